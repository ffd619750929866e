"""Scheduling policies, pure: (queued jobs, running jobs, GPUs, now) -> which to start, which expire.

No clock and no I/O here: the live queue and the trace simulator run exactly this code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Pending:
    id: str
    gpus: int
    submitted_at: float
    max_runtime: float  # the enforced limit
    estimate: float  # expected hold time (expected_runtime, else a declared max_runtime, else 0)
    deadline: float | None = None


@dataclass(frozen=True)
class Running:
    id: str
    gpus: int
    started_at: float
    max_runtime: float

    @property
    def ends_by(self) -> float:
        return self.started_at + self.max_runtime


@dataclass
class Decision:
    start: list[str] = field(default_factory=list)
    expire: list[tuple[str, str]] = field(default_factory=list)  # (job id, reason)


def edf_order(pending: list[Pending]) -> list[Pending]:
    """Earliest deadline first; jobs without a deadline after those with one, oldest first."""
    return sorted(
        pending,
        key=lambda j: (j.deadline if j.deadline is not None else math.inf, j.submitted_at, j.id),
    )


def is_hopeless(job: Pending, now: float) -> bool:
    return job.deadline is not None and now + job.estimate > job.deadline


def _hopeless_reason(job: Pending, now: float) -> str:
    late = now + job.estimate - job.deadline
    return (
        "deadline can no longer be met: the job needs about "
        f"{job.estimate:.0f}s of run time and would end {late:.0f}s after its deadline"
    )


def _reservation(job: Pending, running: list[Running], free: int, now: float) -> tuple[float, int]:
    """When ``job`` can start at the latest (running jobs end by their limits) and how many GPUs
    will be spare beside it then: EASY backfill's shadow time and extra GPUs."""
    available = free
    for r in sorted(running, key=lambda r: r.ends_by):
        if available >= job.gpus:
            break
        available += r.gpus
        shadow = max(now, r.ends_by)
        if available >= job.gpus:
            return shadow, available - job.gpus
    return now, available - job.gpus


def edf_backfill(pending: list[Pending], running: list[Running], total_gpus: int, now: float) -> Decision:
    """Earliest deadline first, with EASY backfill.

    Jobs start in EDF order while they fit. The first that does not fit gets a reservation; a
    later job may jump ahead only if it fits now and either ends (by its max_runtime) before
    that reservation or uses GPUs the reserved job will not need. A job that does not start
    and can no longer meet its deadline expires. A job that fits right now starts even when
    its estimate overshoots the deadline: it may still make it, and waiting cannot help.
    """
    decision = Decision()
    free = total_gpus - sum(r.gpus for r in running)
    holding = list(running)
    reserved: tuple[float, int] | None = None  # (shadow time, spare GPUs at that time)
    for job in edf_order(pending):
        if job.gpus > total_gpus:
            decision.expire.append(
                (job.id, f"asks for {job.gpus} GPUs but the queue now has only {total_gpus}")
            )
            continue
        fits = job.gpus <= free
        if fits and reserved is not None:
            shadow, spare = reserved
            ends_in_time = now + job.max_runtime <= shadow
            fits = ends_in_time or job.gpus <= spare
            if fits and not ends_in_time:
                reserved = (shadow, spare - job.gpus)
        if fits:
            decision.start.append(job.id)
            free -= job.gpus
            holding.append(Running(job.id, job.gpus, now, job.max_runtime))
        elif is_hopeless(job, now):
            decision.expire.append((job.id, _hopeless_reason(job, now)))
        elif reserved is None:
            reserved = _reservation(job, holding, free, now)
    return decision


POLICIES = {"edf": (edf_order, edf_backfill)}
