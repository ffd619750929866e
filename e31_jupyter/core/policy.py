"""What a scheduling policy is, and the walk every policy shares: pure, (queued jobs, a
snapshot of the GPUs and what holds them) -> which jobs to start and where, which to expire.

No clock, no I/O, no randomness here: the live queue and the trace simulator (``simulator.py``)
run exactly this code. Every policy but ``e31-preempt`` lets a started job run to its end.

A ``Policy`` is a ``priority(job, snapshot)`` key that puts the queue in the order the policy
serves it, and a ``walk(ordered, snapshot)`` that goes down that order deciding. The live queue
(``line.py``) and the simulator both keep their queue sorted, new jobs put in their place, and
sort it afresh only when the policy's priorities can have moved (``refresh_s``), as Slurm does
every PriorityCalcPeriod. Whatever the policy, the walk keeps one owner's jobs to at most
``Snapshot.max_gpus_per_owner`` GPUs at once (``OwnerCap``), when the queue sets a cap.

The policies themselves: ``baselines.py`` (fifo, sjf, edf, Slurm's backfill), ``e31_policy.py``
(e31), ``e31_preempt.py`` (e31-preempt), and ``policies.py``, which names them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.runtimes import Demand, RuntimeModel, run_so_far_at

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
    # The queue suspended it to make room for another (e31-preempt): it is never expired, as a
    # job that never ran may be; it was counted on to make its deadline, and late beats lost.
    suspended_by_queue: bool = False
    # The run time it keeps from earlier runs (to their last checkpoint) where it resumes: what it
    # still takes is judged from the whole job (``estimate`` is the whole job's), having run so long.
    done_s: float = 0.0
    # It keeps checkpoints, so a policy that suspends jobs (e31-preempt) can take its GPUs back
    # once it runs. Only a job bigger than a machine is judged by it (``LongJobs``): the live
    # queue, one machine, refuses such a job at submit and leaves it False; the simulator sets it.
    checkpoints: bool = False
    # Its expected run times by quantile (e31's ``expected_runtime``), kept from pass to pass with
    # the run-time model's token they hold for (``RuntimeModel.tokens``): a pass asks of every
    # queued job, and most passes see no job of its team end.
    memo: list = field(default_factory=list, init=False, repr=False, compare=False)


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
    done_s: float = 0.0  # as Pending.done_s: run time kept from its runs before this one
    # It runs again after a suspend (or a loss), from its last checkpoint: one that has saved no
    # checkpoint since its start is not suspended again (``e31_preempt.Room``).
    resumed: bool = False
    # When it reaches its limit; kept, not worked out on each ask: a pass asks of every running job.
    ends_by: float = field(init=False, repr=False, compare=False)
    # What its expected run time was worked out from, kept from pass to pass while it holds
    # (``RuntimeModel.runtime_so_far``'s memo; ``expected_end``).
    memo: list = field(default_factory=list, init=False, repr=False, compare=False)
    # Its expected end or limit before ``now`` bounds it, kept with what it holds for
    # (``expected_ends_or_limits``): [its team's model token, from when and until when, the end].
    end_memo: list = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "ends_by", self.started_at + self.max_runtime)


@dataclass
class Decision:
    start: list[str] = field(default_factory=list)
    expire: list[tuple[str, str]] = field(default_factory=list)  # (job id, reason)
    placement: dict[str, tuple[int, ...]] = field(default_factory=dict)  # job id -> its machines
    held_back: dict[str, str] = field(default_factory=dict)  # job id -> why it waits though GPUs for it are free
    suspend: list[tuple[str, str]] = field(default_factory=list)  # (running job id, the job it makes room for)
    # The jobs left waiting (neither started nor expired), in line order, as far as the walk went
    # (backfill "stop" goes no further than the first that does not fit): those a policy that
    # goes on deciding (e31-preempt) weighs, without going through the whole line again.
    waiting: list[Pending] = field(default_factory=list, repr=False, compare=False)
    # The GPUs free once the walk's starts hold theirs (the walk's own copy of the cluster): what
    # a policy that goes on deciding (e31-preempt) starts from, instead of placing them again.
    cluster_after: Cluster | None = field(default=None, repr=False, compare=False)


@dataclass
class Snapshot:
    """The world as a policy sees it at one moment. It keeps what it works out (each team's
    share), so a new moment is a new snapshot (``replace``). What holds from moment to moment is
    kept on the jobs (``Pending.memo``, ``Running.memo``, ``Running.end_memo``)."""

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

    @cached_property
    def _usage_total(self) -> float:
        return sum(self.usage.values())

    def per_team(self, work: Callable[[Snapshot, str], float], team: str) -> float:
        """``work(self, team)``, worked out once per team for this snapshot."""
        try:
            return self._per_team[work, team]
        except KeyError:  # the first ask for this team
            value = self._per_team[work, team] = work(self, team)
            return value

    def share_used(self, team: str) -> float:
        """The team's part of all recent usage over an equal share: 1 is exactly its share (and
        everyone's while nobody has used anything)."""
        if self._usage_total <= 0:
            return 1.0
        teams = len(self.usage) + (team not in self.usage)
        return self.usage.get(team, 0.0) / self._usage_total * teams


