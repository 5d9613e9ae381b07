"""The alert rules the docs ship (docs/alerts.yml, docs/design.md §19) are valid Prometheus rules
and fire when they should: ``promtool check rules`` and ``promtool test rules`` on
tests/docs/alerts_test.yml. promtool comes with Debian's ``prometheus`` package (.ci/run
installs it); without it these tests are skipped, saying so."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (apt-get install prometheus)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PROMTOOL), *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_documented_rules_are_valid() -> None:
    done = promtool("check", "rules", "docs/alerts.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "5 rules found" in done.stdout


def test_each_rule_fires_when_it_should_and_not_before() -> None:
    done = promtool("test", "rules", "tests/docs/alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout
