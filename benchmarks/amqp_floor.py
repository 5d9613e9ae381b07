"""RabbitMQ's own floor for a burst: how fast the broker takes N messages beat has made.

    python benchmarks/amqp_floor.py [--slots 10000] [--reps 9] [--amqp-url URL]

``burst.py``'s ``broker floor`` row is one way to hand RabbitMQ a burst with nothing made per
message. This benchmark asks whether another way would be faster, so whether a publisher could
beat that floor at all: one message Celery's ``apply_async`` sent, its frames encoded once and
written N times in chunks of 500, each chunk followed by a no-op ``basic.qos`` whose answer says
the broker handled it (as the batch path does), to the exchange and routing key it went to:

- ``persistent, 1 connection``: as ``burst.py``'s floor (one chunk in the air);
- ``persistent, 2 chunks in the air``: the next chunk written before the last one's answer;
- ``persistent, 3 connections``: chunks dealt round to three connections, one channel each,
  so that three of the broker's channel processes work at once;
- ``transient``: the same message with ``delivery_mode`` 1, for information only: Celery sends
  persistent messages (``task_default_delivery_mode``), and so must beat; the row shows what
  persistence costs the broker.

Each row runs in the same turns as a loop of ``apply_async`` (the burst bar's base), and prints
the median of ``--reps`` turns, the speed-up over the loop's median, and, where the broker runs on
this machine, the processor time ``beam.smp`` spent during the row (from ``/proc``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import amqp
from amqp import spec
from kombu import Connection

sys.path.insert(0, str(Path(__file__).resolve().parent))

from burst import BARS, CHUNK, Broker, apply_async_loop, captured, make_app


def beam_seconds() -> float | None:
    """Processor seconds the local RabbitMQ (``beam.smp``) has used, or None if not local."""
    found = subprocess.run(["pgrep", "-o", "beam.smp"], check=False, capture_output=True, text=True)
    if not found.stdout.strip():
        return None
    fields = Path(f"/proc/{found.stdout.strip()}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chunks_writer(
    url: str, message: amqp.Message, exchange: str, key: str, n: int, connections: int, depth: int
) -> Callable[[], None]:
    """Writes N copies of ``message`` in chunks, ``depth`` chunks in the air per connection."""

    def publish() -> None:
        conns = [Connection(url) for _ in range(connections)]
        try:
            channels = [conn.default_channel for conn in conns]
            frames = [
                captured(conn, lambda ch=ch: ch._basic_publish(message, exchange, key))
                for conn, ch in zip(conns, channels, strict=True)
            ]
            qos = [
                captured(conn, lambda ch=ch: ch.send_method(spec.Basic.Qos, "lBb", (0, 0, False)))
                for conn, ch in zip(conns, channels, strict=True)
            ]
            in_air: list[list[int]] = [[] for _ in conns]
            for k, start in enumerate(range(0, n, CHUNK)):
                i = k % len(conns)
                if len(in_air[i]) >= depth:
                    in_air[i].pop(0)
                    channels[i].wait(spec.Basic.QosOk)
                transport = conns[i].connection.transport
                transport.write(frames[i] * min(CHUNK, n - start) + qos[i])
                in_air[i].append(k)
            for i, waiting in enumerate(in_air):
                for _ in waiting:
                    channels[i].wait(spec.Basic.QosOk)
        finally:
            for conn in conns:
                conn.release()

    return publish


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672//")
    args = parser.parse_args()
    n, url = args.slots, args.amqp_url
    queue = f"floor-{uuid.uuid4().hex[:8]}"
    broker = Broker(url, queue)
    app = make_app(url, "", queue, 1)
    try:
        with app.connection_for_write() as conn:
            app.amqp.default_queue(conn.default_channel).declare()
        loop = apply_async_loop(app, n)
        loop()
        broker.wait_for(n)
        with Connection(url) as conn:
            got = conn.default_channel.basic_get(queue, no_ack=True)
        exchange, key = got.delivery_info["exchange"], got.delivery_info["routing_key"]
        persistent = amqp.Message(got.body, **dict(got.properties))
        transient = amqp.Message(got.body, **{**dict(got.properties), "delivery_mode": 1})
        rows: dict[str, Callable[[], None]] = {
            "apply_async loop": loop,
            "persistent, 1 connection": chunks_writer(url, persistent, exchange, key, n, 1, 1),
            "persistent, 2 chunks in the air": chunks_writer(
                url, persistent, exchange, key, n, 1, 2
            ),
            "persistent, 3 connections": chunks_writer(url, persistent, exchange, key, n, 3, 1),
            "transient, 1 connection": chunks_writer(url, transient, exchange, key, n, 1, 1),
        }
        seconds: dict[str, list[float]] = {label: [] for label in rows}
        beam: dict[str, list[float]] = {label: [] for label in rows}
        for _ in range(args.reps):
            for label, publish in rows.items():
                broker.purge()
                cpu_before, started = beam_seconds(), time.perf_counter()
                publish()
                broker.wait_for(n)
                seconds[label].append(time.perf_counter() - started)
                cpu_after = beam_seconds()
                if cpu_before is not None and cpu_after is not None:
                    beam[label].append(cpu_after - cpu_before)
    finally:
        broker.drop()
        app.close()
    base = statistics.median(seconds["apply_async loop"])
    print(f"RabbitMQ at {url.rsplit('@', 1)[-1]}: {n:,} messages, median of {args.reps} turns")
    print(f"the burst bar ({BARS['amqp']:g}x) asks for {base / BARS['amqp']:.3f} s or less")
    header = f"{'way':<34}{'seconds':>9}{'us/msg':>9}{'speed-up':>10}{'broker cpu s':>14}"
    print(header + "\n" + "-" * len(header))
    for label, values in seconds.items():
        median = statistics.median(values)
        cpu = f"{statistics.median(beam[label]):.2f}" if beam[label] else "-"
        print(f"{label:<34}{median:>9.3f}{median / n * 1e6:>9.1f}{base / median:>9.1f}x{cpu:>14}")


if __name__ == "__main__":
    main()
