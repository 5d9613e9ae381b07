"""Every Lua script lives in store/redis/scripts/, under a header that says what it does.

The header (comment lines right above the constant) names each key and argument the script reads,
what it returns and what it guarantees; these tests read the modules' source, so a script added
without its header, or a key used but not described, fails here.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from celery_hashbeat.store.redis import scripts

FOLDER = Path(scripts.__file__).parent
PACKAGE = FOLDER.parents[2]
MODULES = sorted(path.stem for path in FOLDER.glob("*.py") if path.stem != "__init__")
SECTIONS = ("KEYS", "ARGV", "Returns", "Guarantee")


def headers() -> dict[str, list[str]]:
    """Each module-level constant's header: the comment lines right above it, "# " removed."""
    found = {}
    for module in MODULES:
        source = (FOLDER / f"{module}.py").read_text()
        lines = source.splitlines()
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                above = []
                at = node.lineno - 2
                while at >= 0 and lines[at].startswith("#"):
                    above.insert(0, lines[at].removeprefix("#").strip())
                    at -= 1
                assert node.targets[0].id not in found, node.targets[0].id
                found[node.targets[0].id] = above
    return found


def text(name: str) -> str:
    """The Lua text of the script or helper called name, from whichever module holds it."""
    for module in MODULES:
        held = importlib.import_module(f"{scripts.__name__}.{module}")
        if hasattr(held, name):
            return str(getattr(held, name))
    raise LookupError(name)


HEADERS = headers()
SCRIPTS = sorted(name for name in HEADERS if name.endswith("_SCRIPT"))


def sections(header: list[str]) -> dict[str, list[str]]:
    """The header's lines by section; a line that starts no section continues the one above."""
    found: dict[str, list[str]] = {}
    current = None
    for line in header:
        word = re.split(r"[\s\[]", line, maxsplit=1)[0]
        if word in SECTIONS:
            current = word
            found.setdefault(word, []).append(line)
        elif current is not None:
            found[current][-1] += " " + line
    return found


def test_the_modules_hold_scripts_and_five_helpers() -> None:
    helpers = sorted(set(HEADERS) - set(SCRIPTS))
    assert helpers == [
        "HASH_FIELDS",
        "PARSE_FENCE",
        "RECORD_HISTORY",
        "SENT_HORIZON",
        "SENT_RECORDS",
    ]
    assert SCRIPTS
    for name in helpers:
        assert HEADERS[name][0].startswith("Helper"), name


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_has_keys_argv_returns_and_guarantee_in_order(name: str) -> None:
    header = sections(HEADERS[name])
    assert list(header) == list(SECTIONS), f"{name}: header sections {list(header)}"
    for section, lines in header.items():
        assert all(len(line.split(None, 1)) == 2 for line in lines), (name, section, lines)


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_key_a_script_reads_is_described_and_no_other(name: str) -> None:
    used = {int(n) for n in re.findall(r"KEYS\[(\d+)\]", text(name))}
    described = {int(n) for n in re.findall(r"^KEYS\[(\d+)\]", "\n".join(HEADERS[name]), re.M)}
    assert used == described, name
    assert described == set(range(1, len(described) + 1)), name


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_argument_a_script_reads_by_number_is_described(name: str) -> None:
    used = {int(n) for n in re.findall(r"ARGV\[(\d+)\]", text(name))}
    lines = sections(HEADERS[name])["ARGV"]
    single = {int(n) for line in lines for n in re.findall(r"^ARGV\[(\d+)\]\s", line)}
    ranges = [int(n) for line in lines for n in re.findall(r"^ARGV\[(\d+)\.\.", line)]
    uncovered = {n for n in used if n not in single and not any(n >= low for low in ranges)}
    assert not uncovered, f"{name}: ARGV{sorted(uncovered)} used but not described"


def test_no_other_module_of_the_package_holds_lua() -> None:
    holders = {
        path.relative_to(PACKAGE).parent.as_posix()
        for path in PACKAGE.rglob("*.py")
        if "redis.call(" in path.read_text()
    }
    assert holders == {"store/redis/scripts"}


def test_every_script_is_run_by_the_store() -> None:
    users = "\n".join(path.read_text() for path in FOLDER.parent.glob("*.py"))
    unused = [name for name in SCRIPTS if not re.search(rf"\b{name}\b", users)]
    assert not unused
