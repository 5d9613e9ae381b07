"""Reading what the store holds (docs/design.md §13): text within bounds, parsed as JSON, and
any fault in it one DefinitionError that names where, so that a reader skips that value and goes
on with the others. Nothing read is imported or called."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery_hashbeat.errors import HashbeatError

#: The longest stored value read back or written, in characters: a definition is a schedule and a
#: few arguments, and a value past this is refused rather than parsed and published every slot.
TEXT_MAX = 1_000_000


#: How deep a stored value's JSON may nest: enough for any real arguments, and far from the
#: recursion limits of the JSON parser, of kombu's serialisers and of the beat's own code.
DEPTH_MAX = 32


#: The latest instant a stored record may name (9999-12-31T23:59:59.999Z, in epoch ms): beyond
#: it no date can be made of it.
MS_MAX = 253_402_300_799_999


#: The longest message an unreadable stored value gets: it names the entry and the fault, and does
#: not echo a value that may be megabytes long.
MESSAGE_MAX = 400


class DefinitionError(ValueError, HashbeatError):
    """A definition that cannot be stored or read back; the message names the entry, the
    field and what to do."""


def read_json(where: str, text: object) -> Any:
    """Stored text as JSON, refused (as a DefinitionError saying ``where``) when it is not text,
    is longer than TEXT_MAX, does not parse or nests deeper than DEPTH_MAX."""
    if not isinstance(text, str):
        raise DefinitionError(f"{where} is not text")
    if len(text) > TEXT_MAX:
        raise DefinitionError(f"{where} is {len(text):,} characters long; at most {TEXT_MAX:,}")
    try:
        data = json.loads(text)
    except RecursionError:
        raise DefinitionError(f"{where} nests deeper than {DEPTH_MAX} levels") from None
    except ValueError as exc:
        raise DefinitionError(f"{where} is not JSON ({exc})") from None
    if _depth(data) > DEPTH_MAX:
        raise DefinitionError(f"{where} nests deeper than {DEPTH_MAX} levels")
    return data


def _depth(data: Any) -> int:
    """How deep ``data`` nests (a scalar is 0), counted without recursion."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            depth += 1
            if depth > DEPTH_MAX:
                return depth
            deepest = max(deepest, depth)
            stack.extend(
                (item, depth) for item in (value.values() if isinstance(value, dict) else value)
            )
    return deepest


@contextmanager
def unreadable(where: str) -> Iterator[None]:
    """Whatever goes wrong reading a stored value leaves as one DefinitionError saying
    ``where``, with a message of at most MESSAGE_MAX characters."""
    try:
        yield
    except DefinitionError as exc:
        raise DefinitionError(_cut(str(exc))) from None
    except Exception as exc:  # any content at all: a reader skips this value and goes on
        raise DefinitionError(
            _cut(f"{where} cannot be read ({type(exc).__name__}: {exc})")
        ) from None


def _cut(message: str) -> str:
    if len(message) <= MESSAGE_MAX:
        return message
    return message[: MESSAGE_MAX - 5] + " ...)"


def instant_ms(value: Any, where: str) -> int:
    """A stored instant (epoch ms, within MS_MAX), or ValueError saying ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MS_MAX:
        raise ValueError(f"{where} must be an instant in epoch ms, not {value!r}")
    return int(value)


def typed(value: Any, kind: type, where: str) -> Any:
    """``value`` if it is a ``kind`` (a JSON string, list or object), else DefinitionError."""
    if not isinstance(value, kind):
        raise DefinitionError(f"{where} must be a JSON {_json_kind(kind)}, not {value!r}")
    return value


def _json_kind(kind: type) -> str:
    names: dict[type, str] = {str: "string", list: "list", dict: "object"}
    return names.get(kind, kind.__name__)
