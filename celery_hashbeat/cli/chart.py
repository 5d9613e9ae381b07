"""Pictures of load over time: unicode bar charts for the terminal, PNG files with matplotlib."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import click

from .output import SetupError

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
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

        matplotlib.use("Agg")
        from matplotlib import pyplot  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
    except ImportError:
        raise SetupError("--png needs matplotlib: pip install 'celery-hashbeat[plot]'") from None
    week = span > timedelta(days=1)
    unit = timedelta(days=1) if week else timedelta(hours=1)
    figure = pyplot.figure(figsize=(12, 3 * len(series)))
    for index, (label, counts) in enumerate(series, start=1):
        panel = figure.add_subplot(len(series), 1, index)
        step = span / unit / len(counts)
        panel.step([i * step for i in range(len(counts))], counts, where="post", linewidth=0.8)
        panel.set_title(label, loc="left", fontsize=10)
        panel.set_ylabel("enqueues per bucket")
        panel.set_ylim(bottom=0)
        panel.set_xlim(0, span / unit)
    panel.set_xlabel("days from the window's start" if week else "hours from the window's start")
    figure.suptitle(title)
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as exc:
        raise click.BadParameter(
            f"cannot write {path}: {exc.strerror or exc}", param_hint="--png"
        ) from None
    finally:
        pyplot.close(figure)
