"""A brute-force reading of docs/design.md §2 and §3, written without looking at the engine.

It is deliberately slow and literal: it resolves hash terms with its own SHA-256 code, parses
the expression into plain value sets, and decides whether one *real instant* fires by looking at
that instant's wall time and the DST rule. Searches walk real time (UTC epoch) forward or
backward one minute at a time. For 6-field expressions each real minute is expanded into its
seconds: every zone the suite uses has offsets and transitions on whole minutes (checked), so
within one real minute the wall clock runs second for second and this equals a second-by-second
walk, sixty times faster.

Nothing here imports ``celery_hashbeat``: the oracle must be able to disagree with it.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import cache
from zoneinfo import ZoneInfo

FIELDS = ("second", "minute", "hour", "day_of_month", "month", "day_of_week")

#: The whole range of each field (§2): what plain terms, ranges and steps may use.
BOUNDS = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day_of_month": (1, 31),
    "month": (1, 12),
    "day_of_week": (0, 7),
}

#: The range a bare ``H`` and ``H/n`` draw from (§2: day-of-month 1-28, day-of-week 0-6).
HASH_BOUNDS = {**BOUNDS, "day_of_month": (1, 28), "day_of_week": (0, 6)}

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

ALIASES = {
    "@yearly": "H H H H *",
    "@annually": "H H H H *",
    "@monthly": "H H H * *",
    "@weekly": "H H * * H",
    "@daily": "H H * * *",
    "@midnight": "H H(0-2) * * *",
    "@hourly": "H * * * *",
}

Key = str | bytes | int


class OracleParseError(ValueError):
    """The oracle's own parser refused the text (it is strict: only the §2 grammar)."""


# --------------------------------------------------------------------------------------------
# §3 seeding, written out from the formula


