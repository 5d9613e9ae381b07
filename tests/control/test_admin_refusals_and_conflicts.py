"""What ``ScheduleAdmin`` raises (docs/design.md §13): AdminError and its documented
subclasses only, with no password in any message; a read-only store said as such; and two
concurrent updates of one entry never both land on the same revision (compare-and-set on the
stored definition), against a real Redis store and an SQLite one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import (
    AdminError,
    ConflictError,
    StoreProblemError,
    UnknownEntryError,
)
from celery_hashbeat.store import open_store
from tests.support.redis_server import RedisProcess, free_port

SECRET = "S3cr3t-pw"
EVERY_MINUTE = hashcron("H * * * *")


def report(*args: object, **kwargs: object) -> None:
    """The task the stored entries run."""


def admin_for(app: Celery, url: str, prefix: str) -> ScheduleAdmin:
    app.conf.update(hashbeat_store_url=url, hashbeat_key_prefix=prefix)
    app.task(name="shop.report")(report)
    return ScheduleAdmin(app)


@pytest.fixture(params=["redis", "sqlite"])
def admin(
    request: pytest.FixtureRequest, app: Celery, redis_url: str, key_prefix: str, tmp_path: Path
) -> Iterator[ScheduleAdmin]:
    url = redis_url if request.param == "redis" else f"sqlite:///{tmp_path}/store.sqlite"
    made = admin_for(app, url, key_prefix)
    yield made
    made.close()


def test_bad_arguments_are_admin_errors_that_name_what_was_wrong(admin: ScheduleAdmin) -> None:
    admin.add("report", task="shop.report", schedule=EVERY_MINUTE)
    for call in (
        lambda: admin.pause(None),  # type: ignore[arg-type]
        lambda: admin.resume(None),  # type: ignore[arg-type]
        lambda: admin.trigger(None),  # type: ignore[arg-type]
        lambda: admin.get(None),  # type: ignore[arg-type]
    ):
        with pytest.raises(AdminError, match="entry name None: give the entry's name as text"):
            call()
    with pytest.raises(AdminError, match="entry name 123: give the entry's name as text"):
        admin.add(123, task="shop.report", schedule=EVERY_MINUTE)  # type: ignore[arg-type]
    with pytest.raises(AdminError, match="'kwargs' must map keyword names"):
        admin.add("numbered", task="shop.report", schedule=EVERY_MINUTE, kwargs={1: 2})  # type: ignore[dict-item]
    with pytest.raises(AdminError, match="'kwargs' must map keyword names"):
        admin.update("report", kwargs={1: 2})
    with pytest.raises(AdminError, match="revision must be a whole number, not '1'"):
        admin.update("report", args=[1], revision="1")  # type: ignore[arg-type]
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(AdminError, match="must be plain JSON"):
        admin.add("deep", task="shop.report", schedule=EVERY_MINUTE, args=[deep])
    assert [view.name for view in admin.list() if view.source == "store"] == ["report"]


def test_resume_says_whether_it_resumed(admin: ScheduleAdmin) -> None:
    admin.add("report", task="shop.report", schedule=EVERY_MINUTE)
    assert admin.resume("report") is False
    admin.pause("report")
    assert admin.resume("report") is True


def test_an_update_of_a_revision_read_before_another_update_is_a_conflict(
    admin: ScheduleAdmin, app: Celery
) -> None:
    admin.add("report", task="shop.report", schedule=EVERY_MINUTE)
    read = admin.get("report")
    assert read.revision == 1
    other = ScheduleAdmin(app)
    try:
        other.update("report", args=[1])
    finally:
        other.close()
    with pytest.raises(ConflictError, match=r"revision 2.*read it again") as lost:
        admin.update("report", kwargs={"full": True}, revision=read.revision)
    assert lost.value.exit_code == 5
    after = admin.get("report")
    assert (after.revision, after.definition["args"], after.definition["kwargs"]) == (2, [1], {})


def test_concurrent_updates_of_one_entry_never_lose_a_change(
    admin: ScheduleAdmin, app: Celery
) -> None:
    """Two operators change two fields of one entry, 40 times each, at once. Each update that
    returns must still be in the entry afterwards (none overwritten by a stale read)."""
    admin.add("report", task="shop.report", schedule=EVERY_MINUTE, args=[0], kwargs={"k": 0})
    last_ok: dict[str, object] = {}
    conflicts: list[str] = []

    def operator(field: str) -> None:
        mine = ScheduleAdmin(app)
        try:
            for i in range(1, 41):
                value: object = [i] if field == "args" else {"k": i}
                try:
                    mine.update("report", **{field: value})
                except ConflictError:
                    conflicts.append(field)
                else:
                    last_ok[field] = value
        finally:
            mine.close()

    threads = [threading.Thread(target=operator, args=(f,)) for f in ("args", "kwargs")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    final = admin.get("report")
    assert final.definition["args"] == last_ok["args"]
    assert final.definition["kwargs"] == last_ok["kwargs"]
    assert final.revision == 1 + 80 - len(conflicts)


def test_stored_definitions_without_a_revision_still_read_and_update(
    app: Celery, redis_url: str, key_prefix: str
) -> None:
    """An entry stored by a release without revisions (written here as that release did)."""
    store = open_store(redis_url, key_prefix)
    old = '{"args": [], "changed": 1, "schedule": {"hashcron": "H * * * *"}, "task": "shop.report"}'
    store.edit("report", {"definition": old}, require=False)
    admin = admin_for(app, redis_url, key_prefix)
    try:
        assert admin.get("report").revision == 0
        admin.update("report", args=[7])
        assert (admin.get("report").revision, admin.get("report").definition["args"]) == (1, [7])
    finally:
        admin.close()
        store.close()


def test_an_unreachable_store_is_a_store_problem_with_no_password_or_retry_promise(
    app: Celery, key_prefix: str
) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0?socket_connect_timeout=0.5"
    admin = admin_for(app, url, key_prefix)
    for call in (lambda: admin.pause("x"), lambda: admin.trigger("x"), admin.list):
        with pytest.raises(StoreProblemError) as failed:
            call()
        assert failed.value.exit_code == 4
        assert SECRET not in str(failed.value)
        assert "will retry" not in str(failed.value)


def test_no_password_in_the_message_for_an_unknown_entry(app: Celery, key_prefix: str) -> None:
    with RedisProcess(password=SECRET) as server:
        admin = admin_for(app, server.url, key_prefix)
        try:
            for call in (
                lambda: admin.pause("nope"),
                lambda: admin.resume("nope"),
                lambda: admin.trigger("nope"),
                lambda: admin.get("nope"),
                lambda: admin.remove("nope"),
                lambda: admin.update("nope", args=[1]),
            ):
                with pytest.raises(UnknownEntryError) as unknown:
                    call()
                assert SECRET not in str(unknown.value)
                assert unknown.value.exit_code == 3
        finally:
            admin.close()


def test_a_replica_is_said_to_be_read_only(app: Celery, key_prefix: str) -> None:
    with RedisProcess() as server:
        client = redis.Redis.from_url(server.url)
        client.replicaof("127.0.0.1", free_port())  # a primary that is not there: read-only
        client.close()
        admin = admin_for(app, server.url, key_prefix)
        try:
            with pytest.raises(StoreProblemError, match="read-only") as refused:
                admin.add("report", task="shop.report", schedule=timedelta(minutes=1))
            assert refused.value.read_only and refused.value.exit_code == 4
        finally:
            admin.close()
