"""The stability contract (docs/design.md §3): a hash term's value is a pure function of
(key, field, occurrence). Changing anything here moves every user's schedule."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from functools import lru_cache

Key = str | bytes | int

SEPARATOR = b"\x1f"

#: A draw's number from its digest: the first 8 bytes, big-endian, unsigned (no slice made).
_FIRST_8: Callable[[bytes], tuple[int]] = struct.Struct(">Q").unpack_from


def key_bytes(key: Key) -> bytes:
    """The bytes that identify a key: UTF-8 for text, as given for bytes, decimal for ints."""
    if type(key) is str:  # an entry's name: a million of them at start
        return key.encode()
    if isinstance(key, bytes):
        return key
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise TypeError(f"a schedule key must be str, bytes or int, not {type(key).__name__}")
    return key.encode("utf-8") if isinstance(key, str) else str(key).encode()


def draw(key: Key, field: str, occurrence: int) -> int:
    """The unsigned 64-bit number behind one hash term."""
    return drawn(key_bytes(key) + term_bytes(field, occurrence))


def drawn(material: bytes) -> int:
    """The number for a draw's whole material: the key's bytes, then ``term_bytes``. Lets a
    caller that draws many terms for one key, or one term for many keys, make each part once."""
    return _FIRST_8(hashlib.sha256(material).digest())[0]


def draws(keys: list[bytes], field: str, occurrence: int) -> list[int]:
    """``draw`` of one term for many keys, given as bytes: what ``drawn`` does, spelled out
    once more so that a million keys (the balancer's groups) cost no call each."""
    suffix = term_bytes(field, occurrence)
    sha256, first_8 = hashlib.sha256, _FIRST_8
    return [first_8(sha256(key + suffix).digest())[0] for key in keys]


@lru_cache(maxsize=256)
def term_bytes(field: str, occurrence: int) -> bytes:
    """What follows the key in a draw's material: a few distinct values, made once each."""
    return SEPARATOR + field.encode() + SEPARATOR + str(occurrence).encode()
