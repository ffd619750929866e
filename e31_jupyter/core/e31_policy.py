"""``e31``, the default policy, pure, on ``policy.py``'s walk: earliest deadline first (by the
hour; within it, the fewest expected GPU-hours first) with EASY backfill; run times learned
from finished jobs decide when a waiting job expires (more likely than not to miss); a lane of
GPUs long jobs that can wait leave free for short and urgent ones; a share of the GPUs and of
the machines for jobs that run for days, which go beside each other; a fair-share nudge
(``e31_priority``, ``e31_lane``, ``LongJobs``, ``e31_walk``). ``e31_preempt.py`` builds
``e31-preempt`` on it.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Sequence
from functools import cached_property

from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import (
    Decision,
    Pending,
    Running,
    Snapshot,
    expected_ends_or_limits,
    late,
    run_left,
    walk,
)

E31_LANE_MAX = 0.30  # the most of the GPUs the lane for jobs that cannot wait takes
E31_SHORT_S = 3600.0  # a job expected to take at most this is short
E31_URGENT_S = 900.0  # a job that must start within this to make its deadline is urgent
E31_FAIR_SHARE = 0.25  # how far (in expected run times) fair-share moves a job in the queue
# Deadlines are compared by the hour: jobs due within the same one are served fewest expected
# GPU-hours first (where many are due at once, as results wanted by 09:00, that meets the most),
# while the deadline is at most E31_SAME_DUE_WITHIN_S away; further off, by deadline and submit
# time, so a stream of small jobs with a far deadline cannot keep a big one waiting.
E31_SAME_DUE_S = 3600.0
E31_SAME_DUE_WITHIN_S = 86400.0
E31_GIVE_UP = 0.5  # a waiting job expires when it would miss even if it took this quantile of run time
E31_LONG_S = 24 * 3600.0  # a job expected to hold its GPUs longer than this is long
# Long jobs that can wait start only while long jobs hold at most this share of the GPUs, and of the machines.
E31_LONG_SHARE = 0.6
# A long job waits for room in the share only while it would still make its deadline if it ran
# as long as this share of its team's jobs (the q-quantile of its run time): waiting for its turn
# must not make it likely to be late.
E31_LONG_SURE = 0.9

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
    memo, token = job.memo, snap.runtimes.tokens[job.team]
    if memo and memo[0] is token:  # asked of every job in line, more than once a pass: kept
        try:
            return memo[1][q]
        except KeyError:
            pass
    else:
        memo[:] = (token, {})
    runtime = memo[1][q] = _learned_runtime(job, snap, q)
    return runtime


def _learned_runtime(job: Pending, snap: Snapshot, q: float) -> float:
    if job.done_s:  # it resumes: what is left of its whole run time, having run so long
        return run_left(job, snap, job.done_s, q)
    window = job.deadline - job.submitted_at if job.deadline is not None else None
    return min(snap.runtimes.runtime(job.team, job.estimate, window, q), job.max_runtime)


def e31_priority(job: Pending, snap: Snapshot) -> tuple:
    """Earliest deadline first, whatever the job's size, a deadline moved later for a team that
    used more than its share of recent GPU time and earlier for one that used less (by up to
    2 x E31_FAIR_SHARE expected run times). Deadlines count by the hour (E31_SAME_DUE_S): among
    jobs due in the same hour, the one expected to take the fewest GPU-hours goes first, then
    the earlier (moved) deadline. When not all of them can be met, the shortest first meets the
    most (as Moore and Hodgson's rule for one deadline), where EDF would serve them by submit
    time, an order that means nothing. A job due more than E31_SAME_DUE_WITHIN_S from now goes
    by deadline and submit time alone: its deadline is not near, and first come first served
    keeps a stream of small jobs from starving a big one. A large job is not put first: where
    large jobs are common, serving them ahead of every deadline costs more deadlines than it
    saves; it is kept from starving as in edf, by the reservation it holds once it is first in
    line."""
    if job.deadline is None:
        return (math.inf, 0.0, math.inf, job.submitted_at, job.id)
    expected = expected_runtime(job, snap)
    due = moved_deadline(job, snap, expected)
    if due - snap.now > E31_SAME_DUE_WITHIN_S:
        return (due // E31_SAME_DUE_S, 0.0, due, job.submitted_at, job.id)
    return (due // E31_SAME_DUE_S, job.gpus * expected, due, job.submitted_at, job.id)


def moved_deadline(job: Pending, snap: Snapshot, expected: float) -> float:
    """The job's deadline as fair share moves it: later for a team over its share of recent GPU
    time, earlier for one under it, by up to 2 x E31_FAIR_SHARE of its ``expected`` run time.
    Asked only of a job with a deadline (no assert: a replay asks it of every job in line)."""
    return job.deadline + snap.per_team(_fair_shift, job.team) * expected  # type: ignore[operator]


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


def e31_walk(ordered: Sequence[Pending], snap: Snapshot, *, takes_back: bool = False) -> Decision:
    """EASY backfill in ``e31_priority`` order, with rules of its own:

    - A job expires when it is more likely than not to miss its deadline (never one the queue
      suspended: ``walk``): when it cannot start now and its expected run time
      (``expected_runtime``, learned from finished jobs, not the over-estimated declared time)
      no longer fits before the deadline. Its GPUs go to jobs that
      can still make theirs.
    - Long jobs (expected over E31_LONG_S) start only while long jobs hold at most
      E31_LONG_SHARE of the GPUs (``LongJobs``; the queue's ``long_jobs_share``): the rest turn
      over within a day, so a burst finds GPUs freeing every hour instead of a cluster given to
      jobs that end next week. Long jobs also go beside each other: on a machine long jobs
      already run on when one has room, on another only while they run on at most
      E31_LONG_SHARE of the machines. The other machines run only jobs that end within a day,
      so some turn whole every night for the jobs that need whole machines, where long jobs
      spread one or two to a machine would leave none (HISTORY.md, stop 69). A long job waits
      for its turn in the share (when the running long jobs are expected to have left room for
      it and for those ahead of it in line) only while it can afford to: it would still make
      its deadline after that wait, taking as long as E31_LONG_SURE of its team's jobs; else it
      starts where the GPUs are. A job bigger
      than a machine waits for its turn whatever its deadline: past the share, it would hold
      whole machines for days that nothing can take back, the GPUs the large jobs that come
      later need free together (HISTORY.md, stop 64). Unless something can: where the policy
      ``takes_back`` GPUs by suspending jobs (e31-preempt) and the job keeps checkpoints, it is
      judged as a job of one machine (stop 65). While no short job came for a day, there is
      nothing to keep the rest for, and the share does not hold.
    - The last GPUs are a lane (``e31_lane``) for short jobs (expected <= E31_SHORT_S) and urgent
      ones (latest start within E31_URGENT_S): a long job that can wait does not take them, so a
      burst of short jobs that cannot wait finds GPUs free. Jobs too big to ever leave the lane
      free are exempt. A large job that can wait is not: exempt, it could take the lane's GPUs
      as they freed, leaving none for a burst of urgent jobs.

    Both hold whatever a job's size. A large job needs no exemption from the share: while no
    long job runs it starts whatever its size (``LongJobs.admit``), and it waits for the long
    jobs running to end, which they do, so the share never starves it. Exempt, large long jobs
    filled the GPUs the share keeps turning over, and large jobs missed more deadlines, not
    fewer (HISTORY.md, stop 60).
    """
    now = snap.now
    lane = e31_lane(snap)
    long_jobs = LongJobs(snap, takes_back=takes_back)

    def held_back(job: Pending, cluster: Cluster) -> str:
        expected = expected_runtime(job, snap)
        is_long = expected > E31_LONG_S
        if is_long and not long_jobs.admit(job, cluster) and long_jobs.waits_for_turn(job):
            return long_jobs.reason(job, expected, cluster)
        if not _leaves_lane(job, expected, cluster, lane, now):
            return (
                f"the last {lane} GPUs are kept for short and urgent jobs, and it is "
                f"expected to run {expected / 3600:.1f} h and is not urgent"
            )
        if is_long:
            long_jobs.let_in(job)
        return ""

    def hopeless(job: Pending) -> str:  # asked of every job left waiting, each pass
        if job.deadline is None or job.deadline - job.max_runtime - now > 0.0:  # _can_wait by its limit, inline
            return ""  # even its time limit ends in time, and no expected run time exceeds it: no need to learn one
        judged_by = LEARNED_FROM_TEAM if job.estimate else LEARNED_FROM_UNDECLARED
        return late(job, now, expected_runtime(job, snap, E31_GIVE_UP), judged_by)

    return walk(
        ordered, snap, hopeless=hopeless, held_back=held_back, started=long_jobs.started, avoid=long_jobs.elsewhere
    )


class LongJobs:
    """The GPUs and machines long jobs (expected over E31_LONG_S) hold during a pass, and
    the most they may hold while they can wait. The share goes in line order: a long job let in
    keeps its part for the rest of the pass even when it finds no place yet (the only GPUs for
    it are those the reservation will need), so a long job behind it in line cannot take the
    share first and keep it for days. Counted on first use: most passes start no long job, and
    counting goes through every running job."""

    def __init__(self, snap: Snapshot, takes_back: bool = False):
        self.snap = snap
        self.takes_back = takes_back  # the policy may suspend a job that keeps checkpoints
        self.share = E31_LONG_SHARE if snap.long_share is None else snap.long_share
        self.limit = self.share * snap.cluster.gpus
        self.machine_limit = self.share * len(snap.cluster.sizes)
        self._waiting: dict[str, int] = {}  # long jobs let in this pass that found no place yet: their GPUs
        self.kept = 0  # their GPUs in all
        self.ahead = 0  # GPUs of the long jobs this pass held back for the share, waiting their turn
        # The fewest GPUs no machine long jobs run on had free since the pass's last start: a job
        # asking as many or more finds no room beside them either (``_fits_beside``).
        self._no_room_beside = math.inf
        self._untils: dict[tuple[bool, bool], str] = {}  # see reason
        self._fulls: dict[tuple, str] = {}

    @cached_property
    def running(self) -> list[Running]:
        """The running jobs that count: long by what they were expected to take, as
        ``expected_runtime`` without a deadline: declared x its team's median actual / declared,
        or what jobs that declared nothing took; never more than its limit, so a job whose limit
        is a day or less never counts. Each team's figures are looked up once: a replay counts
        hundreds of running jobs on most of its passes."""
        model = self.snap.runtimes
        maybe = [r for r in self.snap.running if r.max_runtime > E31_LONG_S]
        teams = {r.team for r in maybe}
        ratio = {team: model.ratio(team, 0.5) for team in teams}
        undeclared = {team: model.runtime(team, 0.0, None, 0.5) for team in teams}
        return [r for r in maybe if (r.estimate * ratio[r.team] if r.estimate > 0 else undeclared[r.team]) > E31_LONG_S]

    @cached_property
    def held(self) -> int:
        return sum(r.gpus for r in self.running)

    @cached_property
    def machines(self) -> set[int]:
        """The machines long jobs run on, those started this pass included."""
        return {m for r in self.running for m in r.machines}

    @cached_property
    def _every_machine(self) -> frozenset[int]:
        return frozenset(range(len(self.snap.cluster.sizes)))

    @cached_property
    def _ends(self) -> tuple[list[float], list[int]]:
        """When the long jobs running are expected to end (``expected_end``; by their limit when
        nothing says), soonest first, and the GPUs freed by each."""
        return expected_freeing_curve(self.running, self.snap)

    @cached_property
    def _limits(self) -> tuple[list[float], list[int]]:
        """As ``_ends``, each long job running by its limit (which may be past): none is expected
        to end later, so a wait for room by these is never shorter than by ``_ends``, and is
        found without working out any expected end."""
        return limits_freeing_curve(self.running)

    def waits_for_turn(self, job: Pending) -> bool:
        """Whether a long job that finds the share full waits for its turn in it: one bigger than a
        machine always, whatever its deadline, as it would take whole machines for days, the
        GPUs a large job that comes later must find free together, unless they can be taken
        back from it (``_always_waits``); another while it can afford to (``waits_for_room``)."""
        return self._always_waits(job) or self.waits_for_room(job)

    def _always_waits(self, job: Pending) -> bool:
        """A job bigger than a machine that nothing could take its GPUs back from: the policy
        does not suspend jobs, or this one keeps no checkpoints."""
        return job.gpus > self.snap.cluster.machine_gpus and not (self.takes_back and job.checkpoints)

    def waits_for_room(self, job: Pending) -> bool:
        """Whether a long job that finds the share full may wait for its turn in it: it would
        still make its deadline (or has none) after the wait for room for it and for the long
        jobs held back ahead of it, taking as long as E31_LONG_SURE of its team's jobs (where the
        machines are full and not the GPUs: until the first long job ends). One that waits is
        counted ahead of the rest of the line."""
        need = self.held + self.kept + self.ahead + job.gpus - self.limit
        sure, now = expected_runtime(job, self.snap, E31_LONG_SURE), self.snap.now
        # The wait by the limits is the longer: when the job can afford even that, the expected
        # ends need not be worked out (most long jobs asked in a replay can).
        if not (
            _can_wait(job, sure, now, _wait(self._limits, need, now))
            or _can_wait(job, sure, now, _wait(self._ends, need, now))
        ):
            return False
        self.ahead += job.gpus
        return True

    def admit(self, job: Pending, cluster: Cluster) -> bool:
        """Whether a long job may start: within the share of the GPUs (``_within_gpus``) and of the
        machines (``_within_machines``). Without short jobs in the last day there is nothing to
        turn the GPUs over for, so any may."""
        if not self._short_jobs_lately:
            return True
        return self._within_gpus(job.gpus) and self._within_machines(job, cluster)

    def _within_gpus(self, gpus: int) -> bool:
        """The first long job always may start, however many GPUs it asks for, so a small
        cluster still runs its long jobs one by one; the others while long jobs hold at most the
        share of the GPUs."""
        taken = self.held + self.kept
        return taken == 0 or taken + gpus <= self.limit

    def _within_machines(self, job: Pending, cluster: Cluster) -> bool:
        """Where it fits on a machine long jobs already run on, it goes there (``elsewhere``) and
        adds none; else long jobs run on at most the share of the machines, counting those it
        would add. The first always may. On one machine (the live queue) a long job that fits
        always fits beside the others, so only the GPUs' share holds there."""
        if not self.machines or self._fits_beside(job, cluster):
            return True
        return len(self.machines) + cluster.machines_for(job.gpus) <= self.machine_limit

    def _fits_beside(self, job: Pending, cluster: Cluster) -> bool:
        if job.gpus >= self._no_room_beside or job.gpus > cluster.machine_gpus:
            return False
        if any(cluster.free[m] >= job.gpus for m in self.machines):
            return True
        self._no_room_beside = job.gpus
        return False

    def elsewhere(self, job: Pending) -> frozenset[int]:
        """The machines a long job let in goes on only when no machine long jobs run on has room
        for it: those they do not run on. Nothing for other jobs, and for a job bigger than a
        machine, which takes whole ones."""
        if job.id not in self._waiting or job.gpus > self.snap.cluster.machine_gpus:
            return frozenset()
        return self._every_machine - self.machines

    @property
    def _short_jobs_lately(self) -> bool:
        demand = self.snap.demand
        return demand is None or demand.came_lately(self.snap.now)

    def let_in(self, job: Pending) -> None:
        self.kept += job.gpus - self._waiting.get(job.id, 0)
        self._waiting[job.id] = job.gpus

    def started(self, job: Pending, machines: tuple[int, ...]) -> None:
        """Told of every job the walk starts: a long job let in now holds its GPUs on its machines."""
        self._no_room_beside = math.inf  # the machines long jobs run on may have grown
        if job.id in self._waiting:
            gpus = self._waiting.pop(job.id)
            self.held += gpus
            self.kept -= gpus
            self.machines.update(machines)

    def reason(self, job: Pending, expected: float, cluster: Cluster) -> str:
        return f"{self._full(job, cluster)}; it is expected to run {expected / 3600:.1f} h and starts when {self._until(job)}"

    def _until(self, job: Pending) -> str:
        """When a long job held back for the share starts; worked out once per kind of job a pass
        (a pass may say it of hundreds)."""
        kind = (self._always_waits(job), job.deadline is not None)
        until = self._untils.get(kind)
        if until is None:
            until = "one of them ends"
            quiet = self.snap.demand.quiet_from() if self.snap.demand is not None else None
            if quiet is not None:
                hours = (quiet - self.snap.now) / 3600
                until += f", or a day after the last short job came (in {hours:.1f} h if no other comes)"
            if kind[0]:
                until += ", whatever its deadline, as it would take whole machines for days"
            elif kind[1]:
                until += ", or as its deadline draws near"
            self._untils[kind] = until
        return until

    def _full(self, job: Pending, cluster: Cluster) -> str:
        """What of the share long jobs already take, its GPUs or its machines; worked out once per
        count of them a pass."""
        gpus = not self._within_gpus(job.gpus)
        kind = (gpus, self.held, self.kept) if gpus else (gpus, len(self.machines))
        full = self._fulls.get(kind)
        if full is None:
            full = self._fulls[kind] = (
                f"jobs expected to run over {E31_LONG_S / 3600:.0f} h already {self._taken(gpus)} "
                f"while they can wait and short jobs keep coming"
            )
        return full

    def _taken(self, gpus: bool) -> str:
        if gpus:
            kept = f" and {self.kept} more are kept for such jobs ahead of it in line" if self.kept else ""
            share = f"{self.share:.0%} of the GPUs ({math.floor(self.limit)})"  # a job holds whole GPUs
            return f"hold {self.held} GPUs{kept}, and such jobs may hold at most {share}"
        machines = f"{self.share:.0%} of the machines ({math.floor(self.machine_limit)})"
        return (
            f"run on {len(self.machines)} machines, none with room for it beside them, "
            f"and such jobs may run on at most {machines}"
        )


def freeing_curve(ends: Sequence[float], gpus: Sequence[int]) -> tuple[list[float], list[int]]:
    """Running jobs' ends and the GPUs of each -> the ends, soonest first, and the GPUs freed by
    each. A pass may draw it of hundreds of jobs: the work is left to C (``zip``, ``map``)."""
    ordered = sorted(zip(ends, gpus), key=_END)  # by end alone: faster than by the pairs, same curve
    return list(map(_END, ordered)), list(itertools.accumulate(map(_GPUS, ordered)))


_END, _GPUS = operator.itemgetter(0), operator.itemgetter(1)


def expected_freeing_curve(jobs: Sequence[Running], snap: Snapshot) -> tuple[list[float], list[int]]:
    """``freeing_curve`` of running jobs by when they are expected to end (by their limit when nothing says)."""
    return freeing_curve(expected_ends_or_limits(jobs, snap), [job.gpus for job in jobs])


def limits_freeing_curve(jobs: Sequence[Running]) -> tuple[list[float], list[int]]:
    """``freeing_curve`` of running jobs by their limits (which may be past)."""
    return freeing_curve([job.ends_by for job in jobs], [job.gpus for job in jobs])


def _wait(curve: tuple[list[float], list[int]], gpus: float, now: float) -> float:
    """How long from ``now`` until a freeing curve has freed ``gpus`` GPUs (forever if it never does)."""
    ends, freed = curve
    enough = bisect.bisect_left(freed, gpus)  # the first end by which enough GPUs are freed
    return max(0.0, ends[enough] - now) if enough < len(ends) else math.inf


def _leaves_lane(job: Pending, expected: float, cluster: Cluster, lane: int, now: float) -> bool:
    """Whether a job may take GPUs now without eating into the lane kept for short and urgent jobs."""
    if job.gpus > cluster.gpus - lane or cluster.free_gpus - job.gpus >= lane:
        return True  # too big to leave the lane free anyway, or room beside it
    return expected <= E31_SHORT_S or not _can_wait(job, expected, now, E31_URGENT_S)


def _can_wait(job: Pending, expected: float, now: float, margin: float) -> bool:
    """Whether the job would still make its deadline starting ``margin`` from now (always, without one)."""
    return job.deadline is None or job.deadline - expected - now > margin
