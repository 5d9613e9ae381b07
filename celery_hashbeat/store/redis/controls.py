"""The runtime controls (store/controls.py) on Redis, each change one Lua script.

The keys are in store/redis/keys.py, the scripts in store/redis/scripts/.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from celery_hashbeat.store import retention
from celery_hashbeat.store.controls import (
    DEFINITION,
    PAUSE,
    Changes,
    ControlRecords,
    Taken,
    check_values,
)
from celery_hashbeat.store.redis.connect import Connection
from celery_hashbeat.store.redis.keys import Keys
from celery_hashbeat.store.redis.scripts.controls import (
    ASK_TRIGGER_SCRIPT,
    EDIT_CONTROLS_SCRIPT,
    GIVE_BACK_TRIGGERS_SCRIPT,
    READ_CHANGES_SCRIPT,
    SWAP_DEFINITION_SCRIPT,
    TAKE_TRIGGERS_SCRIPT,
)


class RedisControlRecords(ControlRecords):
    """The runtime controls of one prefix on Redis; RedisStore hands its control calls here."""

    def __init__(self, connection: Connection, keys: Keys) -> None:
        self._redis = connection
        self._keys = keys
        self._edit = connection.script(EDIT_CONTROLS_SCRIPT)
        self._read_changes = connection.script(READ_CHANGES_SCRIPT)
        self._swap = connection.script(SWAP_DEFINITION_SCRIPT)
        self._ask = connection.script(ASK_TRIGGER_SCRIPT)
        self._take = connection.script(TAKE_TRIGGERS_SCRIPT)
        self._give_back = connection.script(GIVE_BACK_TRIGGERS_SCRIPT)

    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        check_values(values)
        args: list[str | int] = [name, {None: "", True: "present", False: "absent"}[require]]
        for kind in (DEFINITION, PAUSE):
            if kind not in values:
                args += ["keep", ""]
            else:
                value = values[kind]
                args += ["del", ""] if value is None else ["set", value]
        args.append(retention.GONE_TTL_MS)
        keys = [
            self._keys.version,
            self._keys.changes,
            self._keys.defs,
            self._keys.paused,
            self._keys.removed,
            self._keys.changes_floor,
        ]
        version = int(self._redis.run(self._edit, keys, args))
        return None if version < 0 else version

    def swap_definition(self, name: str, expected: str, definition: str) -> int | None:
        keys = [self._keys.version, self._keys.changes, self._keys.defs]
        version = int(self._redis.run(self._swap, keys, [name, expected, definition]))
        return None if version < 0 else version

    def changes(self, since: int) -> Changes:
        keys = [
            self._keys.version,
            self._keys.changes,
            self._keys.defs,
            self._keys.paused,
            self._keys.triggers,
            self._keys.changes_floor,
            self._keys.handed,
            self._keys.taken,
        ]
        reply = self._redis.run(self._read_changes, keys, [since])
        version, full, waiting, handed = (int(value) for value in reply[:4])
        records = {
            name: (definition or None, pause or None)
            for name, definition, pause in _triples(reply[4:])
        }
        return Changes(version, records, bool(full), waiting, handed)

    def controls_of(self, name: str) -> tuple[str | None, str | None]:
        with self._redis.talking():
            pipe = self._redis.client.pipeline(transaction=False)
            definition, pause = (
                pipe.hget(self._keys.defs, name).hget(self._keys.paused, name).execute()
            )
        return definition, pause

    def ask(self, trigger: str) -> int:
        return int(self._redis.run(self._ask, [self._keys.version, self._keys.triggers], [trigger]))

    def triggers(self) -> list[str]:
        with self._redis.talking():
            pipe = self._redis.client.pipeline(transaction=False)
            taken, waiting = (
                pipe.lrange(self._keys.taken, 0, -1).lrange(self._keys.triggers, 0, -1).execute()
            )
        return [*taken, *waiting]

    def take_triggers(self, token: str) -> Taken:
        keys = [self._keys.leader, self._keys.triggers, self._keys.taken, self._keys.taken_by]
        reply = list(self._redis.run(self._take, keys, [token]))
        if not reply:
            return Taken()
        return Taken([str(item) for item in reply[1:]], int(reply[0]))

    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        keys = [
            self._keys.leader,
            self._keys.triggers,
            self._keys.version,
            self._keys.taken,
            self._keys.taken_by,
        ]
        return bool(self._redis.run(self._give_back, keys, [token, *triggers]))


def _triples(flat: list[str]) -> Iterator[tuple[str, str, str]]:
    for i in range(0, len(flat) - 2, 3):
        yield flat[i], flat[i + 1], flat[i + 2]
