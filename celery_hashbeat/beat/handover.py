"""Owed slots: what this beat claimed and did not send, handed over for the leader to send.

A beat owes a slot when it claimed it and the store may not know the slot was not sent: the
claim's reply was lost, or the publish surely failed and the give-back did not reach the store
(the lease had lapsed: a leader frozen mid-batch wakes too late). Only the claimer can tell such a
slot from a sent one, so while it leads it retries the slot in place, and once it is not leading
(or as it takes over) it hands every owed slot over through the store; whichever beat leads takes
the handed slots and sends them (docs/design.md §5, §10). The store accepts a hand-over only for a
claim it can show was this beat's, so a claim that was never made is simply forgotten: the leader
claims that slot the usual way.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.storecalls import FAILED
from celery_hashbeat.publish.message import slot_iso

if TYPE_CHECKING:
    from celery_hashbeat.beat.storecalls import StoreCalls

logger = SCHEDULER


class Owed:
    """Owns the slots this beat claimed and has not sent, and hands them over."""

    def __init__(self, token: str, calls: StoreCalls) -> None:
        self._token = token
        self._calls = calls
        #: (entry, slot) pairs claimed by this beat and not sent.
        self.owed_slots: set[tuple[str, int]] = set()

    def __bool__(self) -> bool:
        return bool(self.owed_slots)

    def owe(self, pairs: Iterable[tuple[str, int]]) -> None:
        self.owed_slots.update(pairs)

    def paid(self, name: str, slot: int) -> None:
        """``name``'s ``slot`` went out, was given back, or was settled otherwise."""
        self.owed_slots.discard((name, slot))

    def hand_over(self, *, strict: bool = False) -> None:
        """Hand every owed slot over (one store call). A slot the store cannot show this beat
        claimed was never claimed, and is forgotten. Without ``strict`` a failed call keeps
        them for the next try; with it the call's error is raised."""
        if not self.owed_slots:
            return
        calls, owed = self._calls, sorted(self.owed_slots)
        if strict:
            handed = calls.call(calls.store.hand_over, self._token, owed)
        else:
            answer = calls.attempt(calls.store.hand_over, self._token, owed)
            if answer is FAILED:
                return
            handed = answer
        self.owed_slots.difference_update(owed)
        if handed:
            logger.warning(
                "beat: handed over %d slot(s) this beat claimed and did not send, for the leader "
                "to send: %s",
                len(handed),
                ", ".join(f"{name} {slot_iso(slot)}" for name, slot in sorted(handed)[:5]),
            )
