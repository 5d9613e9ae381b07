"""The beat's Redis ACL user exactly as the docs write it can do all a beat does, ``WAIT``
included: with ``hashbeat_store_min_replicas=1`` a beat on a master with a replica leads and
sends. The ``ACL SETUSER`` lines and the store URL are read from the docs here, so the docs and
this test cannot drift apart."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashcron
from tests.support.beat_fixtures import run_for
from tests.support.processes import ROOT
from tests.support.redis_server import RedisProcess
from tests.support.redis_topologies import HOST, ClusterSetup, Server, Topology, wait_for

pytestmark = pytest.mark.slow


def doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def acl_lines(text: str, user: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.startswith("ACL SETUSER ") and line.split()[2] == user
    ]


def documented_beat_urls() -> list[tuple[str, str]]:
    """(ACL line, store URL) of each documented beat user: settings.md's with the URL it shows,
    runtime.md's with its password on database 0."""
    settings = doc("settings.md")
    (setting,) = acl_lines(settings, "beat")
    (url,) = re.findall(r'hashbeat_store_url = "(redis://beat:[^"]+)"', settings)
    (runtime,) = acl_lines(doc("runtime.md"), "beat")
    return [(setting, url), (runtime, "redis://beat:beat-secret@redis.internal:6379/0")]


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[Server, Server]]:
    topology = Topology()
    try:
        master = topology.server("master")
        replica = topology.server("replica", "--replicaof", HOST, str(master.port))
        wait_for(lambda: replica.client.info("replication")["master_link_status"] == "up", 10,
                 "the replica's first sync")  # fmt: skip
        yield master, replica
    finally:
        topology.stop()


def on(server: Server, url: str, query: str) -> str:
    """``url`` (a documented one, with its user, password and database) pointed at ``server``."""
    parts = urlsplit(url)
    netloc = f"{parts.netloc.rpartition('@')[0]}@{HOST}:{server.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def tick(*args: object, **kwargs: object) -> None:
    """The task the beat sends."""


def sent_by_a_beat(store_url: str, broker_port: int, name: str) -> list[str]:
    """What a beat on ``store_url`` sends within a few seconds of an entry due every second, as
    read from the broker (database 9 of the redis-server on ``broker_port``, its default user)."""
    app = Celery(name, set_as_current=False)
    app.conf.update(
        broker_url=f"redis://{HOST}:{broker_port}/9",  # the broker is not what is tested
        task_default_queue=name,
        beat_enable_remote_control=False,
        hashbeat_store_url=store_url,
        hashbeat_lease_ttl=3,
        beat_schedule={"every-second": {"task": "acl.tick", "schedule": hashcron("* * * * * *")}},
    )
    app.task(name="acl.tick")(tick)
    client = redis.Redis(HOST, broker_port, db=9)
    beat = Scheduler(app, lazy=True)
    try:
        beat.setup_schedule()
        run_for(beat, 8, until=lambda: client.llen(name) > 0)
        return [json.loads(raw)["headers"]["hashbeat_entry"] for raw in client.lrange(name, 0, -1)]
    finally:
        beat.close()
        client.close()
        app.close()


@pytest.mark.parametrize("which", [0, 1], ids=["settings.md", "runtime.md"])
def test_a_beat_with_the_documented_acl_user_and_min_replicas_sends(
    replicated: tuple[Server, Server], which: int
) -> None:
    master, _replica = replicated
    line, url = documented_beat_urls()[which]
    master.client.execute_command("ACL", "DELUSER", "beat")
    master.client.execute_command(*shlex.split(line))
    store_url = on(master, url, "min_replicas=1&min_replicas_timeout=0.5")
    sent = sent_by_a_beat(store_url, master.port, f"acl-{which}")
    assert sent and set(sent) == {"every-second"}, f"nothing sent with {line!r}"
    db = int(urlsplit(url).path.strip("/") or 0)
    keys = redis.Redis(HOST, master.port, db=db).keys("{hashbeat}:*")
    assert keys, "the beat's keys are in the database the URL names"


def test_a_beat_with_the_documented_acl_user_sends_on_a_cluster_with_min_replicas() -> None:
    line, _ = documented_beat_urls()[1]
    with ClusterSetup("{hashbeat}:leader") as cluster, RedisProcess() as broker:
        for server in cluster.servers:
            server.client.execute_command(*shlex.split(line))
        query = "min_replicas=1&min_replicas_timeout=0.5"
        store_url = cluster.url(query).replace("://", "://beat:beat-secret@", 1)
        sent = sent_by_a_beat(store_url, broker.port, "acl-cluster")
    assert sent and set(sent) == {"every-second"}, f"nothing sent with {line!r}"