def expected_end(job: Running, snap: Snapshot) -> float | None:
    """When a running job is expected to end: never before now, never after its limit; None
    when nothing says (it declared nothing, and no finished job like it ran as long)."""
    end = _expected_end_from_start(job, snap)
    return None if end is None else max(snap.now, end)


def _expected_end_from_start(job: Running, snap: Snapshot) -> float | None:
    """``expected_end`` before now bounds it: its start and what its run is expected to take."""
    runtime = snap.runtimes.runtime_so_far(job.team, job.estimate, ran_so_far(job, snap.now), 0.5, job.memo)
    if runtime is None:
        if not job.estimate:
            return None
        runtime = job.done_s + job.max_runtime  # it has outrun what it declared: it may run to its limit
    return job.started_at + min(runtime - job.done_s, job.max_runtime)


def ran_so_far(job: Running, now: float) -> float:
    """How long a running job has run, its earlier runs' kept work included (``Running.done_s``):
    what its whole run time is judged from."""
    return job.done_s + max(0.0, now - job.started_at)


def run_left(job: Pending | Running, snap: Snapshot, ran: float, q: float) -> float:
    """What the job's run (the one it is in, or its next) takes with probability ``q``, having run
    ``ran`` in all: as long as that share of its team's jobs that ran as long took
    (``RuntimeModel.runtime_so_far``), less what its earlier runs did (``done_s``); its limit when
    nothing says, and never more."""
    taken = snap.runtimes.runtime_so_far(job.team, job.estimate, ran, q)
    return job.max_runtime if taken is None else min(taken - job.done_s, job.max_runtime)


def expected_end_or_limit(job: Running, snap: Snapshot) -> float:
    """When a running job is expected to end (``expected_end``); by its limit when nothing says."""
    return expected_ends_or_limits((job,), snap)[0]


def expected_ends_or_limits(jobs: Sequence[Running], snap: Snapshot) -> list[float]:
    """``expected_end_or_limit`` of each of ``jobs``.

    Asked of every running job on most passes of a replay, and a job's answer changes only when
    its team's model learns something (``RuntimeModel.tokens``) or its run so far leaves the
    span its expected run time came from (``runtime_so_far``'s memo): it is kept on the job
    (``Running.end_memo``) with the times ``now`` may take meanwhile, and read from there
    without a call."""
    now, tokens = snap.now, snap.runtimes.tokens
    return [
        max(now, kept[3])
        if (kept := job.end_memo) and kept[0] is tokens[job.team] and kept[1] <= now < kept[2]
        else _end_or_limit_afresh(job, snap, tokens[job.team])
        for job in jobs
    ]


# Kept expected ends hold for a ``now`` this far inside the times worked out for them, far more
# than the rounding of times near 2e9 s, so one read from the memo is always the one worked out.
_END_MEMO_MARGIN_S = 1e-3


def _end_or_limit_afresh(job: Running, snap: Snapshot, token: object) -> float:
    end = _expected_end_from_start(job, snap)
    if end is None:
        end = job.ends_by
    memo = job.memo
    if memo and memo[0] is token:  # runtime_so_far answered from a span of run so far, and kept it
        run_from = job.started_at - job.done_s  # when the job would have started, run so far counting from 0
        since = max(job.started_at, run_from + run_so_far_at(job.estimate, memo[2])) + _END_MEMO_MARGIN_S
        until = run_from + run_so_far_at(job.estimate, memo[3]) - _END_MEMO_MARGIN_S
        job.end_memo[:] = (token, since, until, end)
    return max(snap.now, end)


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


_ENDS_BY = operator.attrgetter("ends_by")


