"""Real ``celery beat`` processes with their HTTP endpoints on, and a client that calls them the way
Prometheus and the kubelet do: an HTTP GET from another process."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.processes import Process, ProcessGroup, celery_beat_args
from tests.support.redis_server import free_port

APP = "tests.chaos.app"


class Beat:
    """One beat process and its HTTP port."""

    def __init__(self, process: Process, port: int) -> None:
        self.process = process
        self.port = port

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, bytes]:
        """The status code and body of ``GET path``; 0 when nothing answers."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())
        except (OSError, TimeoutError):
            return 0, b""

    def code(self, path: str) -> int:
        """What a Kubernetes probe looks at: the status code only."""
        return self.get(path)[0]

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, parsed by prometheus_client's own parser, keyed by name and
        labels as Prometheus prints them (``hashbeat_skipped_total{reason="overlap"}``)."""
        code, body = self.get("/metrics")
        if code != 200:
            return {}
        samples: dict[str, float] = {}
        for family in text_string_to_metric_families(body.decode()):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
        return samples

    def status(self) -> dict[str, Any]:
        code, body = self.get("/status")
        return json.loads(body) if code == 200 else {}


class Beats:
    """Beats of ``tests.chaos.app`` on one store, each serving HTTP on a port of its own."""

    def __init__(
        self,
        processes: ProcessGroup,
        store_url: str,
        broker_url: str = "memory://",
        schedule: str = "chaos",
        ttl: float = 3.0,
        **env: str,
    ) -> None:
        self.processes = processes
        self.workdir: Path = processes.workdir
        self.prefix = f"hashbeat-observe-{uuid.uuid4().hex[:8]}"
        self.env = {
            "HASHBEAT_CHAOS_BROKER": broker_url,
            "HASHBEAT_CHAOS_STORE": store_url,
            "HASHBEAT_CHAOS_PREFIX": self.prefix,
            "HASHBEAT_CHAOS_TTL": str(ttl),
            "HASHBEAT_CHAOS_CATCH_UP": "latest",
            "HASHBEAT_CHAOS_SCHEDULE": schedule,
            **env,
        }
        self.started = 0

    def start(self, port: int | None = None) -> Beat:
        self.started += 1
        name = f"beat-{self.started}"
        port = free_port() if port is None else port
        env = {**self.env, "HASHBEAT_CHAOS_HTTP_PORT": str(port)}
        process = self.processes.start(name, celery_beat_args(APP, self.workdir, name), env)
        return Beat(process, port)

    def logs(self) -> str:
        return "\n".join(
            f"--- {process!r}\n{process.log_tail(40)}" for process in self.processes.started
        )
