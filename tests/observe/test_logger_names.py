"""The names celery_hashbeat logs under are an interface: operators filter and silence them."""

from __future__ import annotations

import ast
from pathlib import Path

import celery_hashbeat
from celery_hashbeat import _logs

PACKAGE = Path(celery_hashbeat.__file__).parent


def test_the_package_logs_under_exactly_the_names_it_always_has() -> None:
    assert sorted(logger.name for logger in _logs.ALL) == [
        "celery.beat",
        "celery_hashbeat.compat",
        "celery_hashbeat.fanout",
        "celery_hashbeat.http",
        "celery_hashbeat.lease",
        "celery_hashbeat.outcomes",
        "celery_hashbeat.overlap",
        "celery_hashbeat.running",
        "celery_hashbeat.scheduler",
        "celery_hashbeat.settings",
        "celery_hashbeat.store",
        "celery_hashbeat.web",
    ]


def test_only_the_logs_module_asks_for_a_logger_by_name() -> None:
    """A module that took its logger from ``__name__`` would log under its path, which moves."""
    calls = {"getLogger", "get_logger", "get_task_logger"}
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "_logs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert name not in calls, f"{path.relative_to(PACKAGE)}:{node.lineno} {name}"