def key_material(key: Key) -> bytes:
    """§3 key bytes: UTF-8 for str, as given for bytes, the decimal digits for an int."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    return str(key).encode()


def hash_u(key: Key, field_name: str, occurrence: int) -> int:
    """§3: the first 8 bytes (big-endian) of sha256(key 0x1f field 0x1f occurrence)."""
    material = (
        key_material(key)
        + b"\x1f"
        + field_name.encode("ascii")
        + b"\x1f"
        + str(occurrence).encode("ascii")
    )
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")


# --------------------------------------------------------------------------------------------
# Parsing (strict §2 grammar) into value sets


@dataclass
class FieldSpec:
    """The resolved meaning of one field."""

    values: set[int] = field(default_factory=set)
    star: bool = False  # the field text starts with '*' or is '?' (Vixie's day rule)
    last_day: bool = False  # L   (day of month)
    last_weekday: bool = False  # LW  (day of month)
    nearest: set[int] = field(default_factory=set)  # nW  (day of month)
    last_dow: set[int] = field(default_factory=set)  # nL  (day of week)
    nth_dow: set[tuple[int, int]] = field(default_factory=set)  # n#k (day of week)
    hash_terms: int = 0


_NUM = r"(\d+)"
_RE_H = re.compile(r"H(?:\((\d+)-(\d+)\))?(?:/(\d+))?")
_RE_FUZZY = re.compile(r"#(?:\[(\d+)-(\d+)\]|/(\d+))?")
_RE_NEAREST = re.compile(_NUM + "W")
_RE_LAST_DOW = re.compile(_NUM + "L")
_RE_NTH = re.compile(r"([0-9A-Za-z]+)#(\d+)")  # MON#1 as well as 1#1
_RE_PLAIN = re.compile(r"([0-9A-Za-z]+|\*)(?:-([0-9A-Za-z]+))?(?:/(\d+))?")


def _number(text: str, name: str) -> int:
    """A plain ASCII number or a name valid in this field."""
    upper = text.upper()
    if name == "month" and upper in MONTH_NAMES:
        return MONTH_NAMES.index(upper) + 1
    if name == "day_of_week" and upper in DAY_NAMES:
        return DAY_NAMES.index(upper)
    if not (text.isascii() and text.isdigit()):
        raise OracleParseError(f"{name}: bad value {text!r}")
    value = int(text)
    lo, hi = BOUNDS[name]
    if not lo <= value <= hi:
        raise OracleParseError(f"{name}: {value} out of range")
    return value


def _check_step(step: int, span: int, name: str) -> None:
    if not 1 <= step <= span:
        raise OracleParseError(f"{name}: bad step {step}")


def _hash_values(
    name: str, key: Key | None, occurrence: int, *, a: int | None, b: int | None, step: int | None
) -> set[int]:
    """§3 for one hash term."""
    if key is None:
        raise OracleParseError("hash term without a key")
    u = hash_u(key, name, occurrence)
    if a is None or b is None:
        lo, hi = HASH_BOUNDS[name]
    else:
        lo, hi = a, b
        flo, fhi = BOUNDS[name]
        if not (flo <= lo <= hi <= fhi):
            raise OracleParseError(f"{name}: bad hash range {a}-{b}")
    if step is None:
        return {lo + u % (hi - lo + 1)}
    _check_step(step, hi - lo + 1, name)
    return set(range(lo + u % step, hi + 1, step))


def parse_field(text: str, name: str, key: Key | None) -> FieldSpec:
    """One field's text -> FieldSpec, hash terms resolved with the oracle's §3 code."""
    spec = FieldSpec(star=text.startswith("*") or text == "?")
    lo, hi = BOUNDS[name]
    # syntax.md: letters are read in any case (H, L, W as names are).
    for term in text.upper().split(","):
        if term == "":
            raise OracleParseError(f"{name}: empty term")
        if term == "?":
            if name not in ("day_of_month", "day_of_week"):
                raise OracleParseError(f"{name}: '?' not allowed")
            spec.values |= set(range(lo, hi + 1))
            continue
        if m := _RE_H.fullmatch(term):
            a, b, step = (int(g) if g is not None else None for g in m.groups())
            spec.values |= _hash_values(name, key, spec.hash_terms, a=a, b=b, step=step)
            spec.hash_terms += 1
            continue
        if m := _RE_FUZZY.fullmatch(term):
            a, b, step = (int(g) if g is not None else None for g in m.groups())
            spec.values |= _hash_values(name, key, spec.hash_terms, a=a, b=b, step=step)
            spec.hash_terms += 1
            continue
        if name == "day_of_month":
            if term == "L":
                spec.last_day = True
                continue
            if term == "LW":
                spec.last_weekday = True
                continue
            if m := _RE_NEAREST.fullmatch(term):
                spec.nearest.add(_number(m.group(1), name))
                continue
        if name == "day_of_week":
            if m := _RE_LAST_DOW.fullmatch(term):
                spec.last_dow.add(_number(m.group(1), name) % 7)
                continue
            if m := _RE_NTH.fullmatch(term):
                nth = int(m.group(2))
                if not 1 <= nth <= 5:
                    raise OracleParseError(f"{name}: bad nth {nth}")
                spec.nth_dow.add((_number(m.group(1), name) % 7, nth))
                continue
        m = _RE_PLAIN.fullmatch(term)
        if not m:
            raise OracleParseError(f"{name}: bad term {term!r}")
        first, last, step_text = m.groups()
        if first == "*":
            if last is not None:
                raise OracleParseError(f"{name}: '*-'")
            start, stop = lo, hi
        else:
            start = _number(first, name)
            if last is not None:
                stop = _number(last, name)
                if stop < start:
                    raise OracleParseError(f"{name}: reversed range")
            elif step_text is not None:
                stop = hi  # N/n runs to the field's end
            else:
                stop = start
        if step_text is None:
            spec.values |= set(range(start, stop + 1))
        else:
            step = int(step_text)
            span = (hi - lo + 1) if (first == "*" or last is None) else (stop - start + 1)
            _check_step(step, span, name)
            spec.values |= set(range(start, stop + 1, step))
    if name == "day_of_week":
        spec.values = {v % 7 for v in spec.values}
    return spec


@dataclass
class Spec:
    """A whole parsed expression, ready for matching."""

    text: str
    fields: list[str]
    seconds: set[int]
    minutes: set[int]
    hours: set[int]
    dom: FieldSpec
    months: set[int]
    dow: FieldSpec
    six: bool
    day_and: bool
    fixed_time: bool  # §2: 5-field, minute and hour fields both not starting with '*'
    day_cache: dict[date, bool] = field(default_factory=dict, compare=False, repr=False)

    def resolved_sets(self) -> dict[str, set[int]]:
        """Plain value sets per field (specials left out), for comparing resolutions."""
        return {
            "second": self.seconds,
            "minute": self.minutes,
            "hour": self.hours,
            "day_of_month": self.dom.values,
            "month": self.months,
            "day_of_week": self.dow.values,
        }

    # -- day matching ------------------------------------------------------------------------

    def dom_matches(self, d: date) -> bool:
        spec = self.dom
        if d.day in spec.values:
            return True
        days = calendar.monthrange(d.year, d.month)[1]
        if spec.last_day and d.day == days:
            return True
        if spec.last_weekday and d.day == last_weekday_of_month(d.year, d.month):
            return True
        return any(nearest_weekday(d.year, d.month, n) == d.day for n in spec.nearest)

    def dow_matches(self, d: date) -> bool:
        spec = self.dow
        weekday = (d.weekday() + 1) % 7  # Sunday = 0
        if weekday in spec.values:
            return True
        days = calendar.monthrange(d.year, d.month)[1]
        if weekday in spec.last_dow and d.day + 7 > days:
            return True
        return (weekday, (d.day - 1) // 7 + 1) in spec.nth_dow

    def day_matches(self, d: date) -> bool:
        """§2 day rule: AND if either field starts with '*' (or is '?') or day_and; else OR."""
        cached = self.day_cache.get(d)
        if cached is None:
            dom_ok = self.dom_matches(d)
            dow_ok = self.dow_matches(d)
            if self.day_and or self.dom.star or self.dow.star:
                cached = dom_ok and dow_ok
            else:
                cached = dom_ok or dow_ok
            self.day_cache[d] = cached
        return cached

    def wall_matches(self, wall: datetime) -> bool:
        """Every field but the second matches this wall time."""
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self.day_matches(wall.date())
        )


def last_weekday_of_month(year: int, month: int) -> int:
    """The day number of the last Monday-Friday of the month."""
    days = calendar.monthrange(year, month)[1]
    weekday = date(year, month, days).weekday()  # Monday = 0
    return days - max(0, weekday - 4)


def nearest_weekday(year: int, month: int, n: int) -> int | None:
    """Quartz ``nW``: the Monday-Friday nearest the nth, never leaving the month."""
    days = calendar.monthrange(year, month)[1]
    if n > days:
        return None
    weekday = date(year, month, n).weekday()
    if weekday == 5:  # Saturday -> Friday, or Monday the 3rd if the 1st is a Saturday
        return n - 1 if n > 1 else n + 2
    if weekday == 6:  # Sunday -> Monday, or Friday if the month ends on this Sunday
        return n + 1 if n < days else n - 2
    return n


def parse(text: str, key: Key | None = None, *, day_and: bool = False) -> Spec:
    """The oracle's reading of an expression (aliases, 5 or 6 fields, hash terms)."""
    stripped = text.strip(" \t")
    if stripped.startswith("@"):
        if stripped not in ALIASES:
            raise OracleParseError(f"unknown alias {stripped!r}")
        stripped = ALIASES[stripped]
    parts = re.split(r"[ \t]+", stripped)
    if len(parts) == 5:
        parts = ["0", *parts]
        six = False
        texts = parts
    elif len(parts) == 6:
        six = True
        texts = parts
    else:
        raise OracleParseError(f"{len(parts)} fields")
    specs = [parse_field(t, name, key) for t, name in zip(texts, FIELDS, strict=True)]
    fixed = not six and not texts[1].startswith("*") and not texts[2].startswith("*")
    spec = Spec(
        text=text,
        fields=texts if six else texts[1:],
        seconds=specs[0].values,
        minutes=specs[1].values,
        hours=specs[2].values,
        dom=specs[3],
        months=specs[4].values,
        dow=specs[5],
        six=six,
        day_and=day_and,
        fixed_time=fixed,
    )
    if not can_ever_fire(spec):
        raise OracleParseError("never fires")
    return spec


