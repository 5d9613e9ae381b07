"""Commands that need no app: explain, lint and spread on expressions, against the engine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import Result

from celery_hashbeat import parse
from celery_hashbeat.cli.chart import draw
from celery_hashbeat.cli.output import Exit
from celery_hashbeat.cli.terms import lowest
from tests.cli.conftest import ROOT

Invoke = Callable[..., Result]
Run = Callable[..., subprocess.CompletedProcess[str]]
NO_PLOT = "--png needs matplotlib (the plot extra)"


def test_explain_resolves_as_the_engine_does(invoke: Invoke) -> None:
    result = invoke(
        "explain",
        "H/15 H(9-16) * * 1-5",
        "--key",
        "report",
        "--tz",
        "Europe/Riga",
        "-n",
        "3",
        "--json",
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    expr = parse("H/15 H(9-16) * * 1-5", "report", tz="Europe/Riga")
    assert shown["resolved"] == str(expr)
    assert shown["tz"] == "Europe/Riga"
    assert len(shown["next"]) == 3
    assert all(expr.matches(datetime.fromisoformat(fire["local"])) for fire in shown["next"])


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["explain", "61 * * * *"], "out of range 0-59"),
        (["explain", "H * * * *", "--key", "k", "--tz", "Mars/Olympus"], "unknown time zone"),
        (["lint", "* * *"], "expected 5 fields"),
        (["spread", "--expr", "H * * * * * *", "--keys", "-"], "expected 5 fields"),
    ],
)
def test_bad_expressions_are_usage_errors_without_traceback(
    invoke: Invoke, args: list[str], where: str
) -> None:
    result = invoke(*args, input="a\n")
    assert result.exit_code == Exit.USAGE
    assert where in result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(
    ("expression", "code", "suggestion"),
    [
        ("0 * * * *", "literal-minute", "H * * * *"),
        ("0,30 2 * * *", "literal-minute", "H/30 2 * * *"),
        ("*/15 * * * *", "unhashed-step", "H/15 * * * *"),
        ("* * * * *", "every-minute", "H * * * *"),
        ("* * * * * *", "every-second", "H * * * * *"),
        ("H/7 * * * *", "uneven-wrap", None),
        ("H H */5 * * *", "uneven-wrap", None),
        ("H H */3 * *", "month-turn-gap", None),
        ("H H H/3 * *", "month-turn-gap", None),
    ],
)
def test_lint_finds(invoke: Invoke, expression: str, code: str, suggestion: str | None) -> None:
    result = invoke("lint", expression, "--json")
    assert result.exit_code == Exit.FINDINGS, result.output
    (checked,) = json.loads(result.stdout)["results"]
    found = {w["code"]: w for w in checked["warnings"]}
    assert code in found
    assert found[code]["suggestion"] == suggestion


def test_lint_wording(invoke: Invoke) -> None:
    result = invoke("lint", "0 * * * *", "H/7 * * * *", "H H */3 * *")
    assert result.exit_code == Exit.FINDINGS
    assert "use H instead of 0" in result.stdout
    assert "60 is not a multiple of 7" in result.stdout
    assert "after a 31-day month" not in result.stdout  # the shortest gap is after February
    assert "again 1 day after its last run" in result.stdout
    assert result.stdout.rstrip().endswith("3 warnings in 3 expressions")


@pytest.mark.parametrize(
    "expression", ["H * * * *", "H/15 * * * *", "H H(0-5) * * 1-5", "@daily", "H H 1,15 * *"]
)
def test_lint_clean(invoke: Invoke, expression: str) -> None:
    result = invoke("lint", expression)
    assert result.exit_code == 0, result.output
    assert "0 warnings" in result.stdout


@pytest.mark.parametrize(
    ("written", "plain"),
    [
        ("H * * * *", "0 * * * *"),
        ("H(10-20) H(0-5) * * *", "10 0 * * *"),
        ("H/15 H * * *", "*/15 0 * * *"),
        ("H(0-29)/10 * * * *", "0-29/10 * * * *"),
        ("H H H * H", "0 0 1 * 0"),
        ("H H H/3 * H/2", "0 0 1-28/3 * 0-6/2"),
        ("#/10 #[2-4] * * *", "*/10 2 * * *"),
        ("@midnight", "0 0 * * *"),
        ("0 30 2 * * 1-5", "0 30 2 * * 1-5"),
        ("h,30 * * * *", "0,30 * * * *"),
    ],
)
def test_lowest(written: str, plain: str) -> None:
    assert lowest(written) == plain
    parse(plain)  # plain cron: valid, and needs no key


def spread(invoke: Invoke, *args: str, keys: int = 1000) -> dict[str, Any]:
    names = "".join(f"job-{i}\n" for i in range(keys))
    result = invoke("spread", *args, "--keys", "-", "--date", "2026-03-08", "--json", input=names)
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.stdout)
    return shown


def test_spread_of_hourly_jobs_is_flat_where_plain_cron_bunches(invoke: Invoke) -> None:
    shown = spread(invoke, "--expr", "H * * * *")
    hashed, plain = shown["hashed"], shown["plain"]
    assert shown["bucket_seconds"] == 60
    assert hashed["total"] == plain["total"] == 1000 * 24
    assert plain["peak"] == 1000  # every job in minute 0 of each hour
    assert plain["peak_to_mean"] == pytest.approx(60)
    assert hashed["peak"] < 40
    assert hashed["peak_to_mean"] < 2.5


def test_spread_counts_seconds_for_six_field_expressions(invoke: Invoke) -> None:
    shown = spread(invoke, "--expr", "H/10 * * * * *", keys=100)
    assert shown["bucket_seconds"] == 1
    assert shown["plain"]["peak"] == 100
    assert shown["hashed"]["total"] == 100 * 6 * 1440


def test_spread_chart(invoke: Invoke) -> None:
    result = invoke(
        "spread", "--expr", "H * * * *", "--keys", "-", "--width", "48", "--week", input="a\nb\nc\n"
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Enqueues of 'H * * * *' for 3 keys per minute")
    bars = [line for line in lines if line.startswith("|")]
    assert len(bars) == 12 and all(len(bar) == 49 for bar in bars)
    assert "█" in "".join(bars)
    assert "full height = 3 per minute" in result.stdout


def test_spread_png(invoke: Invoke, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason=NO_PLOT)
    picture = tmp_path / "load.png"
    result = invoke(
        "spread", "--expr", "H H * * *", "--keys", "-", "--png", str(picture), input="a\nb\n"
    )
    assert result.exit_code == 0, result.output
    assert picture.read_bytes().startswith(b"\x89PNG")


def test_spread_png_without_matplotlib(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = invoke(
        "spread",
        "--expr",
        "H H * * *",
        "--keys",
        "-",
        "--png",
        str(tmp_path / "x.png"),
        input="a\n",
    )
    assert result.exit_code == Exit.SETUP
    assert "pip install 'celery-hashbeat[plot]'" in result.stderr
    assert "Traceback" not in result.output


def test_spread_needs_keys_or_app(invoke: Invoke) -> None:
    assert invoke("spread", "--expr", "H * * * *").exit_code == Exit.USAGE
    result = invoke("spread")
    assert result.exit_code == Exit.USAGE
    assert "-A proj" in result.stderr


def test_spread_png_panels_have_their_own_scale_a_clock_axis_and_a_clear_first_spike() -> None:
    """The plain-cron panel's spike sits in the first bucket: it must stand clear of the y-axis.
    Each panel has its own vertical scale, so a flat hashed load is not flattened against plain
    cron's spike (its title says its peak); the axis tells the time of day in the window's
    zone."""
    pyplot = pytest.importorskip("matplotlib.pyplot", reason=NO_PLOT)
    from matplotlib.dates import date2num  # noqa: PLC0415 - only with matplotlib

    spike = [40] + [0] * 59
    spread_out = [1] * 40 + [0] * 20
    start = datetime(2026, 3, 9, 9, 0, tzinfo=ZoneInfo("Europe/Riga"))
    figure = draw(
        pyplot, start, timedelta(hours=1), [("0 * * * *", spike), ("H * * * *", spread_out)], "t"
    )
    try:
        figure.canvas.draw()
        plain, hashed = figure.axes
        assert 40 <= plain.get_ylim()[1] < 50 and 1 <= hashed.get_ylim()[1] < 2
        assert plain.get_title(loc="left") == "0 * * * *: peak 40 per bucket"
        assert plain.get_xlim()[0] < date2num(start)  # the first bucket is not on the axis line
        labels = [label.get_text() for label in hashed.get_xticklabels() if label.get_text()]
        assert labels and all(re.fullmatch(r"\d\d:\d\d", text) for text in labels), labels
        assert "09:00" in labels  # Riga's clock, not UTC's 07:00 nor hours from the start
        assert hashed.get_xlabel() == "time of day (EET)"
    finally:
        pyplot.close(figure)


def test_spread_png_without_matplotlib_fails_before_printing(run: Run, tmp_path: Path) -> None:
    """With no matplotlib to import, --png fails at once, naming the extra to install, and
    prints no chart first."""
    hidden = tmp_path / "hidden"
    (hidden / "matplotlib").mkdir(parents=True)
    (hidden / "matplotlib" / "__init__.py").write_text("raise ImportError('not installed')\n")
    (tmp_path / "keys.txt").write_text("a\nb\n")
    path = f"{hidden}{os.pathsep}{ROOT}"
    done = run(
        "hashbeat", "spread", "--expr", "H H * * *", "--keys", "keys.txt", "--png", "x.png",
        env={"PYTHONPATH": path},
    )  # fmt: skip
    assert done.returncode == Exit.SETUP, done.stdout + done.stderr
    assert done.stdout == ""
    assert "pip install 'celery-hashbeat[plot]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "x.png").exists()


def test_spread_png_of_one_second_buckets_is_not_a_solid_block(run: Run, tmp_path: Path) -> None:
    """A day of one-second buckets is 86,400 of them: drawn one by one they fill the panel.
    Plain cron's 100 runs every tenth second average 10 a second; the panel shows that level
    (and the peak as a line), so most of it stays blank."""
    image = pytest.importorskip("matplotlib.image", reason=NO_PLOT)
    (tmp_path / "keys.txt").write_text("".join(f"job-{i}\n" for i in range(100)))
    done = run(
        "hashbeat", "spread", "--expr", "H/10 * * * * *", "--keys", "keys.txt",
        "--date", "2026-03-09", "--png", "load.png",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pixels = image.imread(str(tmp_path / "load.png"))[:, :, :3]
    ink = pixels.sum(axis=2) < 2.9  # anything but white
    plain_panel = ink[ink.shape[0] // 2 :]
    assert plain_panel.mean() < 0.3, plain_panel.mean()
