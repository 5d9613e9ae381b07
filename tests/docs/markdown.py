"""Reading the documentation's Markdown: fenced blocks, test directives, links and headings, plus
the small subset of YAML that the docs' Kubernetes manifest uses (PyYAML is no dependency)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(?P<words>.*?)\s*-->$")
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language (the info string's first word, or ""),
    its text, and the words of a ``<!-- docs-test: ... -->`` directive on the line before it."""

    path: Path
    line: int
    language: str
    text: str
    directive: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def is_doctest(self) -> bool:
        return any(line.lstrip().startswith(">>>") for line in self.text.splitlines())


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        info = opening["info"].strip().split()
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines) and not (
            lines[index].strip().startswith(fence[0] * len(fence))
            and not lines[index].strip().strip(fence[0])
        ):
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index])
            index += 1
        if index == len(lines):
            raise ValueError(f"{path.name}:{start + 1}: the block is never closed")
        index += 1
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        directive = DIRECTIVE.match(previous.strip())
        found.append(
            Block(
                path,
                start + 1,
                info[0].lower() if info else "",
                "\n".join(body) + "\n",
                tuple(directive["words"].split()) if directive else (),
            )
        )
    return found


def prose(path: Path) -> str:
    """The file without its fenced blocks and inline code, where links and headings live."""
    lines = path.read_text(encoding="utf-8").splitlines()
    kept: list[str] = []
    fence: str | None = None
    for line in lines:
        opening = FENCE.match(line)
        if fence is None and opening is not None:
            fence = opening["fence"]
            kept.append("")
        elif fence is not None:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            kept.append("")
        else:
            kept.append(INLINE_CODE.sub("code", line))
    return "\n".join(kept)


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every Markdown link outside code."""
    return [
        (number, match["target"])
        for number, line in enumerate(prose(path).splitlines(), start=1)
        for match in LINK.finditer(line)
    ]


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the file's headings (lower case, punctuation dropped, spaces to
    hyphens, repeated headings numbered)."""
    seen: dict[str, int] = {}
    found = set()
    source = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(prose(path).splitlines()):
        match = HEADING.match(line)
        if match is None:
            continue
        title = source[number].lstrip("#").strip().replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


# A YAML subset: block mappings and sequences, JSON-style flow collections and quoted scalars,
# plain scalars, comments on their own lines, and documents separated by ---.


@dataclass
class _Line:
    indent: int
    text: str
    number: int


@dataclass
class _Cursor:
    lines: list[_Line]
    index: int = 0
    errors: list[str] = field(default_factory=list)

    def peek(self) -> _Line | None:
        return self.lines[self.index] if self.index < len(self.lines) else None


class YamlError(ValueError):
    """The text is not in the YAML subset the docs use."""


def load_yaml(text: str) -> list[Any]:
    """The documents of a YAML stream, in the subset described above."""
    documents = []
    for chunk in re.split(r"(?m)^---[ \t]*$", text):
        lines = []
        for number, raw in enumerate(chunk.splitlines(), start=1):
            if "\t" in raw[: len(raw) - len(raw.lstrip())]:
                raise YamlError(f"line {number}: a tab in the indentation")
            stripped = raw.strip()
            if stripped and not stripped.startswith("#"):
                lines.append(_Line(len(raw) - len(raw.lstrip(" ")), stripped, number))
        if not lines:
            continue
        cursor = _Cursor(lines)
        documents.append(_node(cursor, lines[0].indent))
        left = cursor.peek()
        if left is not None:
            raise YamlError(f"line {left.number}: unexpected indentation: {left.text!r}")
    return documents


def _node(cursor: _Cursor, indent: int) -> Any:
    line = cursor.peek()
    assert line is not None
    if line.text == "-" or line.text.startswith("- "):
        return _sequence(cursor, indent)
    return _mapping(cursor, indent)


def _sequence(cursor: _Cursor, indent: int) -> list[Any]:
    items: list[Any] = []
    while (line := cursor.peek()) is not None and line.indent == indent:
        if not (line.text == "-" or line.text.startswith("- ")):
            break
        rest = line.text[1:].strip()
        if not rest:
            cursor.index += 1
            following = cursor.peek()
            if following is None or following.indent <= indent:
                raise YamlError(f"line {line.number}: an empty sequence item")
            items.append(_node(cursor, following.indent))
        elif _key_value(rest) is not None:
            # "- key: value" opens a mapping whose keys line up after the dash.
            cursor.lines[cursor.index] = _Line(indent + 2, rest, line.number)
            items.append(_mapping(cursor, indent + 2))
        else:
            cursor.index += 1
            items.append(_scalar(rest, line.number))
    return items


def _mapping(cursor: _Cursor, indent: int) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    while (line := cursor.peek()) is not None and line.indent == indent:
        pair = _key_value(line.text)
        if pair is None:
            raise YamlError(f"line {line.number}: expected 'key: value', got {line.text!r}")
        key, rest = pair
        if key in mapping:
            raise YamlError(f"line {line.number}: duplicate key {key!r}")
        cursor.index += 1
        following = cursor.peek()
        if rest:
            mapping[key] = _scalar(rest, line.number)
        elif following is not None and following.indent > indent:
            mapping[key] = _node(cursor, following.indent)
        elif following is not None and following.indent == indent and following.text[:2] == "- ":
            mapping[key] = _sequence(cursor, indent)
        else:
            mapping[key] = None
    if (line := cursor.peek()) is not None and line.indent > indent:
        raise YamlError(f"line {line.number}: unexpected indentation: {line.text!r}")
    return mapping


def _key_value(text: str) -> tuple[str, str] | None:
    match = re.match(r"^(?P<key>[A-Za-z0-9_.\-/]+|\"[^\"]*\"):(?:\s+(?P<rest>.*))?$", text)
    if match is None:
        return None
    return match["key"].strip('"'), (match["rest"] or "").strip()


def _scalar(text: str, number: int) -> Any:
    if text[0] in '[{"':
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise YamlError(f"line {number}: not valid JSON-style YAML: {text!r} ({exc})") from None
    if text[0] == "'":
        if len(text) < 2 or text[-1] != "'":
            raise YamlError(f"line {number}: an unterminated quoted string: {text!r}")
        return text[1:-1].replace("''", "'")
    if text in ("true", "false"):
        return text == "true"
    if text in ("null", "~"):
        return None
    if re.fullmatch(r"-?[0-9]+", text):
        return int(text)
    if text[0] in "&*!|>%@`":
        raise YamlError(f"line {number}: {text!r} uses YAML beyond the docs' subset")
    return text
