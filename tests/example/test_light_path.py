"""The README runs the example after ``pip install -e .`` alone, without the test extra: the
example may import only the standard library and the package's runtime dependencies."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def optional_dependencies() -> dict[str, list[str]]:
    """pyproject.toml's extras, read from the checkout (not from an installed copy)."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    with (ROOT / "pyproject.toml").open("rb") as file:
        extras: dict[str, list[str]] = tomllib.load(file)["project"]["optional-dependencies"]
    return extras


def names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~ ;]", requirement)[0] for requirement in requirements}


def test_a_redis_broker_has_an_extra_and_the_readme_says_so() -> None:
    """Kombu's Redis transport needs kombu's redis extra (redis-py and packaging, at the versions
    that kombu release wants): a Redis broker after `pip install -e .` alone fails with "No module
    named 'packaging'"."""
    extras = optional_dependencies()
    assert "kombu[redis]" in names(extras["redis"])
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install 'celery-hashbeat[redis]'" in readme


def test_the_test_extra_keeps_the_stack_and_leaves_the_plots_to_their_own() -> None:
    """The suite's extra declares pytest-celery (part of the stack) but not matplotlib, which is
    the plot extra's; the tests that draw skip with a reason without it, and dev has both."""
    extras = optional_dependencies()
    assert "pytest-celery" in names(extras["test"])
    assert "matplotlib" not in names(extras["test"])
    assert "matplotlib" in names(extras["plot"])
    assert {"celery-hashbeat[test]", "celery-hashbeat[plot]"} <= set(extras["dev"])


def test_the_launcher_says_what_a_redis_broker_needs(tmp_path: Path) -> None:
    """With REDIS_URL set and kombu's Redis transport not importable (no 'packaging', as after
    `pip install -e .` alone), the launcher says what to install in one line, at once, instead
    of a bare "Traceback" from each process."""
    hidden = tmp_path / "hidden" / "packaging"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'packaging'\", name='packaging')\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{hidden.parent}{os.pathsep}{ROOT}",
        "REDIS_URL": "redis://127.0.0.1:9/0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "example_project", "--seconds", "6"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert "No module named 'packaging'" in line
    assert "pip install 'celery-hashbeat[redis]'" in line
