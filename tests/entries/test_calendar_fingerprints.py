"""What identifies a schedule with a calendar (docs/design.md §20): the days an ``ical:`` file
excludes are part of it, so a changed file is a changed schedule to the store, the beats'
schedule digest and ``hashbeat plan``; the same file read again is the same schedule."""

from __future__ import annotations

from pathlib import Path

from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.settings import Settings

APP = Celery("calendar-prints", set_as_current=False)
SETTINGS = Settings.from_conf(APP.conf, warn=False)


def ics(day: str) -> str:
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"
        f"BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:{day}\r\nSUMMARY:closed\r\nEND:VEVENT\r\n"
        "END:VCALENDAR\r\n"
    )


def read(path: Path) -> tuple[str, str]:
    """The entry's fingerprint and the digest of a schedule of it alone, built afresh."""
    schedule = {
        "report": {"task": "t", "schedule": hashcron("H 9 * * *", exclude=[f"ical:{path}"])}
    }
    catalog, refusals = Catalog.preview(APP, SETTINGS, 0, schedule)
    assert not refusals, refusals
    return catalog.entries["report"].fingerprint, catalog.digest()


def test_an_ical_file_that_excludes_other_days_changes_the_fingerprint_and_digest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "closed.ics"
    path.write_text(ics("20270310"))
    before = read(path)
    path.write_text(ics("20270311"))
    after = read(path)
    assert after[0] != before[0]
    assert after[1] != before[1]


def test_the_same_ical_file_read_again_is_the_same_schedule(tmp_path: Path) -> None:
    path = tmp_path / "closed.ics"
    path.write_text(ics("20270310"))
    before = read(path)
    path.write_text(ics("20270310"))
    assert read(path) == before
