"""Every bad expression is one CronSyntaxError that names the field and points at the fault
(docs/design.md §2 "Errors"); valid neighbours of bad expressions still parse."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat.expr import CronSyntaxError, parse

KEY = "some-entry"
FIELDS_6 = ("second", "minute", "hour", "day_of_month", "month", "day_of_week")


@dataclass(frozen=True)
class Bad:
    """One malformed expression and what the error must say about it."""

    text: str
    field: str | None  # §3 field name, or None when no single field is at fault
    slices: tuple[str, ...] | None  # acceptable texts under the caret; None: anything in `term`
    term: str | None = None  # the term the caret must stay inside (default: the first slice)
    key: str | None = KEY
    in_message: bool = True  # the offending text is quoted in the message

    def __str__(self) -> str:
        return repr(self.text)


def one_of(*texts: str) -> tuple[str, ...]:
    return texts


def field_name(err: CronSyntaxError) -> str | None:
    """The error's field in §3 spelling; the engine may spell it "day-of-month" (as its
    messages do), which names the same field."""
    return None if err.field is None else err.field.replace("-", "_")


BAD: list[Bad] = [
    # out of range
    Bad("61 * * * *", "minute", ("61",)),
    Bad("* 24 * * *", "hour", ("24",)),
    Bad("60 * * * * *", "second", ("60",)),
    Bad("* * 32 * *", "day_of_month", ("32",)),
    Bad("* * 0 * *", "day_of_month", ("0",)),
    Bad("* * * 13 *", "month", ("13",)),
    Bad("* * * 0 *", "month", ("0",)),
    Bad("* * * * 8", "day_of_week", ("8",)),
    Bad("0 0 1,15,99 * *", "day_of_month", ("99",)),
    Bad("5-70 * * * *", "minute", one_of("70", "5-70")),
    Bad("* 1-24 * * *", "hour", one_of("24", "1-24")),
    Bad("0\t25\t* * *", "hour", ("25",)),
    # steps
    Bad("*/0 * * * *", "minute", one_of("0", "/0", "*/0")),
    Bad("*/61 * * * *", "minute", one_of("61", "/61", "*/61")),
    Bad("* */25 * * *", "hour", one_of("25", "/25", "*/25")),
    Bad("10-20/12 * * * *", "minute", one_of("12", "/12", "10-20/12")),
    Bad("H(10-20)/12 * * * *", "minute", one_of("12", "/12", "H(10-20)/12")),
    Bad("H/0 * * * *", "minute", one_of("0", "/0", "H/0")),
    Bad("H/61 * * * *", "minute", one_of("61", "/61", "H/61")),
    Bad("*/-1 * * * *", "minute", None, term="*/-1", in_message=False),
    Bad("*/ * * * *", "minute", None, term="*/", in_message=False),
    Bad("*/1.5 * * * *", "minute", None, term="*/1.5", in_message=False),
    # reversed ranges
    Bad("30-10 * * * *", "minute", None, term="30-10", in_message=False),
    Bad("* * * DEC-JAN *", "month", None, term="DEC-JAN", in_message=False),
    Bad("* * * * FRI-MON", "day_of_week", None, term="FRI-MON", in_message=False),
    Bad("H(20-10) * * * *", "minute", None, term="H(20-10)", in_message=False),
    # names
    Bad("* * * FOO *", "month", ("FOO",)),
    Bad("* * * * FUNDAY", "day_of_week", ("FUNDAY",)),
    Bad("* * * JAN-FOO *", "month", one_of("FOO", "JAN-FOO")),
    Bad("* * * MON *", "month", ("MON",)),
    Bad("* * * * JAN", "day_of_week", ("JAN",)),
    Bad("JAN * * * *", "minute", ("JAN",)),
    # specials where they do not belong, or out of range
    Bad("L * * * *", "minute", ("L",)),
    Bad("* * * L *", "month", ("L",)),
    Bad("* * * * LW", "day_of_week", ("LW",)),
    Bad("* * 1#2 * *", "day_of_month", ("1#2",)),
    Bad("* * * * 1W", "day_of_week", ("1W",)),
    Bad("* * * * 1#6", "day_of_week", one_of("6", "1#6")),
    Bad("* * * * 1#0", "day_of_week", one_of("0", "1#0")),
    Bad("* * * * 8#1", "day_of_week", one_of("8", "8#1")),
    Bad("* * * * 8L", "day_of_week", one_of("8", "8L")),
    Bad("* * 32W * *", "day_of_month", one_of("32", "32W")),
    Bad("* * 0W * *", "day_of_month", one_of("0", "0W")),
    Bad("? * * * *", "minute", ("?",)),
    Bad("* * * ? *", "month", ("?",)),
    # hash terms
    Bad("H(50-70) * * * *", "minute", one_of("70", "50-70", "H(50-70)")),
    Bad("H( * * * *", "minute", None, term="H(", in_message=False),
    Bad("HH * * * *", "minute", None, term="HH", in_message=False),
    Bad("H5 * * * *", "minute", None, term="H5", in_message=False),
    Bad("H(1-2 * * * *", "minute", None, term="H(1-2", in_message=False),
    Bad("H[1-2] * * * *", "minute", None, term="H[1-2]", in_message=False),
    Bad("#(1-2) * * * *", "minute", None, term="#(1-2)", in_message=False),
    # malformed numbers and lists
    Bad("1- * * * *", "minute", None, term="1-", in_message=False),
    Bad("-1 * * * *", "minute", None, term="-1", in_message=False),
    Bad("1,,2 * * * *", "minute", None, term="1,,2", in_message=False),
    Bad(",1 * * * *", "minute", None, term=",1", in_message=False),
    # the missing term after the comma may be shown at the blank where it should be
    Bad("1, * * * *", "minute", None, term="1, ", in_message=False),
    Bad("1-2-3 * * * *", "minute", None, term="1-2-3", in_message=False),
    Bad("** * * * *", "minute", None, term="**", in_message=False),
    Bad("1.5 * * * *", "minute", None, term="1.5", in_message=False),
    Bad("5/ * * * *", "minute", None, term="5/", in_message=False),
    Bad("/5 * * * *", "minute", None, term="/5", in_message=False),
    Bad("\u0663 * * * *", "minute", ("\u0663",)),  # ARABIC-INDIC DIGIT THREE: int() accepts it
    Bad("\uff11 * * * *", "minute", ("\uff11",)),  # FULLWIDTH DIGIT ONE
    # aliases
    Bad("@reboot", None, ("@reboot",)),
    Bad("@dayly", None, ("@dayly",)),
    Bad("@", None, ("@",)),
]

WHOLE: list[str] = ["", "   ", "\t", "* * * *", "* * * * * * *", "@daily *", "0 0 1 JAN"]


@pytest.mark.parametrize("bad", BAD, ids=str)
def test_error_names_field_and_points_at_the_fault(bad: Bad) -> None:
    """.field, .start/.end and the caret line all land on the offending text."""
    with pytest.raises(CronSyntaxError) as info:
        parse(bad.text, bad.key)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.expression == bad.text
    assert field_name(err) == bad.field, f"{bad.text!r}: field {err.field!r}: {err.message}"
    under = bad.text[err.start : err.end]
    if bad.slices is not None:
        assert under in bad.slices, f"{bad.text!r}: caret under {under!r}: {err}"
    term = bad.term if bad.term is not None else (bad.slices or ("",))[0]
    term_start = bad.text.index(term)
    assert term_start <= err.start < err.end <= term_start + len(term), (
        f"{bad.text!r}: caret {err.start}-{err.end} ({under!r}) is outside {term!r}"
    )
    if bad.in_message:
        assert under in err.message
    if bad.field is not None:
        spellings = {bad.field, bad.field.replace("_", "-"), bad.field.replace("_", " ")}
        assert any(s in err.message for s in spellings), err.message
    lines = str(err).split("\n")
    assert lines == [
        err.message,
        "  " + bad.text.replace("\t", " "),
        "  " + " " * err.start + "^" * (err.end - err.start),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("61 * * * *", "minute value 61 is out of range 0-59"),
        ("* 24 * * *", "hour value 24 is out of range 0-23"),
        ("60 * * * * *", "second value 60 is out of range 0-59"),
        ("0 0 1,15,99 * *", None),
    ],
)
def test_exact_messages(text: str, message: str | None) -> None:
    """docs/design.md's own example, word for word, and its obvious siblings."""
    with pytest.raises(CronSyntaxError) as info:
        parse(text)
    if message is None:
        assert "99" in info.value.message
        assert "1-31" in info.value.message
    else:
        assert info.value.message == message
    if text == "61 * * * *":
        assert str(info.value) == ("minute value 61 is out of range 0-59\n  61 * * * *\n  ^^")


