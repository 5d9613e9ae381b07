"""The hash-cron engine (``celery_hashbeat.expr``) stands on its own: importing it brings in no
Celery and no kombu, so a tool that only reads expressions needs neither. Checked in a fresh
interpreter, since this test session has imported Celery long ago."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.support.processes import ROOT

#: Prints, as JSON, the Celery and kombu modules loaded after the code it is given has run.
REPORT = """
import json, sys
loaded = sorted(
    name for name in sys.modules if name.split(".")[0] in ("celery", "kombu")
)
print(json.dumps(loaded))
"""


def loaded_after(code: str) -> list[str]:
    """The Celery and kombu modules a fresh interpreter has loaded after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + REPORT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: list[str] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_every_module_of_the_engine_imports_no_celery() -> None:
    """Every module under ``celery_hashbeat/expr/``, loaded beneath a bare ``celery_hashbeat``
    package (so that the package's own ``__init__``, which imports the Scheduler, stays out)."""
    found = loaded_after(
        """
        import importlib, pkgutil, sys, types
        from pathlib import Path
        bare = types.ModuleType("celery_hashbeat")
        bare.__path__ = [str(Path("celery_hashbeat").resolve())]
        sys.modules["celery_hashbeat"] = bare
        engine = importlib.import_module("celery_hashbeat.expr")
        prefix = "celery_hashbeat.expr."
        names = [info.name for info in pkgutil.walk_packages(engine.__path__, prefix)]
        assert len(names) > 5, names
        for name in names:
            importlib.import_module(name)
        assert "celery_hashbeat.scheduler" not in sys.modules
        """
    )
    assert found == []
