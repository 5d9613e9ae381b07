"""The Redis store on Sentinel and on Redis Cluster, against real servers this module starts, and
``min_replicas``: a claim that no replica holds is never published, so a failover cannot make a
second beat send the same slot."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from celery_hashbeat.store import StoreAuthError, StoreConfigError, StoreUnavailable, open_store
from celery_hashbeat.store.base import Store
from celery_hashbeat.store.sent import SlotClaim
from celery_hashbeat.store.values import RunGuard
from tests.support.redis_server import RedisProcess
from tests.support.redis_topologies import ClusterSetup, SentinelSetup, Server, wait_for

PREFIX = "replicated"
#: Any key under the prefix: every key shares its hash tag, so its slot.
TAGGED = "{" + PREFIX + "}:leader"
#: The lease, short so that a beat on the promoted replica gets it soon after the failover.
TTL_MS = 1500


@pytest.fixture
def opened() -> Iterator[Callable[..., Store]]:
    stores: list[Store] = []

    def open_(url: str) -> Store:
        stores.append(open_store(url, PREFIX, socket_timeout=2))
        return stores[-1]

    yield open_
    for store in stores:
        store.close()


def test_cluster_url_errors_name_the_fix() -> None:
    with pytest.raises(StoreConfigError, match=r"only database 0.*write /0"):
        open_store("redis+cluster://a:1,b:2/3")
    with pytest.raises(StoreConfigError, match="master_name is for Sentinel"):
        open_store("redis+cluster://a:1?master_name=x")
    with pytest.raises(StoreConfigError, match=r"redis\+cluster://u:\*\*\*@a:1.*min_replicas"):
        open_store("redis+cluster://u:secret@a:1?min_replicas=two")
    with pytest.raises(StoreConfigError, match="shorter than socket_timeout"):
        open_store("redis://a:1?min_replicas=1&min_replicas_timeout=5&socket_timeout=2")


def test_an_unreachable_cluster_is_unavailable_with_the_password_masked() -> None:
    store = open_store("redis+cluster://u:secret@127.0.0.1:1", socket_timeout=0.5)
    with pytest.raises(StoreUnavailable) as caught:
        store.ping()
    assert "secret" not in str(caught.value) and "***" in str(caught.value)
    store.close()


def test_a_refused_cluster_login_is_an_auth_error() -> None:
    with RedisProcess(password="right") as server:
        store = open_store(f"redis+cluster://:wrong@127.0.0.1:{server.port}", socket_timeout=1)
        with pytest.raises(StoreAuthError) as caught:
            store.ping()
        store.close()
    assert "wrong" not in str(caught.value)
    assert "redis+cluster://:***@" in str(caught.value)
    assert "redis+cluster://user:password@host:port" in str(caught.value)


@pytest.mark.slow
def test_every_call_of_the_protocol_on_a_cluster(opened: Callable[..., Store]) -> None:
    with ClusterSetup(TAGGED) as cluster:
        store = opened(cluster.url("min_replicas=1"))
        assert store.acquire("a:1:x", TTL_MS)
        lease = store.leader()
        assert lease is not None and lease.token == "a:1:x"
        guard = RunGuard("skip", "task-1", 5000)
        assert store.claim("a:1:x", {"e": (1000, "f"), "g": (5, "f")}, {"e": guard}) == {"e", "g"}
        assert store.running() == {"e": "task-1"}
        assert store.running(["e", "g"]) == {"e": "task-1"}
        assert store.unclaim("a:1:x", {"g": 5}) == {"g"}
        assert store.anchor("a:1:x", {"h": (7, "f")})["h"].anchor
        assert store.last_slots() == {"e": 1000}
        assert store.forget("a:1:x", ["h"])
        assert store.share("a:1:x", "roster", "1|[]") and store.shared("roster") == "1|[]"
        store.heartbeat("a:1:x", "leader", 5000)
        assert [beat.token for beat in store.beats()] == ["a:1:x"]
        assert store.renew_runs({"e": "task-1"}, 5000) == {"e"}
        assert store.release_run("e", "task-1") and store.hold_run("e", "task-2", 5000)
        backfilled = store.claim_slots("a:1:x", "e", [2000, 3000], claimer="r1")
        assert backfilled is not None
        assert store.unclaim_slots("a:1:x", "e", list(backfilled.claimed), claimer="r1") == set(
            backfilled.claimed
        )
        store.ask("t1")
        assert store.take_triggers("a:1:x") == ["t1"]
        again = store.take_triggers("a:1:x")  # the first take was never settled
        assert again == ["t1"] and again.recovered == 1 and store.changes(0).triggers == 1
        assert store.give_back_triggers("a:1:x", []) and store.triggers() == []
        assert store.renew("a:1:x", TTL_MS) and store.release("a:1:x")
        store.ping()


@pytest.mark.slow
def test_a_backfill_claim_no_replica_holds_is_not_sent_and_asked_again_is_its_claimers(
    opened: Callable[..., Store],
) -> None:
    """With min_replicas, a backfill's claim that no replica confirmed is refused as one whose
    reply was lost; asked again by the same claimer once the replica is back, its slots are
    its own (store/sent.py)."""
    with SentinelSetup() as setup:
        store = opened(setup.url("min_replicas=1&min_replicas_timeout=0.3"))
        assert store.acquire("a:1:x", TTL_MS)
        wait_for(lambda: confirmed(store, "a:1:x", {"e": (1000, "f")}), 10, "a claim confirmed")
        now_ms = int(time.time() * 1000)
        setup.replica.pause()
        try:
            with pytest.raises(StoreUnavailable, match="hashbeat_store_min_replicas"):
                store.claim_slots("a:1:x", "e", [now_ms, now_ms + 10], claimer="r1")
        finally:
            setup.replica.resume()
        answers: list[SlotClaim | None] = []

        def asked_again() -> bool:
            try:
                answers.append(store.claim_slots("a:1:x", "e", [now_ms, now_ms + 10], claimer="r1"))
            except StoreUnavailable:
                return False
            return True

        wait_for(asked_again, 10, "the claim asked again and confirmed")
        assert answers[-1] is not None and answers[-1].claimed == (now_ms, now_ms + 10)


def confirmed(store: Store, token: str, slots: dict[str, tuple[int, str]]) -> bool:
    """Whether a claim of ``slots`` was made and reached the replicas asked for."""
    try:
        return store.claim(token, slots) == set(slots)
    except StoreUnavailable:
        return False


def duplicate_after_failover(
    url: Callable[[str], str],
    master: Server,
    replica: Server,
    promoted: Callable[[], bool],
    opened: Callable[..., Store],
    min_replicas: int,
) -> int:
    """Beat a claims slot 2000 while the replica is frozen and cut off, so the claim cannot
    replicate; the master dies and the replica takes over; beat b, leading there, claims slot
    2000. The number of beats that publish slot 2000."""
    query = f"min_replicas={min_replicas}&min_replicas_timeout=0.3"
    a = opened(url(query))
    assert a.acquire("a:1:x", TTL_MS)
    # Retried as a beat retries it (a claim of its own is recognised): on a busy machine the
    # replica may take longer than 0.3 s to confirm the first write after it joined.
    wait_for(lambda: confirmed(a, "a:1:x", {"e": (1000, "f")}), 10, "the first claim confirmed")
    # Frozen, and its link dropped, so nothing written from now on waits in its socket buffer.
    replica.pause()
    master.client.client_kill_filter(_type="replica")
    sent = 0
    try:
        if a.claim("a:1:x", {"e": (2000, "f")}) == {"e"}:
            sent += 1
    except StoreUnavailable as exc:
        assert "hashbeat_store_min_replicas" in str(exc)
    master.kill()
    replica.resume()
    wait_for(promoted, 20, "the replica's promotion")
    # b asks for no replica: the promoted replica has none left to wait for.
    b = opened(url("min_replicas=0"))
    wait_for(lambda: b.acquire("b:2:x", TTL_MS), 10, "beat b taking the lease")
    if b.claim("b:2:x", {"e": (2000, "f")}) == {"e"}:
        sent += 1
    return sent


@pytest.mark.slow
@pytest.mark.parametrize("min_replicas", [0, 1])
def test_sentinel_failover_and_min_replicas(
    opened: Callable[..., Store], min_replicas: int
) -> None:
    with SentinelSetup() as setup:
        sent = duplicate_after_failover(
            setup.url,
            setup.master,
            setup.replica,
            setup.promoted,
            opened,
            min_replicas,
        )
    # Without min_replicas the slot the lost claim published goes out again; with it, once.
    assert sent == (2 if min_replicas == 0 else 1)


@pytest.mark.slow
@pytest.mark.parametrize("min_replicas", [0, 1])
def test_cluster_failover_and_min_replicas(opened: Callable[..., Store], min_replicas: int) -> None:
    with ClusterSetup(TAGGED) as setup:
        sent = duplicate_after_failover(
            setup.url,
            setup.holder,
            setup.replica,
            setup.promoted,
            opened,
            min_replicas,
        )
    assert sent == (2 if min_replicas == 0 else 1)
