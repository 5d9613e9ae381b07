"""Hypothesis strategies for the engine's properties: valid expressions of every §2 form, keys,
zones and start instants aimed at DST changes and year ends.

The expression generator only emits expressions that can fire (the engine rejects the others at
parse time, docs/design.md §2); the rules that keep it so are spelled out where they apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

from hypothesis import strategies as st

from tests.expr import oracle

ZONES = ("UTC", "America/New_York", "Europe/Riga", "Australia/Lord_Howe")

#: Hours around the zones' DST changes (New York 2h, Riga 3h, Lord Howe 1:30-2:30).
DST_HOURS = (0, 1, 2, 3, 4)

Key = str | bytes | int


@dataclass
class Case:
    """One generated expression with everything needed to parse it and to ask the oracle."""

    text: str
    key: Key
    tz_name: str
    tz_arg: str | tzinfo | None
    day_and: bool
    spec: oracle.Spec
    near: int | None = None  # a DST change the case was built around (epoch seconds)

    @property
    def tz(self) -> tzinfo:
        return oracle.zone(None if self.tz_name == "UTC" else self.tz_name)

    def horizon(self) -> int:
        """How far the oracle looks (it leaves non-matching days at once, so this is cheap)."""
        return 40 * 86400


keys: st.SearchStrategy[Key] = st.one_of(
    st.text(min_size=1, max_size=24),
    st.binary(min_size=1, max_size=24),
    st.integers(min_value=-(2**70), max_value=2**70),
)


def _value(name: str, hi: int | None = None) -> st.SearchStrategy[int]:
    lo, top = oracle.BOUNDS[name]
    top = top if hi is None else hi
    if name == "hour":
        return st.one_of(st.sampled_from(DST_HOURS), st.integers(lo, top))
    return st.integers(lo, top)


@st.composite
def _range(draw: st.DrawFn, name: str, hi: int | None = None) -> tuple[int, int]:
    a = draw(_value(name, hi))
    b = draw(_value(name, hi).filter(lambda v: v >= a) | st.just(a))
    return a, b


def _name(value: int, name: str, lower: bool) -> str:
    text = oracle.MONTH_NAMES[value - 1] if name == "month" else oracle.DAY_NAMES[value % 7]
    return text.lower() if lower else text


@st.composite
def plain_term(draw: st.DrawFn, name: str, hi: int | None = None) -> str:
    """A Vixie term: N, a-b, */n, a-b/n, N/n, or a name (range) where the field has names."""
    lo, top = oracle.BOUNDS[name]
    top = top if hi is None else hi
    kinds = ["value", "range", "star_step", "range_step", "value_step"]
    if name in ("month", "day_of_week"):
        kinds += ["name", "name_range"]
    kind = draw(st.sampled_from(kinds))
    if kind == "value":
        return str(draw(_value(name, hi)))
    if kind == "range":
        a, b = draw(_range(name, hi))
        return f"{a}-{b}"
    if kind == "star_step":
        # Steps on '*' walk the whole field, so with a lowered top only a small step is safe.
        limit = (top - lo + 1) if hi is None else 1
        return f"*/{draw(st.integers(1, limit))}"
    if kind == "range_step":
        a, b = draw(_range(name, hi))
        return f"{a}-{b}/{draw(st.integers(1, b - a + 1))}"
    if kind == "value_step":
        if hi is not None:  # N/n runs to the field's real end; keep it inside the lowered top
            a = draw(_value(name, hi))
            return f"{a}-{top}/{draw(st.integers(1, top - a + 1))}"
        return f"{draw(_value(name))}/{draw(st.integers(1, top - lo + 1))}"
    lower = draw(st.booleans())
    first = 1 if name == "month" else 0
    last = 12 if name == "month" else 6
    if kind == "name":
        return _name(draw(st.integers(first, last)), name, lower)
    a = draw(st.integers(first, last))
    b = draw(st.integers(a, last))
    return f"{_name(a, name, lower)}-{_name(b, name, lower)}"


@st.composite
def hash_term(draw: st.DrawFn, name: str, hi: int | None = None) -> str:
    """Every hash spelling: H, H(a-b), H/n, H(a-b)/n, #, #[a-b], #/n."""
    hlo, htop = oracle.HASH_BOUNDS[name]
    kind = draw(st.sampled_from(["H", "H()", "H/", "H()/", "#", "#[]", "#/"]))
    if kind in ("H", "#"):
        return kind
    if kind in ("H/", "#/"):
        return f"{kind}{draw(st.integers(1, htop - hlo + 1))}"
    a, b = draw(_range(name, hi))
    if kind == "#[]":
        return f"#[{a}-{b}]"
    if kind == "H()":
        return f"H({a}-{b})"
    return f"H({a}-{b})/{draw(st.integers(1, b - a + 1))}"


@st.composite
def dom_special(draw: st.DrawFn, *, nearest: bool = True) -> str:
    kind = draw(st.sampled_from(["L", "LW", "W"] if nearest else ["L", "LW"]))
    if kind == "W":
        return f"{draw(st.integers(1, 28))}W"  # 29W-31W are not in every month: see calendar tests
    return kind


