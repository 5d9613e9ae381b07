"""English for a resolved schedule: "At 14:37 every day", "Every 15 minutes starting at :07,
9:00-16:59, Monday to Friday". It reads the resolved values, so hash terms show what they became.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import NamedTuple

from celery_hashbeat.expr.fields import DaySpec, Resolved

WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = (
    "", "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
#: Endings of a time phrase that already says it repeats all day.
REPEATING = ("every hour", "every minute")

ORDINALS = ("", "first", "second", "third", "fourth", "fifth")


class Shape(NamedTuple):
    """How a set of values reads: every value, one, a stepped run, a contiguous range, a list."""

    kind: str
    values: tuple[int, ...]
    step: int = 1


def shape(values: Iterable[int], low: int, high: int) -> Shape:
    ordered = tuple(sorted(values))
    if len(ordered) == high - low + 1:
        return Shape("all", ordered)
    if len(ordered) == 1:
        return Shape("one", ordered)
    steps = {b - a for a, b in pairwise(ordered)}
    if len(steps) == 1 and len(ordered) >= 3:
        step = steps.pop()
        if step == 1:
            return Shape("range", ordered)
        if ordered[-1] + step > high:
            return Shape("step", ordered, step)
    return Shape("list", ordered)


def listing(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def describe(resolved: Resolved, six_fields: bool) -> str:
    time = _time_phrase(resolved, six_fields)
    days = _day_phrase(resolved.day)
    months = shape(resolved.months, 1, 12)
    parts = [time]
    if days:
        parts.append(days)
    elif time.startswith("At ") and months.kind == "all" and not time.endswith(REPEATING):
        parts[0] += " every day"
    if months.kind != "all":
        parts.append("in " + _month_words(months))
    return ", ".join(parts)


def _clock(hour: int, minute: int, second: int | None = None) -> str:
    return f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second is not None else "")


def _time_phrase(resolved: Resolved, six_fields: bool) -> str:
    seconds = shape(resolved.seconds, 0, 59)
    minutes = shape(resolved.minutes, 0, 59)
    hours = shape(resolved.hours, 0, 23)
    second = (
        seconds.values[0] if seconds.kind == "one" and (six_fields and seconds.values[0]) else None
    )
    if seconds.kind == "one" and minutes.kind == "one" and len(hours.values) <= 4:
        minute = minutes.values[0]
        return "At " + listing([_clock(hour, minute, second) for hour in hours.values])
    if (
        seconds.kind == "list"
        and minutes.kind == "one"
        and hours.kind != "all"
        and len(seconds.values) * len(hours.values) <= 4
    ):
        # A few seconds of one minute in a few hours: the clock times say it best.
        minute = minutes.values[0]
        return "At " + listing(
            [_clock(hour, minute, s) for hour in hours.values for s in seconds.values]
        )
    # Each phrase below names the unit it repeats in ("of every minute", "of every hour")
    # unless it runs on without a break: "at seconds 15 and 45" alone could mean once an hour.
    if seconds.kind == "one":
        phrase = _unit_phrase(minutes, "minute", ":")
        if second is not None:
            phrase += f", at second {second}"
        bounded = not _endless(minutes, 60)
    else:
        phrase = _unit_phrase(seconds, "second", "second ")
        if minutes.kind == "all":
            if not _endless(seconds, 60):
                phrase += " of every minute"
            bounded = False
        else:
            phrase += ", " + _during(minutes, "minute")
            bounded = True
    if hours.kind == "all":
        return phrase + (" of every hour" if bounded else "")
    return phrase + ", " + _hours_window(hours)


def _endless(values: Shape, size: int) -> bool:
    """True when the values run on across the unit's end at one pace (every value, or a step
    that divides the unit), so the phrase needs no "of every ..."."""
    return values.kind == "all" or (values.kind == "step" and size % values.step == 0)


def _unit_phrase(values: Shape, unit: str, mark: str) -> str:
    numbers = [f"{mark}{v:02d}" if mark == ":" else f"{mark}{v}" for v in values.values]
    if values.kind == "all":
        return f"Every {unit}"
    if values.kind == "step" and 60 % values.step:
        # */25 is 0, 25, 50 and then 0 again after 10: say where each run starts and ends.
        return f"Every {values.step} {unit}s from {numbers[0]} to {numbers[-1]}"
    if values.kind == "step":
        start = values.values[0]
        return f"Every {values.step} {unit}s" + (f" starting at {numbers[0]}" if start else "")
    if values.kind == "range":
        return f"Every {unit} from {numbers[0]} to {numbers[-1]}"
    if values.kind == "one" and mark == ":":
        return f"At minute {values.values[0]}"
    return f"At {unit}s {listing([str(v) for v in values.values])}"


def _during(values: Shape, unit: str) -> str:
    if values.kind == "range":
        return f"during {unit}s {values.values[0]}-{values.values[-1]}"
    if values.kind == "one":
        return f"during {unit} {values.values[0]}"
    return f"during {unit}s {listing([str(v) for v in values.values])}"


def _hours_window(hours: Shape) -> str:
    if hours.kind in {"range", "one"}:
        return f"{hours.values[0]}:00-{hours.values[-1]}:59"
    return "during hours " + listing([str(h) for h in hours.values])


def _month_words(months: Shape) -> str:
    if months.kind == "range":
        return f"{MONTHS[months.values[0]]} to {MONTHS[months.values[-1]]}"
    return listing([MONTHS[m] for m in months.values])


def _day_phrase(day: DaySpec) -> str:
    by_date = _date_words(day)
    by_weekday = _weekday_words(day)
    every_date = not by_date
    every_weekday = not by_weekday
    if every_date and every_weekday:
        return ""
    if every_date:
        return by_weekday
    if every_weekday:
        return by_date
    if day.both_must_match:
        return f"{by_date}, {_weekday_condition(day)}"
    return f"{by_date} and {by_weekday}"


def _weekday_condition(day: DaySpec) -> str:
    """The weekday half of an AND day rule, read as a condition on the date."""
    weekdays = shape(day.weekdays, 0, 6)
    words = []
    if day.weekdays and weekdays.kind != "all":
        if weekdays.kind == "range":
            words.append(f"{WEEKDAYS[weekdays.values[0]]} to {WEEKDAYS[weekdays.values[-1]]}")
        else:
            words += [f"a {WEEKDAYS[w]}" for w in weekdays.values]
    words += _special_weekdays(day)
    return "if it is " + " or ".join(words)


def _date_words(day: DaySpec) -> str:
    words = []
    plain = shape(day.days, 1, 31)
    if day.days and plain.kind != "all":
        numbers = [str(d) for d in plain.values]
        if plain.kind == "range":
            words.append(f"days {numbers[0]}-{numbers[-1]} of the month")
        else:
            words.append(f"day{'s' if len(numbers) > 1 else ''} {listing(numbers)} of the month")
    if day.last_day:
        words.append("the last day of the month")
    if day.last_weekday:
        words.append("the last weekday of the month")
    words += [f"the weekday nearest day {d}" for d in sorted(day.nearest_weekdays)]
    return "on " + listing(words) if words else ""


def _weekday_words(day: DaySpec) -> str:
    words = []
    weekdays = shape(day.weekdays, 0, 6)
    if day.weekdays and weekdays.kind != "all":
        if weekdays.kind == "range":
            words.append(f"{WEEKDAYS[weekdays.values[0]]} to {WEEKDAYS[weekdays.values[-1]]}")
        else:
            words.append(listing([WEEKDAYS[w] + "s" for w in weekdays.values]))
    words += _special_weekdays(day)
    if not words:
        return ""
    prefix = "" if weekdays.kind == "range" and len(words) == 1 else "on "
    return prefix + listing(words)


def _special_weekdays(day: DaySpec) -> list[str]:
    """``nL`` and ``n#k`` terms in words."""
    last = [f"the last {WEEKDAYS[w]} of the month" for w in sorted(day.last_weekdays_of)]
    nth = [f"the {ORDINALS[k]} {WEEKDAYS[w]} of the month" for w, k in sorted(day.nth_weekdays)]
    return last + nth
