"""Scheduling policies, pure: (queued jobs, a snapshot of the GPUs and what holds them) -> which
jobs to start and where, which to expire.

No clock, no I/O, no randomness here: the live queue and the trace simulator (``sim.py``) run
exactly this code. Every policy but ``e31-preempt`` lets a started job run to its end.

A ``Policy`` is a ``priority(job, snapshot)`` key that puts the queue in the order the policy
serves it, and a ``walk(ordered, snapshot)`` that goes down that order deciding. The live queue
(``line.py``) and the simulator both keep their queue sorted, new jobs put in their place, and
sort it afresh only when the policy's priorities can have moved (``refresh_s``), as Slurm does
every PriorityCalcPeriod. Whatever the policy, the walk keeps one owner's jobs to at most
``Snapshot.max_gpus_per_owner`` GPUs at once (``OwnerCap``), when the queue sets a cap.

- ``fifo``: first come, first served, strictly: the first job that does not fit blocks the rest.
- ``sjf``: smallest declared GPU-time first; every job that fits starts (no reservation).
- ``edf``: earliest deadline first with EASY backfill; a job that cannot start and can no longer
  meet its deadline by its estimate expires.
- ``backfill``: Slurm's way: multifactor priority (age, fair-share with a decaying usage
  half-life, a small-job factor), EASY backfill on declared max run time, and a pending job that
  can no longer end within its time limit before its deadline is dropped (``--deadline``).
- ``e31``, the default: earliest deadline first with EASY backfill; run times learned from
  finished jobs (their declared run times and deadline windows; for a job that declared none,
  what such jobs took) decide when a job expires (more likely than not to miss); a lane of GPUs
  that long jobs which can wait leave free, as many as short jobs that could not wait needed in
  this hour or the last (none where deadlines leave hours); at most a share of the
  GPUs for jobs that run for days while they can wait and such short jobs came in the last day;
  a fair-share nudge. See ``e31_priority``, ``e31_lane``, ``LongJobs`` and ``e31_walk``.
- ``e31-preempt``: ``e31``, and a job that will miss its deadline unless it starts now may have
  running jobs that keep checkpoints suspended for it, when they can afford it. See
  ``e31_preempt_walk``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.runtimes import Demand, RuntimeModel

# --- the nouns -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pending:
    id: str
    gpus: int
    submitted_at: float
    max_runtime: float  # the enforced limit
    estimate: float  # expected hold time (expected_runtime, else a declared max_runtime, else 0)
    deadline: float | None = None
    team: str = ""  # who is charged for fair-share: the job's team, else its owner
    owner: str = ""  # who submitted it: Snapshot.max_gpus_per_owner counts by it


@dataclass(frozen=True)
class Running:
    id: str
    gpus: int
    started_at: float
    max_runtime: float
    machines: tuple[int, ...] = (0,)  # where it runs (Cluster.place)
    estimate: float = 0.0  # what it was expected to hold its GPUs for, as Pending.estimate (0: nothing declared)
    team: str = ""
    owner: str = ""
    deadline: float | None = None
    # Its last checkpoint (or when it started, before the first): it may be suspended and resumed
    # from there, losing what it did since. None: it keeps no checkpoints.
    checkpointed_at: float | None = None

    @property
    def ends_by(self) -> float:
        return self.started_at + self.max_runtime


@dataclass
class Decision:
    start: list[str] = field(default_factory=list)
    expire: list[tuple[str, str]] = field(default_factory=list)  # (job id, reason)
    placement: dict[str, tuple[int, ...]] = field(default_factory=dict)  # job id -> its machines
    held_back: dict[str, str] = field(default_factory=dict)  # job id -> why it waits though GPUs for it are free
    suspend: list[tuple[str, str]] = field(default_factory=list)  # (running job id, the job it makes room for)


@dataclass
class Snapshot:
    """The world as a policy sees it at one moment. It keeps what it works out (each team's
    share, each job's expected run time), so a new moment is a new snapshot (``replace``)."""

    now: float
    cluster: Cluster  # free GPUs per machine
    running: Sequence[Running] = ()
    usage: Mapping[str, float] = field(default_factory=dict)  # team -> decayed GPU-seconds
    runtimes: RuntimeModel = field(default_factory=RuntimeModel)
    demand: Demand | None = None  # recent demand of short jobs that could not wait; None: e31 keeps no lane
    long_share: float | None = (
        None  # e31: most of the GPUs long jobs may hold while they can wait; None: E31_LONG_SHARE
    )
    max_gpus_per_owner: int | None = None  # most GPUs one owner's jobs may hold at once, any policy; None: no cap
    restore_s: float = 60.0  # what resuming a suspended job costs before it goes on (loading its checkpoint)
    # A running job's last checkpoint at this moment, where it is worked out (the simulator's
    # model); else what Running.checkpointed_at says.
    checkpointed: Callable[[Running], float] | None = None
    # GPUs that no job holds but processes outside the queue use: left out of ``cluster``'s free
    # ones, and why (a job that would fit with them is held back, saying so).
    outside_gpus: int = 0
    outside_use: str = ""
    # What a policy works out per team (per_team), once per snapshot: a pass asks for every queued job.
    _per_team: dict[tuple[Callable, str], float] = field(default_factory=dict, init=False, repr=False, compare=False)
    # Each job's median expected run time, likewise: e31 asks for it up to three times a pass.
    _medians: dict[str, float] = field(default_factory=dict, init=False, repr=False, compare=False)

    @cached_property
    def _usage_total(self) -> float:
        return sum(self.usage.values())

    def per_team(self, work: Callable[[Snapshot, str], float], team: str) -> float:
        """``work(self, team)``, worked out once per team for this snapshot."""
        key = (work, team)
        value = self._per_team.get(key)
        if value is None:
            value = self._per_team[key] = work(self, team)
        return value

    def share_used(self, team: str) -> float:
        """The team's part of all recent usage over an equal share: 1 is exactly its share (and
        everyone's while nobody has used anything)."""
        if self._usage_total <= 0:
            return 1.0
        teams = len(self.usage) + (team not in self.usage)
        return self.usage.get(team, 0.0) / self._usage_total * teams


@dataclass(frozen=True)
class Policy:
    name: str
    priority: Callable[[Pending, Snapshot], Any]  # smaller is served first
    walk: Callable[[Sequence[Pending], Snapshot], Decision]  # takes the queue in priority order
    refresh_s: float | None = None  # how long priorities stay valid; None: they never change
    preempts: bool = False  # it may suspend running jobs that keep checkpoints (Decision.suspend)

    def order(self, pending: Sequence[Pending], snapshot: Snapshot) -> list[Pending]:
        return sorted(pending, key=lambda job: self.priority(job, snapshot))

    def decide(self, pending: Sequence[Pending], snapshot: Snapshot) -> Decision:
        return self.walk(self.order(pending, snapshot), snapshot)

    def __iter__(self):  # order, decide = POLICIES[name]
        return iter((self.order, self.decide))


# --- the walk every policy shares --------------------------------------------------------------


@dataclass
class Reservation:
    """EASY backfill's promise to the first job that does not fit: it starts by ``shadow`` on the
    machines in ``spare``, which will then have ``spare[m]`` GPUs beside it."""

    shadow: float
    spare: dict[int, int]
    job_id: str = ""

    @cached_property
    def machines(self) -> frozenset[int]:
        return frozenset(self.spare)

    @cached_property
    def behind(self) -> str:
        """Why a job that fits waits: written once, as a pass may say it of thousands."""
        return f"it would still be running when {self.job_id}, first in line, is due to start, on GPUs that job needs"


def reserve(job: Pending, holders: Sequence[Running], cluster: Cluster, now: float) -> Reservation:
    """When and where ``job`` can start at the latest, every holder ending by its time limit."""
    trial = cluster.copy()
    for holder in sorted(holders, key=lambda r: r.ends_by):
        trial.release(holder.machines, holder.gpus)
        if trial.fits(job.gpus):
            machines = trial.place(job.gpus)
            assert machines is not None  # it fits, so it has a place
            return Reservation(max(now, holder.ends_by), {m: trial.free[m] for m in machines}, job.id)
    return Reservation(math.inf, {}, job.id)


def walk(
    ordered: Sequence[Pending],
    snap: Snapshot,
    *,
    backfill: str = "easy",
    hopeless: Callable[[Pending], str] = lambda job: "",
    drop_first: bool = False,
    held_back: Callable[[Pending, Cluster], str] | None = None,
    started: Callable[[Pending], None] | None = None,
) -> Decision:
    """Start jobs in order while they fit.

    ``backfill``: what happens after the first job that does not fit. ``"easy"``: it gets a
    reservation (the earliest time it can start, running jobs ending by their time limits), and a
    later job may start only if it fits now and either ends by then (at its own time limit) or
    uses GPUs the reserved job will not need. ``"none"``: every later job that fits starts.
    ``"stop"``: nothing more starts.

    A job that does not start expires when ``hopeless`` gives a reason; with ``drop_first`` it is
    asked before the job may start. ``held_back`` may keep a job that fits from starting, by
    giving the reason (no reservation is made for it). Every job that waits though there are
    GPUs for it gets the reason in ``Decision.held_back``: the policy's, or the reservation's.
    ``started`` is told of each job that starts, once it has its GPUs.

    With ``Snapshot.max_gpus_per_owner``, a job whose owner's jobs already hold so many GPUs that
    it would take them past the cap waits, whatever the policy, and makes no reservation: the
    GPUs it waits for are its owner's. One that asks for more than the cap expires.
    """
    decision = Decision()
    now, cluster = snap.now, snap.cluster.copy()
    holders = list(snap.running)
    can_ever_fit = cache(cluster.can_ever_fit)  # asked of every job; a queue has few sizes
    cap = OwnerCap(snap) if snap.max_gpus_per_owner is not None else None
    reserved: Reservation | None = None
    # The fewest GPUs that found no place since the last start, anywhere [0] and beside the
    # reservation [1]: a job asking as many or more finds none either, so a long queue is
    # walked in a few steps per job.
    no_room = [math.inf, math.inf]
    for job in ordered:
        if not can_ever_fit(job.gpus):
            decision.expire.append((job.id, f"asks for {job.gpus} GPUs but the queue now has only {cluster.gpus}"))
            continue
        if cap is not None and job.gpus > cap.limit:
            decision.expire.append((job.id, cap.too_big(job)))
            continue
        capped = cap.over(job) if cap is not None else ""
        reason = hopeless(job) if drop_first else ""
        beside = reserved is not None and now + job.max_runtime > reserved.shadow
        machines = None
        if not reason and capped:
            if cluster.fits(job.gpus):
                decision.held_back[job.id] = capped
        elif not reason and job.gpus < no_room[beside]:
            if not cluster.fits(job.gpus):
                no_room = [min(no_room[0], job.gpus), min(no_room[1], job.gpus)]
                if snap.outside_gpus and cluster.free_gpus + snap.outside_gpus >= job.gpus:
                    decision.held_back[job.id] = snap.outside_use
            elif held_back is not None and (why := held_back(job, cluster)):
                decision.held_back[job.id] = why
            else:
                machines = _place(job, cluster, reserved if beside else None)
                if machines is None:  # no place beside the reservation
                    assert reserved is not None  # a job that fits always has a place without one
                    no_room[1] = min(no_room[1], job.gpus)
                    decision.held_back[job.id] = reserved.behind
        elif not reason and beside and job.gpus < no_room[0] and cluster.fits(job.gpus):
            assert reserved is not None  # beside says there is one
            decision.held_back[job.id] = reserved.behind
        if machines is not None:
            decision.start.append(job.id)
            decision.placement[job.id] = machines
            holders.append(Running(job.id, job.gpus, now, job.max_runtime, machines))
            no_room = [math.inf, math.inf]
            if cap is not None:
                cap.took(job)
            if started is not None:
                started(job)
            continue
        reason = reason or hopeless(job)
        if reason:
            decision.expire.append((job.id, reason))
            decision.held_back.pop(job.id, None)
        elif reserved is None and not capped and not cluster.fits(job.gpus):
            if backfill == "stop":
                break
            if backfill == "easy":
                reserved = reserve(job, holders, cluster, now)
    return decision


class OwnerCap:
    """The GPUs each owner's jobs hold during a pass, against the most they may
    (``Snapshot.max_gpus_per_owner``)."""

    def __init__(self, snap: Snapshot):
        assert snap.max_gpus_per_owner is not None  # made only for a snapshot with a cap
        self.limit: int = snap.max_gpus_per_owner
        self.held: dict[str, int] = {}
        for job in snap.running:
            self.held[job.owner] = self.held.get(job.owner, 0) + job.gpus

    def over(self, job: Pending) -> str:
        """Why ``job`` may not start now for its owner's GPUs; "" when it may."""
        held = self.held.get(job.owner, 0)
        if held + job.gpus <= self.limit:
            return ""
        return (
            f"{job.owner or 'its owner'}'s jobs already hold {held} GPU(s), and one user's jobs may hold at most "
            f"{self.limit} at once; it starts when enough of them have ended"
        )

    def too_big(self, job: Pending) -> str:
        return f"asks for {job.gpus} GPUs but one user's jobs may now hold at most {self.limit} at once"

    def took(self, job: Pending) -> None:
        self.held[job.owner] = self.held.get(job.owner, 0) + job.gpus


def _place(job: Pending, cluster: Cluster, beside: Reservation | None) -> tuple[int, ...] | None:
    """Place ``job`` anywhere; or, when it would still run at a reservation's start, only where
    it cannot delay the reserved job."""
    if job.gpus <= 0:
        return ()
    if beside is None:
        return cluster.place(job.gpus)
    return cluster.place(job.gpus, avoid=beside.machines, strict=True) or _use_spare(job, cluster, beside)


def _use_spare(job: Pending, cluster: Cluster, reserved: Reservation) -> tuple[int, ...] | None:
    """Place a job that ends after the reservation on GPUs the reserved job will not need."""
    if job.gpus > cluster.machine_gpus:
        return None
    for m, spare in sorted(reserved.spare.items()):
        if spare >= job.gpus and cluster.free[m] >= job.gpus:
            reserved.spare[m] -= job.gpus
            cluster.hold((m,), job.gpus)
            return (m,)
    return None


def _late(job: Pending, now: float, runtime: float, what: str) -> str:
    """Why a job can no longer meet its deadline, or "" while it still can."""
    if job.deadline is None or now + runtime <= job.deadline:
        return ""
    return (
        f"deadline can no longer be met: the job needs about {round(runtime)}s of run time ({what}) "
        f"and would end {round(now + runtime - job.deadline)}s after its deadline"
    )


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
    return walk(ordered, snap, hopeless=lambda job: _late(job, snap.now, job.estimate, "its estimate"))


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
    return walk(ordered, snap, drop_first=True, hopeless=lambda job: _late(job, now, job.max_runtime, "its time limit"))


# --- e31 -------------------------------------------------------------------------------------

E31_LANE_MAX = 0.30  # the most of the GPUs the lane for jobs that cannot wait takes
E31_SHORT_S = 3600.0  # a job expected to take at most this is short
E31_URGENT_S = 900.0  # a job that must start within this to make its deadline is urgent
E31_FAIR_SHARE = 0.25  # how far (in expected run times) fair-share moves a job in the queue
E31_GIVE_UP = 0.5  # a waiting job expires when it would miss even if it took this quantile of run time
E31_LONG_S = 24 * 3600.0  # a job expected to hold its GPUs longer than this is long
E31_LONG_SHARE = 0.6  # long jobs that can wait start only while long jobs hold at most this share of the GPUs
E31_LONG_SLACK = 0.5  # a long job can wait while its deadline leaves it this many run times of slack
# A job asking for more GPUs is large: exempt from the lane and the long jobs' share (it could
# rarely start if it had to leave GPUs free). A count of GPUs, not the machine's size: on
# machines of 4 GPUs the common 8-GPU job would otherwise be one.
E31_LARGE_GPUS = 8

# How an expired job's run time was judged ("deadline can no longer be met: ... (<this>)").
LEARNED_FROM_TEAM = "as its team's finished jobs suggest"
LEARNED_FROM_UNDECLARED = (
    "as jobs that declared no run time took here; give it an expected run time "
    "(--expected-runtime) to be judged by that instead"
)


def expected_runtime(job: Pending, snap: Snapshot, q: float = 0.5) -> float:
    """What the job will take (with probability ``q``): what it declared, scaled by the q-quantile
    of actual / declared over its team's finished jobs whose ratio is consistent with the job's
    deadline window (``RuntimeModel.runtime``); one that declared nothing, by what finished jobs
    that declared nothing took. Never more than its limit; 0 when nothing says."""
    if q != 0.5:
        return _learned_runtime(job, snap, q)
    median = snap._medians.get(job.id)
    if median is None:
        median = snap._medians[job.id] = _learned_runtime(job, snap, 0.5)
    return median


def _learned_runtime(job: Pending, snap: Snapshot, q: float) -> float:
    window = job.deadline - job.submitted_at if job.deadline is not None else None
    return min(snap.runtimes.runtime(job.team, job.estimate, window, q), job.max_runtime)


def e31_priority(job: Pending, snap: Snapshot) -> tuple:
    """Earliest deadline first, whatever the job's size, a deadline moved later for a team that
    used more than its share of recent GPU time and earlier for one that used less (by up to
    2 x E31_FAIR_SHARE expected run times). A large job is not put first: where large jobs are
    common, serving them ahead of every deadline costs more deadlines than it saves; it is kept
    from starving as in edf, by the reservation it holds once it is first in line."""
    if job.deadline is None:
        return (math.inf, job.submitted_at, job.id)
    return (job.deadline + snap.per_team(_fair_shift, job.team) * expected_runtime(job, snap), job.submitted_at, job.id)


def _fair_shift(snap: Snapshot, team: str) -> float:
    """How many expected run times fair-share moves the team's deadlines later (earlier when
    negative): E31_FAIR_SHARE x log2 of its share used, the log kept between -2 and 2."""
    return E31_FAIR_SHARE * max(-2.0, min(2.0, math.log2(max(snap.share_used(team), 0.25))))


def e31_lane(snap: Snapshot) -> int:
    """GPUs kept free of long jobs that can wait: as many as short jobs that could not wait
    (``UrgentDemand``) held in this hour or the last, at their declared GPU time x
    everyone's median actual / declared, at most E31_LANE_MAX of the GPUs. Where such jobs keep
    coming, they find GPUs free instead of behind jobs that hold theirs for days; where deadlines
    leave hours, the lane is empty and no GPU idles for a job that never comes."""
    if snap.demand is None:
        return 0
    peak = snap.demand.lately(snap.now) * snap.runtimes.ratio(None, 0.5)
    return int(min(peak, E31_LANE_MAX * snap.cluster.gpus))


def e31_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    """EASY backfill in ``e31_priority`` order, with rules of its own:

    - A job expires when it is more likely than not to miss its deadline: when it cannot start
      now and its expected run time (``expected_runtime``, learned from finished jobs, not the
      over-estimated declared time) no longer fits before the deadline. Its GPUs go to jobs that
      can still make theirs.
    - Long jobs (expected over E31_LONG_S) that can wait (their deadline leaves E31_LONG_SLACK
      run times of slack, or they have none) start only while long jobs hold at most
      E31_LONG_SHARE of the GPUs (``LongJobs``; the queue's ``long_jobs_share``): the rest turn
      over within a day, so a burst finds GPUs freeing every hour instead of a cluster given to
      jobs that end next week. While no short job came for a day, there is nothing to keep the
      rest for, and the share does not hold.
    - The last GPUs are a lane (``e31_lane``) for short jobs (expected <= E31_SHORT_S) and urgent
      ones (latest start within E31_URGENT_S): a long job that can wait does not take them, so a
      burst of short jobs that cannot wait finds GPUs free. Jobs too big to ever leave the lane
      free are exempt.

    Large jobs (more than E31_LARGE_GPUS) are exempt from both.
    """
    now = snap.now
    lane = e31_lane(snap)
    long_jobs = LongJobs(snap)

    def held_back(job: Pending, cluster: Cluster) -> str:
        if job.gpus > E31_LARGE_GPUS:
            return ""
        expected = expected_runtime(job, snap)
        is_long = expected > E31_LONG_S
        if is_long and _can_wait(job, expected, now, E31_LONG_SLACK * expected) and not long_jobs.admit(job.gpus):
            return long_jobs.reason(job, expected)
        if not _leaves_lane(job, expected, cluster, lane, now):
            return (
                f"the last {lane} GPUs are kept for short and urgent jobs, and it is "
                f"expected to run {expected / 3600:.1f} h and is not urgent"
            )
        if is_long:
            long_jobs.let_in(job)
        return ""

    def hopeless(job: Pending) -> str:
        if _can_wait(job, job.max_runtime, now, 0.0):
            return ""  # even its time limit ends in time, and no expected run time exceeds it: no need to learn one
        judged_by = LEARNED_FROM_TEAM if job.estimate else LEARNED_FROM_UNDECLARED
        return _late(job, now, expected_runtime(job, snap, E31_GIVE_UP), judged_by)

    return walk(ordered, snap, hopeless=hopeless, held_back=held_back, started=long_jobs.started)


class LongJobs:
    """The GPUs long jobs (expected over E31_LONG_S, not large) hold during a pass, and
    the most they may hold while they can wait. The share goes in line order: a long job let in
    keeps its part for the rest of the pass even when it finds no place yet (the only GPUs for
    it are those the reservation will need), so a long job behind it in line cannot take the
    share first and keep it for days. Counted on first use: most passes start no long job, and
    counting goes through every running job."""

    def __init__(self, snap: Snapshot):
        self.snap = snap
        self.share = E31_LONG_SHARE if snap.long_share is None else snap.long_share
        self.limit = self.share * snap.cluster.gpus
        self._waiting: dict[str, int] = {}  # long jobs let in this pass that found no place yet: their GPUs

    @cached_property
    def held(self) -> int:
        """A running job counts when it is long by what it was expected to take, as
        ``expected_runtime`` without a deadline: declared x its team's median actual / declared,
        or what jobs that declared nothing took; never more than its limit, so a job whose limit
        is a day or less never counts. Each team's figures are looked up once: a replay counts
        hundreds of running jobs on most of its passes."""
        model = self.snap.runtimes
        maybe = [r for r in self.snap.running if r.gpus <= E31_LARGE_GPUS and r.max_runtime > E31_LONG_S]
        teams = {r.team for r in maybe}
        ratio = {team: model.ratio(team, 0.5) for team in teams}
        undeclared = {team: model.runtime(team, 0.0, None, 0.5) for team in teams}
        return sum(
            r.gpus for r in maybe if (r.estimate * ratio[r.team] if r.estimate > 0 else undeclared[r.team]) > E31_LONG_S
        )

    def admit(self, gpus: int) -> bool:
        """Whether a long job of ``gpus`` may start; the first always may, however many it asks
        for, so a small cluster still runs its long jobs one by one. Without short jobs in the
        last day there is nothing to turn the GPUs over for, so any may."""
        taken = self.held + self.kept
        return taken == 0 or taken + gpus <= self.limit or not self._short_jobs_lately

    @property
    def _short_jobs_lately(self) -> bool:
        demand = self.snap.demand
        return demand is None or demand.came_lately(self.snap.now)

    @property
    def kept(self) -> int:
        return sum(self._waiting.values())

    def let_in(self, job: Pending) -> None:
        self._waiting[job.id] = job.gpus

    def started(self, job: Pending) -> None:
        """Told of every job the walk starts: a long job let in now holds its GPUs."""
        if job.id in self._waiting:
            self.held += self._waiting.pop(job.id)

    def reason(self, job: Pending, expected: float) -> str:
        share = f"{self.share:.0%} of the GPUs ({math.floor(self.limit)})"  # a job holds whole GPUs
        until = "one of them ends"
        quiet = self.snap.demand.quiet_from() if self.snap.demand is not None else None
        if quiet is not None:
            hours = (quiet - self.snap.now) / 3600
            until += f", or a day after the last short job came (in {hours:.1f} h if no other comes)"
        if job.deadline is not None:
            until += ", or as its deadline draws near"
        kept = f" and {self.kept} more are kept for such jobs ahead of it in line" if self.kept else ""
        return (
            f"jobs expected to run over {E31_LONG_S / 3600:.0f} h already hold {self.held} GPUs{kept}, "
            f"and such jobs may hold at most {share} while they can wait and short jobs keep coming; "
            f"it is expected to run {expected / 3600:.1f} h and starts when {until}"
        )


def _leaves_lane(job: Pending, expected: float, cluster: Cluster, lane: int, now: float) -> bool:
    """Whether a job may take GPUs now without eating into the lane kept for short and urgent jobs."""
    if job.gpus > cluster.gpus - lane or cluster.free_gpus - job.gpus >= lane:
        return True  # too big to leave the lane free anyway, or room beside it
    return expected <= E31_SHORT_S or not _can_wait(job, expected, now, E31_URGENT_S)


def _can_wait(job: Pending, expected: float, now: float, margin: float) -> bool:
    """Whether the job would still make its deadline starting ``margin`` from now (always, without one)."""
    return job.deadline is None or job.deadline - expected - now > margin


# --- e31-preempt ------------------------------------------------------------------------------


def e31_preempt_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    """``e31_walk``; then a waiting job that will miss its deadline unless it starts now (its
    latest start is within E31_URGENT_S, and it finds no GPUs) may have running jobs that keep
    checkpoints suspended to start on their GPUs, when that is worth it:

    - each of them can afford it: it still meets its own deadline (or has none) if it starts
      again only once the job it made room for is expected to end and takes all of its time
      limit, redoing what it did since its last checkpoint and paying the restore
      (``Snapshot.restore_s``);
    - the GPU time they lose (since their last checkpoint, and the restore) is less than the GPU
      time of the job they make room for: a deadline is saved for less than it costs.

    The cheapest to suspend go first, and only those on the machines the job takes. A job whose
    deadline cannot be met even now is not helped, and none is suspended for a job that fits but
    was held back by e31's own rules."""
    decision = e31_walk(ordered, snap)
    suspendable = [r for r in snap.running if r.checkpointed_at is not None]
    if not suspendable:
        return decision
    room: Room | None = None  # made for the first job that cannot wait: most passes have none
    gone = set(decision.start) | {job_id for job_id, _ in decision.expire}
    now = snap.now
    for job in ordered:
        # _can_wait with its whole limit (no expected run time is longer), written out: a pass
        # asks it of every queued job
        if job.deadline is None or job.deadline - job.max_runtime - now > E31_URGENT_S or job.id in gone:
            continue
        expected = expected_runtime(job, snap)
        if _can_wait(job, expected, now, E31_URGENT_S) or now + expected > job.deadline:
            continue  # it may still find GPUs in time, or it misses whatever is done
        room = room or Room(snap, ordered, decision, suspendable)
        made = room.make(job, expected)
        if made is not None:
            victims, machines = made
            decision.start.append(job.id)
            decision.placement[job.id] = machines
            decision.suspend.extend((victim.id, job.id) for victim in victims)
            decision.held_back.pop(job.id, None)
    return decision


@dataclass(frozen=True)
class Suspendable:
    """A running job that may be suspended, weighed once a pass."""

    job: Running
    loss: float  # GPU-seconds a suspend costs it: what it did since its last checkpoint, and the restore
    again_by: float  # the latest it may start again and still meet its deadline on all of its limit


class Room:
    """The GPUs after a pass's starts, and the running jobs that may still be suspended to make
    room for a job that cannot wait, cheapest first."""

    def __init__(self, snap: Snapshot, ordered: Sequence[Pending], decision: Decision, suspendable: list[Running]):
        self.snap = snap
        self.cluster = snap.cluster.copy()
        gpus = {job.id: job.gpus for job in ordered if job.id in decision.placement}
        for job_id, machines in decision.placement.items():
            self.cluster.hold(machines, gpus[job_id])
        self.suspendable = sorted((self._weigh(job) for job in suspendable), key=lambda s: s.loss)

    def _weigh(self, job: Running) -> Suspendable:
        snap = self.snap
        checkpointed = snap.checkpointed(job) if snap.checkpointed is not None else job.checkpointed_at
        assert checkpointed is not None  # only such jobs are suspendable
        loss = job.gpus * (snap.now - checkpointed + snap.restore_s)
        left = job.max_runtime - (checkpointed - job.started_at) + snap.restore_s  # of its limit, after the suspend
        return Suspendable(job, loss, math.inf if job.deadline is None else job.deadline - left)

    def make(self, job: Pending, expected: float) -> tuple[list[Running], tuple[int, ...]] | None:
        """The running jobs to suspend for ``job`` and where it starts; None when it is not worth it."""
        if self.cluster.fits(job.gpus):
            return None  # GPUs are free: e31's own rules held it back, not a lack of room
        again_at = self.snap.now + expected  # when the jobs suspended for it are sure to get GPUs back
        trial, freed = self.cluster.copy(), []
        for candidate in self.suspendable:
            if trial.fits(job.gpus):
                break
            if candidate.again_by >= again_at:
                trial.release(candidate.job.machines, candidate.job.gpus)
                freed.append(candidate)
        machines = trial.place(job.gpus)
        if machines is None:
            return None
        victims = [c for c in freed if set(c.job.machines) & set(machines)]
        if sum(c.loss for c in victims) >= job.gpus * expected:
            return None
        for victim in victims:
            self.cluster.release(victim.job.machines, victim.job.gpus)
            self.suspendable.remove(victim)
        self.cluster.hold(machines, job.gpus)
        return [victim.job for victim in victims], machines


POLICIES: dict[str, Policy] = {
    "fifo": Policy("fifo", fifo_priority, fifo_walk),
    "backfill": Policy("backfill", slurm_priority, slurm_walk, refresh_s=SLURM_CALC_PERIOD_S),
    "edf": Policy("edf", edf_priority, edf_walk),
    "sjf": Policy("sjf", sjf_priority, sjf_walk),
    "e31": Policy("e31", e31_priority, e31_walk, refresh_s=300.0),
    "e31-preempt": Policy("e31-preempt", e31_priority, e31_preempt_walk, refresh_s=300.0, preempts=True),
}
DEFAULT_POLICY = "e31"
PREEMPTING = "e31-preempt"  # the default policy's form that may suspend jobs (c.E31.preempt)
