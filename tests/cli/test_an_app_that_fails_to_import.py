"""An app module that fails to import is reported by the commands with the file and line of the
user's code that failed (a syntax error, an exception at import, one in a module it imports),
in one line with exit code 3, as real processes."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from celery_hashbeat.cli.output import Exit
from tests.cli.conftest import ROOT

Run = Callable[..., subprocess.CompletedProcess[str]]

MODULES = {
    "raises_app.py": 'from celery import Celery\n\nraise RuntimeError("no config")\n',
    "syntax_app.py": 'from celery import Celery\napp = Celery("x"\n',
    "imports_app.py": 'from celery import Celery\nimport helper_mod\napp = Celery("x")\n',
    "helper_mod.py": "x = 1\n\n1 / 0\n",
}


@pytest.mark.parametrize(
    ("app", "where"),
    [
        ("raises_app", "raises_app.py, line 3): RuntimeError: no config"),
        ("syntax_app", "syntax_app.py, line 2): SyntaxError"),
        ("imports_app", "helper_mod.py, line 3): ZeroDivisionError"),
    ],
)
def test_the_failing_line_is_named(run: Run, tmp_path: Path, app: str, where: str) -> None:
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    done = run("hashbeat", "entries", "-A", app, env={"PYTHONPATH": f"{ROOT}:{tmp_path}"})
    assert done.returncode == Exit.SETUP, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"Error: importing the app {app!r} failed ({tmp_path}/"), line
    assert where in line, line
