"""Burst benchmark: N slots due at one instant, published side by side on real brokers.

    python benchmarks/burst.py [--slots 10000] [--reps 3] [--amqp-url URL] [--no-amqp]

For each broker (a private redis-server; RabbitMQ at ``--amqp-url`` if it answers) and each way
of publishing, the seconds from the start until the broker holds all N messages (Redis: the
queue's length; RabbitMQ: the queue's message count), best of ``--reps``:

- ``apply_async loop``: Celery's way, one ``apply_async`` per slot on one reused producer (what
  ``celery.beat`` does for each due entry), with the same headers and task ids;
- ``hashbeat, one by one``: the Scheduler's publishing with the batch path off (a subclass that
  replaces ``send``), as before the batch path;
- ``hashbeat, batch``: the Scheduler's publishing of the claimed slots (``Dispatcher.publish``), in
  the steady state: every entry's plan and stencil made by an earlier burst (``1st``: the first
  burst after start, which makes them);
- ``hashbeat, 1st, after start``: the first burst of a beat that led from its start and ticked
  as it does while it waits for its first slot (making its plans and stencils meanwhile);
- ``hashbeat, 1st, taken over``: the first burst of a beat that stood by while another led (and
  made its plans and stencils meanwhile, as standbys do), then took over;
- ``hashbeat, whole tick``: the Scheduler's ticks at the due instant until every slot is sent:
  the store's claims (1,000 slots per call) plus the publish; for information, no bar;
- ``broker floor``: one message the batch path sent, written N times with nothing made per
  message, in the batch path's chunks (Redis: one ``LPUSH`` of 500 values a round trip; RabbitMQ:
  the message's frames, encoded once, written 500 at a time, each chunk followed by the wait the
  batch does: the answer to a no-op ``basic.qos``, or with confirms the chunk's confirms): what
  the broker takes at best, so the best speed-up any publisher could show here; for
  information, no bar, but the row says how many times this the batch takes. It runs in the
  same turns as the others, so that a slow moment of the broker hits both.

The bars (issue 28, docs/design.md §15): the batch at least 25x faster than the apply_async loop
on Redis, 8x on RabbitMQ (issue 12's were 10x and 3x).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

import amqp
import redis
from celery import Celery
from kombu import Connection

from celery_hashbeat import Scheduler, hashcron

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.redis_server import RedisProcess  # noqa: E402

T0 = 1_893_456_000.0  # 2030-01-01T00:00:00Z, a whole minute
TASK = "burst.tick"
BARS = {"redis": 25.0, "amqp": 8.0}
#: Messages per round trip in the broker floor row, as the batch path's chunks.
CHUNK = 500


def tick(i: int) -> None:
    """The task the slots name; never run (no worker)."""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class OneByOne(Scheduler):
    """The batch path off: a subclass that replaces ``send`` is published one message at a time."""

    def send(self, entry: Any, task_id: str, when: str) -> Any:
        return super().send(entry, task_id, when)


class Broker:
    """Counts and empties the benchmark's queue on either broker."""

    def __init__(self, url: str, queue: str) -> None:
        self.url = url
        self.queue = queue
        self.redis = redis.Redis.from_url(url) if url.startswith("redis") else None

    def count(self) -> int:
        if self.redis is not None:
            return int(self.redis.llen(self.queue))
        with Connection(self.url) as conn:
            _, count, _ = conn.default_channel.queue_declare(self.queue, passive=True)
            return int(count)

    def wait_for(self, n: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.count() < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {self.count()} of {n} messages reached {self.queue}")
            time.sleep(0.001)

    def purge(self) -> None:
        if self.redis is not None:
            self.redis.delete(self.queue)
            return
        with Connection(self.url) as conn:
            conn.default_channel.queue_purge(self.queue)

    def drop(self) -> None:
        if self.redis is not None:
            self.redis.delete(self.queue)
            self.redis.close()
            return
        with Connection(self.url) as conn:
            conn.default_channel.queue_delete(self.queue)


def make_app(
    broker_url: str, store_url: str, queue: str, n: int, prefix: str = "", **conf: Any
) -> Celery:
    app = Celery("burst", set_as_current=False, broker=broker_url)
    app.conf.update(
        timezone="UTC",
        task_default_queue=queue,
        broker_connection_retry_on_startup=True,
        beat_enable_remote_control=False,
        hashbeat_store_url=store_url,
        hashbeat_key_prefix=prefix or f"{queue}-{uuid.uuid4().hex[:6]}",
        hashbeat_lease_ttl=300,  # outlives the other publishers' turns
        beat_schedule={
            f"burst-{i}": {"task": TASK, "schedule": hashcron("* * * * *"), "args": (i,)}
            for i in range(n)
        },
        **conf,
    )
    app.task(name=TASK, shared=False)(tick)
    return app


def leading(app: Celery, cls: type[Scheduler], clock: Clock) -> Scheduler:
    scheduler = cls(app, lazy=True)
    scheduler.clock = clock
    scheduler.setup_schedule()
    scheduler.tick()  # takes the lease
    return scheduler


def timed(broker: Broker, n: int, publish: Callable[[], object]) -> float:
    broker.purge()
    started = time.perf_counter()
    publish()
    broker.wait_for(n)
    return time.perf_counter() - started


def apply_async_loop(app: Celery, n: int) -> Callable[[], None]:
    task = app.tasks[TASK]
    slot = datetime.fromtimestamp(T0 + 60, timezone.utc).isoformat()

    def publish() -> None:
        with app.producer_or_acquire() as producer:
            for i in range(n):
                headers = {"hashbeat_entry": f"burst-{i}", "hashbeat_slot": slot}
                task.apply_async(
                    [i], {}, producer=producer, headers=headers, task_id=str(uuid.uuid4()),
                    retry=False,
                )  # fmt: skip

    return publish


def taken_over(url: str, store_url: str, queue: str, n: int, **conf: Any) -> Scheduler:
    """A beat that stood by while another led (making its plans as a standby does), then took
    over when the leader stopped: ready for its first burst as a leader."""
    prefix = f"{queue}-{uuid.uuid4().hex[:6]}"
    leader = leading(make_app(url, store_url, queue, n, prefix, **conf), Scheduler, Clock())
    standby = Scheduler(make_app(url, store_url, queue, n, prefix, **conf), lazy=True)
    standby.clock = Clock()
    standby.setup_schedule()
    deadline = time.monotonic() + 120
    while standby.publisher.kept < n and time.monotonic() < deadline:
        standby.tick()
    leader.close()
    leader.app.close()
    while not standby.leadership.lease.leader and time.monotonic() < deadline:
        time.sleep(standby.tick())
    return standby


def waited(app: Celery, n: int) -> Scheduler:
    """A beat that leads from its start and ticks while its first slot is a minute away, as
    beat's loop would (without the sleeps): ready for its first burst."""
    scheduler = leading(app, Scheduler, Clock())
    deadline = time.monotonic() + 30  # ~2 s here, for 10,000 entries; a beat that makes none
    while scheduler.publisher.kept < n and time.monotonic() < deadline:
        scheduler.tick()
    return scheduler


def publish_claimed(scheduler: Scheduler) -> Callable[[], object]:
    scheduler.tick()  # leads again if its lease ran out while the others published
    slots = [(entry, int((T0 + 60) * 1000)) for entry in scheduler.entries.values()]
    return lambda: scheduler.dispatcher.publish(slots)


def whole_tick(scheduler: Scheduler, clock: Clock) -> Callable[[], None]:
    def publish() -> None:
        clock.now += 60
        while scheduler.tick() == 0:
            pass

    return publish


def floor(broker: Broker, n: int, confirms: bool) -> Callable[[], None]:
    """The ``broker floor`` row's publisher: the newest message on the queue, N times."""
    if broker.redis is not None:
        client, queue = broker.redis, broker.queue
        sample = client.lindex(queue, 0)

        def push() -> None:
            for start in range(0, n, CHUNK):
                client.lpush(queue, *[sample] * min(CHUNK, n - start))

        return push
    with Connection(broker.url) as conn:
        got = conn.default_channel.basic_get(broker.queue, no_ack=True)
        body, properties = got.body, dict(got.properties)  # its headers among them

    def publish() -> None:
        with Connection(broker.url) as conn:
            channel = conn.default_channel
            acked = [0]
            if confirms:
                channel.confirm_select()
                channel.events["basic_ack"].add(lambda tag, multiple: acked.__setitem__(0, tag))
            message = amqp.Message(body, **properties)
            frames = captured(conn, lambda: channel._basic_publish(message, "", broker.queue))
            for start in range(0, n, CHUNK):
                count = min(CHUNK, n - start)
                conn.connection.transport.write(frames * count)
                if confirms:  # as the batch: wait for the chunk's confirms
                    while acked[0] < start + count:
                        conn.connection.drain_events(timeout=10)
                else:  # as the batch: a no-op the broker answers once it handled the chunk
                    channel.basic_qos(0, 0, False)

    return publish


def captured(conn: Connection, publish: Callable[[], object]) -> bytes:
    """The frames py-amqp would write for one publish (held back: they are not written)."""
    transport = conn.connection.transport
    held: list[bytes] = []
    write = transport._write
    transport._write = lambda data: held.append(bytes(data))
    try:
        publish()
    finally:
        transport._write = write
    return b"".join(held)


def run_broker(kind: str, url: str, store_url: str, n: int, reps: int, **conf: Any) -> list[str]:
    """The rows of one broker: each publisher's best of ``reps`` bursts; the batch's first
    burst (its plans and stencils made on the way) on a row of its own."""
    queue = f"burst-{uuid.uuid4().hex[:8]}"
    broker = Broker(url, queue)
    try:
        app = make_app(url, store_url, queue, n, **conf)
        with app.connection_for_write() as conn:  # as the publishers will declare it
            app.amqp.default_queue(conn.default_channel).declare()
        # Each beat on an app of its own: each leads its own store prefix.
        one = leading(make_app(url, store_url, queue, n, **conf), OneByOne, Clock())
        batch = leading(make_app(url, store_url, queue, n, **conf), Scheduler, Clock())
        clock = Clock()
        ticking = leading(make_app(url, store_url, queue, n, **conf), Scheduler, clock)
        standby = taken_over(url, store_url, queue, n, **conf)
        first_after_standing_by = timed(broker, n, publish_claimed(standby))
        standby.close()
        standby.app.close()
        started = waited(make_app(url, store_url, queue, n, **conf), n)
        first_after_start = timed(broker, n, publish_claimed(started))
        started.close()
        started.app.close()
        publishers: dict[str, Callable[[], Callable[[], object]]] = {
            "apply_async loop": lambda: apply_async_loop(app, n),
            "hashbeat, one by one": lambda: publish_claimed(one),
            "hashbeat, batch": lambda: publish_claimed(batch),
            "hashbeat, whole tick": lambda: whole_tick(ticking, clock),
            # Last in each turn: it writes the newest message the whole tick sent.
            "broker floor": lambda: floor(broker, n, bool(conf)),
        }
        times: dict[str, list[float]] = {label: [] for label in publishers}
        for _ in range(reps):  # in turns, so that a busy moment of the machine hits them all
            for label, publish in publishers.items():
                times[label].append(timed(broker, n, publish()))
        for scheduler in (one, batch, ticking):
            scheduler.close()
            scheduler.app.close()
        app.close()
    finally:
        broker.drop()
    first, *later = times["hashbeat, batch"]
    rows = [(label, min(values)) for label, values in times.items()]
    rows[2] = ("hashbeat, batch", min(later or [first]))
    rows.insert(2, ("hashbeat, batch, 1st", first))
    rows.insert(3, ("hashbeat, 1st, after start", first_after_start))
    rows.insert(4, ("hashbeat, 1st, taken over", first_after_standing_by))
    base = rows[0][1]
    batch_s = dict(rows)["hashbeat, batch"]
    lines = []
    for label, seconds in rows:
        verdict = ""
        if label == "hashbeat, batch":
            bar = BARS[kind]
            verdict = f">= {bar:g}x {'PASS' if base / seconds >= bar else 'FAIL'}"
        elif label == "broker floor":
            verdict = f"the batch takes {batch_s / seconds:.2f}x this"
        lines.append(
            f"{kind + (' (confirms)' if conf else ''):<18}{label:<26}{seconds:>9.3f}"
            f"{seconds / n * 1e6:>10.1f}{base / seconds:>9.1f}x  {verdict}"
        )
    return lines


def amqp_answers(url: str) -> bool:
    try:
        with Connection(url, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--no-amqp", action="store_true", help="Redis only")
    args = parser.parse_args()
    print(
        f"python {platform.python_version()}, celery {version('celery')}, kombu "
        f"{version('kombu')}, redis-py {version('redis')}, {args.slots:,} slots due at one "
        f"instant, best of {args.reps}",
        flush=True,
    )
    header = f"{'broker':<18}{'publisher':<26}{'seconds':>9}{'us/slot':>10}{'speed-up':>10}  bar"
    lines = [header, "-" * (len(header) + 14)]
    with RedisProcess() as server:
        lines += run_broker("redis", server.url, server.url, args.slots, args.reps)
        if args.no_amqp:
            pass
        elif amqp_answers(args.amqp_url):
            lines += run_broker("amqp", args.amqp_url, server.url, args.slots, args.reps)
            lines += run_broker(
                "amqp", args.amqp_url, server.url, args.slots, args.reps,
                broker_transport_options={"confirm_publish": True},
            )  # fmt: skip
        else:
            lines.append(f"amqp: {args.amqp_url} does not answer; skipped")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
