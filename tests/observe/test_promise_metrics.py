"""The promise metrics (docs/design.md §19): a send later than the entry's max_lateness counts as
late; without per-entry labels the gauges show the entry doing worst."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from celery_hashbeat.observe.metrics import Metrics
from celery_hashbeat.observe.watch import Watch


def samples(metrics: Metrics) -> dict[str, float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return found


def test_a_send_later_than_max_lateness_counts_as_late() -> None:
    metrics = Metrics(entry_labels=True)
    watch = Watch("host:1:a", metrics)
    watch.late_after_ms = {"report": 5_000}
    watch.sent("report", 1_000_000, "id-1", 1_000_000 + 4_000)
    watch.sent("report", 1_060_000, "id-2", 1_060_000 + 6_000)
    watch.sent("other", 1_060_000, "id-3", 1_060_000 + 60_000)  # promises nothing
    found = samples(metrics)
    assert found['hashbeat_entry_late_total{entry="report"}'] == 1
    assert 'hashbeat_entry_late_total{entry="other"}' not in found


def test_without_entry_labels_the_gauges_show_the_entry_doing_worst() -> None:
    metrics = Metrics(entry_labels=False)
    metrics.set_outcomes({"a": (0, 1_700.0), "b": (4, 1_500.0), "c": (2, None)})
    found = samples(metrics)
    assert found["hashbeat_entry_consecutive_failures"] == 4
    assert found["hashbeat_entry_last_success_timestamp_seconds"] == 1_500.0
