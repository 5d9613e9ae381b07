"""The README runs the example after ``pip install -e .`` alone, without the test extra: the
example may import only the standard library and the package's runtime dependencies."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Top-level modules that ``pip install -e .`` brings (pyproject's dependencies and theirs).
RUNTIME = {"celery", "celery_hashbeat", "click", "kombu", "redis", "example_project"}


def imported(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports (relative imports excluded)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.partition(".")[0])
    return found


def test_the_example_needs_nothing_beyond_the_runtime_dependencies() -> None:
    modules = sorted((ROOT / "example_project").glob("*.py"))
    assert modules
    extra = {
        f"{path.name}: {name}"
        for path in modules
        for name in imported(path) - RUNTIME - sys.stdlib_module_names - {"__future__"}
    }
    assert not extra, f"the example imports what `pip install -e .` does not install: {extra}"


def test_the_readme_runs_the_example_without_the_test_extra() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python -m pip install -e . && python -m example_project" in readme
    assert 'python -m pip install -e ".[test]" && python -m pytest' in readme
