"""What ``ScheduleAdmin.trigger`` hands back: the new run's task id, with what became of the
request in words (docs/design.md §13)."""

from __future__ import annotations

from typing import Any


class Triggered(str):
    """A trigger's task id (the ``str`` itself), with what became of the request: the entry's
    ``overlap``, the task whose run held the entry's run lease when it was asked (``running``,
    or None), whether it was ``forced`` past the guard, and a ``note`` in words."""

    __slots__ = ("entry", "forced", "note", "overlap", "running")
    entry: str
    overlap: str
    running: str | None
    forced: bool
    note: str

    def __new__(
        cls, task_id: str, entry: str, overlap: str, running: str | None, forced: bool
    ) -> Triggered:
        triggered = super().__new__(cls, task_id)
        triggered.entry, triggered.overlap = entry, overlap
        triggered.running, triggered.forced = running, forced
        triggered.note = _trigger_note(overlap, running, forced)
        return triggered

    def as_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "task_id": str(self),
            "overlap": self.overlap,
            "running": self.running,
            "forced": self.forced,
            "note": self.note,
        }


def _trigger_note(overlap: str, running: str | None, forced: bool) -> str:
    if forced and running:
        return f"forced: it runs beside task {running}, which holds the run lease"
    if running is None:
        return "queued: the leader sends it within a second"
    if overlap == "buffer_one":
        return f"queued: it waits for task {running} to end (overlap buffer_one)"
    if overlap == "replace":
        return f"queued: the leader revokes task {running} and sends it (overlap replace)"
    return f"queued beside task {running} (overlap {overlap})"
