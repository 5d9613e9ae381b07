"""The record of sent slots (store/sent.py) on Redis, as backfills read and claim it; the claim
and give-back scripts of the regular path write it too (store/redis/scripts.py)."""

from __future__ import annotations

from collections.abc import Sequence

from celery_hashbeat.store.options import check_token
from celery_hashbeat.store.redis.connect import Connection
from celery_hashbeat.store.redis.keys import Keys
from celery_hashbeat.store.redis.scripts import (
    CLAIM_SLOTS_SCRIPT,
    RECORDED_SCRIPT,
    UNCLAIM_SLOTS_SCRIPT,
)
from celery_hashbeat.store.sent import SENT_CAP, SENT_KEEP_MS, Recorded, SentRecords, SlotClaim


class RedisSentRecords(SentRecords):
    """The sent slots of one prefix on Redis: one sorted set, ``{p}:sent``."""

    def __init__(self, connection: Connection, keys: Keys) -> None:
        self._redis = connection
        self._keys = keys
        self._recorded = connection.script(RECORDED_SCRIPT)
        self._claim = connection.script(CLAIM_SLOTS_SCRIPT)
        self._unclaim = connection.script(UNCLAIM_SLOTS_SCRIPT)

    def recorded(self, entry: str, slots: Sequence[int]) -> Recorded:
        keys = [self._keys.sent, self._keys.sent_since]
        args: list[str | int] = [entry, SENT_KEEP_MS, SENT_CAP, *map(int, slots)]
        found = self._redis.run(self._recorded, keys, args)
        return Recorded(int(found[0]), frozenset(int(slot) for slot in found[1:]))

    def claim_slots(self, token: str, entry: str, slots: Sequence[int]) -> SlotClaim | None:
        check_token(token)
        keys = [self._keys.leader, self._keys.sent, self._keys.sent_since]
        wanted = sorted({int(slot) for slot in slots})
        args: list[str | int] = [token, entry, SENT_KEEP_MS, SENT_CAP, *wanted]
        answer = self._redis.run(self._claim, keys, args)
        if answer == 0:
            return None
        start, claimed, sent = answer
        return SlotClaim(int(start), tuple(map(int, claimed)), tuple(map(int, sent)))

    def unclaim_slots(self, token: str, entry: str, slots: Sequence[int]) -> set[int]:
        if not slots:
            return set()
        keys = [self._keys.leader, self._keys.sent]
        args: list[str | int] = [token, entry, *map(int, slots)]
        return {int(slot) for slot in self._redis.run(self._unclaim, keys, args)}
