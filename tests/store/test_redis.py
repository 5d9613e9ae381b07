"""What only the Redis store has: a server that can die, hang, refuse us, or sit behind Sentinel."""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from celery_hashbeat.store import (
    RedisStore,
    StoreAuthError,
    StoreConfigError,
    StoreUnavailable,
    open_store,
)
from celery_hashbeat.store.redis.scripts.claims import CLAIM_SCRIPT
from celery_hashbeat.store.redis.scripts.lease import RENEW_SCRIPT
from celery_hashbeat.store.values import Fence
from tests.support.redis_server import RedisProcess, free_port, redis_server_binary

LONG = 60_000


def test_every_key_shares_the_prefix_hash_tag(redis_url: str, key_prefix: str) -> None:
    store = RedisStore(redis_url, key_prefix)
    try:
        assert store.acquire("a", LONG)
        store.claim("a", {"x": (1, "fp")})
        store.heartbeat("a", "leader", LONG)
    finally:
        store.close()
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        keys = set(client.scan_iter(match=f"*{key_prefix}*", count=1000))
        names = ("leader", "fired", "runs", "beats", "sent", "sent-since")
        assert keys == {f"{{{key_prefix}}}:{name}" for name in names}
        assert len({key_slot(key.encode()) for key in keys}) == 1
        assert client.hgetall(f"{{{key_prefix}}}:fired") == {"x": "1|a||fp"}
        assert client.hgetall(f"{{{key_prefix}}}:runs") == {"x": "1"}
        assert client.zrange(f"{{{key_prefix}}}:sent", 0, -1, withscores=True) == [("1|x", 1.0)]
    finally:
        client.close()


def test_scripts_are_sent_by_sha_and_reloaded_after_a_flush(private_redis: RedisProcess) -> None:
    store = RedisStore(private_redis.url)
    client = redis.Redis.from_url(private_redis.url)
    try:
        assert store.acquire("a", LONG)
        assert store.renew("a", LONG)
        store.claim("a", {"x": (1, "fp")})
        shas = [client.register_script(text).sha for text in (RENEW_SCRIPT, CLAIM_SCRIPT)]
        assert client.script_exists(*shas) == [True, True]
        client.script_flush()
        assert store.renew("a", LONG)
        assert store.claim("a", {"x": (2, "fp")}) == {"x"}
    finally:
        client.close()
        store.close()


def test_a_killed_server_is_unavailable_then_a_restarted_one_serves_the_same_store(
    private_redis: RedisProcess,
) -> None:
    store = open_store(private_redis.url, socket_timeout=0.5)
    try:
        assert store.acquire("a", LONG)
        private_redis.kill()
        for call in (store.ping, lambda: store.acquire("a", LONG), store.beats):
            with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{private_redis.port}"):
                call()
        private_redis.start()
        store.ping()
        assert store.acquire("b", LONG)  # the restarted server kept nothing
        assert store.claim("b", {"x": (1, "fp")}) == {"x"}
    finally:
        store.close()


def test_a_paused_server_is_unavailable_within_the_socket_timeout(
    private_redis: RedisProcess,
) -> None:
    store = open_store(f"{private_redis.url}?socket_timeout=0.3")
    try:
        store.ping()
        private_redis.pause()
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="not answering"):
                store.claim("a", {"x": (1, "fp")})
            # Without the option (3 s) or with redis-py's retries this would take far longer.
            assert time.monotonic() - started < 2.5
        finally:
            private_redis.resume()
        store.ping()
    finally:
        store.close()


@pytest.mark.parametrize(
    "credentials", ["", ":wrong-battery-7e1@", "nobody:wrong-battery-7e1@", "default:@"]
)
def test_wrong_credentials_raise_auth_error_without_the_password(credentials: str) -> None:
    with RedisProcess(password="correct-horse-9f3") as server:
        url = f"redis://{credentials}127.0.0.1:{server.port}/0"
        store = open_store(url)
        try:
            with pytest.raises(StoreAuthError) as raised:
                store.acquire("a", LONG)
        finally:
            store.close()
        message = str(raised.value)
        assert "hashbeat_store_url" in message
        assert f"127.0.0.1:{server.port}" in message
        assert "wrong-battery-7e1" not in message
        assert "wrong-battery-7e1" not in store.url
        assert "correct-horse-9f3" not in message
        good = open_store(server.url)
        try:
            assert good.acquire("a", LONG)
        finally:
            good.close()


@pytest.mark.parametrize(
    ("url", "options", "complaint"),
    [
        ("redis://127.0.0.1:notaport/0", {}, "host:port"),
        ("redis://:s3cret-pw@127.0.0.1:99999/0", {}, "host:port"),
        ("redis://127.0.0.1:6379/zero", {}, "database"),
        ("redis://127.0.0.1:6379/0?socket_timeout=soon", {}, "socket_timeout"),
        ("redis://127.0.0.1:6379/0", {"socket_timeout": -1}, "socket_timeout"),
        ("redis://127.0.0.1:6379/0?bogus=1", {}, "unknown option"),
        ("redis://127.0.0.1:6379/0?a", {}, "malformed"),
        ("redis://a:6379,b:6379/0", {}, "several hosts"),
        ("redis://127.0.0.1:6379/0?ssl_cert_reqs=none", {}, "rediss://"),
        ("redis://127.0.0.1:6379/0", {"master_name": "m"}, "Sentinel"),
        ("rediss://127.0.0.1:6379/0?ssl_cert_reqs=maybe", {}, "ssl_cert_reqs"),
        ("rediss://127.0.0.1:6379/0?ssl_ca_certs=/no/such/ca.pem", {}, "not a file"),
        ("rediss://127.0.0.1/0", {"ssl_check_hostname": "perhaps"}, "ssl_check_hostname"),
        ("redis+sentinel://127.0.0.1:26379/0", {}, "master_name"),
        ("redis+sentinel://h:1/0?master_name=m", {"sentinel_kwargs": "x"}, "sentinel_kwargs"),
        ("redis+sentinel://h:1/0?master_name=m", {"transport_options": 3}, "transport_options"),
        ("redis://[::1/0", {}, "not a URL"),
        ("memcached://127.0.0.1/0", {}, "redis://, rediss://, redis+sentinel://"),
        ("", {}, "sqlite:///path"),
    ],
)
def test_malformed_urls_and_options_are_config_errors(
    url: str, options: dict[str, object], complaint: str
) -> None:
    with pytest.raises(StoreConfigError, match="hashbeat_store_url") as raised:
        open_store(url, **options)
    assert complaint in str(raised.value)
    assert "s3cret-pw" not in str(raised.value)


