"""Every "§N" the repository cites names a section of docs/design.md, the project's own design
notes, so a reader of the repository can open each one; and no citation points outside it."""

from __future__ import annotations

import re
from pathlib import Path

from .runner import ROOT

DESIGN = ROOT / "docs" / "design.md"
#: Where the code, the tests, the benchmarks and the docs cite sections.
CITING = ("celery_hashbeat", "tests", "benchmarks", "docs")
#: A section heading of the notes: "## §5 The coordination protocol".
HEADING = re.compile(r"^## §(?P<number>\d+) \S", re.MULTILINE)
#: A citation: "§5", "§ 5", and ranges such as "§11-12" or "§2-§3" (every number in them).
CITATION = re.compile(r"§\s?(?P<first>\d+)(?:\s?[-\u2013]\s?§?(?P<last>\d+))?")
#: The contract file the citations used to name; spelled in two parts so this file passes.
OUTSIDE = re.compile("DESIGN" + r"(?:\.md|'s|\s*§)")


def sections() -> list[int]:
    return [int(match["number"]) for match in HEADING.finditer(DESIGN.read_text("utf-8"))]


def citing_files() -> list[Path]:
    found = []
    for top in CITING:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.append(path)
    return found


def lines_of(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        return []  # a binary file cites nothing


def test_sections_are_numbered_once_in_order() -> None:
    numbers = sections()
    assert numbers, "docs/design.md has no '## §N Title' headings"
    assert numbers == sorted(set(numbers)), f"section numbers repeat or go backwards: {numbers}"


def test_the_list_of_sections_matches_the_headings() -> None:
    """The list near the top of the notes names every section, with its heading's title."""
    text = DESIGN.read_text("utf-8")
    listed = re.findall(r"^- (§\d+ .+)$", text, re.MULTILINE)
    headed = re.findall(r"^## (§\d+ .+)$", text, re.MULTILINE)
    assert listed == headed


def test_every_citation_names_a_section() -> None:
    known = set(sections())
    wrong = []
    for path in citing_files():
        for number, line in enumerate(lines_of(path), 1):
            for match in CITATION.finditer(line):
                first = int(match["first"])
                last = int(match["last"] or first)
                missing = [n for n in range(first, max(first, last) + 1) if n not in known]
                if missing:
                    where = path.relative_to(ROOT)
                    wrong.append(f"{where}:{number}: {match[0]!r}: no section {missing}")
    assert not wrong, "citations of sections docs/design.md does not have:\n" + "\n".join(wrong)


def test_no_citation_points_outside_the_repository() -> None:
    outside = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in citing_files()
        for number, line in enumerate(lines_of(path), 1)
        if OUTSIDE.search(line)
    ]
    assert not outside, "cite docs/design.md instead:\n" + "\n".join(outside)


def test_the_citation_pattern_catches_mistakes() -> None:
    """The checks above would see a bad citation: a range, a spaced sign, the old file."""
    assert [m[0] for m in CITATION.finditer("see §11-12 and § 3, not §2-§3")] == [
        "§11-12",
        "§ 3",
        "§2-§3",
    ]
    assert OUTSIDE.search("DESIGN" + ".md §5")
    assert OUTSIDE.search("DESIGN" + " §7 bars")
    assert OUTSIDE.search("DESIGN" + "'s own example")
    assert not OUTSIDE.search("docs/design.md §5")
