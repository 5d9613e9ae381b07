"""The README's and docs/'s examples are run, so the documentation cannot drift from the code.

See runner.py for how each kind of block is checked; this file runs every Markdown file, checks
its links, tests the two migration exporters against real data, and makes sure the checks
themselves catch mistakes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab, schedule

from celery_hashbeat import at, hashcron

from .markdown import anchors, blocks, links, load_yaml
from .runner import ROOT, DocRun, check_app

DOCS = ROOT / "docs"
PAGES = [
    "syntax",
    "seeding",
    "ha",
    "settings",
    "migration",
    "operations",
    "comparison",
    "workers",
    "runtime",
    "console",
    "design",
]
FILES = [ROOT / "README.md", *(DOCS / f"{page}.md" for page in PAGES)]


def test_every_page_is_tested() -> None:
    """A new page under docs/ joins FILES, so that its examples run too."""
    assert sorted(DOCS.glob("*.md")) == sorted(FILES[1:])


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_examples_run(path: Path, tmp_path: Path) -> None:
    run = DocRun(path, tmp_path).run()
    assert not run.failures, "\n\n".join(run.failures)
    if path.name != "comparison.md":
        runnable = {kind for kind in run.counts if kind not in ("text",)}
        assert runnable, f"{path.name} has no example that runs"


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_relative_links_resolve(path: Path) -> None:
    broken = []
    for line, target in links(path):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file_part, _, fragment = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{path.name}:{line}: {target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{path.name}:{line}: {target}: no heading #{fragment}")
    assert not broken, "\n".join(broken)


def test_readme_links_every_page() -> None:
    linked = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    assert {f"docs/{page}.md" for page in PAGES} <= linked


def test_readme_keeps_its_opening_example() -> None:
    """The example and the command at the top of the README stay exactly as they are."""
    first, second = blocks(ROOT / "README.md")[:2]
    assert first.text.startswith("from celery_hashbeat import hashcron\n")
    assert '"poll-feeds": {"task": "feeds.poll", "schedule": hashcron("H/10 * * * * *")}' in (
        first.text
    )
    assert second.text == "celery -A proj beat -S celery_hashbeat.Scheduler\n"


# The migration page's exporters, run against what RedBeat and django-celery-beat really hold.


@pytest.fixture(scope="module")
def migration(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The namespace the migration page's examples leave behind."""
    run = DocRun(DOCS / "migration.md", tmp_path_factory.mktemp("migration")).run()
    assert not run.failures, "\n\n".join(run.failures)
    return run.namespace


