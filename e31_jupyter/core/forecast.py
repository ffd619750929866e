"""When queued jobs are expected to start: the policy run forward from one moment.

Running jobs end after their expected run time: what they declared, scaled by the median of
their team's actual / declared learned from finished jobs, among the ratios above the share of it
they have already run (a job that has run long is likely one of the long ones), and by their
limit at the latest. A job that declared nothing goes by the run times of finished jobs that
declared nothing either; with none longer than it has run, when it ends is not known, and the
jobs waiting for its GPUs get no expected start rather than a guess (its limit is only a server
default). Each job the policy starts then holds its GPUs for its own expected run time, judged
the same way; nothing new arrives, but short jobs are taken to keep coming as they have, so a
long job held back for them stays held back (``_Persisting``). At each expected end the policy
takes another pass, exactly as the live queue would, lane, reservations and expiry included. A
job waiting for others to succeed (``dependencies.py``) joins the line when the last of them is
expected to end, in its place by the line's priority (at the end when none is given), or expires
if its deadline passes before that; one whose earlier jobs get no expected end gets no expected
start. Pure, like the policy; only the first FORECAST_JOBS jobs in line (and as many waiting)
are forecast, so a forecast costs the same however long the queue is.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

from e31_jupyter.core.e31_policy import expected_runtime
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import Decision, Pending, Running, Snapshot, expected_end
from e31_jupyter.core.runtimes import Demand

FORECAST_JOBS = 200  # jobs at the head of the line that get an expected start


@dataclass
class Forecast:
    """What the policy run forward expects of the jobs it looked at (job id -> time)."""

    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)  # of running and started jobs, where known
    expired: set[str] = field(default_factory=set)  # gave up on before they started: deadline out of reach
    held_back: dict[str, str] = field(default_factory=dict)  # why a job waits now though GPUs for it are free


def expected_starts(
    walk: Callable[[Sequence[Pending], Snapshot], Decision], ordered: Sequence[Pending], snap: Snapshot
) -> dict[str, float]:
    """Job id -> expected start time, for the jobs among the first FORECAST_JOBS of ``ordered``
    (the queue in the policy's order) that the policy would start; a job it would expire first
    (its deadline out of reach), or one that waits for GPUs nothing will free, gets none."""
    return run_forward(walk, ordered, snap).starts


def run_forward(
    walk: Callable[[Sequence[Pending], Snapshot], Decision],
    ordered: Sequence[Pending],
    snap: Snapshot,
    held: Sequence[tuple[Pending, Sequence[str]]] = (),
    key: Callable[[Pending], Any] | None = None,
) -> Forecast:
    """The policy run forward over the first FORECAST_JOBS of ``ordered``, as the module says;
    ``held``: jobs out of the line, each with the ids of the jobs it waits for; ``key``: the
    priority ``ordered`` is sorted by, for their place once they join."""
    queue = list(ordered[:FORECAST_JOBS])
    waiting = list(held[:FORECAST_JOBS])
    ended: set[str] = set()
    cluster = snap.cluster.copy()
    order = count()  # ties in the heap of ends go by order of start
    ends = [(end, next(order), r) for r in snap.running if (end := expected_end(r, snap)) is not None]
    heapq.heapify(ends)
    running = {r.id: r for r in snap.running}
    seen = Forecast(ends={r.id: end for end, _, r in ends})
    demand = _Persisting(snap.demand, snap.now) if snap.demand is not None else None

    def take_pass(now: float, queue: list[Pending], first: bool = False) -> list[Pending]:
        # The first pass is the live queue's own: its reasons may say when short jobs' demand runs out.
        moment_demand = snap.demand if first else demand
        moment = replace(snap, now=now, cluster=cluster, running=list(running.values()), demand=moment_demand)
        decision = walk(queue, moment)
        for job in queue:
            if job.id in decision.start:
                seen.starts[job.id] = now
                where = decision.placement[job.id]
                held = Running(
                    job.id, job.gpus, now, job.max_runtime, where, job.estimate, job.team, job.owner, done_s=job.done_s
                )
                cluster.hold(held.machines, job.gpus)
                running[job.id] = held
                hold = _expected_hold(job, moment)
                if hold is not None:  # else it holds its GPUs for as long as the forecast looks
                    heapq.heappush(ends, (now + hold, next(order), held))
                    seen.ends[job.id] = now + hold
        if first:  # the pass the live queue takes now, before any end the forecast expects
            seen.held_back = dict(decision.held_back)
        expired = {job_id for job_id, _ in decision.expire}
        seen.expired |= expired
        gone = expired | set(decision.start)
        return [job for job in queue if job.id not in gone]

    queue = take_pass(snap.now, queue, first=True)
    while (queue or waiting) and ends:
        # The live queue takes a pass every second: first what changed before the next end
        # (deadlines out of reach, jobs that became urgent), then what that end frees.
        if queue:
            queue = take_pass(ends[0][0], queue)
        when = _release_next(ends, running, cluster, ended)
        waiting, ready, late = _settle_waiting(waiting, ended, when)
        seen.expired |= late
        for job in ready:
            if key is None:
                queue.append(job)
            else:
                insort(queue, job, key=key)
        if queue:
            queue = take_pass(when, queue)
    return seen


class _Persisting:
    """Short jobs' demand as if they keep coming as they have: a long job held back for them
    stays held back however far the forecast looks (taking them as gone a day after the last,
    as "nothing new arrives" would, made forecasts of over 6 hours worse on the trace while jobs
    still arrived: 0.34 within 15 minutes or 25% instead of 0.38). The lane is sized as before,
    by the demand of the moment looked at."""

    def __init__(self, demand: Demand, at: float):
        self.demand, self.at = demand, at

    def lately(self, now: float) -> float:
        return self.demand.lately(now)

    def came_lately(self, now: float) -> bool:
        return self.demand.came_lately(self.at)

    def quiet_from(self) -> float | None:
        return None  # they keep coming


def _expected_hold(job: Pending, snap: Snapshot) -> float | None:
    """How long a job the forecast starts holds its GPUs; None when nothing says."""
    hold = expected_runtime(job, snap)
    return hold if hold or job.estimate else None


def _release_next(ends: list, running: dict[str, Running], cluster: Cluster, ended: set[str]) -> float:
    """Let the jobs that end next go, adding them to ``ended``; returns when that is."""
    when = ends[0][0]
    while ends and ends[0][0] <= when:
        _, _, held = heapq.heappop(ends)
        del running[held.id]
        cluster.release(held.machines, held.gpus)
        ended.add(held.id)
    return when


def _settle_waiting(
    waiting: list[tuple[Pending, Sequence[str]]], ended: set[str], now: float
) -> tuple[list[tuple[Pending, Sequence[str]]], list[Pending], set[str]]:
    """Of the jobs waiting for others: those that still wait, those whose earlier jobs have
    all ended, and the ids of those whose deadline passed while they waited (the live queue
    expires them then)."""
    still, ready, late = [], [], set()
    for job, after in waiting:
        if job.deadline is not None and job.deadline < now:
            late.add(job.id)
        elif ended.issuperset(after):
            ready.append(job)
        else:
            still.append((job, after))
    return still, ready, late
