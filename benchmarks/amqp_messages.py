"""What the batch path puts on RabbitMQ, compared with what ``apply_async`` puts there.

    python benchmarks/amqp_messages.py [--amqp-url amqp://guest:guest@127.0.0.1:5672//] [--confirms]

The test suite compares the two on a Redis broker it starts itself
(tests/publish/test_batch_sends_what_apply_async_sends.py); it may not need RabbitMQ, so this
check of the AMQP path (py-amqp frames written per chunk, later slots made from the first one's
frames) runs here, against a RabbitMQ you have. One beat publishes three slots of each entry
both ways on its one publishing thread; every message is read back with ``basic_get`` and
compared: headers, properties (the broker's ``delivery_tag`` aside) and body.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from celery import Celery
from kombu import Connection, Queue

from celery_hashbeat import Scheduler, hashcron

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.redis_server import RedisProcess  # noqa: E402

T0 = 1_893_456_000.0  # 2030-01-01T00:00:00Z


def anything(*args: Any, **kwargs: Any) -> None:
    """The task the entries name; never run."""


def make_app(url: str, store_url: str, q: str, confirms: bool) -> Celery:
    every = hashcron("* * * * *")
    app = Celery("amqp-messages", set_as_current=False, broker=url)
    app.conf.update(
        timezone="UTC",
        task_default_queue=q,
        broker_transport_options={"confirm_publish": confirms},
        task_queues=[Queue(q), Queue(f"{q}-prio", queue_arguments={"x-max-priority": 10})],
        accept_content=["json", "pickle"],
        beat_enable_remote_control=False,
        hashbeat_store_url=store_url,
        hashbeat_key_prefix=q,
        beat_schedule={
            "plain": {"task": "m.t", "schedule": every, "args": (1, "a"), "kwargs": {"x": [1]}},
            "priority": {
                "task": "m.t",
                "schedule": every,
                "options": {"queue": f"{q}-prio", "priority": 7},
            },
            "encoded": {
                "task": "m.t",
                "schedule": every,
                "args": ({"n": [1, 2.5]},),
                "options": {"serializer": "pickle", "compression": "zlib", "headers": {"t": "a"}},
            },
            "expiring": {"task": "m.t", "schedule": every, "options": {"expires": 30}},
            "guarded": {"task": "m.t", "schedule": every, "overlap": "skip"},
        },
    )
    app.task(name="m.t", shared=False)(anything)
    moment = datetime(2030, 1, 1, 0, 1, tzinfo=timezone.utc)
    app.now = lambda: moment  # type: ignore[method-assign]  # the same expires both ways
    return app


def drain(url: str, queues: list[str]) -> list[tuple[str, Any, Any, Any]]:
    found = []
    with Connection(url) as conn:
        channel = conn.default_channel
        for name in queues:
            while (message := channel.basic_get(name, no_ack=True)) is not None:
                properties = {k: v for k, v in message.properties.items() if k != "delivery_tag"}
                found.append((name, message.headers, properties, message.body))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672//")
    parser.add_argument("--confirms", action="store_true", help="with publisher confirms on")
    args = parser.parse_args()
    url = args.amqp_url
    q = f"amqp-messages-{uuid.uuid4().hex[:6]}"
    queues = [q, f"{q}-prio"]
    with RedisProcess() as server:
        app = make_app(url, server.url, q, args.confirms)
        beat = Scheduler(app, lazy=True)
        beat.clock = lambda: T0
        beat.setup_schedule()
        beat.tick()
        try:
            entries = [
                entry for name, entry in beat.entries.items() if not name.startswith("celery")
            ]
            slots = [(e, int((T0 + m * 60) * 1000)) for m in (1, 2, 3) for e in entries]
            ways = {}
            for way in ("batch", "apply_async"):
                if way == "apply_async":
                    beat.publisher.__dict__["sink"] = None  # the per-message path, same thread
                outcomes = {s.outcome.value for s in beat.dispatcher.publish(slots)}
                ways[way] = drain(url, queues)
                print(f"{way}: {len(ways[way])} messages, outcomes {sorted(outcomes)}")
        finally:
            with Connection(url) as conn:
                for name in queues:
                    conn.default_channel.queue_delete(name)
            beat.close()
    same = ways["batch"] == ways["apply_async"]
    print(f"identical headers, properties and bodies: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
