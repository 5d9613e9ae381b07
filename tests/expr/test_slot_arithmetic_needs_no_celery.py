"""The engine's slot arithmetic (expr/slots.py) imports no Celery: fire times as epoch ms are the
engine's job, and schedules.py, which sits below the schedule model, builds on them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import celery_hashbeat

#: Imports a module under a bare stand-in for the package (whose own __init__ loads the
#: Scheduler, hence Celery), then lists what of Celery and kombu got imported.
PROBE = """
import sys, types
package = types.ModuleType("celery_hashbeat")
package.__path__ = [sys.argv[1]]
sys.modules["celery_hashbeat"] = package
__import__(sys.argv[2])
print(sorted(name for name in sys.modules if name.split(".")[0] in ("celery", "kombu")))
"""


def loaded_by(module: str) -> str:
    """What of Celery and kombu importing ``module`` loads, in a fresh interpreter."""
    package = str(Path(celery_hashbeat.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, package, module],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_slot_arithmetic_imports_no_celery() -> None:
    assert loaded_by("celery_hashbeat.expr.slots") == "[]"


def test_the_probe_sees_celery_when_a_module_imports_it() -> None:
    assert "'celery'" in loaded_by("celery_hashbeat.entries.derived")
