"""``hashbeat plan``: what deploying the app's beat_schedule would change, before it is deployed
(docs/design.md §19). Exit 0 when nothing changes, 2 when something does, as
``terraform plan -detailed-exitcode``; ``--json`` for CI."""

from __future__ import annotations

import time
from typing import Any

import click

from celery_hashbeat.cli.loading import (
    app_option,
    app_settings,
    beat_schedule,
    chosen_store,
    connected,
    require_app,
)
from celery_hashbeat.cli.output import Failure, echo_json, json_option, stamp_iso
from celery_hashbeat.control import running
from celery_hashbeat.control.deploy import DeployPlan, EntryChange, compare
from celery_hashbeat.control.words import stamp
from celery_hashbeat.store import Store
from celery_hashbeat.store.values import BeatInfo

#: The exit code when the candidate changes something.
CHANGES = 2


class NothingRunning(Failure):
    """No beat recorded what it runs: there is nothing to compare with."""

    exit_code = 3


@click.command()
@app_option
@json_option
def plan(app_name: str | None, as_json: bool) -> None:
    """Show what deploying this app's beat_schedule would change in what the beats run now:
    entries added, removed, changed (with their next slots before and after, and hash values
    that move), and balanced entries moved by the others. The beats' side is what they recorded
    in the store under the schedule digest they run; the leader's is compared.

    Exit 0 when nothing changes, 2 when something does.

    \b
    Examples:
      hashbeat plan -A proj
      hashbeat plan -A proj --json > plan.json || test $? -eq 2
    """
    app = require_app(app_name)
    candidate = beat_schedule(app)
    settings = app_settings(app)
    url, prefix, options = chosen_store(app, None, None)
    now = int(time.time() * 1000)
    with connected(url, prefix, options) as store:
        beat = compared_beat(store)
        recorded = store.schedules().get(beat.schedule_digest)
        if recorded is None:
            raise NothingRunning(
                f"the beat {beat.token} runs schedule {beat.schedule_digest}, but did not record "
                f"it in the store: restart the beats with this release so they record it (a "
                f"configuration of more than {running.RECORD_AT_MOST:,} entries is not recorded)"
            )
        definitions = running.read(recorded)
        result = compare(app, settings, definitions, candidate, store, now, beat.schedule_digest)
    if as_json:
        echo_json(plan_json(result, beat))
    else:
        click.echo(plan_text(result, beat))
    if result.changed:
        raise click.exceptions.Exit(CHANGES)


def compared_beat(store: Store) -> BeatInfo:
    """The beat whose schedule the plan compares with: the leader, else the beat seen last."""
    beats = [beat for beat in store.beats() if beat.schedule_digest]
    if not beats:
        raise NothingRunning(
            f"no beat runs on this store ({store.url}): nothing to compare with; start one, or "
            f"check the app's hashbeat_store_url and hashbeat_key_prefix"
        )
    holder = store.leader()
    leading = [beat for beat in beats if holder is not None and beat.token == holder.token]
    return leading[0] if leading else max(beats, key=lambda beat: beat.last_seen_ms)


def plan_json(result: DeployPlan, beat: BeatInfo) -> dict[str, Any]:
    return {
        "changed": result.changed,
        "running": {"beat": beat.token, "digest": result.running_digest},
        "candidate": {"digest": result.candidate_digest},
        "entries": [change_json(change) for change in result.changes],
    }


def change_json(change: EntryChange) -> dict[str, Any]:
    return {
        "name": change.name,
        "change": change.change,
        "balanced": change.balanced,
        "fields": {
            key: {"before": before, "after": after}
            for key, (before, after) in change.fields.items()
        },
        "next_slots": {
            "before": [stamp_iso(slot) for slot in change.slots_before],
            "after": [stamp_iso(slot) for slot in change.slots_after],
        },
    }


SIGNS = {"added": "+", "removed": "-", "changed": "~", "moved": ">"}


def plan_text(result: DeployPlan, beat: BeatInfo) -> str:
    lines = [
        f"running:   schedule {result.running_digest} (beat {beat.token})",
        f"candidate: schedule {result.candidate_digest}",
    ]
    if not result.changed:
        lines.append("no changes: the candidate runs what the beats run")
        return "\n".join(lines)
    if result.unseen:
        lines.append(
            "changed, though every entry reads the same: a file an entry reads (an ical: "
            "calendar) changed since the beats read it; restarted, they run the candidate"
        )
        return "\n".join(lines)
    for change in result.changes:
        note = " (balanced)" if change.balanced else ""
        lines.append(f"{SIGNS[change.change]} {change.name}: {change.change}{note}")
        for key, (before, after) in change.fields.items():
            if key == "schedule" and "resolved" in change.fields:
                continue
            lines.append(f"    {key}: {before!r} -> {after!r}")
        if change.slots_before:
            lines.append("    next before: " + ", ".join(map(stamp, change.slots_before)))
        if change.slots_after:
            lines.append("    next after:  " + ", ".join(map(stamp, change.slots_after)))
    counts = {kind: sum(c.change == kind for c in result.changes) for kind in SIGNS}
    lines.append("plan: " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    return "\n".join(lines)
