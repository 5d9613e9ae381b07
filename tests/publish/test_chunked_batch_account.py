"""The account a chunked batch (``bulk.Bulk``) gives of every slot, with a sink that fails
on cue: which slots went out, which surely did not (given back) and which may have (kept)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from kombu.exceptions import EncodeError, OperationalError

from celery_hashbeat.publish.batch import MayHaveGone, Outcome
from celery_hashbeat.publish.bulk import Bulk
from celery_hashbeat.publish.gate import Gate
from tests.publish.test_batch_account import outcomes, refused


class Sink:
    """Buffers entries; ``flush`` sends them, or fails as told for the n-th flush. One that
    ``speculates`` may stage before the claim answers (as the Redis output does)."""

    def __init__(self, immediate: bool = False, speculates: bool = False) -> None:
        self.immediate = immediate
        self.speculates = speculates
        self.buffered: list[str] = []
        self.log: list[str] = []
        self.fail_flush: dict[int, Exception] = {}
        self.answers: dict[int, dict[str, Exception]] = {}
        self.fail_stage: dict[str, Exception] = {}
        self.flushes = 0

    def direct(self, entry: str) -> bool:
        return entry.startswith("direct")

    def stage(self, entry: str, slot: int, *, unclaimed: bool = False) -> None:
        if entry in self.fail_stage:
            raise self.fail_stage[entry]
        self.log.append(f"{'staged' if unclaimed else 'announced'} {entry}")
        self.buffered.append(entry)

    def flush(self) -> list[BaseException | None]:
        self.flushes += 1
        chunk, self.buffered = self.buffered, []
        if self.flushes in self.fail_flush:
            raise self.fail_flush[self.flushes]
        answers = self.answers.get(self.flushes, {})
        self.log += [f"sent {entry}" for entry in chunk if entry not in answers]
        return [answers.get(entry) for entry in chunk]

    def admit(self, entries: Sequence[str], allowed: Sequence[bool]) -> None:
        assert list(entries) == self.buffered
        self.buffered = [entry for entry, go in zip(entries, allowed, strict=True) if go]
        self.log += [f"announced {entry}" for entry in self.buffered]

    def discard(self) -> None:
        self.log.append(f"discarded {len(self.buffered)}")
        self.buffered = []

    def sent(self, entry: str, slot: int) -> None:
        self.log.append(f"after {entry}")

    def unsent(self, entry: str, slot: int) -> None:
        self.log.append(f"unsent {entry}")


def sends(sink: Sink) -> list[str]:
    """The sink's log without the stage lines: what went to the broker, and after."""
    return [line for line in sink.log if not line.startswith(("announced", "staged"))]


def bulk(sink: Sink, *entries: str, chunk: int = 2) -> Bulk[str]:
    def send(entry: str, slot: int) -> None:
        sink.log.append(f"direct {entry}")

    return Bulk([(entry, 1) for entry in entries], sink, send, chunk=chunk)


def test_chunks_go_out_one_round_trip_each_and_signal_after_each() -> None:
    sink = Sink()
    batch = bulk(sink, "a", "b", "c", "d", "e")
    batch.run()
    assert set(outcomes(batch).values()) == {Outcome.SENT}
    assert sink.flushes == 3
    assert sends(sink)[:4] == ["sent a", "sent b", "after a", "after b"]


@pytest.mark.parametrize(
    ("error", "outcome"),
    [(refused(), Outcome.FAILED), (OperationalError("Connection reset"), Outcome.UNKNOWN)],
)
def test_a_chunk_whose_round_trip_fails_is_failed_if_refused_else_unknown(
    error: Exception, outcome: Outcome
) -> None:
    sink = Sink()
    sink.fail_flush[2] = error
    batch = bulk(sink, "a", "b", "c", "d", "e")
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.SENT,
        "b": Outcome.SENT,
        "c": outcome,
        "d": outcome,
        "e": Outcome.UNSENT,  # never tried: given back
    }


@pytest.mark.parametrize(
    ("error", "outcome"),
    [(RuntimeError("WRONGTYPE"), Outcome.FAILED), (MayHaveGone("fanout"), Outcome.UNKNOWN)],
)
def test_a_message_the_broker_answered_with_an_error_ends_the_batch(
    error: Exception, outcome: Outcome
) -> None:
    sink = Sink()
    sink.answers[2] = {"c": error}
    batch = bulk(sink, "a", "b", "c", "d", "e")
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.SENT,
        "b": Outcome.SENT,
        "c": outcome,  # refused (given back), or it may have gone (kept)
        "d": Outcome.SENT,  # same round trip: the broker took it
        "e": Outcome.UNSENT,
    }
    assert sends(sink)[-3:] == ["sent d", "unsent c", "after d"]