def can_ever_fire(spec: Spec) -> bool:
    """Does any day in a full 400-year Gregorian cycle match? (Times always exist.)"""
    if not (spec.seconds and spec.minutes and spec.hours and spec.months):
        return False
    return _some_day_matches(spec)


def _some_day_matches(spec: Spec) -> bool:
    # 28 years cover every (leap, weekday-of-Jan-1) pair; add 2100 for the non-leap century.
    for year in (*range(2000, 2028), 2100):
        for month in spec.months:
            for day in range(1, calendar.monthrange(year, month)[1] + 1):
                if spec.day_matches(date(year, month, day)):
                    return True
    return False


# --------------------------------------------------------------------------------------------
# Instants


def zone(tz: str | tzinfo | None) -> tzinfo:
    """The tzinfo an expression lives in (None is UTC)."""
    if tz is None:
        return timezone.utc
    if isinstance(tz, str):
        return ZoneInfo(tz)
    return tz


def local(ts: int, tz: tzinfo) -> datetime:
    """The wall time (with fold) of a real instant."""
    wall = datetime.fromtimestamp(ts, tz)
    offset = wall.utcoffset()
    assert offset is not None
    assert offset.total_seconds() % 60 == 0, "the oracle's minute walk needs whole-minute offsets"
    return wall


def _offset(ts: int, tz: tzinfo) -> int:
    offset = datetime.fromtimestamp(ts, tz).utcoffset()
    assert offset is not None
    return int(offset.total_seconds())


