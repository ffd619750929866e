"""The policies people use, as e31 compares itself with them and offers them
(``c.E31.policy``): first come first served, shortest job first, earliest deadline first, and
Slurm's multifactor priority with EASY backfill. Pure, on ``policy.py``'s walk."""

from __future__ import annotations

import math
from collections.abc import Sequence

from e31_jupyter.core.policy import Decision, Pending, Snapshot, late, walk

# --- fifo, sjf --------------------------------------------------------------------------------


def fifo_priority(job: Pending, snap: Snapshot | None = None) -> tuple:
    return (job.submitted_at, job.id)


def fifo_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    return walk(ordered, snap, backfill="stop")


def sjf_priority(job: Pending, snap: Snapshot | None = None) -> tuple:
    return (job.gpus * job.max_runtime, job.submitted_at, job.id)


def sjf_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    return walk(ordered, snap, backfill="none")


# --- edf --------------------------------------------------------------------------------------


def edf_priority(job: Pending, snap: Snapshot | None = None) -> tuple:
    """Earliest deadline first; jobs without a deadline after those with one, oldest first."""
    return (job.deadline if job.deadline is not None else math.inf, job.submitted_at, job.id)


def edf_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    """EDF order with EASY backfill on max run time. A job that does not start and can no longer
    meet its deadline by its estimate expires; a job that fits right now starts even when its
    estimate overshoots the deadline: it may still make it, and waiting cannot help."""
    return walk(ordered, snap, hopeless=lambda job: late(job, snap.now, job.estimate, "its estimate"))


def edf_order(pending: Sequence[Pending]) -> list[Pending]:
    return sorted(pending, key=edf_priority)


# --- backfill (Slurm) -------------------------------------------------------------------------

SLURM_MAX_AGE_S = 7 * 86400.0  # PriorityMaxAge default
SLURM_WEIGHTS = {"age": 1000.0, "fairshare": 10000.0, "jobsize": 1000.0}  # SchedMD's example
SLURM_CALC_PERIOD_S = 300.0  # PriorityCalcPeriod default


def slurm_priority(job: Pending, snap: Snapshot) -> tuple:
    """Multifactor: age (saturates at PriorityMaxAge), classic fair-share 2^(-usage/shares) and
    job size with PriorityFavorSmall (1 for the smallest job, 0 for the whole cluster)."""
    age = min(max(snap.now - job.submitted_at, 0.0) / SLURM_MAX_AGE_S, 1.0)
    fairshare = snap.per_team(_slurm_fairshare, job.team)
    size = 1.0 - job.gpus / max(snap.cluster.gpus, 1)
    w = SLURM_WEIGHTS
    return (-(w["age"] * age + w["fairshare"] * fairshare + w["jobsize"] * size), job.submitted_at, job.id)


def _slurm_fairshare(snap: Snapshot, team: str) -> float:
    return 2.0 ** -snap.share_used(team)


def slurm_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    """EASY backfill on declared max run time; a job whose time limit no longer fits before its
    deadline is dropped, started or not (Slurm's ``--deadline`` without ``--time-min``)."""
    now = snap.now
    return walk(ordered, snap, drop_first=True, hopeless=lambda job: late(job, now, job.max_runtime, "its time limit"))
