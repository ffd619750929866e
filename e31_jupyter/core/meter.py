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


def earlier_runs_s(job: Mapping[str, Any]) -> float:
    """How long a resumed job's earlier runs (``attempts``) ran: each from its start until its
    kernel ended (``released_at``), or it ended."""
    total = 0.0
    for run in job.get("attempts") or ():
        ends = [run[key] for key in ("released_at", "finished_at") if run.get(key) is not None]
        if run.get("started_at") is not None and ends:
            total += min(ends) - run["started_at"]
    return total


def attempt(job: Mapping[str, Any]) -> dict:
    """What a job's run that has ended keeps of itself once the job is resumed: its hold (what
    the meter counts) and how it ended."""
    keys = ("started_at", "released_at", "finished_at", "granted", "returned", "state", "reason")
    return {key: job.get(key) for key in keys} | {"state": str(job.get("state"))}


def _held(job: Mapping[str, Any], now: float, since: float | None, until: float | None) -> float:
    if job.get("started_at") is None:
        return 0.0  # queued (or never started): waiting is free
    start = job["started_at"]
    ends: list[float] = [job[key] for key in ("released_at", "finished_at") if job.get(key) is not None]
    end = min(ends) if ends else now
    held = len(job["granted"]) * _overlap(start, end, since, until)
    # GPUs given back while it ran (idle): held from its start until then
    return held + sum(_overlap(start, min(r["at"], end), since, until) for r in job.get("returned") or ())


def _overlap(start: float, end: float, since: float | None, until: float | None) -> float:
    if since is not None:
        start = max(start, since)
    if until is not None:
        end = min(end, until)
    return max(0.0, end - start)


def used_seconds(job: Mapping[str, Any], now: float, since: float | None, until: float | None) -> float | None:
    """GPU-seconds the job used (utilisation-weighted, from its GPUs' readings) within the window:
    its whole use in the share of its hold that falls in the window. None: not measured."""
    used = job.get("used_gpu_s")
    if used is None:
        return None
    held = gpu_seconds(job, now)
    return used * gpu_seconds(job, now, since, until) / held if held > 0 else 0.0


def reading(seconds: float, rate: float, currency: str, used: float | None = None) -> dict:
    """A meter reading as shown to people: GPU-seconds, GPU-hours and cost, and the GPU-hours
    used of those held where the GPUs were read (None: not measured)."""
    hours = seconds / 3600.0
    return {
        "gpu_seconds": round(seconds, 3),
        "gpu_hours": round(hours, 6),
        "cost": round(hours * rate, 4),
        "currency": currency,
        "used_gpu_hours": round(used / 3600.0, 6) if used is not None else None,
    }


def summary(
    jobs: Sequence[Mapping[str, Any]], since: float, until: float, now: float, rate: float, currency: str
) -> dict:
    """Usage in [since, until], in total, by user and by team: held, and used where measured."""
    total = _Tally()
    by_user: defaultdict[str, _Tally] = defaultdict(_Tally)
    by_team: defaultdict[str, _Tally] = defaultdict(_Tally)
    for job in jobs:
        held, used = gpu_seconds(job, now, since, until), used_seconds(job, now, since, until)
        for tally in (total, by_user[job["owner"]], by_team[job["team"] or "(no team)"]):
            tally.add(held, used)
    return {
        **total.reading(rate, currency),
        "by_user": {k: v.reading(rate, currency) for k, v in sorted(by_user.items())},
        "by_team": {k: v.reading(rate, currency) for k, v in sorted(by_team.items())},
    }


class _Tally:
    """GPU-seconds held, and used where measured (None while nothing was)."""

    def __init__(self) -> None:
        self.held = 0.0
        self.used: float | None = None

    def add(self, held: float, used: float | None) -> None:
        self.held += held
        if used is not None:
            self.used = (self.used or 0.0) + used

    def reading(self, rate: float, currency: str) -> dict:
        return reading(self.held, rate, currency, self.used)
