"""The §3 stability contract, pinned twice.

1. ``resolve()`` below computes the resolved expression from the §3 formula with hashlib, on its
   own (it shares no code with the engine or the oracle).
2. ``PINNED`` is a literal table of those results, generated once and reviewed by hand. If the
   formula changes in the engine, the engine disagrees with both; if someone "fixes" ``resolve``,
   it disagrees with ``PINNED``. Either way a moved schedule cannot pass unnoticed.

Hash terms that resolve to one value must appear in ``str(expr)`` as that number with the rest of
the text unchanged (as in ``"37 14 * * *"``, docs/design.md §4). Terms with several values (``H/n``)
may be spelled in any plain way, so those are compared by the value sets they denote.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timezone

import pytest

from celery_hashbeat.expr import parse, seeding
from tests.expr import oracle

FIELD_NAMES_5 = ("minute", "hour", "day_of_month", "month", "day_of_week")
FIELD_NAMES_6 = ("second", *FIELD_NAMES_5)
# §2/§3 ranges and aliases, as the oracle reads them from the spec.
DRAW = oracle.HASH_BOUNDS
ALIAS = oracle.ALIASES


def u_of(key: str | bytes | int, field: str, occurrence: int) -> int:
    """§3 verbatim: sha256(key bytes 0x1f field 0x1f occurrence), first 8 bytes big-endian."""
    if isinstance(key, str):
        raw = key.encode("utf-8")
    elif isinstance(key, bytes):
        raw = key
    else:
        raw = str(key).encode()
    digest = hashlib.sha256(raw + b"\x1f" + field.encode() + b"\x1f" + str(occurrence).encode())
    return int.from_bytes(digest.digest()[:8], "big")


HASH_TERM = re.compile(r"H(?:\((\d+)-(\d+)\))?(?:/(\d+))?|#(?:\[(\d+)-(\d+)\])?(?:/(\d+))?")


def resolve(key: str | bytes | int, text: str) -> str:
    """Replace each hash term by its value(s), comma-joined, leaving everything else as is."""
    text = ALIAS.get(text, text)
    fields = text.split(" ")
    names = FIELD_NAMES_6 if len(fields) == 6 else FIELD_NAMES_5
    out = []
    for name, field_text in zip(names, fields, strict=True):
        terms = []
        occurrence = 0
        for term in field_text.split(","):
            m = HASH_TERM.fullmatch(term)
            if m is None or (name == "day_of_week" and re.fullmatch(r"\d+#\d+", term)):
                terms.append(term)
                continue
            a, b, step = (
                m.group(1) or m.group(4),
                m.group(2) or m.group(5),
                m.group(3) or m.group(6),
            )
            lo, hi = (int(a), int(b)) if a is not None else DRAW[name]
            u = u_of(key, name, occurrence)
            occurrence += 1
            if step is None:
                values = [lo + u % (hi - lo + 1)]
            else:
                values = list(range(lo + u % int(step), hi + 1, int(step)))
            terms.append(",".join(map(str, values)))
        out.append(",".join(terms))
    return " ".join(out)


#: (key, expression, resolved) -- generated once by resolve() above, then checked by hand:
#: every single value lies in its term's range, H/n lists have the right stride and stop at the
#: field's top (28 for day-of-month, 6 for day-of-week, b for H(a-b)/n).
PINNED: list[tuple[str | bytes | int, str, str]] = [
    ("refresh-prices", "H * * * *", "26 * * * *"),
    ("nightly-report", "@midnight", "26 0 * * *"),
    ("poll-feeds", "H/10 * * * * *", "1,11,21,31,41,51 * * * * *"),
    (b"\x00\xffraw-bytes", "H H * * *", "58 19 * * *"),
    (12345, "H H H * *", "2 2 18 * *"),
    (0, "H * * * *", "19 * * * *"),
    (-42, "H H H * * *", "28 23 5 * * *"),
    (2**64 + 7, "H H * * *", "25 20 * * *"),
    ("zürich ☃ 東京", "H H H H H", "29 8 26 11 2"),
    ("every-field", "H H H H H H", "57 53 6 28 7 5"),
    ("window", "H(0-29) H(9-17) * * *", "28 15 * * *"),
    ("quarter", "H/15 * * * *", "2,17,32,47 * * * *"),
    ("sevens", "H(10-50)/7 * * * *", "16,23,30,37,44 * * * *"),
    ("two-in-one", "H,H * * * *", "22,28 * * * *"),
    ("three-in-one", "H,H,H 0 * * *", "18,18,40 0 * * *"),
    ("mixed-list", "1-5,H(20-25) * * * *", "1-5,22 * * * *"),
    ("fuzzy", "# #[9-17] * * *", "14 14 * * *"),
    ("fuzzy-step", "#/20 * * * *", "5,25,45 * * * *"),
    ("late-days", "0 0 H(29-31) * *", "0 0 30 * *"),
    ("sunday-seven-5", "0 0 * * H(0-7)", "0 0 * * 7"),
    ("dom-step-2", "0 0 H/7 * *", "0 0 1,8,15,22 * *"),
    ("dow-step", "0 0 * * H/2", "0 0 * * 1,3,5"),
    ("month-hash", "0 0 1 H *", "0 0 1 5 *"),
    ("degenerate", "H(5-5) * * * *", "5 * * * *"),
    ("every-minute", "H/1 * * * *", ",".join(map(str, range(60))) + " * * * *"),
    ("shop.report@worker-1.example.com", "@daily", "41 18 * * *"),
    ("weekly", "@weekly", "49 11 * * 2"),
    ("monthly", "@monthly", "36 11 3 * *"),
    ("yearly", "@yearly", "58 12 13 1 *"),
    ("yearly", "@annually", "58 12 13 1 *"),
    ("hourly", "@hourly", "53 * * * *"),
]

#: Raw draws, pinned: the 64-bit number behind a few terms (§3 "u").
PINNED_U = [
    ("refresh-prices", "minute", 0, 3509030278412398646),
    ("refresh-prices", "minute", 1, 784203948346580652),
    (b"\x00\xffraw-bytes", "hour", 0, 9744134897937901915),
    (12345, "day_of_month", 0, 16636316674780966789),
    ("zürich ☃ 東京", "day_of_week", 0, 624461938433117143),
    ("anything", "interval", 0, 2035480060382491098),
]


@pytest.mark.parametrize(("key", "field", "occurrence", "u"), PINNED_U)
def test_raw_draws_are_pinned(key: str | bytes | int, field: str, occurrence: int, u: int) -> None:
    """Our §3 code still gives the pinned numbers, and so does the engine's seeding.draw."""
    assert u_of(key, field, occurrence) == u
    assert seeding.draw(key, field, occurrence) == u


