"""What a policy may learn from jobs already seen, pure: run times of finished jobs
(``RuntimeModel``) and the recent demand of short jobs that could not wait (``UrgentDemand``).
Both are fed by their caller (the live queue's history, or the simulator) as jobs end or
arrive, so nothing is learned from the future."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Sequence
from typing import Protocol

KEPT_RUNTIMES = 100_000  # run times a team's cache keeps between its finished jobs; then it starts afresh


class Tokens(dict[str | None, object]):
    """Per team, an object that stays the same while the model's answers for the team cannot
    change, and is a new one once they may (a job of the team's finished, or anyone's where the
    team borrows everyone's samples): a caller may keep an answer beside it, and trust the answer
    while the team's token is still the same object. Read by subscript, as a pass reads it for
    every job it weighs; the first read after a change makes the new one."""

    def __missing__(self, team: str | None) -> object:
        token = self[team] = object()
        return token


class RuntimeModel:
    """What finished jobs teach about run times, from the latest ``window`` jobs per team and over
    everyone: the ratio of each job's actual run time to what it declared (``Pending.estimate``),
    and, for jobs with a deadline, to its deadline window (deadline - submit); for jobs that
    declared nothing, the run time itself. Fed by the caller as jobs finish, so there is no
    look-ahead. A team with fewer than ``min_samples`` finished jobs borrows everyone's; with none
    at all the declared time stands (ratio 1).

    A job's run time is bounded by both: its declared time x a learned ratio, and a run time that
    sits inside the learned range of actual / deadline window. ``runtime`` keeps only the ratios
    consistent with both. Where deadlines say nothing about run time that range is wide and
    changes nothing; where people set deadlines from how long their work takes, it narrows the
    estimate.
    """

    def __init__(self, window: int = 400, min_samples: int = 20):
        self.window = window
        self.min_samples = min_samples
        self._declared: dict[str | None, deque[float]] = {}  # actual / declared
        self._windows: dict[str | None, deque[float]] = {}  # actual / deadline window
        self._undeclared: dict[str | None, deque[float]] = {}  # actual, of jobs that declared nothing
        # Worked out from the samples, per team, and kept while the samples they come from stand
        # (``_forget``): a queue asks again for every waiting job on every pass.
        self._cache: dict[str | None, tuple[list[float], tuple[float, float] | None]] = {}  # see _learned
        self._undeclared_cache: dict[str | None, list[float]] = {}  # sorted
        self._runtimes: dict[str | None, dict[tuple[float, float | None, float], float]] = {}  # see runtime
        # The samples sorted, per (samples, team or None): a new list each time they change (``_ordered``).
        self._sorted: dict[tuple[int, str | None], list[float]] = {}
        self.tokens = Tokens()  # what callers keep answers beside, per team

    def observe(self, team: str, declared_s: float, actual_s: float, deadline_window_s: float | None = None) -> None:
        """One finished job: what it declared (0: nothing), what it took, and (optional) how long
        its deadline left it from submit."""
        declared = self._add(self._declared, team, declared_s, actual_s)
        windowed = self._add(self._windows, team, deadline_window_s or 0.0, actual_s)
        if declared or windowed:
            self._forget(team, (self._cache, self._runtimes, self.tokens), (self._declared, self._windows))
        if declared_s <= 0:
            self._add(self._undeclared, team, 1.0, actual_s)
            self._forget(team, (self._undeclared_cache, self.tokens), (self._undeclared,))

    def _add(self, samples: dict[str | None, deque[float]], team: str, base_s: float, actual_s: float) -> bool:
        if base_s <= 0:
            return False
        value = actual_s / base_s
        for key in (team, None):
            latest = samples.setdefault(key, deque(maxlen=self.window))
            dropped = latest[0] if len(latest) == latest.maxlen else None
            latest.append(value)
            ordered = self._sorted.get((id(samples), key))
            if ordered is not None:  # kept sorted as it changes, in a new list: one handed out stays as it was
                ordered = list(ordered)
                if dropped is not None:
                    del ordered[bisect_left(ordered, dropped)]
                insort(ordered, value)
                self._sorted[(id(samples), key)] = ordered
        return True

    def _forget(self, team: str, caches: Sequence[dict], sources: Sequence[dict[str | None, deque[float]]]) -> None:
        """``team``'s samples in ``sources`` changed, and so everyone's: drop what ``caches`` keep
        for it, for everyone, and for every team that borrows everyone's (too few of its own)."""
        for cache in caches:
            stale = [key for key in cache if key is None or key == team or self._borrows(key, sources)]
            for key in stale:
                del cache[key]

    def _borrows(self, team: str, sources: Sequence[dict[str | None, deque[float]]]) -> bool:
        return any(len(samples.get(team, ())) < self.min_samples for samples in sources)

    def ratio(self, team: str | None, q: float) -> float:
        """The q-quantile of actual / declared run time for the team's jobs (None: everyone's)."""
        ratios, _ = self._learned(team)
        return quantile(ratios, q) if ratios else 1.0

    def runtime(self, team: str, declared_s: float, deadline_window_s: float | None, q: float) -> float:
        """The q-quantile of the job's run time: ``declared_s`` x the team's ratios of actual /
        declared, keeping those whose run time lies in the learned range of actual / deadline
        window (all of them when the job has no deadline, or fewer than ``min_samples`` agree).
        A job that declared nothing (``declared_s`` 0) goes by the run times of finished jobs that
        declared nothing either; 0 while there are none.
        Asked for every waiting job on every pass: what it works out is kept until a job of the
        team ends (or any job, for a team that borrows everyone's samples)."""
        if declared_s <= 0:
            durations = self._undeclared_durations(team)
            return quantile(durations, q) if durations else 0.0
        known = self._runtimes.get(team)
        if known is None:
            known = self._runtimes[team] = {}
        asked = (declared_s, deadline_window_s, q)
        runtime = known.get(asked)
        if runtime is None:
            if len(known) >= KEPT_RUNTIMES:
                known.clear()
            runtime = known[asked] = self._runtime(team, declared_s, deadline_window_s, q)
        return runtime

    def _runtime(self, team: str, declared_s: float, deadline_window_s: float | None, q: float) -> float:
        ratios, bounds = self._learned(team)
        if not ratios:
            return declared_s
        if bounds is not None and deadline_window_s and declared_s > 0:
            scale = deadline_window_s / declared_s
            lo, hi = bisect_left(ratios, bounds[0] * scale), bisect_right(ratios, bounds[1] * scale)
            if hi - lo >= self.min_samples:
                return declared_s * ratios[min(hi - 1, lo + int(q * (hi - lo)))]
        return declared_s * quantile(ratios, q)

    def runtime_so_far(
        self, team: str, declared_s: float, elapsed_s: float, q: float, memo: list | None = None
    ) -> float | None:
        """The q-quantile of a running job's whole run time, given that it has run ``elapsed_s``:
        ``declared_s`` x the q-quantile of the team's ratios above the share of it already run (a
        job that has run long is likely one of the long ones); what it declared while nothing is
        learned. None once it has outrun all of them: it may run to its limit. A job that declared
        nothing (``declared_s`` 0) goes by the run times of finished jobs that declared nothing
        either, the same way; None while there are none longer than it has run.

        ``memo``: a list the caller keeps for one job (empty at first). The answer is kept in it
        with the team's token (``tokens``) and how far the job may run before it changes, so asking
        again as the job runs, while its team learned nothing new, is a lookup: a pass asks of
        every running job, and most passes see no job of its team end."""
        declared = declared_s > 0
        floor = run_so_far_measure(declared_s, elapsed_s)
        token = self.tokens[team]
        if memo and memo[0] is token and memo[1] == q and memo[2] <= floor < memo[3]:
            found = memo[4]
        else:
            if declared:
                ordered = self._learned(team)[0]
                if not ordered:
                    return declared_s if elapsed_s < declared_s else None
            else:
                ordered = self._undeclared_durations(team)
            found, lo, hi = _above(ordered, floor, q)
            if memo is not None:
                memo[:] = (token, q, lo, hi, found)
        if found is None or not declared:
            return found  # a run time itself, for a job that declared none
        return declared_s * found

    def _undeclared_durations(self, team: str) -> list[float]:
        durations = self._undeclared_cache.get(team)
        if durations is None:
            durations = self._undeclared_cache[team] = self._ordered(self._undeclared, team)
        return durations

    def _learned(self, team: str | None) -> tuple[list[float], tuple[float, float] | None]:
        """The team's actual / declared ratios, sorted, and the lowest and highest actual /
        deadline window (None before any); everyone's while the team has few. Kept until the
        next observe."""
        learned = self._cache.get(team)
        if learned is None:
            windows = self._ordered(self._windows, team)
            bounds = (windows[0], windows[-1]) if windows else None
            learned = self._cache[team] = (self._ordered(self._declared, team), bounds)
        return learned

    def _ordered(self, samples: dict[str | None, deque[float]], team: str | None) -> list[float]:
        """The samples the team's figures come from, sorted: its own, or everyone's while it has
        fewer than ``min_samples``. Sorted once per change, however many teams borrow them."""
        key = team if len(samples.get(team, ())) >= self.min_samples else None
        ordered = self._sorted.get((id(samples), key))
        if ordered is None:
            ordered = self._sorted[(id(samples), key)] = sorted(samples.get(key, ()))
        return ordered


class Demand(Protocol):
    """What a policy reads of urgent jobs' demand (``Snapshot.demand``): ``UrgentDemand``, or the
    forecast's view of it that keeps it coming."""

    def lately(self, now: float) -> float: ...

    def quiet_from(self) -> float | None: ...

    def came_lately(self, now: float) -> bool: ...


class UrgentDemand:
    """How many GPUs jobs that could not wait asked for lately, per hour of submit time over the
    last day: the GPU-seconds declared by short jobs (at most one machine, a declared run time of
    at most ``short_s``) whose deadline left them at most ``urgent_s`` beyond their declared run
    time when they came. Fed by the caller as jobs are submitted, so there is no look-ahead. It
    sizes e31's lane (``e31_lane``): while such jobs come, GPUs kept free let them start at
    once; where deadlines leave hours (results wanted by the morning), or in the hours none
    come, there is nothing to keep free for. While none came for a day, long jobs may take
    every GPU (``LongJobs``)."""

    def __init__(
        self,
        short_s: float = 7200.0,
        machine_gpus: int = 8,
        bucket_s: float = 3600.0,
        span_s: float = 86400.0,
        urgent_s: float = 3600.0,
    ):
        self.short_s = short_s
        self.machine_gpus = machine_gpus
        self.bucket_s = bucket_s
        self.span_s = span_s
        self.urgent_s = urgent_s
        self._buckets: deque[list[float]] = deque()  # [bucket start, declared GPU-seconds]

    def submitted(self, t: float, gpus: int, declared_s: float, deadline: float | None) -> None:
        if gpus > self.machine_gpus or not 0 < declared_s <= self.short_s:
            return  # a job that declared no run time is not known to be short
        if deadline is None or deadline - t - declared_s > self.urgent_s:
            return  # it can wait
        start = t - t % self.bucket_s
        if not self._buckets or self._buckets[-1][0] < start:
            self._buckets.append([start, 0.0])
        self._buckets[-1][1] += gpus * declared_s
        while self._buckets and self._buckets[0][0] < start - self.span_s:
            self._buckets.popleft()

    def lately(self, now: float) -> float:
        """The GPUs such jobs held in this hour or the last, whichever held more, at their
        declared run times; 0 when none came in them."""
        this_hour = now - now % self.bucket_s
        recent = (load for start, load in self._buckets if start >= this_hour - self.bucket_s)
        return max(recent, default=0.0) / self.bucket_s

    def quiet_from(self) -> float | None:
        """When the short jobs seen so far stop holding long jobs back: ``span_s`` after the
        hour the last came in; None before any came."""
        return self._buckets[-1][0] + self.span_s if self._buckets else None

    def came_lately(self, now: float) -> bool:
        quiet = self.quiet_from()
        return quiet is not None and now < quiet


def run_so_far_measure(declared_s: float, elapsed_s: float) -> float:
    """How ``RuntimeModel.runtime_so_far`` measures a job's run so far, and keeps its answer by:
    the share of its declared run time, or the run time itself for a job that declared none."""
    return elapsed_s / declared_s if declared_s > 0 else elapsed_s


def run_so_far_at(declared_s: float, measure: float) -> float:
    """The run so far, in seconds, that ``run_so_far_measure`` measures as ``measure``."""
    return measure * declared_s if declared_s > 0 else measure


def _above(ordered: Sequence[float], floor: float, q: float) -> tuple[float | None, float, float]:
    """The q-quantile of the sorted values above ``floor`` (None when none is), and the range of
    floors that give the same answer (at least the first, below the second)."""
    first = bisect_right(ordered, floor)
    lo = ordered[first - 1] if first else -math.inf
    if first == len(ordered):
        return None, lo, math.inf
    return ordered[first + int(q * (len(ordered) - first))], lo, ordered[first]


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of values already sorted (the nearest rank at or below)."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