@st.composite
def dow_special(draw: st.DrawFn) -> str:
    day = draw(st.integers(0, 7))
    if draw(st.booleans()):
        return f"{day}L"
    return f"{day}#{draw(st.integers(1, 5))}"


@st.composite
def field_text(
    draw: st.DrawFn,
    name: str,
    *,
    hashes: bool,
    specials: bool = False,
    hi: int | None = None,
    nearest: bool = True,
) -> str:
    """A field: one term, or a comma list of two or three."""
    options: list[st.SearchStrategy[str]] = [plain_term(name, hi)]
    if hashes:
        options.append(hash_term(name, hi))
    if specials and name == "day_of_month":
        options += [dom_special(nearest=nearest), dom_special(nearest=nearest)]
    if specials and name == "day_of_week":
        options += [dow_special(), dow_special()]
    term = st.one_of(*options)
    count = draw(st.sampled_from([1, 1, 1, 2, 3]))
    return ",".join(draw(term) for _ in range(count))


@st.composite
def expression_text(
    draw: st.DrawFn, *, hashes: bool = True, day_and: bool = False, cronsim_dialect: bool = False
) -> str:
    """A valid 5- or 6-field expression that can fire. ``cronsim_dialect`` leaves out what
    cronsim does not read: '?' and nW."""
    six = draw(st.booleans())
    star = st.just("*")

    def time_field(name: str) -> str:
        return draw(st.one_of(star, field_text(name, hashes=hashes)))

    second = time_field("second") if six else None
    minute = time_field("minute")
    hour = time_field("hour")
    month = draw(st.one_of(star, star, star, field_text("month", hashes=hashes)))
    # Days 29-31 only exist in some months: allow them only when every month is allowed.
    dom_hi = None if month == "*" else 28
    question = [] if cronsim_dialect else ["?"]
    restricted = ["restricted"] * 3
    dom_mode = draw(st.sampled_from(["*", *question, "*/", *restricted]))
    dow_mode = draw(st.sampled_from(["*", *question, "*/", "restricted", "restricted"]))
    if dom_mode == "?" and dow_mode == "?":
        dow_mode = "*"
    # A day matches both fields when one starts with '*' or day_and is set. Keep such pairs
    # satisfiable: specials (L, LW, nW, nL, n#k) only beside a bare '*' or '?', and never with
    # day_and (e.g. "LW" and "*/7" can never meet).
    dom_specials = not day_and and dow_mode in ("*", "?", "restricted")
    dow_specials = not day_and and dom_mode in ("*", "?", "restricted")

    def day_field(name: str, mode: str, specials: bool) -> str:
        if mode in ("*", "?"):
            return mode
        hi = dom_hi if name == "day_of_month" else None
        if mode == "*/":
            lo, top = oracle.BOUNDS[name]
            limit = (top - lo + 1) if hi is None else 1
            return f"*/{draw(st.integers(1, limit))}"
        # "restricted" must not start with '*' (a '*/n' first term would switch on the AND rule).
        return draw(
            field_text(
                name, hashes=hashes, specials=specials, hi=hi, nearest=not cronsim_dialect
            ).filter(lambda text: not text.startswith("*"))
        )

    dom = day_field("day_of_month", dom_mode, dom_specials)
    dow = day_field("day_of_week", dow_mode, dow_specials)
    fields = [minute, hour, dom, month, dow]
    if second is not None:
        fields.insert(0, second)
    sep = draw(st.sampled_from([" ", " ", " ", "\t", "  "]))
    return sep.join(fields)


aliases = st.sampled_from(sorted(oracle.ALIASES))


@st.composite
def cases(draw: st.DrawFn, *, hashes: bool = True, zones: tuple[str, ...] = ZONES) -> Case:
    """An expression (sometimes an alias), key, zone and day rule, with the oracle's reading."""
    day_and = draw(st.sampled_from([False, False, False, True]))
    if hashes and draw(st.integers(0, 9)) == 0:
        text = draw(aliases)
    else:
        text = draw(expression_text(hashes=hashes, day_and=day_and))
    key = draw(keys)
    tz_name = draw(st.sampled_from(zones))
    if tz_name == "UTC":
        tz_arg: str | tzinfo | None = draw(st.sampled_from([None, "UTC", timezone.utc]))
    else:
        tz_arg = draw(st.sampled_from([tz_name, ZoneInfo(tz_name)]))
    spec = oracle.parse(text, key, day_and=day_and)
    return Case(text=text, key=key, tz_name=tz_name, tz_arg=tz_arg, day_and=day_and, spec=spec)


_EPOCH_2020 = int(datetime(2020, 1, 1, tzinfo=timezone.utc).timestamp())
_EPOCH_2031 = int(datetime(2031, 1, 1, tzinfo=timezone.utc).timestamp())