def test_building_errors_drop_one_message_or_give_back_the_unsent_chunk() -> None:
    sink = Sink()
    sink.fail_stage = {"bad": EncodeError("cannot serialise"), "down": refused()}
    batch = bulk(sink, "a", "bad", "b", "c", "down", "d", chunk=2)
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.SENT,
        "bad": Outcome.DROPPED,
        "b": Outcome.SENT,
        "c": Outcome.UNSENT,  # buffered, never sent: given back with the rest
        "down": Outcome.FAILED,
        "d": Outcome.UNSENT,
    }
    assert sends(sink)[-1] == "discarded 1"


def test_a_direct_entry_goes_after_the_chunk_before_it() -> None:
    sink = Sink()
    batch = bulk(sink, "a", "direct-x", "b", chunk=5)
    batch.run()
    assert set(outcomes(batch).values()) == {Outcome.SENT}
    assert sends(sink) == ["sent a", "after a", "direct direct-x", "sent b", "after b"]


def test_a_cancelled_batch_gives_back_what_it_buffered() -> None:
    sink = Sink()
    batch = bulk(sink, "a", "b", "c", "d", chunk=3)
    staged = threading.Event()
    stage = sink.stage

    def stage_then_cancel(entry: str, slot: int, **how: bool) -> None:
        stage(entry, slot, **how)
        if entry == "b":
            batch.cancel()
            staged.set()

    sink.stage = stage_then_cancel  # type: ignore[method-assign]
    batch.run()
    assert staged.is_set()
    assert set(outcomes(batch).values()) == {Outcome.UNSENT}
    assert sends(sink) == ["discarded 2"]


def test_an_immediate_sink_accounts_message_by_message() -> None:
    sink = Sink(immediate=True)
    sink.fail_stage = {"cut": OperationalError("Connection closed by server.")}
    batch = bulk(sink, "a", "cut", "b")
    batch.run()
    assert outcomes(batch) == {"a": Outcome.SENT, "cut": Outcome.UNKNOWN, "b": Outcome.UNSENT}


# A batch started while its claim is in flight (publish/gate.py) ---------------------------------


def gated(sink: Sink, *entries: str, chunk: int = 10) -> tuple[Bulk[str], Gate, threading.Thread]:
    gate = Gate()
    batch = Bulk([(entry, 1) for entry in entries], sink, lambda e, s: None, chunk=chunk, gate=gate)
    thread = threading.Thread(target=batch.run)
    thread.start()
    return batch, gate, thread


def wait_for_log(sink: Sink, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(sink.log) < count:
        assert time.monotonic() < deadline, sink.log
        time.sleep(0.001)


def test_a_gated_batch_stages_unannounced_and_sends_only_what_the_claim_won() -> None:
    sink = Sink(speculates=True)
    batch, gate, thread = gated(sink, "a", "b", "c", "d")
    wait_for_log(sink, 4)
    time.sleep(0.01)
    assert sink.log == ["staged a", "staged b", "staged c", "staged d"]  # waiting at the gate
    gate.open([0, 2])
    thread.join(5)
    assert outcomes(batch) == {"a": Outcome.SENT, "c": Outcome.SENT}  # b, d: not its account
    assert sink.log[4:] == ["announced a", "announced c", "sent a", "sent c", "after a", "after c"]


def test_a_gate_closed_by_a_failed_claim_sends_nothing_and_accounts_for_nothing() -> None:
    sink = Sink(speculates=True)
    batch, gate, thread = gated(sink, "a", "b")
    wait_for_log(sink, 2)
    gate.close()
    thread.join(5)
    assert batch.settle() == []
    assert sends(sink) == []
    assert sink.flushes == 0


def test_a_gated_batch_stages_one_chunk_then_skips_the_slots_kept_out() -> None:
    sink = Sink(speculates=True)
    batch, gate, thread = gated(sink, "a", "b", "c", "d", "e", chunk=2)
    wait_for_log(sink, 2)
    time.sleep(0.01)
    assert sink.log == ["staged a", "staged b"]  # a full chunk waits for the claim
    gate.open([1, 2, 4])
    thread.join(5)
    assert outcomes(batch) == {"b": Outcome.SENT, "c": Outcome.SENT, "e": Outcome.SENT}
    assert "announced d" not in sink.log
    assert "staged c" not in sink.log  # after the gate, staged as claimed


def test_a_sink_that_cannot_hold_messages_back_stages_nothing_before_the_gate() -> None:
    sink = Sink(speculates=False)  # as RabbitMQ's: nothing may be staged unclaimed
    batch, gate, thread = gated(sink, "a", "b")
    time.sleep(0.05)
    assert sink.log == []
    gate.open([1])
    thread.join(5)
    assert outcomes(batch) == {"b": Outcome.SENT}
    assert sink.log[0] == "announced b"
