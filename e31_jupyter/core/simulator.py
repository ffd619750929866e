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

What a public trace lacks is drawn from a seed (``synthesise``): a declared max run time of run
time x a factor uniform in OVERESTIMATE, and a deadline by one of DEADLINE_MODELS:

- ``slack``: submit + k x run time, k uniform in DEADLINE_FACTOR;
- ``clock``: people who want results by a time of day: the first of DEADLINE_HOURS (09:00 or
  18:00 UTC, the trace's clock) at least the declared max run time after the submit.

A trace's own deadlines and declared run times, where it has them, are used as they are.
Jobs declare only that limit unless ``declare_expected`` gives them an expected run time too,
as a user who passes ``--expected-runtime`` does: the queue is then told to expect that
(``TraceJob.estimate``), and learns from it, instead of the limit.

A policy that preempts (``Policy.preempts``: ``e31-preempt``) may suspend running jobs that keep
checkpoints (``TraceJob.resumable``; ``mark_resumable`` draws a share of them). A suspended job
loses its work since its last checkpoint (one every ``Preemption.checkpoint_every_s`` of its
work), goes back in line with the rest of its work, and pays ``Preemption.restore_s`` when it
starts again.
"""

from __future__ import annotations

import heapq
import math
import random
from bisect import insort
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from e31_jupyter.core.fairshare import Usage
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import Pending, Policy, Running, Snapshot
from e31_jupyter.core.runtimes import RuntimeModel, UrgentDemand, quantile
from e31_jupyter.core.states import JobState

TICK_S = 300.0
STALL_TICKS = 100_000  # passes on an idle cluster that start nothing before a replay gives up
DEADLINE_FACTOR = (1.2, 3.0)  # slack model: deadline = submit + k x run time
DEADLINE_HOURS = (9, 18)  # clock model: deadlines at these hours of the day (UTC)
DEADLINE_MODELS = ("slack", "clock")
OVERESTIMATE = (1.0, 3.0)  # declared max run time = run time x this
DAY_S = 86_400.0


@dataclass(frozen=True)
class TraceJob:
    id: str
    submitted_at: float
    duration: float  # the true run time: the simulator knows it, a policy never sees it
    gpus: int
    team: str
    deadline: float
    max_runtime: float  # what the user declared
    resumable: bool = False  # it keeps checkpoints: a policy that preempts may suspend it
    expected: float = 0.0  # the run time the user said to expect (``declare_expected``); 0: none

    @property
    def estimate(self) -> float:
        """What the queue is told to expect the job to take (``Pending.estimate``): its expected
        run time where the user gave one, else its limit."""
        return self.expected or self.max_runtime

    def pending(self) -> Pending:
        return Pending(
            self.id, self.gpus, self.submitted_at, self.max_runtime, self.estimate, self.deadline, self.team,
            checkpoints=self.resumable,
        )  # fmt: skip


def synthesise(
    submits: Sequence[float],
    durations: Sequence[float],
    gpus: Sequence[int],
    teams: Sequence[str],
    seed: int = 0,
    *,
    deadlines: Sequence[float | None] | None = None,
    max_runtimes: Sequence[float | None] | None = None,
    model: str = "slack",
) -> list[TraceJob]:
    """Trace jobs with what public traces lack drawn from ``seed``. ``deadlines`` and
    ``max_runtimes`` are the trace's own, per job (None where it has none): those are kept, and
    only the rest drawn. A declared max run time is run time x a factor uniform in OVERESTIMATE
    (people over-estimate: it often exceeds the deadline's slack). A deadline comes from
    ``model``: ``slack``, submit + k x run time, k uniform in DEADLINE_FACTOR; or ``clock``, the
    next of DEADLINE_HOURS at least the declared max run time after the submit.

    Every job draws k and the factor, in that order, whatever the model and whatever the trace
    gives: one job's draws never depend on another's values, and a seed gives the same draws."""
    if model not in DEADLINE_MODELS:
        raise ValueError(f"unknown deadline model {model!r}; known: {', '.join(DEADLINE_MODELS)}")
    given_deadlines = deadlines or [None] * len(submits)
    given_runtimes = max_runtimes or [None] * len(submits)
    rng = random.Random(seed)
    jobs = []
    for i, (submit, duration, g, team) in enumerate(zip(submits, durations, gpus, teams)):
        submit, duration = float(submit), max(float(duration), 1.0)
        k, over = rng.uniform(*DEADLINE_FACTOR), rng.uniform(*OVERESTIMATE)
        declared = _given_or(given_runtimes[i], duration * over)
        drawn = submit + k * duration if model == "slack" else next_clock_deadline(submit + declared)
        jobs.append(TraceJob(f"j{i}", submit, duration, int(g), team, _given_or(given_deadlines[i], drawn), declared))
    return jobs


def next_clock_deadline(earliest: float) -> float:
    """The first of DEADLINE_HOURS (UTC, seconds since the epoch) at or after ``earliest``."""
    midnight = math.floor(earliest / DAY_S) * DAY_S
    return next(
        when
        for day in (0, 1)
        for hour in DEADLINE_HOURS
        if (when := midnight + day * DAY_S + hour * 3600.0) >= earliest
    )


def _given_or(given: float | None, drawn: float) -> float:
    return drawn if given is None else float(given)


def mark_resumable(jobs: Sequence[TraceJob], share: float, seed: int = 0) -> list[TraceJob]:
    """``jobs`` with a seeded ``share`` of them keeping checkpoints (drawn apart from
    ``synthesise``'s draws, so its deadlines and run times stay as they were)."""
    rng = random.Random(seed + 2)
    return [replace(job, resumable=rng.random() < share) for job in jobs]


def declare_expected(jobs: Sequence[TraceJob], error: float, seed: int = 0) -> list[TraceJob]:
    """``jobs``, each also declaring an expected run time: its true run time x a factor uniform
    in [1 - ``error``, 1 + ``error``] (0: exactly right), never more than its limit; drawn apart
    from the other draws, so deadlines, limits and checkpoints stay as they were."""
    expected_error(error)
    rng = random.Random(seed + 3)
    return [
        replace(job, expected=min(job.duration * rng.uniform(1.0 - error, 1.0 + error), job.max_runtime))
        for job in jobs
    ]


def expected_error(error: float) -> float:
    """``error`` where it is one ``declare_expected`` takes (a share from 0 up to 1); ValueError else."""
    if not 0.0 <= error < 1.0:
        raise ValueError(f"the error of expected run times is a share from 0 up to 1, not {error}")
    return error


@dataclass(frozen=True)
class Preemption:
    """What suspending a job costs it: what it did since its last checkpoint (one every
    ``checkpoint_every_s`` of its work) is lost, and it pays ``restore_s`` when it starts again."""

    checkpoint_every_s: float = 1800.0
    restore_s: float = 60.0


@dataclass
class Outcome:
    job: TraceJob
    started_at: float | None = None  # when it first started
    finished_at: float | None = None
    expired_at: float | None = None
    runs: list[tuple[float, float]] = field(default_factory=list)  # each time it held its GPUs, start to end
    machines: list[tuple[int, ...]] = field(default_factory=list)  # where it held them, run by run
    suspended: int = 0  # times a policy suspended it
    lost_s: float = 0.0  # its run time lost to suspends: work done again, and the restores

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

    def __init__(
        self,
        jobs: Sequence[TraceJob],
        policy: Policy,
        gpus: int,
        machine_gpus: int = 8,
        preemption: Preemption = Preemption(),
    ):
        self.jobs = sorted(jobs, key=lambda j: (j.submitted_at, j.id))
        self.policy = policy
        self.preemption = preemption
        self.tick_s = min(TICK_S, policy.refresh_s or TICK_S)
        self.cluster = Cluster.of(gpus, machine_gpus)
        self.outcomes = {j.id: Outcome(j) for j in self.jobs}
        self.running: dict[str, Running] = {}
        self.ends: list[tuple[float, str]] = []  # heap of (end, job id); a suspended job's end stays, stale
        self.end_at: dict[str, float] = {}  # each running job's end
        self.work_from: dict[str, float] = {}  # each running job's start, after its restore when resumed
        self.work_left: dict[str, float] = {}  # a suspended job's run time still to do
        self.queue: list[tuple] = []  # (priority, job id), sorted
        self.waiting: dict[str, Pending] = {}
        self.usage = Usage(self.jobs[0].submitted_at if self.jobs else 0.0)
        self.runtimes = RuntimeModel()
        self.demand = UrgentDemand(machine_gpus=machine_gpus)

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
        return Snapshot(
            now, self.cluster, list(self.running.values()), self.usage.at(now), self.runtimes, self.demand,
            restore_s=self.preemption.restore_s, checkpointed=partial(self._checkpointed, now=now),
        )  # fmt: skip

    def _checkpointed(self, job: Running, now: float) -> float:
        """A running job's last checkpoint: one every ``checkpoint_every_s`` of its work; its start
        before the first (a resumed job's restore saves nothing new)."""
        work_from, every = self.work_from[job.id], self.preemption.checkpoint_every_s
        saved = (now - work_from) // every
        return job.started_at if saved < 1 else work_from + saved * every

    def _arrive(self, job: TraceJob, snap: Snapshot) -> None:
        pending = job.pending()
        self.waiting[job.id] = pending
        self.usage.join(job.team)
        self.demand.submitted(job.submitted_at, job.gpus, job.estimate, job.deadline)
        insort(self.queue, (self.policy.priority(pending, snap), job.id))

    def _resort(self, snap: Snapshot) -> None:
        self.queue = sorted((self.policy.priority(p, snap), p.id) for p in self.waiting.values())

    def _pass(self, snap: Snapshot) -> bool:
        """One scheduling pass; whether anything started or expired."""
        decision = self.policy.walk([self.waiting[job_id] for _, job_id in self.queue], snap)
        for job_id, _ in decision.expire:
            self.outcomes[job_id].expired_at = snap.now
            del self.waiting[job_id]
        for job_id, _ in decision.suspend:
            self._suspend(job_id, snap)
        for job_id in decision.start:
            self._start(self.waiting.pop(job_id), decision.placement[job_id], snap.now)
        if decision.start or decision.expire:
            self.queue = [entry for entry in self.queue if entry[1] in self.waiting]
            return True
        return False

    def _start(self, job: Pending, machines: tuple[int, ...], now: float) -> None:
        outcome = self.outcomes[job.id]
        trace = outcome.job
        resumed = job.id in self.work_left
        restore = self.preemption.restore_s if resumed else 0.0
        checkpointed_at = now if trace.resumable else None
        self.cluster.hold(machines, job.gpus)
        self.running[job.id] = Running(
            job.id,
            job.gpus,
            now,
            job.max_runtime,
            machines,
            job.estimate,
            job.team,
            "",
            trace.deadline,
            checkpointed_at,
            job.done_s,
            resumed,
        )
        self.usage.start(job.team, job.gpus, now)
        if outcome.started_at is None:
            outcome.started_at = now
        self.work_from[job.id] = now + restore
        self.end_at[job.id] = now + restore + self.work_left.pop(job.id, trace.duration)
        heapq.heappush(self.ends, (self.end_at[job.id], job.id))

    def _suspend(self, job_id: str, snap: Snapshot) -> None:
        """Stop a running job; it keeps its work up to its last checkpoint and waits again."""
        now, running, outcome = snap.now, self.running.pop(job_id), self.outcomes[job_id]
        self.cluster.release(running.machines, running.gpus)
        self.usage.end(running.team, running.gpus, running.started_at, now)
        work_from = self.work_from.pop(job_id)
        done = max(0.0, now - work_from)
        kept = done // self.preemption.checkpoint_every_s * self.preemption.checkpoint_every_s
        self.work_left[job_id] = self.end_at.pop(job_id) - work_from - kept
        outcome.runs.append((running.started_at, now))
        outcome.machines.append(running.machines)
        outcome.suspended += 1
        outcome.lost_s += now - running.started_at - kept  # the restore too, where it was paying one
        trace = outcome.job
        done = trace.duration - self.work_left[job_id]
        limit = max(trace.max_runtime - done, 1.0) + self.preemption.restore_s
        # it will not expire: it runs, late if it must
        pending = Pending(
            job_id,
            trace.gpus,
            trace.submitted_at,
            limit,
            trace.estimate,
            trace.deadline,
            trace.team,
            suspended_by_queue=True,
            done_s=done,
            checkpoints=trace.resumable,
        )
        self.waiting[job_id] = pending
        insort(self.queue, (self.policy.priority(pending, snap), job_id))

    def _end_jobs(self, now: float) -> None:
        while self.ends and self.ends[0][0] <= now:
            end, job_id = heapq.heappop(self.ends)
            if self.end_at.get(job_id) != end:
                continue  # it was suspended: this end will not come
            del self.end_at[job_id]
            running = self.running.pop(job_id)
            outcome = self.outcomes[job_id]
            outcome.lost_s += self.work_from.pop(job_id) - running.started_at  # its restore, if resumed
            outcome.finished_at = now
            outcome.runs.append((running.started_at, now))
            outcome.machines.append(running.machines)
            job = outcome.job
            self.cluster.release(running.machines, running.gpus)
            self.usage.end(job.team, running.gpus, running.started_at, now)
            window = job.deadline - job.submitted_at
            took = job.duration if outcome.suspended else now - running.started_at
            self.runtimes.observe(job.team, job.estimate, took, deadline_window_s=window)


def simulate(
    jobs: Sequence[TraceJob], policy: Policy, gpus: int, machine_gpus: int = 8, preemption: Preemption = Preemption()
) -> list[Outcome]:
    return Simulation(jobs, policy, gpus, machine_gpus, preemption).run()


# --- what a replay shows ------------------------------------------------------------------------

SIZE_CLASSES = {"1": (1, 1), "2-8": (2, 8), ">8": (9, math.inf)}
FAIRNESS_MIN_JOBS = 20


def size_class(gpus: int) -> str:
    return next(name for name, (lo, hi) in SIZE_CLASSES.items() if lo <= gpus <= hi) if gpus >= 1 else "1"


def summarise(outcomes: Sequence[Outcome], gpus: int, window: tuple[float, float]) -> dict:
    """The figures of one replay (times in hours). ``window`` is the arrival window
    [start, end) over which utilisation is measured.

    - miss_rate: share of jobs that expired or finished after their deadline.
    - miss_rate_by_class: the same per size class; like miss_rate it counts every job that did not
      finish by its deadline (expired, refused or late).
    - goodput: GPU-hours of jobs that finished on time / GPU-hours asked.
    - suspended: share of jobs suspended at least once (by a policy that preempts); lost_gpu_h:
      the GPU-hours suspends cost (work done again, and restores).
    - wait: time in the queue until the job started or was dropped, per size class.
    - mean_jct_h: mean submit -> end over jobs that ran.
    - fairness_worst: each team's mean slowdown (submit -> end over run time, jobs that ran),
      over teams with at least FAIRNESS_MIN_JOBS jobs; lowest team mean / highest (1 = even).
      jain: Jain's index over the same team means.
    - team_ontime_worst: each team's share of its jobs that finished by their deadline, over
      teams with at least FAIRNESS_MIN_JOBS jobs; lowest share / highest (1 = even). None when
      the trace has no teams. A policy that refuses every team's work alike scores well on it
      (one that runs nothing scores 1), so team_ontime_min, the lowest share itself, stands beside it.
    """
    asked = sum(o.job.gpus * o.job.duration for o in outcomes) or 1.0
    good = sum(o.job.gpus * o.job.duration for o in outcomes if o.on_time)
    ran = [(o, *_span(o)) for o in outcomes if o.finished_at is not None]
    start, end = window
    held = sum(o.job.gpus * overlap(began, ended, start, end) for o in outcomes for began, ended in o.runs)
    fairness_worst, jain = _fairness(outcomes)
    return {
        "jobs": len(outcomes),
        "miss_rate": _missed(outcomes),
        "miss_rate_by_class": {c: _missed(of_class) for c, of_class in _by_class(outcomes).items()},
        JobState.EXPIRED.value: sum(o.expired_at is not None for o in outcomes) / max(len(outcomes), 1),
        "goodput": good / asked,
        "utilization": held / (gpus * (end - start)) if end > start else 0.0,
        "mean_jct_h": _mean([ended - o.job.submitted_at for o, _, ended in ran]) / 3600,
        "wait_mean_h": {c: _mean(w) / 3600 for c, w in _waits(outcomes).items()},
        "wait_p99_h": {c: (quantile(sorted(w), 0.99) if w else 0.0) / 3600 for c, w in _waits(outcomes).items()},
        "fairness_worst": fairness_worst,
        "jain": jain,
        "team_ontime_worst": _team_ontime_worst(outcomes),
        "team_ontime_min": _team_ontime_min(outcomes),
        "makespan_h": (max((ended for _, _, ended in ran), default=start) - start) / 3600,
        "suspended": sum(o.suspended > 0 for o in outcomes) / max(len(outcomes), 1),
        "lost_gpu_h": sum(o.job.gpus * o.lost_s for o in outcomes) / 3600,
    }


def _span(o: Outcome) -> tuple[float, float]:
    """When a job that ran started and finished."""
    assert o.started_at is not None and o.finished_at is not None, "a job finishes only after it started"
    return o.started_at, o.finished_at


def _missed(outcomes: Sequence[Outcome]) -> float:
    """Share of jobs that did not finish by their deadline: expired, refused or late."""
    return sum(not o.on_time for o in outcomes) / max(len(outcomes), 1)


def _by_class(outcomes: Iterable[Outcome]) -> dict[str, list[Outcome]]:
    classes: dict[str, list[Outcome]] = {c: [] for c in SIZE_CLASSES}
    for o in outcomes:
        classes[size_class(o.job.gpus)].append(o)
    return classes


def _waits(outcomes: Iterable[Outcome]) -> dict[str, list[float]]:
    return {c: [o.left_queue_at - o.job.submitted_at for o in of_class] for c, of_class in _by_class(outcomes).items()}


def _big_teams(outcomes: Iterable[Outcome]) -> dict[str, list[Outcome]]:
    """The jobs of each team with at least FAIRNESS_MIN_JOBS of them, by team."""
    teams: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        teams[o.job.team].append(o)
    return {team: jobs for team, jobs in teams.items() if len(jobs) >= FAIRNESS_MIN_JOBS}


def _fairness(outcomes: Iterable[Outcome]) -> tuple[float, float]:
    slowdowns = [[_slowdown(o) for o in jobs if o.finished_at is not None] for jobs in _big_teams(outcomes).values()]
    means = [_mean(s) for s in slowdowns if s]
    if not means:
        return 1.0, 1.0
    return min(means) / max(means), sum(means) ** 2 / (len(means) * sum(m * m for m in means))


def _slowdown(o: Outcome) -> float:
    assert o.finished_at is not None, "only a job that ran has a slowdown"
    return (o.finished_at - o.job.submitted_at) / o.job.duration


def _team_ontime_worst(outcomes: Sequence[Outcome]) -> float | None:
    shares = _team_ontime_shares(outcomes)
    if shares is None:
        return None
    highest = max(shares, default=0.0)
    return min(shares) / highest if highest > 0 else 1.0


def _team_ontime_min(outcomes: Sequence[Outcome]) -> float | None:
    """The lowest team's share of jobs on time: unlike the ratio, refusing work never raises it."""
    shares = _team_ontime_shares(outcomes)
    return None if shares is None else min(shares, default=1.0)


def _team_ontime_shares(outcomes: Sequence[Outcome]) -> list[float] | None:
    shares = team_ontime(outcomes)
    return None if shares is None else list(shares.values())


def team_ontime(outcomes: Sequence[Outcome]) -> dict[str, float] | None:
    """Each team's share of its jobs done by their deadline, over the teams with at least
    FAIRNESS_MIN_JOBS jobs; None when the trace has no teams."""
    if all(o.job.team == "" for o in outcomes):
        return None
    return {team: 1.0 - _missed(jobs) for team, jobs in _big_teams(outcomes).items()}


def overlap(a: float, b: float, start: float, end: float) -> float:
    """How long [a, b) and [start, end) share."""
    return max(0.0, min(b, end) - max(a, start))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