def _year_ends(tz_name: str) -> list[int]:
    tz = oracle.zone(None if tz_name == "UTC" else tz_name)
    marks = []
    for year in range(2020, 2031):
        marks.append(int(datetime(year, 12, 31, 23, 59, tzinfo=tz).timestamp()))
        marks.append(int(datetime(year, 2, 28, 23, 59, tzinfo=tz).timestamp()))
    return marks


@st.composite
def instants(draw: st.DrawFn, tz_name: str, near: int | None = None) -> datetime:
    """An aware instant near a DST change, a year or February end, or anywhere in 2020-2030;
    with ``near``, a few hours before or just after that DST change."""
    if near is not None:
        shift = draw(st.integers(-4 * 3600, 3600) | st.sampled_from([-3600, -1800, -60, -1, 0]))
        micro = draw(st.sampled_from([0, 0, 1, 999_999]))
        return datetime.fromtimestamp(near + shift, timezone.utc) + timedelta(microseconds=micro)
    kind = draw(st.sampled_from(["transition", "transition", "year_end", "anywhere"]))
    changes = oracle.transitions(tz_name) if tz_name != "UTC" else ()
    if kind == "transition" and changes:
        base = draw(st.sampled_from(changes))
    elif kind in ("transition", "year_end"):
        base = draw(st.sampled_from(_year_ends(tz_name)))
    else:
        base = draw(st.integers(_EPOCH_2020, _EPOCH_2031))
    shift = draw(
        st.one_of(
            st.sampled_from([-3601, -3600, -1800, -61, -60, -1, 0, 1, 59, 60, 1800, 3600]),
            st.integers(-4 * 3600, 4 * 3600),
            st.integers(-2 * 86400, 2 * 86400),
        )
    )
    micro = draw(st.sampled_from([0, 0, 0, 1, 500_000, 999_999]))
    return datetime.fromtimestamp(base + shift, timezone.utc) + timedelta(microseconds=micro)


def present(instant: datetime, tz_name: str, how: int) -> datetime:
    """The same instant shown in the expression's zone, in UTC, or at a fixed offset."""
    if how == 0:
        return instant.astimezone(oracle.zone(None if tz_name == "UTC" else tz_name))
    if how == 1:
        return instant.astimezone(timezone.utc)
    return instant.astimezone(timezone(timedelta(hours=5, minutes=45)))


@st.composite
def dst_cases(draw: st.DrawFn, *, hashes: bool = True, zones: tuple[str, ...] = ZONES[1:]) -> Case:
    """An expression aimed at one DST change: its hour field names the hours the change skips or
    repeats, its minute field is often fixed (the §2 fixed-time rule) and sometimes '*'-led
    (real-instant rule); 6-field forms follow the real-instant rule whatever their fields."""
    tz_name = draw(st.sampled_from(zones))
    change = draw(st.sampled_from(oracle.transitions(tz_name)))
    tz = oracle.zone(tz_name)
    before = datetime.fromtimestamp(change - 1, tz)
    after = datetime.fromtimestamp(change, tz)
    near_hours = sorted({(h + d) % 24 for h in (before.hour, after.hour) for d in (-1, 0, 1)})
    hour_value = st.sampled_from(near_hours)
    minute_value = st.sampled_from([0, 1, 15, 29, 30, 31, 45, 59]) | st.integers(0, 59)

    @st.composite
    def listed(draw: st.DrawFn, values: st.SearchStrategy[int]) -> str:
        picked = draw(st.lists(values, min_size=1, max_size=3, unique=True))
        if len(picked) == 2 and draw(st.booleans()):
            a, b = sorted(picked)
            return f"{a}-{b}"
        return ",".join(map(str, picked))

    minute_options = [listed(minute_value), st.sampled_from(["*", "*/15", "*/7", "*/30"])]
    if hashes:
        minute_options.append(st.sampled_from(["H", "H(25-35)", "H/20", "H(0-5)"]))
    minute = draw(st.one_of(*minute_options))
    hour_options = [listed(hour_value), st.sampled_from(["*", "*/2", "1-3", "2-4"])]
    if hashes:
        hour_options.append(st.just(f"H({near_hours[0]}-{near_hours[-1]})"))
    hour = draw(st.one_of(*hour_options))
    fields = [minute, hour, "*", "*", "*"]
    if draw(st.integers(0, 3)) == 0:
        fields.insert(0, draw(st.sampled_from(["0", "*/20", "59", "0,30"])))
    text = " ".join(fields)
    key = draw(keys)
    tz_arg: str | tzinfo = draw(st.sampled_from([tz_name, ZoneInfo(tz_name)]))
    spec = oracle.parse(text, key)
    return Case(text, key, tz_name, tz_arg, day_and=False, spec=spec, near=change)


def any_cases(*, hashes: bool = True, zones: tuple[str, ...] = ZONES) -> st.SearchStrategy[Case]:
    """Half general cases, half cases built around a DST change."""
    changing = tuple(z for z in zones if z != "UTC" and oracle.transitions(z))
    return st.one_of(cases(hashes=hashes, zones=zones), dst_cases(hashes=hashes, zones=changing))
