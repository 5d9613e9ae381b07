"""The store knows nothing of the scheduler: its modules import only the store and the leaves.

Imports under ``TYPE_CHECKING`` count too, since a circle closed only for a type is still a
circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import celery_hashbeat.store

STORE = Path(celery_hashbeat.store.__file__).parent
#: The store itself, and the leaves every room may use (errors, logger names, outage lines).
ALLOWED = (
    "celery_hashbeat.store",
    "celery_hashbeat.errors",
    "celery_hashbeat._logs",
    "celery_hashbeat._outage",
)


def imported(path: Path) -> set[str]:
    """Every module of the package that ``path`` imports, wherever the import statement is."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.split(".")[0] == "celery_hashbeat"}


def test_the_store_imports_only_itself_and_the_leaves() -> None:
    outside = {
        path.relative_to(STORE).as_posix(): sorted(
            name for name in imported(path) if not name.startswith(ALLOWED)
        )
        for path in sorted(STORE.rglob("*.py"))
    }
    assert {path: names for path, names in outside.items() if names} == {}
