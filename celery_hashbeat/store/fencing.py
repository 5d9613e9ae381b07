"""The decisions of a claim, a give-back and an anchor (docs/design.md §5), for the stores that
keep fences as rows (SQLite, PostgreSQL).

Each store reads the fences inside its own transaction, asks here what to do, and writes what it
is told in the same transaction; the rules themselves live here once. (The Redis store makes the
same decisions inside its Lua scripts, which cannot call Python.)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from celery_hashbeat.store.values import Claimed, Fence, RunGuard

#: A fence row as the row stores keep it: entry, slot, token, previous, fingerprint, runs.
Row = tuple[str, int, str, str, str, int]


@dataclass
class ClaimPlan:
    """What a claim does: the entries it claims (with the run leases found held), the fence rows
    to write, the run leases to grant, and the claims of other beats it moves past (kept so that
    their claimers can still hand them over)."""

    claimed: Claimed = field(default_factory=Claimed)
    rows: list[Row] = field(default_factory=list)
    grants: list[tuple[str, RunGuard]] = field(default_factory=list)
    moved_past: list[tuple[str, int, str]] = field(default_factory=list)


def plan_claim(
    token: str,
    slots: Mapping[str, tuple[int, str]],
    runs: Mapping[str, RunGuard],
    stored: Mapping[str, Fence],
    holders: Mapping[str, str],
    recorded: Collection[tuple[str, int]] = (),
) -> ClaimPlan:
    """The claim of ``slots`` (entry -> (slot, fingerprint)) by the lease holder ``token``, over
    the ``stored`` fences, the live run-lease ``holders`` (entry -> task id) and the (entry,
    slot) pairs ``recorded`` as sent (store/sent.py: a backfill sent them). Each row written is
    a slot to record."""
    plan = ClaimPlan()
    for entry, (slot, fingerprint) in slots.items():
        fence = stored.get(entry)
        mine = _mine(token, slot, fence)
        if not (mine or _later(slot, fence)):
            continue
        if not mine and (entry, slot) in recorded:
            continue
        guard = runs.get(entry)
        holder = "" if guard is None else holders.get(entry, "")
        if guard is not None and holder == guard.task_id:
            holder = ""
        if guard is not None and (not holder or guard.mode == "replace"):
            plan.grants.append((entry, guard))
        if holder:
            plan.claimed.held[entry] = holder
            if guard is not None and guard.mode == "buffer_one":
                continue
        plan.claimed.add(entry)
        if mine:
            continue  # a retry of its own claim: already written, already counted
        previous = "" if fence is None else f"{'a' if fence.anchor else ''}{fence.slot}"
        runs_before = 0 if fence is None else fence.runs
        plan.rows.append((entry, int(slot), token, previous, fingerprint, runs_before + 1))
        if fence is not None and fence.token not in ("", "-", token):
            plan.moved_past.append((entry, fence.slot, fence.token))
    return plan


def _mine(token: str, slot: int, fence: Fence | None) -> bool:
    """The fence is this very slot claimed by this very token: a retry after a lost reply."""
    return fence is not None and fence.slot == slot and fence.token == token


def _later(slot: int, fence: Fence | None) -> bool:
    return fence is None or slot > fence.slot


def fresh(
    token: str, slots: Mapping[str, tuple[int, str]], stored: Mapping[str, Fence]
) -> list[tuple[str, int]]:
    """The (entry, slot) pairs of ``slots`` that a claim would newly record as sent, if nobody
    recorded them: those later than their fence, not the caller's own claim retried."""
    return [
        (entry, int(slot))
        for entry, (slot, _) in slots.items()
        if _later(slot, stored.get(entry)) and not _mine(token, slot, stored.get(entry))
    ]


def plan_give_back(
    token: str, slots: Mapping[str, int], stored: Mapping[str, tuple[Fence, str]]
) -> tuple[set[str], list[Row]]:
    """The give-back of ``slots`` (entry -> slot) by ``token``, over the ``stored`` fences with
    their ``previous``: the entries given back (their rows are deleted) and the rows that restore
    what each had before (an entry with nothing before stays deleted)."""
    given: set[str] = set()
    restored: list[Row] = []
    for entry, (fence, previous) in stored.items():
        if entry not in slots or fence.token != token or fence.slot != slots[entry]:
            continue
        given.add(entry)
        if previous:
            anchor = previous.startswith("a")
            slot = int(previous.removeprefix("a"))
            count = max(fence.runs - 1, 0)
            restored.append(
                (entry, slot, "" if anchor else "-", "", fence.fingerprint or "", count)
            )
    return given, restored


def plan_anchors(
    anchors: Mapping[str, tuple[int, str]], stored: dict[str, Fence]
) -> tuple[dict[str, Fence], list[Row]]:
    """The anchors of ``anchors`` (entry -> (instant, fingerprint)) over the ``stored`` fences:
    every given entry's fence afterwards, and the rows to write for those anchored anew."""
    fences: dict[str, Fence] = {}
    rows: list[Row] = []
    for entry, (instant, fingerprint) in anchors.items():
        fence = stored.get(entry)
        if fence is None or fence.fingerprint not in (None, fingerprint):
            count = 0 if fence is None else fence.runs
            fence = Fence(int(instant), "", fingerprint, count)
            rows.append((entry, int(instant), "", "", fingerprint, count))
        fences[entry] = fence
    return fences, rows


def plan_hand_over(
    token: str, wanted: list[tuple[str, int]], stored: Mapping[str, Fence]
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """How each (entry, slot) that ``token`` hands over is proved: the pairs whose entry's fence
    is that very claim (the store clears the fence's claimer, using the proof up), and the rest,
    which only a kept claim (moved past by another beat's) can prove."""
    by_fence: list[tuple[str, int]] = []
    by_kept: list[tuple[str, int]] = []
    for entry, slot in wanted:
        fence = stored.get(entry)
        if fence is not None and fence.token == token and fence.slot == slot:
            by_fence.append((entry, slot))
            stored = {**stored, entry: Fence(slot, "-", fence.fingerprint, fence.runs)}
        else:
            by_kept.append((entry, slot))
    return by_fence, by_kept
