"""The six cron fields and the plain data an expression resolves to.

Parsing produces sets of values; evaluation wants lookup tables ("the first allowed value at or
after v"). Tables are built once per distinct value set and shared, so a hundred thousand entries
with a few hundred distinct schedules cost a few hundred tables, not a hundred thousand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache


class Field(enum.Enum):
    """A cron field, in the order of a 6-field expression; the value is (label, low, high)."""

    SECOND = ("second", 0, 59)
    MINUTE = ("minute", 0, 59)
    HOUR = ("hour", 0, 23)
    DAY_OF_MONTH = ("day-of-month", 1, 31)
    MONTH = ("month", 1, 12)
    DAY_OF_WEEK = ("day-of-week", 0, 7)

    @property
    def label(self) -> str:
        """The name used in messages: "day-of-month"."""
        return self.value[0]

    @property
    def seed_name(self) -> str:
        """The name hashed into seeds (docs/design.md §3): "day_of_month"."""
        return _SEED_NAMES[self]

    @property
    def low(self) -> int:
        return self.value[1]

    @property
    def high(self) -> int:
        return self.value[2]

    @property
    def hash_high(self) -> int:
        """The top of a bare ``H``: days 29-31 and weekday 7 would make it fire unevenly."""
        return {Field.DAY_OF_MONTH: 28, Field.DAY_OF_WEEK: 6}.get(self, self.high)

    @property
    def size(self) -> int:
        return self.high - self.low + 1


FIVE_FIELDS = (Field.MINUTE, Field.HOUR, Field.DAY_OF_MONTH, Field.MONTH, Field.DAY_OF_WEEK)
SIX_FIELDS = (Field.SECOND, *FIVE_FIELDS)

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
NAMES = {
    Field.MONTH: {name: number for number, name in enumerate(MONTH_NAMES, start=1)},
    Field.DAY_OF_WEEK: {name: number for number, name in enumerate(DAY_NAMES)},
}


@dataclass(frozen=True, slots=True)
class DaySpec:
    """Which days a schedule fires on: the two day fields and the rule that joins them."""

    days: frozenset[int]
    last_day: bool
    last_weekday: bool
    nearest_weekdays: frozenset[int]
    weekdays: frozenset[int]
    last_weekdays_of: frozenset[int]
    nth_weekdays: frozenset[tuple[int, int]]
    both_must_match: bool


@dataclass(frozen=True, slots=True)
class Resolved:
    """An expression with every hash term replaced by its values: plain data, no text."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    day: DaySpec


@lru_cache(maxsize=4096)
def next_table(values: frozenset[int], high: int) -> tuple[int, ...]:
    """``table[v]``: the smallest allowed value >= v, or -1; one extra slot past ``high``."""
    table = [-1] * (high + 2)
    following = -1
    for v in range(high, -1, -1):
        if v in values:
            following = v
        table[v] = following
    return tuple(table)


@lru_cache(maxsize=4096)
def prev_table(values: frozenset[int], high: int) -> tuple[int, ...]:
    """``table[v]``: the largest allowed value <= v, or -1."""
    table = [-1] * (high + 1)
    preceding = -1
    for v in range(high + 1):
        if v in values:
            preceding = v
        table[v] = preceding
    return tuple(table)


@lru_cache(maxsize=4096)
def weekday_masks(weekdays: frozenset[int]) -> tuple[int, ...]:
    """For each weekday of a month's 1st (0 = Sunday), a bit mask of its days 1-31 whose weekday
    is in ``weekdays``: a month's weekday matches are then one lookup."""
    masks = []
    for first in range(7):
        mask = 0
        for day in range(1, 32):
            if (first + day - 1) % 7 in weekdays:
                mask |= 1 << day
        masks.append(mask)
    return tuple(masks)


def day_bits(days: frozenset[int]) -> int:
    mask = 0
    for day in days:
        mask |= 1 << day
    return mask


#: Each field's seed name, made once: a draw asks for it per key.
_SEED_NAMES = {field: field.name.lower() for field in Field}
