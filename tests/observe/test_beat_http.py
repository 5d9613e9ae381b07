"""The beat's HTTP endpoints (docs/design.md §14) on real ``celery beat`` processes, called from
this process as Prometheus and the kubelet call them. Each test runs its own redis-server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_hashbeat.observe.history import decode
from celery_hashbeat.store import open_store
from tests.docs.markdown import blocks, load_yaml
from tests.observe.beats import Beat, Beats
from tests.support.processes import ProcessGroup, wait_until
from tests.support.redis_server import RedisProcess, free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessGroup]:
    """Every beat the test starts, reaped at the end whatever happened."""
    with ProcessGroup(tmp_path) as group:
        yield group


def documented_probes() -> tuple[str, str]:
    """The liveness and readiness paths of the Deployment in docs/operations.md, so the test
    calls what the documented manifest tells the kubelet to call."""
    page = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    for block in blocks(page):
        if block.language != "yaml":
            continue
        for document in load_yaml(block.text):
            if document.get("kind") == "Deployment":
                (container,) = document["spec"]["template"]["spec"]["containers"]
                live = container["livenessProbe"]["httpGet"]
                ready = container["readinessProbe"]["httpGet"]
                return str(live["path"]), str(ready["path"])
    raise AssertionError("docs/operations.md shows no Deployment with HTTP probes")


def leader_of(*beats: Beat) -> Beat | None:
    return next((b for b in beats if b.metrics().get("hashbeat_leader") == 1.0), None)


def test_metrics_count_sends_and_the_leader_gauge_follows_a_failover(
    processes: ProcessGroup, private_redis: RedisProcess
) -> None:
    beats = Beats(processes, private_redis.url, broker_url=private_redis.url)
    first, second = beats.start(), beats.start()
    found: list[Beat] = []
    assert wait_until(lambda: found.append(leader_of(first, second)) or found[-1], 20, 0.2), (
        beats.logs()
    )
    leader = found[-1]
    standby = second if leader is first else first

    before = leader.metrics()["hashbeat_sent_total"]
    assert wait_until(lambda: leader.metrics()["hashbeat_sent_total"] >= before + 6, 5, 0.2)
    scraped = leader.metrics()
    assert scraped["hashbeat_send_lateness_seconds_count"] >= 6
    assert scraped["hashbeat_entries"] == 5.0  # the chaos entries and Celery's backend_cleanup
    assert scraped["hashbeat_leader_changes_total"] >= 1.0
    assert scraped["hashbeat_store_errors_total"] == 0.0
    assert 'hashbeat_skipped_total{reason="overlap"}' not in scraped  # none skipped, none shown
    assert standby.metrics()["hashbeat_leader"] == 0.0
    assert standby.metrics()["hashbeat_sent_total"] == 0.0
    status = leader.status()
    assert status["role"] == "leader" and status["leader"] == status["token"]
    assert status["entries"] == 5 and status["store"]["ready"] is True

    leader.process.terminate()  # a clean stop hands over within a second (docs/design.md §7)
    assert wait_until(lambda: standby.metrics().get("hashbeat_leader") == 1.0, 5, 0.1)
    took_over = standby.metrics()
    assert took_over["hashbeat_leader_changes_total"] == 1.0
    assert wait_until(lambda: standby.metrics()["hashbeat_sent_total"] >= 2, 5, 0.2)
    assert standby.status()["role"] == "leader"


def test_readyz_follows_the_store_and_livez_the_tick_loop(
    processes: ProcessGroup, private_redis: RedisProcess
) -> None:
    livez_path, readyz_path = documented_probes()
    assert (livez_path, readyz_path) == ("/livez", "/readyz")
    beat = Beats(processes, private_redis.url).start()
    assert wait_until(lambda: beat.code("/readyz") == 200, 20, 0.2), beat.get("/readyz")
    assert beat.code("/livez") == 200

    private_redis.pause()  # SIGSTOP: the store stops answering, its connections stay open
    paused = time.monotonic()
    try:
        livez: list[int] = []

        def unready() -> bool:
            livez.append(beat.code("/livez"))
            return beat.code("/readyz") == 503

        assert wait_until(unready, 8, 0.2), beat.get("/readyz")
        assert time.monotonic() - paused < 8
        code, body = beat.get("/readyz")
        assert code == 503 and b"the store is not answering" in body, body
        assert set(livez) == {200}
        assert beat.metrics()["hashbeat_store_errors_total"] >= 1
    finally:
        private_redis.resume()
    livez = []

    def ready() -> bool:
        livez.append(beat.code("/livez"))
        return beat.code("/readyz") == 200

    assert wait_until(ready, 12, 0.2), beat.get("/readyz")
    assert set(livez) == {200}


def test_a_port_in_use_stops_the_beat_with_one_clear_line(
    processes: ProcessGroup, tmp_path: Path
) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        beat = Beats(processes, f"sqlite:///{tmp_path}/store.sqlite").start(port)
        code = beat.process.wait(30)
    log = beat.process.log.read_text()
    assert code not in (None, 0), log
    lines = [line for line in log.splitlines() if "hashbeat_http_port" in line]
    assert len(lines) == 1, log
    assert f"127.0.0.1:{port}" in lines[0] and "already in use" in lines[0], lines
    assert "Traceback" not in log


def test_history_shows_overlap_skips_and_catch_up_misses(
    processes: ProcessGroup, private_redis: RedisProcess
) -> None:
    beats = Beats(processes, private_redis.url, schedule="observe")
    store = open_store(private_redis.url, beats.prefix)
    try:
        first = beats.start()

        def outcomes(entry: str) -> list[str]:
            return [r.outcome for r in map(decode, store.history(entry)) if r is not None]

        assert wait_until(lambda: outcomes("guarded").count("skipped") >= 2, 20, 0.2), beats.logs()
        records = [r for r in map(decode, store.history("guarded")) if r is not None]
        sent = [r for r in records if r.outcome == "sent"]
        skipped = [r for r in records if r.outcome == "skipped"]
        assert len(sent) == 1, records  # the run lease (60 s) is still held by the first run
        assert all(r.reason == "overlap" and r.task_id == sent[0].task_id for r in skipped)
        assert sent[0].lateness_ms is not None and 0 <= sent[0].lateness_ms < 1000
        assert sent[0].by == first.status()["token"]
        assert first.metrics()['hashbeat_skipped_total{reason="overlap"}'] >= 2

        first.process.terminate()
        assert first.process.wait(10) == 0
        time.sleep(2.5)  # "skip-missed" misses two or three slots with no beat running
        second = beats.start()
        assert wait_until(lambda: "missed" in outcomes("skip-missed"), 20, 0.2), beats.logs()
        missed = next(
            r for r in map(decode, store.history("skip-missed")) if r and r.outcome == "missed"
        )
        assert missed.reason == "catch_up=skip" and missed.count is not None
        assert 2 <= missed.count <= 6, missed
        assert wait_until(lambda: second.metrics().get("hashbeat_missed_total", 0) >= 2, 5, 0.2)
        # The records are one line of JSON each, for any tool to read.
        assert json.loads(store.history("skip-missed")[0])["outcome"] in ("missed", "sent")
    finally:
        store.close()