def test_redbeat_export_reads_what_redbeat_saved(
    migration: dict[str, Any], redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    from redbeat import RedBeatSchedulerEntry  # noqa: PLC0415 - a test dependency only

    app = Celery("redbeat-export", set_as_current=False)
    app.conf.update(redbeat_redis_url=redis_url, redbeat_key_prefix=f"{key_prefix}:redbeat:")
    saved = {
        "refresh-prices": crontab(minute="*/15"),
        "poll-feeds": schedule(timedelta(seconds=30)),
    }
    for name, every in saved.items():
        entry = RedBeatSchedulerEntry(
            name, "shop.refresh", every, args=[1], kwargs={"full": True}, app=app
        )
        entry.save()
    exported = migration["redbeat_entries"](app)
    assert set(exported) == set(saved)
    assert exported["refresh-prices"]["kwargs"] == {"full": True}
    assert exported["poll-feeds"]["schedule"].run_every == timedelta(seconds=30)
    target = Celery("target", set_as_current=False)
    target.conf.beat_schedule = exported
    check_app(target, tmp_path)


def _row(name: str, **fields: Any) -> SimpleNamespace:
    """A django-celery-beat PeriodicTask as its attributes look (JSON text for args and kwargs)."""
    defaults: dict[str, Any] = {
        "name": name,
        "task": "shop.refresh",
        "args": "[]",
        "kwargs": "{}",
        "queue": None,
        "exchange": None,
        "routing_key": None,
        "priority": None,
        "headers": "{}",
        "expire_seconds": None,
        "one_off": False,
        "enabled": True,
        "crontab": None,
        "interval": None,
        "solar": None,
        "clocked": None,
    }
    return SimpleNamespace(**{**defaults, **fields})


def test_django_export_converts_every_schedule_kind(
    migration: dict[str, Any], tmp_path: Path
) -> None:
    cron = SimpleNamespace(
        minute="0",
        hour="4",
        day_of_month="*",
        month_of_year="*",
        day_of_week="mon-fri",
        timezone="Europe/Riga",
    )
    rows = [
        _row(
            "nightly-report",
            crontab=cron,
            args='["eu"]',
            kwargs='{"full": true}',
            queue="reports",
            expire_seconds=600,
            headers='{"team": "shop"}',
        ),
        _row("poll-feeds", interval=SimpleNamespace(every=30, period="seconds")),
        _row("sunset", solar=SimpleNamespace(event="sunset", latitude=56.95, longitude=24.1)),
        _row(
            "launch",
            clocked=SimpleNamespace(clocked_time="2031-01-01T00:00:00+00:00"),
            one_off=True,
        ),
        _row("once", interval=SimpleNamespace(every=1, period="hours"), one_off=True),
    ]
    exported, skipped = migration["beat_schedule_from_django"](rows)
    assert set(exported) == {"nightly-report", "poll-feeds", "sunset", "launch", "once"}
    assert skipped == []
    assert exported["launch"]["schedule"] == at("2031-01-01T01:00:00+01:00")
    # A one_off row runs once: max_runs=1, as migration.md's table and workers.md both say;
    # a clocked one is a one-shot, which runs once by itself.
    assert "max_runs" not in exported["launch"] and exported["once"]["max_runs"] == 1
    nightly = exported["nightly-report"]
    assert nightly["schedule"] == hashcron("0 4 * * mon-fri", tz="Europe/Riga", day_and=True)
    assert nightly["args"] == ["eu"] and nightly["kwargs"] == {"full": True}
    assert nightly["options"] == {"queue": "reports", "expires": 600, "headers": {"team": "shop"}}
    assert exported["poll-feeds"]["schedule"] == timedelta(seconds=30)
    target = Celery("target", set_as_current=False)
    target.conf.beat_schedule = exported
    check_app(target, tmp_path)


# The checks themselves: each must catch the mistake it exists for.


def _page(tmp_path: Path, text: str) -> Callable[[], list[str]]:
    page = tmp_path / "page.md"
    page.write_text(text)
    work = tmp_path / "work"
    work.mkdir()
    return lambda: DocRun(page, work).run().failures


FENCE = "```"

BROKEN = {
    "doctest output": f"{FENCE}python\n>>> 1 + 1\n3\n{FENCE}\n",
    "console output": f'{FENCE}console\n$ hashbeat explain "H * * * *" -k a -n 1\n'
    f"resolved     27 * * * *\n{FENCE}\n",
    "bad setting": f"{FENCE}python\napp.conf.hashbeat_lease_ttl = 0\n{FENCE}\n",
    "skipped entry": f"{FENCE}python\nfrom celery_hashbeat import hashcron\n"
    f'app.conf.beat_schedule = {{"x": {{"task": "t", "schedule": hashcron("61 * * * *")}}}}\n'
    f"{FENCE}\n",
    "invalid command": f"{FENCE}shell\nhashbeat status --no-such-option\n{FENCE}\n",
    "wrong scheduler": f"{FENCE}shell\ncelery -A proj beat -S celery.beat.PersistentScheduler\n"
    f"{FENCE}\n",
    "unit without ExecStart": f"{FENCE}ini\n[Unit]\n[Service]\nRestart=always\n[Install]\n"
    f"WantedBy=multi-user.target\n{FENCE}\n",
    "one replica": f"{FENCE}yaml\napiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 1\n"
    f"{FENCE}\n",
    "unknown language": f"{FENCE}bash\nls\n{FENCE}\n",
}


@pytest.mark.parametrize("text", BROKEN.values(), ids=BROKEN.keys())
def test_the_checks_catch_mistakes(text: str, tmp_path: Path) -> None:
    assert _page(tmp_path, text)()


def test_the_checks_pass_a_correct_page(tmp_path: Path) -> None:
    text = (
        f'{FENCE}python\n>>> from celery_hashbeat import parse\n>>> str(parse("H * * * *", '
        f"key=\"a\"))\n'...'\n{FENCE}\n"
        f'{FENCE}console\n$ hashbeat explain "H * * * *" -k a -n 1 --after 2026-01-01\n'
        f"expression   H * * * *  (key 'a')\nresolved     ...\n{FENCE}\n"
    )
    assert _page(tmp_path, text)() == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [the other page](other.md) and [here](#title).\n")
    assert [target for _, target in links(page)] == ["other.md", "#title"]
    assert anchors(page) == {"title"}
    assert not (tmp_path / "other.md").exists()


def test_the_yaml_subset_reads_a_manifest() -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 2\n  template:\n"
        "    spec:\n      containers:\n        - name: beat\n"
        '          command: ["celery", "-A", "proj"]\n          env:\n'
        "            - name: A\n              value: 'b'\n---\nkind: Secret\n"
    )
    assert load_yaml(text) == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "spec": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "beat",
                                "command": ["celery", "-A", "proj"],
                                "env": [{"name": "A", "value": "b"}],
                            }
                        ]
                    }
                },
            },
        },
        {"kind": "Secret"},
    ]
    assert json.dumps(load_yaml("a:\n- 1\n- x\n")) == '[{"a": [1, "x"]}]'
