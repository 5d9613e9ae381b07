"""The schedule model stands on its own: nothing under celery_hashbeat/entries/ imports the store,
the runtime or anything else above it (not even for a type), and its modules import each other
one way, so any of them can be read, and tested, without the rest of the package."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import celery_hashbeat

PACKAGE = Path(celery_hashbeat.__file__).parent
ENTRIES = PACKAGE / "entries"

#: What the schedule model may import of the package (LAYOUT.md, level 1).
BELOW = ("expr", "schedules", "settings", "errors", "_logs", "entries")


def imported(path: Path) -> Iterator[str]:
    """Every celery_hashbeat module ``path`` imports, at the top, in a function or under
    TYPE_CHECKING alike, relative to the package (``entries.errors``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith("celery_hashbeat."):
                yield name.removeprefix("celery_hashbeat.")


def test_the_schedule_model_imports_nothing_above_it() -> None:
    upward = {
        f"{path.name} imports {name}"
        for path in ENTRIES.glob("*.py")
        for name in imported(path)
        if name.split(".")[0] not in BELOW
    }
    assert not upward


def test_the_modules_of_the_schedule_model_import_each_other_one_way() -> None:
    modules = {path.stem for path in ENTRIES.glob("*.py")} - {"__init__"}
    edges = {
        module: {
            name.split(".")[1]
            for name in imported(ENTRIES / f"{module}.py")
            if name.startswith("entries.") and name.split(".")[1] in modules
        }
        for module in modules
    }

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for following in edges[start] - seen:
            if following == goal or reaches(following, goal, seen | {following}):
                return True
        return False

    circles = sorted(module for module in modules if reaches(module, module, set()))
    assert not circles


def test_a_circle_would_be_seen(tmp_path: Path) -> None:
    """The scan reads imports under TYPE_CHECKING too (the kind that closed entry <-> sharing)."""
    source = tmp_path / "module.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from celery_hashbeat.entries.sharing import SharedSlots\n"
        "    import celery_hashbeat.store.base\n"
    )
    assert set(imported(source)) >= {"entries.sharing", "store.base"}