def test_transport_options_supply_only_what_the_store_knows(redis_url: str) -> None:
    options = {"socket_timeout": 0.7, "visibility_timeout": 3600, "global_keyprefix": "x"}
    store = open_store(redis_url, transport_options=options, socket_connect_timeout=0.9)
    try:
        store.ping()
    finally:
        store.close()


class SentinelProcess:
    """A redis-server in Sentinel mode watching one master, as ``mymaster``."""

    def __init__(self, master: RedisProcess, directory: Path) -> None:
        self.port = free_port()
        config = directory / "sentinel.conf"
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
        )
        log = (directory / "sentinel.log").open("ab")
        self.process = subprocess.Popen(
            [redis_server_binary(), str(config), "--sentinel"], stdout=log, stderr=log
        )
        client = redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if client.sentinel_get_master_addr_by_name("mymaster"):
                    break
            except redis.RedisError:
                time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"sentinel did not start; see {directory}/sentinel.log")
        client.close()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=5)


@pytest.fixture
def sentinel(private_redis: RedisProcess, tmp_path: Path) -> Iterator[SentinelProcess]:
    process = SentinelProcess(private_redis, tmp_path)
    yield process
    process.stop()


def test_sentinel_url_finds_the_master(
    sentinel: SentinelProcess, private_redis: RedisProcess
) -> None:
    urls = [
        (f"redis+sentinel://127.0.0.1:{free_port()},127.0.0.1:{sentinel.port}/0", "mymaster"),
        (f"redis+sentinel://127.0.0.1:{sentinel.port}/0?master_name=mymaster", None),
    ]
    for slot, (url, master) in enumerate(urls, start=1):
        options = {} if master is None else {"transport_options": {"master_name": master}}
        store = open_store(url, "sentinel-test", **options)
        try:
            assert store.acquire(url, LONG)
            assert store.claim(url, {"x": (slot, "fp")}) == {"x"}
            assert store.release(url)
        finally:
            store.close()
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    try:
        assert client.hgetall("{sentinel-test}:fired").keys() == {"x"}
        assert client.hget("{sentinel-test}:fired", "x").startswith("2|")
    finally:
        client.close()


def test_sentinel_without_that_master_is_unavailable(sentinel: SentinelProcess) -> None:
    store = open_store(f"redis+sentinel://127.0.0.1:{sentinel.port}/0?master_name=nobody")
    try:
        with pytest.raises(StoreUnavailable, match="redis\\+sentinel://"):
            store.ping()
    finally:
        store.close()


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A TLS-only redis-server with a self-signed certificate for 127.0.0.1, and that cert."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    port = free_port()
    server = subprocess.Popen(
        [redis_server_binary(), "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(cert),
         "--tls-auth-clients", "no", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while server.poll() is None and time.monotonic() < deadline:
            client = redis.Redis(port=port, ssl=True, ssl_cert_reqs="none", socket_timeout=0.5)
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
            finally:
                client.close()
        else:
            pytest.skip("this redis-server has no TLS support")
        yield port, cert
    finally:
        server.terminate()
        server.wait(timeout=5)


def test_rediss_verifies_the_server_as_configured(tls_redis: tuple[int, Path]) -> None:
    port, cert = tls_redis
    trusted = [
        f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={cert}",
        f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=CERT_REQUIRED&ssl_ca_certs={cert}",
        f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none",
    ]
    for url in trusted:
        store = open_store(url, "tls-test")
        try:
            assert store.acquire(url, LONG)
            assert store.release(url)
        finally:
            store.close()
    untrusted = open_store(f"rediss://127.0.0.1:{port}/0?socket_timeout=1")
    try:
        with pytest.raises(StoreUnavailable, match="certificate"):
            untrusted.ping()
    finally:
        untrusted.close()


def test_unreadable_and_legacy_fences(
    redis_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A value written by hand is logged once and skipped, and the next claim overwrites it; a
    bare slot (release 0.1) reads as a claim by an unknown beat."""
    store = RedisStore(redis_url, key_prefix)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        client.hset(f"{{{key_prefix}}}:fired", mapping={"bad": "soon", "old": "1700000000000"})
        with caplog.at_level(logging.WARNING, logger="celery_hashbeat.store"):
            assert store.fences() == {"old": Fence(1_700_000_000_000, "-", None)}
            assert store.fences(["bad"]) == {}
        assert len([r for r in caplog.records if "'soon'" in r.getMessage()]) == 1
        assert store.acquire("a", LONG)
        assert store.claim("a", {"bad": (7, "fp"), "old": (1_700_000_000_000, "fp")}) == {"bad"}
        assert store.anchor("a", {"old": (9, "fp")}) == {"old": Fence(1_700_000_000_000, "-", None)}
        assert store.last_slots() == {"bad": 7, "old": 1_700_000_000_000}
    finally:
        client.close()
        store.close()
