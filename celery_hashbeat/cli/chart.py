"""Pictures of load over time: unicode bar charts for the terminal, PNG files with matplotlib."""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import click

from celery_hashbeat.cli.output import SetupError

BLOCKS = " ▁▂▃▄▅▆▇█"


def columns(counts: Sequence[int], width: int) -> list[int]:
    """``counts`` squeezed into ``width`` columns, each the peak of the buckets it covers, so a
    one-minute spike still shows in a chart of a whole week."""
    width = min(width, len(counts))
    return [
        max(counts[i * len(counts) // width : (i + 1) * len(counts) // width]) for i in range(width)
    ]


def bars(values: Sequence[int], top: int, height: int) -> list[str]:
    """Rows of block characters, highest first; ``top`` fills a column, any value above zero
    shows at least a sliver."""
    levels = len(BLOCKS) - 1
    eighths = [
        max(1 if value else 0, round(value / top * height * levels)) if top else 0
        for value in values
    ]
    return [
        "".join(BLOCKS[min(levels, max(0, e - row * levels))] for e in eighths)
        for row in range(height - 1, -1, -1)
    ]


def axis(start: datetime, span: timedelta, width: int) -> str:
    """Tick labels under a chart: hours across a day, weekdays across a week."""
    week = span > timedelta(days=1)
    step = timedelta(days=1) if week else timedelta(hours=3)
    line = [" "] * width
    tick = start
    while tick < start + span:
        label = f"{tick:%a %d}" if week else f"{tick:%H}"
        at = round((tick - start) / span * width)
        if at + len(label) <= width and all(c == " " for c in line[at : at + len(label) + 1]):
            line[at : at + len(label)] = label
        tick += step
    return "".join(line).rstrip()


#: The most points a panel of the PNG draws: a column holds the buckets of its span, so a day of
#: one-second buckets (86,400 of them) is not drawn into a solid block of sub-pixel spikes.
PNG_COLUMNS = 1200


def write_png(
    pyplot: Any,
    path: str,
    start: datetime,
    span: timedelta,
    series: Sequence[tuple[str, Sequence[int]]],
    title: str,
) -> None:
    """Each series over the window, one panel each, in one PNG file (``pyplot`` from
    ``load_pyplot``, loaded before anything is printed)."""
    figure = draw(pyplot, start, span, series, title)
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot write {path}: {exc.strerror or exc}", param_hint="--png"
        ) from None
    finally:
        pyplot.close(figure)


def load_pyplot() -> Any:
    """matplotlib's pyplot, drawing to files; a SetupError naming the extra to install when
    matplotlib is missing."""
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

        matplotlib.use("Agg")
        from matplotlib import pyplot  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        raise SetupError(
            "--png needs matplotlib, which is not installed: pip install 'celery-hashbeat[plot]'"
        ) from None
    return pyplot


def peaks_and_means(counts: Sequence[int], width: int) -> tuple[list[int], list[float]]:
    """``counts`` in at most ``width`` columns: each column's peak bucket and its mean."""
    width = max(1, min(width, len(counts)))
    peaks, means = [], []
    for i in range(width):
        part = counts[i * len(counts) // width : (i + 1) * len(counts) // width]
        peaks.append(max(part))
        means.append(sum(part) / len(part))
    return peaks, means


def draw(
    pyplot: Any,
    start: datetime,
    span: timedelta,
    series: Sequence[tuple[str, Sequence[int]]],
    title: str,
) -> Any:
    """The figure: one panel per series on a clock-time axis in the window's zone, each on its
    own vertical scale (a flat hashed load stays readable beside plain cron's spikes; each
    title says its peak). Where a column of the picture covers several buckets, the area is
    their mean and the line their peak, so a second-by-second load reads as a level, not as a
    block. The axis is padded on both sides, so a spike in the first bucket (plain cron's
    minute 0) stands clear of the axis."""
    dates: Any = importlib.import_module("matplotlib.dates")  # loaded with pyplot
    week = span > timedelta(days=1)
    zone = start.tzinfo
    figure, panels = pyplot.subplots(
        len(series), 1, figsize=(12, 3 * len(series)), sharex=True, squeeze=False
    )
    for panel, (label, counts) in zip(panels[:, 0], series, strict=True):
        peaks, means = peaks_and_means(counts, PNG_COLUMNS) if counts else ([0], [0.0])
        step = span / len(peaks)
        xs = [start + step * i for i in range(len(peaks))] + [start + span]
        panel.fill_between(xs, [*means, means[-1]], step="post", alpha=0.35, linewidth=0)
        panel.step(xs, [*peaks, peaks[-1]], where="post", linewidth=0.6)
        top = max(peaks)
        panel.set_title(f"{label}: peak {top} per bucket", loc="left", fontsize=10)
        panel.set_ylabel("enqueues per bucket")
        panel.set_ylim(0, max(1, top) * 1.08)
        panel.set_xlim(start - span * 0.02, start + span * 1.02)
    axis_ = panels[-1, 0].xaxis
    axis_.set_major_locator(dates.DayLocator(tz=zone) if week else dates.HourLocator(
        byhour=range(0, 24, 3), tz=zone))  # fmt: skip
    axis_.set_major_formatter(dates.DateFormatter("%a %d" if week else "%H:%M", tz=zone))
    panels[-1, 0].set_xlabel(f"time of day ({start.tzname()})" if not week else
                             f"day ({start.tzname()})")  # fmt: skip
    figure.suptitle(title)
    figure.tight_layout()
    return figure