@pytest.mark.parametrize(("key", "text", "resolved"), PINNED)
def test_formula_still_gives_the_pinned_table(
    key: str | bytes | int, text: str, resolved: str
) -> None:
    """Guards resolve() itself: a change to the formula here fails against the literal table."""
    assert resolve(key, text) == resolved


def _exact_text_expected(resolved: str) -> bool:
    """Every hash term is one value and no field repeats a value (whether a resolved list keeps
    a duplicate, as in "18,18,40", is a spelling choice the spec leaves open)."""
    fields = [f.split(",") for f in resolved.split(" ")]
    return all(len(f) == len(set(f)) for f in fields) and len(resolved) < 80


@pytest.mark.parametrize(("key", "text", "resolved"), PINNED)
def test_engine_resolves_as_pinned(key: str | bytes | int, text: str, resolved: str) -> None:
    """str(expr) names the same values; exactly the same text where every hash term is one value."""
    expr = parse(text, key)
    shown = str(expr)
    assert "H" not in shown
    assert "#" not in shown or re.search(r"\d#\d", shown)
    if "/" not in ALIAS.get(text, text) and _exact_text_expected(resolved):
        assert shown == resolved
    mine = oracle.parse(resolved).resolved_sets()
    theirs = oracle.parse(shown).resolved_sets()
    assert theirs == mine, f"{text!r} key={key!r}: engine {shown!r}, §3 says {resolved!r}"


@pytest.mark.parametrize(("key", "text", "resolved"), PINNED)
def test_resolved_text_schedules_the_same(key: str | bytes | int, text: str, resolved: str) -> None:
    """The hashed expression fires exactly when its pinned resolution does (key-free)."""
    hashed = parse(text, key)
    plain = parse(resolved)
    t = datetime(2026, 3, 7, 12, 34, 56, tzinfo=timezone.utc)
    for _ in range(6):
        t_hashed, t_plain = hashed.next(t), plain.next(t)
        assert t_hashed == t_plain, (text, key, t)
        t = t_hashed


def test_key_types_are_distinct_but_equivalent_spellings_agree() -> None:
    """int 7 and str "7" are the same key bytes (§3); bytes b"7" too; "7 " is another key."""
    same = {str(parse("H H H H H H", k)) for k in (7, "7", b"7")}
    assert len(same) == 1
    assert str(parse("H H H H H H", "7 ")) not in same


def test_fields_draw_independently() -> None:
    """Editing one field never moves another's hash value (§3, unlike Jenkins)."""
    key = "independence"
    base = str(parse("H H * * *", key)).split()
    for edited in ("H 5 * * *", "H H 1 * *", "H H * 6 *", "H H * * 1-5", "H H * * 1#2"):
        got = str(parse(edited, key)).split()
        assert got[0] == base[0], edited
    assert str(parse("30 H * * *", key)).split()[1] == base[1]


def test_occurrence_counts_hash_terms_only() -> None:
    """The second hash term of a field is occurrence 1 even with plain terms before it."""
    key = "occurrence"
    expected = 20 + u_of(key, "minute", 1) % 6
    first = u_of(key, "minute", 0) % 60
    assert str(parse("1,H,5,H(20-25) * * * *", key)).split()[0] == f"1,{first},5,{expected}"
