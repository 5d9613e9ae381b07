"""Pictures of load over time: unicode bar charts for the terminal, PNG files with matplotlib."""

from __future__ import annotations

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


def write_png(
    path: str,
    span: timedelta,
    series: Sequence[tuple[str, Sequence[int]]],
    title: str,
) -> None:
    """Each series as a step line over the window, one panel each, in one PNG file."""
    pyplot = _pyplot()
    figure = draw(pyplot, span, series, title)
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot write {path}: {exc.strerror or exc}", param_hint="--png"
        ) from None
    finally:
        pyplot.close(figure)


def _pyplot() -> Any:
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

        matplotlib.use("Agg")
        from matplotlib import pyplot  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        raise SetupError("--png needs matplotlib: pip install 'celery-hashbeat[plot]'") from None
    return pyplot


def draw(
    pyplot: Any, span: timedelta, series: Sequence[tuple[str, Sequence[int]]], title: str
) -> Any:
    """The figure: panels on one vertical scale, so their peaks compare at a glance, and the
    time axis padded on both sides, so a spike in the first bucket (plain cron's minute 0)
    stands clear of the axis instead of hiding in it."""
    week = span > timedelta(days=1)
    unit = timedelta(days=1) if week else timedelta(hours=1)
    length = span / unit
    top = max((max(counts, default=0) for _, counts in series), default=0)
    figure, panels = pyplot.subplots(
        len(series), 1, figsize=(12, 3 * len(series)), sharex=True, sharey=True, squeeze=False
    )
    for panel, (label, counts) in zip(panels[:, 0], series, strict=True):
        step = length / len(counts)
        xs = [i * step for i in range(len(counts))] + [length]
        ys = [*counts, counts[-1]] if counts else [0]
        panel.fill_between(xs, ys, step="post", alpha=0.35, linewidth=0)
        panel.step(xs, ys, where="post", linewidth=0.8)
        panel.set_title(label, loc="left", fontsize=10)
        panel.set_ylabel("enqueues per bucket")
        panel.set_ylim(0, max(1, top) * 1.08)
        panel.set_xlim(-0.02 * length, 1.02 * length)
    panels[-1, 0].set_xlabel(
        "days from the window's start" if week else "hours from the window's start"
    )
    figure.suptitle(title)
    figure.tight_layout()
    return figure
