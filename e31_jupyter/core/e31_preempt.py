"""``e31-preempt``: ``e31`` in deadline order (``e31_preempt_priority``), and running jobs
that keep checkpoints may be suspended for a waiting job that would otherwise miss its
deadline, when they can afford it and it is worth what they lose (``e31_preempt_walk``).
``Supply`` forecasts the GPUs running jobs free by a time, to decide when room is made early;
``Room`` picks the jobs to suspend. Pure, like ``e31_policy.py``, whose walk it runs first.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from e31_jupyter.core.e31_policy import (
    E31_GIVE_UP,
    E31_LONG_SURE,
    E31_URGENT_S,
    e31_walk,
    expected_freeing_curve,
    expected_runtime,
    limits_freeing_curve,
    moved_deadline,
)
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import (
    Decision,
    Pending,
    Running,
    Snapshot,
    ran_so_far,
    run_left,
)

# A job asking for more GPUs is large: room is made for it only once it is urgent, as room for
# it takes whole machines. A count of GPUs, not the machine's size: on machines of 4 GPUs the
# common 8-GPU job would otherwise be one.
E31_LARGE_GPUS = 8
# Deadlines within the same minute are due together (``e31_preempt_priority``).
E31_PREEMPT_SAME_DUE_S = 60.0


def e31_preempt_priority(job: Pending, snap: Snapshot) -> tuple:
    """Earliest deadline first, to the minute (E31_PREEMPT_SAME_DUE_S); among jobs due at the
    same minute, as where many want results by the same time of day, the one expected to take
    the fewest GPU-hours first, then the deadline as fair share moves it (``moved_deadline``),
    then submit time. When not all of them can be met, shortest first meets the most (Moore and
    Hodgson's rule for one deadline); between different deadlines it is plain deadline order.
    e31 groups deadlines by the hour instead; where a job due soon can be given room by
    suspending others, that missed more deadlines than it saved, as jobs due an hour apart are
    not due together (HISTORY.md, stops 58 and 82).
    Fair share orders only jobs due at the same minute. Moving a team over its share behind
    jobs due later too missed 3.1% fewer jobs on the 96 judged runs, but no fewer on the 80
    held-out ones (geometric mean over their windows 0.993), and more runs had a size class pay
    (HISTORY.md, stops 83 and 85)."""
    if job.deadline is None:
        return (math.inf, 0.0, math.inf, job.submitted_at, job.id)
    expected = expected_runtime(job, snap)
    due_together = job.deadline // E31_PREEMPT_SAME_DUE_S * E31_PREEMPT_SAME_DUE_S
    return (due_together, job.gpus * expected, moved_deadline(job, snap, expected), job.submitted_at, job.id)


def e31_preempt_walk(ordered: Sequence[Pending], snap: Snapshot) -> Decision:
    """``e31_walk`` (a long job bigger than a machine that keeps checkpoints may start beyond the
    long jobs' share when it cannot afford to wait, as its GPUs can be taken back; one that keeps
    none waits for its turn whatever its deadline, as in e31); then a waiting job that finds no
    GPUs and will miss its deadline unless it is given room may have running jobs that keep
    checkpoints suspended to start on their GPUs.
    It is given room when its latest start is within E31_URGENT_S; or, a job of at most
    E31_LARGE_GPUS, as soon as its latest start is within its own expected run time and the
    GPUs running jobs are expected to free before then (``Supply``) are fewer than it and the
    jobs still waiting ahead of it in line need. Made early, the jobs suspended for it get their
    GPUs back sooner, so more of them can afford it. In either case, only when that is worth it:

    - each of them can afford it: it still meets its own deadline (or has none) if it starts
      again only once the job it made room for is expected to end and takes as long as
      E31_LONG_SURE of its team's jobs that ran as long; or, where it would miss its deadline so
      even if left alone, as long as half of them (``_judged_runtime``; never more than its
      limit), redoing what it did since its last checkpoint and paying the restore
      (``Snapshot.restore_s``);
    - the GPU time they lose (since their last checkpoint, and the restore) is less than the GPU
      time of the job they make room for (no work is given up for it), or less than E31_URGENT_S
      on every GPU of the cluster: spread over the cluster, the loss sets the jobs waiting back by
      less than the margin within which a job is urgent and is given room itself, so a job
      that could wait is not made to miss by it. The suspend saves a deadline, and the jobs
      suspended keep theirs. Held to the GPU time alone, a short job's deadline was worth too
      little to save: half an hour between checkpoints loses a quarter of an hour on each GPU,
      on average, more than many short jobs take (HISTORY.md, stop 61).

    The cheapest to suspend go first, and only those on the machines the job takes. A job whose
    deadline cannot be met even now is not helped, and none is suspended for a job that fits but
    was held back by e31's own rules."""
    decision = e31_walk(ordered, snap, takes_back=True)
    suspendable = [r for r in snap.running if r.checkpointed_at is not None]
    if not suspendable:
        return decision
    after_starts = decision.cluster_after
    assert after_starts is not None  # the walk leaves it
    room: Room | None = None  # made for the first job that cannot wait: most passes have none
    now = snap.now
    ahead = 0  # GPUs of the jobs ahead in line still waiting
    given = 0  # GPUs of the jobs given room so far
    supply: Supply | None = None
    for job in decision.waiting:
        waiting_ahead, ahead = ahead, ahead + job.gpus
        if job.deadline is None or not _may_need_room(job, job.deadline - job.max_runtime - now):
            continue
        expected = expected_runtime(job, snap)
        latest = job.deadline - expected  # the latest it may start and make its deadline
        if latest < now:
            continue  # it misses whatever is done
        if latest - now > E31_URGENT_S:
            if job.gpus > E31_LARGE_GPUS or latest - now > expected:
                continue
            supply = supply or Supply(snap, free=after_starts.free_gpus - given)
            if supply.covers(waiting_ahead + job.gpus, by=latest):
                continue  # GPUs are expected to free for it and the jobs ahead of it in time
        room = room or Room(snap, after_starts, suspendable)
        made = room.make(job, expected)
        if made is not None:
            victims, machines = made
            decision.start.append(job.id)
            decision.placement[job.id] = machines
            decision.suspend.extend((victim.id, job.id) for victim in victims)
            decision.held_back.pop(job.id, None)
            ahead -= job.gpus
            given += job.gpus
    if decision.suspend:  # room was made: those it was made for wait no more
        decision.waiting = [job for job in decision.waiting if job.id not in decision.placement]
    return decision


def _may_need_room(job: Pending, slack_on_limit: float) -> bool:
    """Whether a job may be given room this pass, judged on its whole limit (no expected run time
    is longer) before its expected run time is looked up: a pass asks it of every queued job.
    ``slack_on_limit`` is how long it could wait and still meet its deadline taking all of it."""
    if slack_on_limit <= E31_URGENT_S:
        return True
    return job.gpus <= E31_LARGE_GPUS and slack_on_limit <= job.max_runtime


class Supply:
    """The GPUs free after a pass's starts, and those running jobs are expected to free by a
    time (``expected_end``; by their limit when nothing says). Worked out only as far as it
    takes: most jobs asked about are settled by the GPUs free now, by all of the GPUs, or by
    the jobs that reach their limit by then, before any job's expected end is worked out."""

    def __init__(self, snap: Snapshot, free: int):
        self.snap = snap
        self.free = free  # after the pass's starts
        self.held = snap.cluster.gpus - snap.cluster.free_gpus  # by running jobs

    def covers(self, gpus: int, by: float) -> bool:
        """Whether ``gpus`` GPUs are expected to be free by ``by``."""
        if gpus <= self.free or gpus > self.free + self.held:
            return gpus <= self.free
        return gpus <= self.free + _freed_by(self._limits, by) or gpus <= self.free + _freed_by(self._expected, by)

    @cached_property
    def _limits(self) -> tuple[list[float], list[int]]:
        return limits_freeing_curve(self.snap.running)

    @cached_property
    def _expected(self) -> tuple[list[float], list[int]]:
        return expected_freeing_curve(self.snap.running, self.snap)


def _freed_by(curve: tuple[list[float], list[int]], when: float) -> int:
    times, freed = curve
    i = bisect.bisect_right(times, when)
    return freed[i - 1] if i else 0


def _judged_runtime(job: Running, snap: Snapshot) -> float:
    """The run time a running job on a deadline must still make it by after a suspend: as long as
    E31_LONG_SURE of its team's jobs that ran as long as it has took, where it makes its deadline
    so if left alone; else as long as half of them took (E31_GIVE_UP, the odds by which a waiting
    job expires). A job only likely to be on time may be suspended while that leaves it more
    likely than not to be: held to E31_LONG_SURE, it never could, and on the clock runs of
    HISTORY.md a third to two thirds of the tries to make room failed for want of such jobs
    alone (stop 62)."""
    assert job.deadline is not None  # asked only of a job with one
    sure = _runtime_so_far(job, snap, E31_LONG_SURE)
    return sure if job.started_at + sure <= job.deadline else _runtime_so_far(job, snap, E31_GIVE_UP)


def _runtime_so_far(job: Running, snap: Snapshot, q: float) -> float:
    """What a running job's run will take with probability ``q``, judged on all it has run, its
    earlier runs too (``run_left``). Not the limit alone: declared run times are over-estimates
    (on the public trace 1-3x what jobs take), and a suspend judged on them is one nearly no job
    on a deadline can afford."""
    return run_left(job, snap, ran_so_far(job, snap.now), q)


@dataclass(frozen=True, eq=False)  # one per running job: a list removes it by identity
class Suspendable:
    """A running job that may be suspended, weighed once a pass."""

    job: Running
    loss: float  # GPU-seconds a suspend costs it: what it did since its last checkpoint, and the restore
    again_by: float  # the latest it may start again and still meet its deadline (``_judged_runtime``)


class Room:
    """The GPUs after a pass's starts, and the running jobs that may still be suspended to make
    room for a job that cannot wait, cheapest first."""

    def __init__(self, snap: Snapshot, after_starts: Cluster, suspendable: list[Running]):
        self.snap = snap
        self.cluster = after_starts.copy()
        self._candidates = suspendable
        # (GPUs, when its victims get them back) of jobs that found no place: one asking as many
        # or more, whose victims would get them back no sooner, finds none either
        self._no_place: list[tuple[int, float]] = []

    @cached_property
    def suspendable(self) -> list[Suspendable]:
        """Weighed on first need: most jobs given room in a pass find GPUs free or no place."""
        weighed = (self._weigh(job) for job in self._candidates)
        return sorted((s for s in weighed if s is not None), key=lambda s: s.loss)

    def _weigh(self, job: Running) -> Suspendable | None:
        """None for a resumed job that has saved no checkpoint since it started again: suspended
        now it would have gained nothing from its restore, and the cheapest to suspend, a job
        just started again was suspended again and again, hundreds of times (HISTORY.md, stop 63)."""
        snap = self.snap
        checkpointed = snap.checkpointed(job) if snap.checkpointed is not None else job.checkpointed_at
        assert checkpointed is not None  # only such jobs are suspendable
        if job.resumed and checkpointed <= job.started_at:
            return None
        loss = job.gpus * (snap.now - checkpointed + snap.restore_s)
        if job.deadline is None:
            return Suspendable(job, loss, math.inf)
        left = _judged_runtime(job, snap) - (checkpointed - job.started_at) + snap.restore_s  # after the suspend
        return Suspendable(job, loss, job.deadline - left)

    def _worth(self, job: Pending, expected: float) -> float:
        """The most GPU-seconds the jobs suspended for ``job`` may lose: the GPU time it will do,
        or E31_URGENT_S on every GPU of the cluster, whichever is more (``e31_preempt_walk``)."""
        return max(job.gpus * expected, self.snap.cluster.gpus * E31_URGENT_S)

    def make(self, job: Pending, expected: float) -> tuple[list[Running], tuple[int, ...]] | None:
        """The running jobs to suspend for ``job`` and where it starts; None when it is not worth it."""
        if self.cluster.fits(job.gpus):
            return None  # GPUs are free: e31's own rules held it back, not a lack of room
        again_at = self.snap.now + expected  # when the jobs suspended for it are sure to get GPUs back
        if any(g <= job.gpus and at <= again_at for g, at in self._no_place):
            return None
        trial, freed = self.cluster.copy(), []
        for candidate in self.suspendable:
            if trial.fits(job.gpus):
                break
            if candidate.again_by >= again_at:
                trial.release(candidate.job.machines, candidate.job.gpus)
                freed.append(candidate)
        machines = trial.place(job.gpus)
        if machines is None:
            self._no_place.append((job.gpus, again_at))
            return None
        victims = [c for c in freed if set(c.job.machines) & set(machines)]
        if sum(c.loss for c in victims) >= self._worth(job, expected):
            return None
        for victim in victims:
            self.cluster.release(victim.job.machines, victim.job.gpus)
            self.suspendable.remove(victim)
        self.cluster.hold(machines, job.gpus)
        self._no_place.clear()  # its victims may have left GPUs beside it
        return [victim.job for victim in victims], machines
