"""The record of sent slots (store/sent.py) on Redis, as backfills read and claim it; the claim
and give-back scripts of the regular path write it too (store/redis/scripts/sent.py)."""

from __future__ import annotations

from collections.abc import Sequence

from celery_hashbeat.store.errors import ReplicasBehind
from celery_hashbeat.store.options import check_token
from celery_hashbeat.store.redis.connect import Connection
from celery_hashbeat.store.redis.keys import Keys
from celery_hashbeat.store.redis.scripts.sent import (
    CLAIM_SLOTS_SCRIPT,
    RECORDED_SCRIPT,
    UNCLAIM_SLOTS_SCRIPT,
)
from celery_hashbeat.store.sent import (
    CLAIMER_KEEP_MS,
    SENT_CAP,
    SENT_KEEP_MS,
    Recorded,
    SentRecords,
    SlotClaim,
)


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

    def claim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> SlotClaim | None:
        check_token(token)
        keys = [self._keys.leader, self._keys.sent, self._keys.sent_since]
        keys.append(self._keys.sent_by(claimer))
        wanted = sorted({int(slot) for slot in slots})
        args: list[str | int] = [token, entry, SENT_KEEP_MS, SENT_CAP, CLAIMER_KEEP_MS, *wanted]
        answer, acked = self._redis.run_replicated(self._claim, keys, args)
        if answer == 0:
            return None
        start, claimed, sent = answer
        replicas = self._redis.replication.replicas
        if claimed and acked < replicas:
            # Not to be sent: to the backfill this is a claim whose reply was lost, and asked
            # again by the same claimer the slots are its own again (docs/design.md §19).
            raise ReplicasBehind(
                f"Redis store {self._redis.url}: a backfill's claim of {len(claimed)} slot(s) "
                f"reached {acked} replica(s), not the {replicas} that hashbeat_store_min_replicas "
                "asks for, so a failover could lose it; they are not sent yet and the claim is "
                "asked again (bring the replicas back, or lower hashbeat_store_min_replicas)"
            )
        return SlotClaim(int(start), tuple(map(int, claimed)), tuple(map(int, sent)))

    def unclaim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> set[int]:
        if not slots:
            return set()
        keys = [self._keys.leader, self._keys.sent, self._keys.sent_by(claimer)]
        args: list[str | int] = [token, entry, *map(int, slots)]
        return {int(slot) for slot in self._redis.run(self._unclaim, keys, args)}
