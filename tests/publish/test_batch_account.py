"""The batch's account of each slot: which claims are given back when a batch is cut short.
(The runner that lets the tick stop waiting, the other half of that decision, is checked in
tests/beat/test_runner_can_abandon_a_call.py.)"""

from __future__ import annotations

import threading

from kombu.exceptions import EncodeError, OperationalError

from celery_hashbeat.publish.batch import Batch, Outcome


def outcomes(batch: Batch[str]) -> dict[str, Outcome]:
    return {entry: outcome for entry, _, outcome, _ in batch.settle()}


def refused() -> OperationalError:
    """kombu's error for a broker that refused the connection, with the socket's error inside."""
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError as exc:
        try:
            raise OperationalError("[Errno 111] Connection refused") from exc
        except OperationalError as wrapped:
            return wrapped


def test_a_batch_stops_at_the_first_unreachable_broker_and_drops_what_can_never_go() -> None:
    def send(entry: str, slot: int) -> None:
        if entry == "bad":
            raise EncodeError("cannot serialise")
        if entry == "down":
            raise refused()

    batch = Batch([("a", 1), ("bad", 1), ("b", 1), ("down", 1), ("c", 1)], send)
    batch.run()
    assert outcomes(batch) == {
        "a": Outcome.SENT,
        "bad": Outcome.DROPPED,
        "b": Outcome.SENT,
        "down": Outcome.FAILED,
        "c": Outcome.UNSENT,  # never tried: the broker is down for it too
    }
    errors = {entry: type(error) for entry, _, _, error in batch.settle() if error}
    assert errors == {"bad": EncodeError, "down": OperationalError}


def test_a_connection_lost_mid_publish_keeps_its_claim() -> None:
    """The broker may have taken the message before the connection broke: sending it again
    could deliver it twice, so it is neither retried nor given back."""

    def send(entry: str, slot: int) -> None:
        if entry == "cut":
            raise OperationalError("Connection closed by server.")

    batch = Batch([("a", 1), ("cut", 1), ("b", 1)], send)
    batch.run()
    assert outcomes(batch) == {"a": Outcome.SENT, "cut": Outcome.UNKNOWN, "b": Outcome.UNSENT}


def test_a_cancelled_batch_says_which_message_was_under_way() -> None:
    started, release = threading.Event(), threading.Event()

    def send(entry: str, slot: int) -> None:
        if entry == "slow":
            started.set()
            release.wait(5)

    batch = Batch([("quick", 1), ("slow", 1), ("later", 1)], send)
    thread = threading.Thread(target=batch.run)
    thread.start()
    assert started.wait(5)
    assert batch.in_flight_for() > 0
    settled = outcomes(batch)
    release.set()
    thread.join(5)
    # Sent, unknown (it may have gone out: its claim must be kept), never started.
    assert settled == {"quick": Outcome.SENT, "slow": Outcome.UNKNOWN, "later": Outcome.UNSENT}
    assert outcomes(batch)["later"] is Outcome.UNSENT  # cancelled: it never starts afterwards


def test_a_batch_cut_short_while_connecting_gives_that_slot_back() -> None:
    """Nothing has left while the connection is being made: a stop or a hung broker then
    leaves the slot to be given back, not kept as 'may have gone out'."""
    connecting, release = threading.Event(), threading.Event()
    sent: list[str] = []

    def connect() -> None:
        connecting.set()
        release.wait(5)

    batch = Batch([("first", 1)], lambda entry, slot: sent.append(entry), connect=connect)
    thread = threading.Thread(target=batch.run)
    thread.start()
    assert connecting.wait(5)
    settled = outcomes(batch)
    release.set()
    thread.join(5)
    assert settled == {"first": Outcome.UNSENT} and sent == []  # and it never goes out later


def test_a_connection_that_fails_sends_nothing_and_gives_back() -> None:
    def connect() -> None:
        raise OSError("handshake failed")

    batch = Batch([("a", 1), ("b", 1)], lambda entry, slot: None, connect=connect)
    batch.run()
    assert outcomes(batch) == {"a": Outcome.FAILED, "b": Outcome.UNSENT}
