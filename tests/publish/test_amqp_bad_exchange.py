"""One entry whose messages name an exchange RabbitMQ does not have costs that entry's slots
alone (issue 22, defect 1; docs/design.md §15): a real ``celery beat`` on a private RabbitMQ
vhost, with and without publisher confirms, beside an entry that runs every second.

RabbitMQ answers a publish to a missing exchange by closing the channel (404 NOT_FOUND) and
discards whatever comes on that channel until the client acknowledges the close. The good
entry's messages must all arrive, on time; the bad entry's slots must be logged as dropped,
naming the entry and the exchange, and never be recorded as sent. Both ways the broker can say
so: the exchange is missing from the start (found by the lookup made before a plan's first
message), or deleted while the beat publishes to it (the channel closed under a written chunk).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kombu import Connection, Exchange

from celery_hashbeat.store import open_store
from tests.chaos.harness import Cluster, problems
from tests.support.broker import iso_to_ms
from tests.support.processes import ProcessGroup, wait_until
from tests.support.rabbitmq import private_vhost, unavailable
from tests.support.redis_server import RedisProcess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(unavailable() is not None, reason=str(unavailable())),
]

GOOD, BAD = "every-second", "bad-exchange"
#: The exchange the bad entry publishes to (tests/chaos/app.py).
BAD_EXCHANGE = "no-such-exchange"
#: How long the beat runs with both entries.
RUN_S = 7.0
#: A good message later than this after its slot was held up by the bad one (a confirm wait
#: of seconds, a batch retried a second later): far above a loaded machine's lateness.
LATE_S = 1.5

DROPPED_LINE = re.compile(
    rf"beat: {BAD} slot (\S+) can never be sent, so it is dropped \(.*no-such-exchange"
)


@pytest.fixture
def vhost() -> Iterator[str]:
    with private_vhost() as url:
        yield url


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path) as group:
        yield group


def delete_exchange_later(vhost: str, after_s: float) -> threading.Thread:
    """Declare the bad entry's exchange now and delete it ``after_s`` seconds later, while the
    beat publishes to it: the beat has looked it up and found it, so the broker's refusal comes
    as a channel closed under a written chunk."""
    with Connection(vhost) as connection:
        Exchange(BAD_EXCHANGE, "direct", durable=False)(connection.default_channel).declare()

    def delete() -> None:
        time.sleep(after_s)
        with Connection(vhost) as connection:
            connection.default_channel.exchange_delete(BAD_EXCHANGE)

    thread = threading.Thread(target=delete, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("confirms", [False, True], ids=["no-confirms", "confirms"])
@pytest.mark.parametrize("deleted", [False, True], ids=["missing", "deleted-while-used"])
def test_an_unknown_exchange_costs_only_its_own_slots(
    confirms: bool,
    deleted: bool,
    vhost: str,
    private_redis: RedisProcess,
    processes: ProcessGroup,
) -> None:
    prefix = f"bad-exchange-{uuid.uuid4().hex[:8]}"
    chaos = Cluster(
        processes,
        broker_url=vhost,
        store_url=private_redis.url,
        prefix=prefix,
        queue="work",
        ttl=3.0,
        schedule="bad-exchange",
        env={"HASHBEAT_CHAOS_CONFIRMS": "1" if confirms else "0"},
    )
    try:
        deleting = delete_exchange_later(vhost, 2.0) if deleted else None
        chaos.start(beats=1)
        beat = chaos.beats[0]
        assert wait_until(chaos.recorder.deliveries, 20), chaos.diagnostics()
        if deleting is not None:
            deleting.join()
        gone_at = chaos.note("the bad entry's exchange is missing")
        time.sleep(RUN_S)
        stopped_at = chaos.note("SIGTERM")
        beat.terminate()
        assert beat.wait(10) == 0, chaos.diagnostics()
        chaos.quiet_broker()
        chaos.recorder.stop()
        log = beat.log.read_text(errors="replace")

        deliveries = chaos.recorder.deliveries()
        good = [d for d in deliveries if d.entry == GOOD]
        assert all(d.entry == GOOD for d in deliveries), "the bad entry's message arrived"
        # Every slot of the good entry, from its first to the end of the run, arrived once.
        judged = problems(
            good,
            {GOOD: chaos.schedule[GOOD]},
            catch_up_all=True,
            until=stopped_at,
        )
        assert not judged, "\n".join(judged) + "\n" + chaos.diagnostics()
        assert len(good) >= RUN_S - 1, chaos.diagnostics()
        late = [(d.slot, round(d.lateness_ms)) for d in good if d.lateness_ms > LATE_S * 1000]
        assert not late, f"good messages held up by the bad entry: {late}\n{chaos.diagnostics()}"
        assert "may or may not have reached the broker" not in log, chaos.diagnostics()

        # Each slot of the bad entry since its exchange is missing is one dropped line naming
        # it and the exchange.
        dropped = DROPPED_LINE.findall(log)
        assert len(dropped) == len(set(dropped)), "a slot was dropped twice"
        dropped_ms = {iso_to_ms(when) for when in dropped}
        since = [d.slot for d in good if d.slot > (gone_at + 1) * 1000]
        assert len(since) >= RUN_S - 2, chaos.diagnostics()
        assert set(since) <= dropped_ms, sorted(set(since) - dropped_ms)

        # The history tells the truth: the bad entry never "sent", the good one only what came.
        store = open_store(private_redis.url, prefix)
        try:
            bad_history = [json.loads(text) for text in store.history(BAD)]
            good_history = [json.loads(text) for text in store.history(GOOD)]
        finally:
            store.close()
        bad_sent = {r["slot"] for r in bad_history if r["outcome"] == "sent"}
        assert not bad_sent & dropped_ms, sorted(bad_sent & dropped_ms)
        assert deleted or not bad_sent, sorted(bad_sent)
        bad_dropped = {r["slot"] for r in bad_history if r["outcome"] == "dropped"}
        assert bad_dropped and bad_dropped <= dropped_ms, sorted(bad_dropped - dropped_ms)
        arrived = {d.slot for d in good}
        claimed_sent = {r["slot"] for r in good_history if r["outcome"] == "sent"}
        assert claimed_sent <= arrived, sorted(claimed_sent - arrived)
    finally:
        chaos.close()
