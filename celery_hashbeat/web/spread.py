"""The spread picture of an entry's page: when it and the entries of its shape fire over the next
hour or day, as an inline SVG drawn on the server (docs/design.md §18). Hashed schedules exist to
spread load; this is where an operator sees whether they do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from markupsafe import Markup, escape

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

#: Entries of the same shape drawn at most (the first ones by name: enough to see the spread).
MOST_ENTRIES = 500

#: Slots asked per entry at most (an entry every second, over an hour).
MOST_SLOTS = 3600

WIDTH, BAR_H, MARK_H, PAD = 720, 90, 24, 30


@dataclass(frozen=True)
class Spread:
    """Fire times (epoch ms) in a window: the entry's own and its shape's, in bins."""

    start_ms: int
    span_ms: int
    own: list[int]
    bins: list[int]
    entries: int

    @property
    def window(self) -> str:
        return "hour" if self.span_ms == HOUR_MS else "day"


def spread(
    names: list[str], slots_of: Callable[[str, int], list[int]], now_ms: int, bins: int = 96
) -> Spread:
    """``names[0]``'s slots and every named entry's, counted in ``bins`` over the next day, or
    the next hour when the entry fires more than once an hour."""
    own_all = slots_of(names[0], MOST_SLOTS)
    each = max(MOST_SLOTS * 4 // max(len(names), 1), 60)  # a bounded total for many entries
    span = HOUR_MS if len([s for s in own_all if s < now_ms + HOUR_MS]) > 1 else DAY_MS
    end = now_ms + span
    counts = [0] * bins
    drawn = names[:MOST_ENTRIES]
    for name in drawn:
        for slot in own_all if name == names[0] else slots_of(name, min(each, MOST_SLOTS)):
            if now_ms <= slot < end:
                counts[min(bins - 1, (slot - now_ms) * bins // span)] += 1
    own = [slot for slot in own_all if now_ms <= slot < end]
    return Spread(now_ms, span, own, counts, len(drawn))


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M")


def svg(picture: Spread, name: str) -> Markup:
    """The picture as accessible inline SVG: a title, a description, and text ticks."""
    width, bins = WIDTH, len(picture.bins)
    tallest = max(picture.bins) or 1
    bar_w = (width - 2 * PAD) / bins
    parts = [
        f'<svg role="img" aria-labelledby="spread-title spread-desc" viewBox="0 0 {width} '
        f'{BAR_H + MARK_H + 3 * PAD}" width="100%" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="spread-title">When {escape(name)} and its shape fire over the next '
        f"{picture.window}</title>",
        f'<desc id="spread-desc">{len(picture.own)} runs of {escape(name)}; '
        f"{sum(picture.bins)} runs of the {picture.entries} entries of its shape; the busiest "
        f"of {bins} equal parts of the {picture.window} has {tallest}.</desc>",
    ]
    for index, count in enumerate(picture.bins):
        height = BAR_H * count / tallest
        x = PAD + index * bar_w
        parts.append(
            f'<rect class="shape" x="{x:.1f}" y="{PAD + BAR_H - height:.1f}" '
            f'width="{max(bar_w - 1, 1):.1f}" height="{height:.1f}"/>'
        )
    top = PAD + BAR_H + 6
    for slot in picture.own:
        x = PAD + (slot - picture.start_ms) * (width - 2 * PAD) / picture.span_ms
        parts.append(f'<rect class="own" x="{x:.1f}" y="{top}" width="2" height="{MARK_H}"/>')
    for quarter in range(5):
        at = picture.start_ms + picture.span_ms * quarter // 4
        x = PAD + (width - 2 * PAD) * quarter / 4
        parts.append(
            f'<text x="{x:.1f}" y="{top + MARK_H + 18}" text-anchor="middle">{_clock(at)}</text>'
        )
    parts.append(f'<text x="{PAD}" y="{PAD - 8}">entries of this shape, per bin</text>')
    parts.append(f'<text x="{PAD}" y="{top - 2 + MARK_H + 40}">this entry</text>')
    parts.append("</svg>")
    return Markup("".join(parts))
