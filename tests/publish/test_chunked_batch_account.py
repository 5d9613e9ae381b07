"""The account a chunked batch (``publishing.Bulk``) gives of every slot, with a sink that fails
on cue: which slots went out, which surely did not (given back) and which may have (kept)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from kombu.exceptions import EncodeError, OperationalError

from celery_hashbeat.publish.batch import MayHaveGone, Outcome
from celery_hashbeat.publish.chunked import Bulk
from tests.publish.test_batch_account import outcomes, refused


class Sink:
    """Buffers entries; ``send`` sends them, or fails as told for the n-th send; ``answers``
    answers for the chunk last sent."""

    def __init__(self, immediate: bool = False, answers_later: bool = True) -> None:
        self.immediate = immediate
        self.answers_later = answers_later
        self.buffered: list[str] = []
        self.log: list[str] = []
        self.fail_flush: dict[int, Exception] = {}
        self.fail_answers: dict[int, Exception] = {}
        self.air: list[str] = []
        self.said: dict[int, dict[str, Exception]] = {}
        self.fail_stage: dict[str, Exception] = {}
        #: Log each message as it is built; call ``cut[1]`` once ``cut[0]`` is buffered.
        self.log_builds = False
        self.cut: tuple[str, Callable[[], object]] | None = None
        self.flushes = 0

    def direct(self, entry: str) -> bool:
        return entry.startswith("direct")

    def stage(self, entry: str, slot: int) -> None:
        if self.log_builds:
            self.log.append(f"built {entry}")
        if entry in self.fail_stage:
            raise self.fail_stage[entry]
        self.buffered.append(entry)
        if self.cut is not None and entry == self.cut[0]:
            self.cut[1]()

    def send(self) -> None:
        self.flushes += 1
        self.air, self.buffered = self.buffered, []
        if self.flushes in self.fail_flush:
            raise self.fail_flush[self.flushes]
        said = self.said.get(self.flushes, {})
        self.log += [f"sent {entry}" for entry in self.air if entry not in said]

    def answers(self) -> list[BaseException | None]:
        if self.flushes in self.fail_answers:
            raise self.fail_answers[self.flushes]
        said = self.said.get(self.flushes, {})
        self.log.append(f"answered {len(self.air)}")
        return [said.get(entry) for entry in self.air]

    def discard(self) -> None:
        self.log.append(f"discarded {len(self.buffered)}")
        self.buffered = []

    def sent(self, entry: str, slot: int) -> None:
        self.log.append(f"after {entry}")

    def unsent(self, entry: str, slot: int) -> None:
        self.log.append(f"unsent {entry}")


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
    assert sink.log[:5] == ["sent a", "sent b", "answered 2", "after a", "after b"]


def test_the_next_chunk_is_built_while_one_is_in_the_air_and_sent_after_its_answers() -> None:
    sink = Sink()
    sink.log_builds = True
    batch = bulk(sink, "a", "b", "c", "d", "e")
    batch.run()
    assert sink.log == [
        "built a", "built b", "sent a", "sent b",
        "built c", "built d", "answered 2", "after a", "after b", "sent c", "sent d",
        "built e", "answered 2", "after c", "after d", "sent e",
        "answered 1", "after e",
    ]  # fmt: skip


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


def test_answers_given_as_a_chunk_is_sent_settle_it_before_the_next_is_built() -> None:
    """A Redis pipeline's replies come with it: its slots are settled (after_task_publish)
    at once, not a chunk later."""
    sink = Sink(answers_later=False)
    sink.log_builds = True
    batch = bulk(sink, "a", "b", "c")
    batch.run()
    assert sink.log == [
        "built a", "built b", "sent a", "sent b", "answered 2", "after a", "after b",
        "built c", "sent c", "answered 1", "after c",
    ]  # fmt: skip


def test_a_chunk_whose_answers_never_come_stops_the_chunk_built_meanwhile() -> None:
    sink = Sink()
    sink.fail_answers[1] = OperationalError("Connection reset")
    batch = bulk(sink, "a", "b", "c", "d", "e")
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.UNKNOWN,  # written: may have arrived (kept)
        "b": Outcome.UNKNOWN,
        "c": Outcome.UNSENT,  # built while a and b were in the air, never written
        "d": Outcome.UNSENT,
        "e": Outcome.UNSENT,
    }
    assert sink.flushes == 1 and sink.log[-1] == "discarded 2"


def test_a_batch_cut_with_a_chunk_in_the_air_reads_its_answers_and_sends_no_more() -> None:
    sink = Sink()
    batch = bulk(sink, "a", "b", "c", "d", chunk=2)
    sink.cut = ("c", batch.cancel)
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.SENT,
        "b": Outcome.SENT,
        "c": Outcome.UNSENT,
        "d": Outcome.UNSENT,
    }
    assert sink.log == ["sent a", "sent b", "answered 2", "after a", "after b", "discarded 1"]


@pytest.mark.parametrize(
    ("error", "outcome"),
    [(RuntimeError("WRONGTYPE"), Outcome.FAILED), (MayHaveGone("fanout"), Outcome.UNKNOWN)],
)
def test_a_message_the_broker_answered_with_an_error_ends_the_batch(
    error: Exception, outcome: Outcome
) -> None:
    sink = Sink()
    sink.said[2] = {"c": error}
    batch = bulk(sink, "a", "b", "c", "d", "e")
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.SENT,
        "b": Outcome.SENT,
        "c": outcome,  # refused (given back), or it may have gone (kept)
        "d": Outcome.SENT,  # same round trip: the broker took it
        "e": Outcome.UNSENT,
    }
    # e was built while c and d were in the air, and never sent: given back.
    assert sink.log[-4:] == ["answered 2", "unsent c", "after d", "discarded 1"]


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
    assert sink.log[-1] == "discarded 1"


def test_a_direct_entry_goes_after_the_chunk_before_it() -> None:
    sink = Sink()
    batch = bulk(sink, "a", "direct-x", "b", chunk=5)
    batch.run()
    assert set(outcomes(batch).values()) == {Outcome.SENT}
    assert sink.log == [
        "sent a", "answered 1", "after a", "direct direct-x", "sent b", "answered 1", "after b"
    ]  # fmt: skip


def test_a_cancelled_batch_gives_back_what_it_buffered() -> None:
    sink = Sink()
    batch = bulk(sink, "a", "b", "c", "d", chunk=3)
    staged = threading.Event()

    def cancel() -> None:
        batch.cancel()
        staged.set()

    sink.cut = ("b", cancel)
    batch.run()
    assert staged.is_set()
    assert set(outcomes(batch).values()) == {Outcome.UNSENT}
    assert sink.log == ["discarded 2"]


def test_an_immediate_sink_accounts_message_by_message() -> None:
    sink = Sink(immediate=True)
    sink.fail_stage = {"cut": OperationalError("Connection closed by server.")}
    batch = bulk(sink, "a", "cut", "b")
    batch.run()
    assert outcomes(batch) == {"a": Outcome.SENT, "cut": Outcome.UNKNOWN, "b": Outcome.UNSENT}


def test_a_batch_cancelled_as_its_chunk_fills_gives_that_chunk_back() -> None:
    """The chunk was buffered in full when the cut came: it is discarded, not left in the sink
    for the next batch's flush to send."""
    sink = Sink()
    batch = bulk(sink, "a", "b", "c", "d", chunk=2)
    sink.cut = ("b", batch.cancel)
    batch.run()
    assert set(outcomes(batch).values()) == {Outcome.UNSENT}
    assert sink.log == ["discarded 2"] and sink.buffered == []


@pytest.mark.parametrize("immediate", [False, True])
def test_a_held_batch_sends_nothing_until_its_instant_came(immediate: bool) -> None:
    sink = Sink(immediate=immediate)
    seen_at_hold: list[list[str]] = []

    def hold() -> bool:
        seen_at_hold.append(list(sink.log))
        return True

    def send(entry: str, slot: int) -> None:
        sink.log.append(f"direct {entry}")

    batch = Bulk([(e, 1) for e in ("direct-x", "a", "b")], sink, send, chunk=5, hold=hold)
    batch.run()
    assert seen_at_hold == [[]]  # asked once, before anything left
    assert set(outcomes(batch).values()) == {Outcome.SENT}


def test_a_held_batch_whose_instant_does_not_come_gives_every_slot_back() -> None:
    sink = Sink()
    batch = Bulk([(e, 1) for e in ("a", "b", "c")], sink, lambda e, s: None, chunk=2,
                 hold=lambda: False)  # fmt: skip
    batch.run()
    assert set(outcomes(batch).values()) == {Outcome.UNSENT}
    assert sink.log == ["discarded 2"] and sink.flushes == 0
