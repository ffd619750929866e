"""The line: the queued jobs in the order the policy would start them, kept between passes while
the policy's priorities hold, with each job's place and the forecast of the queue. Queued jobs
that wait for others (``--after``) stand out of it until those have succeeded. The local
scheduler's passes start jobs from its head; the views ask it for places and expected starts."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from e31_jupyter.core import policy
from e31_jupyter.core.after import Standing, standing
from e31_jupyter.core.forecast import Forecast, run_forward
from e31_jupyter.core.queue_order import Line
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.policy_input import History, PendingJobs, pending, standing_of
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.store import Store

LINE_MAX_AGE_S = 1.0  # how stale a place in line may be shown after the queue changed


class LineKeeper:
    def __init__(
        self,
        store: Store,
        policy_: policy.Policy,
        settings: Settings,
        clock,
        busy_outside: Callable[[], Mapping[str, str]] = dict,
    ):
        self.store = store
        self.busy_outside = busy_outside  # GPUs not to hand out: busy outside the queue (gpu_watch.py)
        self.policy = policy_
        self.clock = clock
        self.inventory: list[str] = settings.inventory or []
        self.history = History(
            store,
            machine_gpus=len(settings.inventory or ()),
            long_share=settings.long_jobs_share,
            max_gpus_per_owner=settings.max_gpus_per_user,
        )
        self.current: Line | None = None  # the queue in order, for places in line
        self._pending_jobs = PendingJobs()  # the queued jobs as the policy sees them, kept between passes
        self._seen: policy.Snapshot | None = None  # what the policy saw when the line was made
        self._forecast: tuple[Line | None, Forecast] = (None, Forecast())  # a line's forecast
        self._made = (0.0, (0, 0))  # when (time.monotonic()) and at which store.version()
        # Queued jobs out of the line, waiting for others (--after): where they stand, and the job.
        self.waiting_for_others: dict[str, tuple[Standing, policy.Pending]] = {}

    def changed(self, job: JobRecord, after_changed: bool) -> None:
        """A queued job's request changed in place."""
        if after_changed:
            self.current = None  # who waits for whom changed: the line is made anew when next asked
        else:
            self.rejoin(job)

    def positions(self) -> Line:
        """Place in line of each queued job (``.get(id)``, 1 = next), in the order the policy
        would start them: at most LINE_MAX_AGE_S old once the queue has changed."""
        made_at, version = self._made
        age = time.monotonic() - made_at
        if self.current is None or (age >= LINE_MAX_AGE_S and (
            self.store.version() != version or age >= (self.policy.refresh_s or math.inf)
        )):  # fmt: skip
            self.make(self.clock())
        assert self.current is not None
        return self.current

    def forecast(self) -> Forecast:
        """What is expected of the jobs at the head of the line (``forecast.py``), worked out
        once per line, when first asked."""
        line = self.positions()
        if self._forecast[0] is not line:
            assert self._seen is not None  # made with the line
            forecast = run_forward(self.policy.walk, line.ordered, self._seen, self._waiting_jobs(), line.key)
            self._forecast = (line, forecast)
        return self._forecast[1]

    def would_take(self, job: policy.Pending, waiting_for: list[str], now: float) -> tuple[int | None, Forecast]:
        """The place in line a job would take if it were submitted now (none while it would
        wait for ``waiting_for``), and the forecast of the queue with it."""
        line = self.positions()
        if self.store.version() != self._made[1]:  # the queue changed since: a check must be exact
            self.make(now)
            line = self.positions()
        assert self._seen is not None
        moment = replace(self._seen, now=max(now, self._seen.now))
        waiting = self._waiting_jobs()
        if waiting_for:
            return None, run_forward(self.policy.walk, line.ordered, moment, [*waiting, (job, waiting_for)], line.key)
        return line.place_of(job), run_forward(self.policy.walk, line.ordered_with(job), moment, waiting, line.key)

    def make(self, now: float, running: list[JobRecord] | None = None) -> policy.Snapshot:
        """Put the queued jobs in line as of ``now``: the line as it was, with the jobs that
        joined and left since, while the policy's priorities hold (``_keys_hold``); else a new
        one. Returns what the policy sees now."""
        version = self.store.version()
        rows = self.store.queued_requests()
        self.waiting_for_others = self._still_waiting(rows)
        queued = [job for job in self._pending_jobs.of(rows) if job.id not in self.waiting_for_others]
        if running is None:
            running = self.store.holding()
        snapshot = self.history.snapshot(now, self.inventory, running, self.busy_outside())
        if self.current is not None and self._keys_hold(now):
            self.current.follow(queued)
        else:
            self.current = Line(self.policy.priority, snapshot, queued)
        self._seen = snapshot
        self._made = (time.monotonic(), version)
        self._forecast = (None, Forecast())
        return snapshot

    def _keys_hold(self, now: float) -> bool:
        """Whether the line's priority keys are still the policy's (``Policy.refresh_s``): the
        simulator's queue is re-sorted as often, so the live queue orders jobs as the replays did."""
        if self.current is None:
            return False
        age = now - self.current.snapshot.now
        return 0 <= age < (self.policy.refresh_s if self.policy.refresh_s is not None else math.inf)

    def _still_waiting(self, rows) -> dict[str, tuple[Standing, policy.Pending]]:
        """The queued jobs (store rows) still waiting for others, or that others let down."""
        waiting = [r for r in rows if r["after_jobs"] != "[]"]
        if not waiting:
            return {}
        after = {r["id"]: json.loads(r["after_jobs"]) for r in waiting}
        states = self.store.states(sorted({job_id for ids in after.values() for job_id in ids}))
        found = {r["id"]: (standing(after[r["id"]], states), pending(r)) for r in waiting}
        return {job_id: held for job_id, held in found.items() if not held[0].ready}

    def _waiting_jobs(self) -> list[tuple[policy.Pending, list[str]]]:
        """The jobs out of the line that may still run, each with the jobs it waits for."""
        return [(job, where.waiting_for) for where, job in self.waiting_for_others.values() if not where.broken]

    def rejoin(self, job: JobRecord) -> None:
        """A queued job takes its place in line (new, or its request changed), unless it waits
        for others."""
        self.leave(job.id)
        line = self.positions()
        if standing_of(self.store, job).ready:
            line.join(pending(job))
        self._forecast = (None, Forecast())  # the line changed in place: forecast it again

    def started(self, job_id: str) -> None:
        """A job left the line for its GPUs. What the policy saw had them free, so the next
        place or forecast asked for is worked out anew, not from that (however soon it is asked)."""
        self.leave(job_id)
        self._made = (-math.inf, self._made[1])

    def leave(self, job_id: str) -> None:
        if self.current is not None:
            self.current.leave(job_id)
        self._forecast = (None, Forecast())
