"""An entry's promises (docs/design.md §19) as beat_schedule and stored entries give them: read
onto the entry, kept when an entry is handed back as a definition, refused by name when wrong."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import Celery

from celery_hashbeat.entries.building import as_definition
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.entries.promises import Promises
from celery_hashbeat.settings import Settings

APP = Celery("promises", set_as_current=False)
SETTINGS = Settings.from_conf(APP.conf, warn=False)


def built(**keys: object) -> Promises | None:
    definition = {"task": "t", "schedule": timedelta(minutes=1), **keys}
    return Catalog.trial(APP, SETTINGS, 0, "report", definition).promises


def test_the_promises_are_read_onto_the_entry() -> None:
    assert built() is None
    made = built(max_lateness=90, alert_after_failures=2, pause_after_failures=5)
    assert made == Promises(90_000, 2, 5)
    entry = Catalog.trial(APP, SETTINGS, 0, "r", {"task": "t", "schedule": 60, "max_lateness": 1.5})
    again = as_definition(entry)
    assert again is not None and again["max_lateness"] == 1.5


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("max_lateness", 0, "'max_lateness' must be a number of seconds above 0"),
        ("max_lateness", "60", "'max_lateness' must be a number of seconds above 0"),
        ("pause_after_failures", 0, "'pause_after_failures' must be a whole number of runs"),
        ("alert_after_failures", 2.5, "'alert_after_failures' must be a whole number of runs"),
        ("pause_after_failures", 31, "from 1 to 30"),
    ],
)
def test_a_wrong_promise_is_refused_naming_the_entry(key: str, value: object, said: str) -> None:
    with pytest.raises(EntryError) as refused:
        built(**{key: value})
    assert str(refused.value).startswith("entry 'report': ") and said in str(refused.value)