@pytest.mark.parametrize("text", WHOLE, ids=repr)
def test_wrong_shape_is_an_error_of_no_field(text: str) -> None:
    """Empty input and wrong field counts are nobody's field."""
    with pytest.raises(CronSyntaxError) as info:
        parse(text, KEY)
    assert info.value.field is None
    assert info.value.message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("H * * * *", None),
        ("0 0 * * H", None),
        ("# * * * *", None),
        ("0 H(0-5)/2 * * *", None),
        ("@daily", None),
        ("@hourly", None),
    ],
)
def test_hash_without_key_says_how_to_give_one(text: str, key: None) -> None:
    """§2: the message tells the user to pass key= or run under celery_hashbeat.Scheduler."""
    with pytest.raises(CronSyntaxError) as info:
        parse(text, key)
    message = info.value.message
    assert "key=" in message
    assert "celery_hashbeat.Scheduler" in message
    if not text.startswith("@"):
        under = text[info.value.start : info.value.end]
        assert under.startswith(("H", "#")), under
        assert info.value.field is not None


@pytest.mark.parametrize(
    ("text", "day_and"),
    [
        ("0 0 30 2 *", False),
        ("0 0 31 4,6,9,11 *", False),
        ("0 0 30,31 2 *", False),
        ("0 0 0 31 2 *", False),
        ("0 0 H(30-31) 2 *", False),
        ("0 0 31 2 1", True),
        ("0 0 1 * 1#5", True),
        ("0 0 LW * 0", True),
        ("0 0 30 FEB ?", False),
    ],
)
def test_impossible_expressions_are_rejected(text: str, day_and: bool) -> None:
    """§2: an expression that can never fire is rejected at parse time, naming a day field."""
    with pytest.raises(CronSyntaxError) as info:
        parse(text, KEY, day_and=day_and)
    assert field_name(info.value) in ("day_of_month", "month", "day_of_week", None)