def minute_fires(spec: Spec, tz: tzinfo, minute_ts: int) -> list[int]:
    """The fire instants in the real minute [minute_ts, minute_ts + 60), in order."""
    assert minute_ts % 60 == 0
    wall = local(minute_ts, tz)
    if spec.six or not spec.fixed_time:
        # Real-instant semantics: gap walls never happen, repeated walls fire twice.
        if spec.wall_matches(wall):
            return [minute_ts + s for s in sorted(spec.seconds)]
        return []
    # Fixed-time 5-field job (§2 DST rule).
    if spec.wall_matches(wall) and wall.fold == 0:
        return [minute_ts]
    before = _offset(minute_ts - 60, tz)
    now = int(wall.utcoffset().total_seconds())  # type: ignore[union-attr]
    if now > before:
        # minute_ts is the first instant after a spring-forward gap; the gap's walls are the
        # minutes strictly between the wall of minute_ts - 60 and the wall of minute_ts.
        prev_wall = local(minute_ts - 60, tz).replace(tzinfo=None, fold=0)
        for k in range(1, (now - before) // 60 + 1):
            if spec.wall_matches(prev_wall + timedelta(minutes=k)):
                return [minute_ts]
    return []


def fires_at(spec: Spec, tz: tzinfo, instant: datetime) -> bool:
    """Is this aware instant a fire of the expression?"""
    assert instant.tzinfo is not None
    if instant.microsecond:
        return False
    ts = int(instant.timestamp())
    return ts in minute_fires(spec, tz, ts - ts % 60)


def _floor_int(x: float) -> int:
    i = int(x)
    return i - 1 if i > x else i


def _day_is_possible(spec: Spec, wall: datetime) -> bool:
    return wall.month in spec.months and spec.day_matches(wall.date())


def _midnight(day: date, tz: tzinfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp())


# Offsets change by at most two hours: landing this far before or after a local midnight never
# steps over a real instant of the day we are walking into.
_MARGIN = 7200


def iter_next(spec: Spec, tz: tzinfo, after: float, horizon: int) -> Iterator[int]:
    """Fires strictly after ``after`` (epoch seconds) and no later than after + horizon.

    Walks minute by minute, but leaves a local day whose date cannot match at once (after
    looking at its first minute, where a gap rule fire of the day before would be)."""
    end = after + horizon
    minute = _floor_int(after) // 60 * 60
    while minute <= end:
        for ts in minute_fires(spec, tz, minute):
            if after < ts <= end:
                yield ts
        wall = local(minute, tz)
        if not _day_is_possible(spec, wall):
            day = wall.date() + timedelta(days=1)
            if wall.month not in spec.months:  # the whole month is out: go to the next one
                day = (wall.date().replace(day=28) + timedelta(days=4)).replace(day=1)
            jump = _midnight(day, tz) - _MARGIN
            minute = max(minute + 60, jump // 60 * 60)
        else:
            minute += 60


def iter_prev(spec: Spec, tz: tzinfo, before: float, horizon: int) -> Iterator[int]:
    """Fires strictly before ``before``, newest first, no earlier than before - horizon."""
    start = before - horizon
    minute = _floor_int(before) // 60 * 60
    while minute + 60 > start:
        for ts in reversed(minute_fires(spec, tz, minute)):
            if start <= ts < before:
                yield ts
        wall = local(minute, tz)
        if not _day_is_possible(spec, wall):
            # The first minute of the day may fire for the day before (gap rule): land on it.
            day = wall.date() if wall.month in spec.months else wall.date().replace(day=1)
            jump = _midnight(day, tz) + _MARGIN
            minute = min(minute - 60, jump // 60 * 60)
        else:
            minute -= 60


def next_fire(spec: Spec, tz: tzinfo, after: float, horizon: int) -> int | None:
    """The first fire strictly after ``after`` within the horizon, or None."""
    return next(iter_next(spec, tz, after, horizon), None)


def prev_fire(spec: Spec, tz: tzinfo, before: float, horizon: int) -> int | None:
    """The last fire strictly before ``before`` within the horizon, or None."""
    return next(iter_prev(spec, tz, before, horizon), None)


# --------------------------------------------------------------------------------------------
# Time zone transitions, to aim start times at them


@cache
def transitions(tz_name: str, first_year: int = 2019, last_year: int = 2031) -> tuple[int, ...]:
    """Epoch seconds of every offset change of the zone in the given years (day scan + bisect)."""
    tz = ZoneInfo(tz_name)
    start = int(datetime(first_year, 1, 1, tzinfo=timezone.utc).timestamp())
    stop = int(datetime(last_year + 1, 1, 1, tzinfo=timezone.utc).timestamp())
    found: list[int] = []
    day = 86400
    t = start
    current = _offset(t, tz)
    while t < stop:
        nxt = t + day
        offset = _offset(nxt, tz)
        if offset != current:
            lo, hi = t, nxt  # offset(lo) == current, offset(hi) == new
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(mid, tz) == current:
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
            current = offset
        t = nxt
    return tuple(found)
