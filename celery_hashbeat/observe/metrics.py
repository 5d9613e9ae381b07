"""The beat's Prometheus metrics (docs/design.md §14), in a registry of its own.

Each scheduler has its own registry, so two schedulers in one process (tests, an embedded beat)
never collide, and /metrics shows this beat's numbers only. Per-entry counters carry an ``entry``
label only when ``hashbeat_metrics_entry_labels`` is on: otherwise 100,000 entries would be
100,000 series. The lateness histogram never has one.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

#: Seconds from a slot to its publish: from "on time" to "caught up after an outage".
LATENESS_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    float("inf"),
)


class Metrics:
    """Every metric the beat exports, updated from the tick (and the publish thread)."""

    def __init__(self, entry_labels: bool = False) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.entry_labels = entry_labels
        per_entry = ("entry",) if entry_labels else ()
        registry = self.registry
        self.leader = Gauge(
            "hashbeat_leader", "1 while this beat holds the lease, else 0", registry=registry
        )
        self.leader_changes = Counter(
            "hashbeat_leader_changes",
            "Times this beat became leader or stopped being leader",
            registry=registry,
        )
        self.sent = Counter(
            "hashbeat_sent", "Slots this beat published", per_entry, registry=registry
        )
        self.skipped = Counter(
            "hashbeat_skipped",
            "Slots not sent, by reason (overlap: the previous run was still queued or running)",
            ("reason", *per_entry),
            registry=registry,
        )
        self.missed = Counter(
            "hashbeat_missed",
            "Slots the catch-up policy left out after an outage or a leader change",
            per_entry,
            registry=registry,
        )
        self.lateness = Histogram(
            "hashbeat_send_lateness_seconds",
            "Publish time minus slot time",
            buckets=LATENESS_BUCKETS,
            registry=registry,
        )
        self.store_errors = Counter(
            "hashbeat_store_errors",
            "Store calls that failed or did not answer in time",
            registry=registry,
        )
        self.publish_errors = Counter(
            "hashbeat_publish_errors",
            "Publishes that failed or may not have reached the broker",
            registry=registry,
        )
        self.entries = Gauge("hashbeat_entries", "Entries in the schedule", registry=registry)
        self.tick_age = Gauge(
            "hashbeat_seconds_since_tick",
            "Seconds since the tick loop last turned (what /livez judges)",
            registry=registry,
        )
        # The promises of entries that make them (docs/design.md §19). Without per-entry
        # labels each gauge shows the entry doing worst: the oldest last success, the longest
        # run of failures, so that one alert rule still fires for any entry.
        self.last_success = Gauge(
            "hashbeat_entry_last_success_timestamp_seconds",
            "When the entry's task last succeeded (epoch seconds), for entries with promises",
            per_entry,
            registry=registry,
        )
        self.consecutive_failures = Gauge(
            "hashbeat_entry_consecutive_failures",
            "Failures of the entry's task in a row since its last success",
            per_entry,
            registry=registry,
        )
        self.late = Counter(
            "hashbeat_entry_late",
            "Sends later after their slot than the entry's max_lateness",
            per_entry,
            registry=registry,
        )
        # What the alert rules compare those with (docs/alerts.yml).
        self.alert_after = Gauge(
            "hashbeat_entry_alert_after_failures",
            "The entry's alert_after_failures: its alert fires at this many failures in a row",
            per_entry,
            registry=registry,
        )
        self.interval = Gauge(
            "hashbeat_entry_interval_seconds",
            "Seconds between the entry's next two slots, for the entries with promises",
            per_entry,
            registry=registry,
        )
        self._was_leader = False

    def set_leader(self, leader: bool) -> None:
        if leader != self._was_leader:
            self._was_leader = leader
            self.leader.set(1 if leader else 0)
            self.leader_changes.inc()

    def count_sent(self, entry: str, lateness_s: float) -> None:
        (self.sent.labels(entry) if self.entry_labels else self.sent).inc()
        self.lateness.observe(lateness_s)

    def count_skipped(self, entry: str, reason: str) -> None:
        labels = (reason, entry) if self.entry_labels else (reason,)
        self.skipped.labels(*labels).inc()

    def count_missed(self, entry: str, count: int) -> None:
        (self.missed.labels(entry) if self.entry_labels else self.missed).inc(count)

    def count_late(self, entry: str) -> None:
        (self.late.labels(entry) if self.entry_labels else self.late).inc()

    def set_outcomes(self, outcomes: Mapping[str, tuple[int, float | None]]) -> None:
        """Entry -> (failures in a row, last success in epoch seconds or None if unknown)."""
        if self.entry_labels:
            for entry, (failures, success_s) in outcomes.items():
                self.consecutive_failures.labels(entry).set(failures)
                if success_s is not None:
                    self.last_success.labels(entry).set(success_s)
            return
        if outcomes:
            self.consecutive_failures.set(max(f for f, _ in outcomes.values()))
            known = [s for _, s in outcomes.values() if s is not None]
            if known:
                self.last_success.set(min(known))

    def set_promises(self, promises: Mapping[str, tuple[int | None, float | None]]) -> None:
        """Entry -> (its alert_after_failures, its interval in seconds), None where unknown;
        without per-entry labels, the smallest of each (the first alert to fire)."""
        gauges = (self.alert_after, self.interval)
        if self.entry_labels:
            for entry, values in promises.items():
                for gauge, value in zip(gauges, values, strict=True):
                    if value is not None:
                        gauge.labels(entry).set(value)
            return
        for index, gauge in enumerate(gauges):
            known = [float(v) for values in promises.values() if (v := values[index]) is not None]
            if known:
                gauge.set(min(known))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return bytes(generate_latest(self.registry))