def reserve(job: Pending, holders: Sequence[Running], cluster: Cluster, now: float) -> Reservation:
    """When and where ``job`` can start at the latest, every holder ending by its time limit."""
    trial = cluster.copy()
    for holder in sorted(holders, key=_ENDS_BY):
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
    started: Callable[[Pending, tuple[int, ...]], None] | None = None,
    avoid: Callable[[Pending], frozenset[int]] | None = None,
) -> Decision:
    """Start jobs in order while they fit.

    ``backfill``: what happens after the first job that does not fit. ``"easy"``: it gets a
    reservation (the earliest time it can start, running jobs ending by their time limits), and a
    later job may start only if it fits now and either ends by then (at its own time limit) or
    uses GPUs the reserved job will not need. ``"none"``: every later job that fits starts.
    ``"stop"``: nothing more starts.

    A job that does not start expires when ``hopeless`` gives a reason; with ``drop_first`` it is
    asked before the job may start. It is never asked of a job the queue suspended
    (``Pending.suspended_by_queue``), whatever the policy: that one runs, late if it must.
    ``held_back`` may keep a job that fits from starting, by giving the reason (no reservation is
    made for it). Every job that waits though there are
    GPUs for it gets the reason in ``Decision.held_back``: the policy's, or the reservation's.
    ``started`` is told of each job that starts and the machines it got. ``avoid`` names the
    machines a job goes on only when no other has room for it (a policy's wish for where it goes).

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
    shadow = math.inf  # the reservation's start: a job still running then goes beside it
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
        if drop_first and not job.suspended_by_queue and (reason := hopeless(job)):
            decision.expire.append((job.id, reason))
            continue
        capped = cap.over(job) if cap is not None else ""
        beside = now + job.max_runtime > shadow
        waits = ""  # why it waits though there are GPUs for it
        machines = None
        if capped:
            if cluster.fits(job.gpus):
                waits = capped
        elif job.gpus < no_room[beside]:
            if not cluster.fits(job.gpus):
                no_room = [min(no_room[0], job.gpus), min(no_room[1], job.gpus)]
                if snap.outside_gpus and cluster.free_gpus + snap.outside_gpus >= job.gpus:
                    waits = snap.outside_use
            elif held_back is None or not (waits := held_back(job, cluster)):
                machines = _place(job, cluster, reserved if beside else None, avoid(job) if avoid else frozenset())
                if machines is None:  # no place beside the reservation
                    assert reserved is not None  # a job that fits always has a place without one
                    no_room[1] = min(no_room[1], job.gpus)
                    waits = reserved.behind
        elif beside and job.gpus < no_room[0] and cluster.fits(job.gpus):
            assert reserved is not None  # beside says there is one
            waits = reserved.behind
        if machines is not None:
            decision.start.append(job.id)
            decision.placement[job.id] = machines
            holders.append(Running(job.id, job.gpus, now, job.max_runtime, machines))
            no_room = [math.inf, math.inf]
            if cap is not None:
                cap.took(job)
            if started is not None:
                started(job, machines)
            continue
        if not job.suspended_by_queue and (reason := hopeless(job)):
            decision.expire.append((job.id, reason))
            continue
        if waits:
            decision.held_back[job.id] = waits
        decision.waiting.append(job)
        if reserved is None and not capped and not cluster.fits(job.gpus):
            if backfill == "stop":
                break
            if backfill == "easy":
                reserved = reserve(job, holders, cluster, now)
                shadow = reserved.shadow
    decision.cluster_after = cluster
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


def _place(job: Pending, cluster: Cluster, beside: Reservation | None, avoid: frozenset[int]) -> tuple[int, ...] | None:
    """Place ``job`` anywhere, on the machines in ``avoid`` only when no other has room; or, when
    it would still run at a reservation's start, only where it cannot delay the reserved job
    (there the reservation decides, and ``avoid`` is not asked)."""
    if job.gpus <= 0:
        return ()
    if beside is None:
        return cluster.place(job.gpus, avoid=avoid)
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


def late(job: Pending, now: float, runtime: float, what: str) -> str:
    """Why a job can no longer meet its deadline, or "" while it still can."""
    if job.deadline is None or now + runtime <= job.deadline:
        return ""
    return (
        f"deadline can no longer be met: the job needs about {round(runtime)}s of run time ({what}) "
        f"and would end {round(now + runtime - job.deadline)}s after its deadline"
    )