@pytest.mark.parametrize(
    ("text", "day_and"),
    [
        ("0 0 29 2 *", False),
        ("0 0 L 2 *", False),
        ("0 0 30 2 1", False),  # OR rule: every Monday in February
        ("0 0 31 * *", False),
        ("0 0 1 * 1#5", False),  # OR rule
        ("0 0 * 2 1#5", False),  # Feb 29 on a Monday (2016, 2044)
        ("0 0 29 2 1", True),  # Feb 29 on a Monday
        ("59/15 * * * *", False),  # minute 59 alone (§2)
        ("*/60 * * * *", False),
        ("0 0 * * */8", False),
        ("H(0-7)/8 * * * *", False),
        ("0 0 ? * MON-FRI", False),
        ("0 0 1 jan,Feb *", False),
        ("0\t0\t*\t*\t*", False),
        ("H/1 * * * *", False),
    ],
)
def test_valid_neighbours_parse(text: str, day_and: bool) -> None:
    """Rejection is not over-eager: the close relatives of bad expressions are fine."""
    expr = parse(text, KEY, day_and=day_and)
    assert str(expr)


def test_over_long_input_fails_fast() -> None:
    """A pathological, huge expression is refused with CronSyntaxError, and quickly."""
    huge = ",".join(["0"] * 50_000) + " * * * *"
    started = time.perf_counter()
    with pytest.raises(CronSyntaxError):
        parse(huge, KEY)
    with pytest.raises(CronSyntaxError):
        parse("* " * 100_000, KEY)
    with pytest.raises(CronSyntaxError):
        parse("H" * 1_000_000, KEY)
    assert time.perf_counter() - started < 5.0


OUT_OF_RANGE = {
    "second": ["60", "99"],
    "minute": ["60", "75"],
    "hour": ["24", "99"],
    "day_of_month": ["0", "32"],
    "month": ["0", "13"],
    "day_of_week": ["8", "10"],
}


@given(
    st.integers(5, 6),
    st.lists(st.sampled_from([" ", "\t", "  ", " \t"]), min_size=5, max_size=5),
    st.data(),
)
def test_caret_lands_on_a_bad_value_anywhere(
    count: int, seps: list[str], data: st.DataObject
) -> None:
    """Put one out-of-range value (alone or at the end of a list) in any field, with any mix of
    blanks between fields: the error names that field and the caret sits exactly under it."""
    names = FIELDS_6 if count == 6 else FIELDS_6[1:]
    fields = [data.draw(st.sampled_from(["*", "1", "1-2", "*/5"])) for _ in names]
    bad_index = data.draw(st.integers(0, count - 1))
    name = names[bad_index]
    bad = data.draw(st.sampled_from(OUT_OF_RANGE[name]))
    prefix = data.draw(st.sampled_from(["", "1,", "1-2,"]))
    fields[bad_index] = prefix + bad
    text = fields[0]
    start = -1
    for i in range(1, count):
        if i == bad_index:
            start = len(text) + len(seps[i - 1]) + len(prefix)
        text += seps[i - 1] + fields[i]
    if bad_index == 0:
        start = len(prefix)
    with pytest.raises(CronSyntaxError) as info:
        parse(text)
    err = info.value
    assert field_name(err) == name, (text, err.message)
    assert (err.start, err.end) == (start, start + len(bad)), (text, str(err))
