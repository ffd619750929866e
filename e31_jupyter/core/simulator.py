"""Discrete-event replay of a job trace through a policy of ``policy.py``: the code the live queue
runs, on a simulated cluster of machines.

Events are arrivals, ends and a tick every ``TICK_S`` while jobs wait. After the events of one
moment the policy gets a pass, as the live queue schedules on every submit, every end and every
tick. The queue is kept in the policy's priority
order: arrivals are inserted, and the whole queue is re-sorted only when the policy says its
priorities go stale (``Policy.refresh_s``).

Fair-share usage is the meter's GPU-seconds (GPUs x time held), decayed by
``fairshare.FAIR_SHARE_HALF_LIFE_S``; run-time estimates are learned only from jobs that have ended
(their declared run time, their deadline window and what they took), short jobs' demand only from
jobs already submitted.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import insort
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from e31_jupyter.core.fairshare import Usage
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import Pending, Policy, Running, Snapshot
from e31_jupyter.core.runtimes import RuntimeModel, ShortDemand, quantile
from e31_jupyter.core.states import JobState

TICK_S = 300.0
STALL_TICKS = 100_000  # passes on an idle cluster that start nothing before a replay gives up
DEADLINE_FACTOR = (1.2, 3.0)  # deadline = submit + k x run time
OVERESTIMATE = (1.0, 3.0)  # declared max run time = run time x this


@dataclass(frozen=True)
class TraceJob:
    id: str
    submitted_at: float
    duration: float  # the true run time: the simulator knows it, a policy never sees it
    gpus: int
    team: str
    deadline: float
    max_runtime: float  # what the user declared

    def pending(self) -> Pending:
        return Pending(
            self.id, self.gpus, self.submitted_at, self.max_runtime, self.max_runtime, self.deadline, self.team
        )


def synthesise(
    submits: Sequence[float], durations: Sequence[float], gpus: Sequence[int], teams: Sequence[str], seed: int = 0
) -> list[TraceJob]:
    """Trace jobs with what public traces lack, drawn from ``seed``: a deadline of submit + k x run
    time, k uniform in DEADLINE_FACTOR, and a declared max run time of run time x a factor uniform
    in OVERESTIMATE (people over-estimate: it often exceeds the deadline's slack)."""
    rng = random.Random(seed)
    jobs = []
    for i, (submit, duration, g, team) in enumerate(zip(submits, durations, gpus, teams)):
        duration = max(float(duration), 1.0)
        k, over = rng.uniform(*DEADLINE_FACTOR), rng.uniform(*OVERESTIMATE)
        jobs.append(TraceJob(f"j{i}", float(submit), duration, int(g), team, submit + k * duration, duration * over))
    return jobs


@dataclass
class Outcome:
    job: TraceJob
    started_at: float | None = None
    finished_at: float | None = None
    expired_at: float | None = None

    @property
    def left_queue_at(self) -> float:
        if self.started_at is not None:
            return self.started_at
        assert self.expired_at is not None, "a replay ends only once every job started or expired"
        return self.expired_at

    @property
    def on_time(self) -> bool:
        return self.finished_at is not None and self.finished_at <= self.job.deadline


class Simulation:
    """One replay: the cluster, the queue in the policy's order, the running jobs, and what the
    policy may learn (fair-share usage, run times of jobs that ended)."""

    def __init__(self, jobs: Sequence[TraceJob], policy: Policy, gpus: int, machine_gpus: int = 8):
        self.jobs = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
        self.policy = policy
        self.tick_s = min(TICK_S, policy.refresh_s or TICK_S)
        self.cluster = Cluster.of(gpus, machine_gpus)
        self.outcomes = {j.id: Outcome(j) for j in self.jobs}
        self.running: dict[str, Running] = {}
        self.ends: list[tuple[float, str]] = []  # heap of (end, job id)
        self.queue: list[tuple] = []  # (priority, job id), sorted
        self.waiting: dict[str, Pending] = {}
        self.usage = Usage(self.jobs[0].submitted_at if self.jobs else 0.0)
        self.runtimes = RuntimeModel()
        self.demand = ShortDemand(machine_gpus=machine_gpus)

    def run(self) -> list[Outcome]:
        arrivals = deque(self.jobs)
        next_tick, stalled = math.inf, 0
        while arrivals or self.ends or self.waiting:
            now = min(
                arrivals[0].submitted_at if arrivals else math.inf,
                self.ends[0][0] if self.ends else math.inf,
                next_tick,
            )
            self._end_jobs(now)
            snap = self._snapshot(now)
            while arrivals and arrivals[0].submitted_at <= now:
                self._arrive(arrivals.popleft(), snap)
            ticked = now >= next_tick
            if ticked and self.policy.refresh_s is not None:
                self._resort(snap)
            if self.waiting:
                progress = self._pass(snap)
                stalled = 0 if progress or arrivals or self.ends else stalled + 1
                if stalled > STALL_TICKS:
                    raise RuntimeError(f"{self.policy.name}: jobs wait on an idle cluster and nothing starts them")
            if not self.waiting:
                next_tick = math.inf
            elif ticked or next_tick == math.inf:
                next_tick = now + self.tick_s
        return [self.outcomes[j.id] for j in self.jobs]

    def _snapshot(self, now: float) -> Snapshot:
        return Snapshot(now, self.cluster, list(self.running.values()), self.usage.at(now), self.runtimes, self.demand)

    def _arrive(self, job: TraceJob, snap: Snapshot) -> None:
        pending = job.pending()
        self.waiting[job.id] = pending
        self.usage.join(job.team)
        self.demand.submitted(job.submitted_at, job.gpus, job.max_runtime)
        insort(self.queue, (self.policy.priority(pending, snap), job.id))

    def _resort(self, snap: Snapshot) -> None:
        self.queue = sorted((self.policy.priority(p, snap), p.id) for p in self.waiting.values())

    def _pass(self, snap: Snapshot) -> bool:
        """One scheduling pass; whether anything started or expired."""
        decision = self.policy.walk([self.waiting[job_id] for _, job_id in self.queue], snap)
        for job_id, _ in decision.expire:
            self.outcomes[job_id].expired_at = snap.now
            del self.waiting[job_id]
        for job_id in decision.start:
            self._start(self.waiting.pop(job_id), decision.placement[job_id], snap.now)
        if decision.start or decision.expire:
            self.queue = [entry for entry in self.queue if entry[1] in self.waiting]
            return True
        return False

    def _start(self, job: Pending, machines: tuple[int, ...], now: float) -> None:
        self.cluster.hold(machines, job.gpus)
        self.running[job.id] = Running(job.id, job.gpus, now, job.max_runtime, machines, job.estimate, job.team)
        self.usage.start(job.team, job.gpus, now)
        outcome = self.outcomes[job.id]
        outcome.started_at = now
        heapq.heappush(self.ends, (now + outcome.job.duration, job.id))

    def _end_jobs(self, now: float) -> None:
        while self.ends and self.ends[0][0] <= now:
            _, job_id = heapq.heappop(self.ends)
            running = self.running.pop(job_id)
            outcome = self.outcomes[job_id]
            outcome.finished_at = now
            job = outcome.job
            self.cluster.release(running.machines, running.gpus)
            self.usage.end(job.team, running.gpus, running.started_at, now)
            window = job.deadline - job.submitted_at
            self.runtimes.observe(job.team, job.max_runtime, now - running.started_at, deadline_window_s=window)


def simulate(jobs: Sequence[TraceJob], policy: Policy, gpus: int, machine_gpus: int = 8) -> list[Outcome]:
    return Simulation(jobs, policy, gpus, machine_gpus).run()


# --- what a replay shows ------------------------------------------------------------------------

SIZE_CLASSES = {"1": (1, 1), "2-8": (2, 8), ">8": (9, math.inf)}
FAIRNESS_MIN_JOBS = 20


def size_class(gpus: int) -> str:
    return next(name for name, (lo, hi) in SIZE_CLASSES.items() if lo <= gpus <= hi) if gpus >= 1 else "1"


def summarise(outcomes: Sequence[Outcome], gpus: int, window: tuple[float, float]) -> dict:
    """The figures of one replay (times in hours). ``window`` is the arrival window
    [start, end) over which utilisation is measured.

    - miss_rate: share of jobs that expired or finished after their deadline.
    - goodput: GPU-hours of jobs that finished on time / GPU-hours asked.
    - wait: time in the queue until the job started or was dropped, per size class.
    - mean_jct_h: mean submit -> end over jobs that ran.
    - fairness_worst: each team's mean slowdown (submit -> end over run time, jobs that ran),
      over teams with at least FAIRNESS_MIN_JOBS jobs; lowest team mean / highest (1 = even).
      jain: Jain's index over the same team means.
    """
    asked = sum(o.job.gpus * o.job.duration for o in outcomes) or 1.0
    good = sum(o.job.gpus * o.job.duration for o in outcomes if o.on_time)
    ran = [(o, *_span(o)) for o in outcomes if o.finished_at is not None]
    start, end = window
    held = sum(o.job.gpus * _overlap(began, ended, start, end) for o, began, ended in ran)
    fairness_worst, jain = _fairness(outcomes)
    return {
        "jobs": len(outcomes),
        "miss_rate": sum(not o.on_time for o in outcomes) / max(len(outcomes), 1),
        JobState.EXPIRED.value: sum(o.expired_at is not None for o in outcomes) / max(len(outcomes), 1),
        "goodput": good / asked,
        "utilization": held / (gpus * (end - start)) if end > start else 0.0,
        "mean_jct_h": _mean([ended - o.job.submitted_at for o, _, ended in ran]) / 3600,
        "wait_mean_h": {c: _mean(w) / 3600 for c, w in _waits(outcomes).items()},
        "wait_p99_h": {c: (quantile(sorted(w), 0.99) if w else 0.0) / 3600 for c, w in _waits(outcomes).items()},
        "fairness_worst": fairness_worst,
        "jain": jain,
        "makespan_h": (max((ended for _, _, ended in ran), default=start) - start) / 3600,
    }


def _span(o: Outcome) -> tuple[float, float]:
    """When a job that ran started and finished."""
    assert o.started_at is not None and o.finished_at is not None, "a job finishes only after it started"
    return o.started_at, o.finished_at


def _waits(outcomes: Iterable[Outcome]) -> dict[str, list[float]]:
    waits: dict[str, list[float]] = {c: [] for c in SIZE_CLASSES}
    for o in outcomes:
        waits[size_class(o.job.gpus)].append(o.left_queue_at - o.job.submitted_at)
    return waits


def _fairness(outcomes: Iterable[Outcome]) -> tuple[float, float]:
    slowdowns: dict[str, list[float]] = defaultdict(list)
    counts: dict[str, int] = defaultdict(int)
    for o in outcomes:
        counts[o.job.team] += 1
        if o.finished_at is not None:
            slowdowns[o.job.team].append((o.finished_at - o.job.submitted_at) / o.job.duration)
    means = [_mean(s) for team, s in slowdowns.items() if counts[team] >= FAIRNESS_MIN_JOBS and s]
    if not means:
        return 1.0, 1.0
    return min(means) / max(means), sum(means) ** 2 / (len(means) * sum(m * m for m in means))


def _overlap(a: float, b: float, start: float, end: float) -> float:
    return max(0.0, min(b, end) - max(a, start))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
