"""The meter: GPU-seconds held, from grant to release. The only thing that is charged."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any


def gpu_seconds(job: Mapping[str, Any], now: float, since: float | None = None, until: float | None = None) -> float:
    """GPUs granted x time held, optionally clipped to the window [since, until]. A job holds
    its GPUs from its start until its kernel ends (``released_at``: its reports and files are made
    after that, free), or until it ends, whichever comes first. A resumed job's meter is the sum
    of its attempts: the earlier ones (``attempts``) and the current one."""
    earlier = sum(_held(attempt, now, since, until) for attempt in job.get("attempts") or ())
    return earlier + _held(job, now, since, until)


def attempt(job: Mapping[str, Any]) -> dict:
    """What a job's run that has ended keeps of itself once the job is resumed: its hold (what
    the meter counts) and how it ended."""
    keys = ("started_at", "released_at", "finished_at", "granted", "state", "reason")
    return {key: job.get(key) for key in keys} | {"state": str(job.get("state"))}


def _held(job: Mapping[str, Any], now: float, since: float | None, until: float | None) -> float:
    if job.get("started_at") is None:
        return 0.0  # queued (or never started): waiting is free
    start = job["started_at"]
    ends: list[float] = [job[key] for key in ("released_at", "finished_at") if job.get(key) is not None]
    end = min(ends) if ends else now
    if since is not None:
        start = max(start, since)
    if until is not None:
        end = min(end, until)
    return len(job["granted"]) * max(0.0, end - start)


def reading(seconds: float, rate: float, currency: str) -> dict:
    """A meter reading as shown to people: GPU-seconds, GPU-hours and cost."""
    hours = seconds / 3600.0
    return {
        "gpu_seconds": round(seconds, 3),
        "gpu_hours": round(hours, 6),
        "cost": round(hours * rate, 4),
        "currency": currency,
    }


def summary(
    jobs: Sequence[Mapping[str, Any]], since: float, until: float, now: float, rate: float, currency: str
) -> dict:
    """Usage in [since, until], in total, by user and by team."""
    by_user: dict[str, float] = defaultdict(float)
    by_team: dict[str, float] = defaultdict(float)
    total = 0.0
    for job in jobs:
        seconds = gpu_seconds(job, now, since, until)
        total += seconds
        by_user[job["owner"]] += seconds
        by_team[job["team"] or "(no team)"] += seconds
    return {
        **reading(total, rate, currency),
        "by_user": {k: reading(v, rate, currency) for k, v in sorted(by_user.items())},
        "by_team": {k: reading(v, rate, currency) for k, v in sorted(by_team.items())},
    }
