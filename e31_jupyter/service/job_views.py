"""What the API reads: a job as it stands now, a page of jobs, its history, the changes since a
moment, the meter over a window and the GPU pool. Gathers what a view needs from the store and
the scheduler (place in line, forecast, progress, meter) and hands it to ``api_json``."""

from __future__ import annotations

from collections.abc import Callable

from e31_jupyter.core import meter
from e31_jupyter.core.errors import InvalidRequest, NotFound
from e31_jupyter.core.forecast import Forecast
from e31_jupyter.core.job import MAX_IDS, MAX_PAGE_SIZE, PAGE_SIZE, iso
from e31_jupyter.core.states import ACTIVE_STATES, JobState
from e31_jupyter.core.text import name_gpus
from e31_jupyter.service import api_json
from e31_jupyter.service.admission import Caller
from e31_jupyter.service.job_files import JobFiles
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.policy_input import standing_of
from e31_jupyter.service.scheduler import Places, Scheduler
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.store import Store


class JobViews:
    def __init__(
        self, store: Store, scheduler: Scheduler, files: JobFiles, settings: Settings, clock: Callable[[], float]
    ):
        self.store = store
        self.scheduler = scheduler
        self.files = files
        self.settings = settings
        self.clock = clock

    def visible_job(self, caller: Caller, job_id: str) -> JobRecord:
        job = self.store.get(job_id) if isinstance(job_id, str) else None
        if job is None or not (caller.is_admin or job.owner == caller.name):
            raise NotFound(f"No job {job_id!r}. List your jobs with `e31 jobs`.")
        return job

    def describe(self, job: JobRecord, positions: Places | None = None) -> dict:
        """The job as the API shows it, with what the queue knows of it now."""
        queued = job.state == JobState.QUEUED
        if positions is None and queued:
            positions = self.scheduler.positions()
        return api_json.job_view(
            job,
            position=positions.get(job.id) if positions is not None else None,
            outlook=self._outlook(job),
            waiting_for=standing_of(self.store, job).waiting_for if queued else [],
            meter=self._meter(job),
            progress=self.files.progress(job),
            gpu_use=api_json.gpu_use_view(job, meter.gpu_seconds(job, self.clock()), self._why_unread()),
        )

    def jobs(
        self,
        caller: Caller,
        state: str | None = None,
        fingerprint: str | None = None,
        ids: list[str] | None = None,
        before: str | None = None,
        limit: int = PAGE_SIZE,
    ) -> tuple[list[dict], str | None]:
        """A page of the caller's jobs (all jobs for an admin), newest first: at most ``limit``,
        only those in ``ids`` when given, submitted before job ``before``; and the id to ask
        ``before`` for the next page (None when this page is the last)."""  # fmt: skip
        if state is not None and state not in {s.value for s in JobState}:
            raise InvalidRequest(f"state: unknown state {state!r}. Allowed: {', '.join(s.value for s in JobState)}.")
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidRequest(f"limit: ask for 1 to {MAX_PAGE_SIZE} jobs a page; got {limit}.")
        if ids is not None and len(ids) > MAX_IDS:
            raise InvalidRequest(f"id: ask for at most {MAX_IDS} jobs by id at once; got {len(ids)}.")
        after = None
        if before is not None:
            mark = self.visible_job(caller, before)
            after = (mark.submitted_at, mark.id)
        owner = None if caller.is_admin else caller.name
        states = (state,) if state else None
        rows = self.store.jobs(states, owner=owner, fingerprint=fingerprint, ids=ids, before=after, limit=limit + 1)
        page = rows[:limit]
        positions = self.scheduler.positions() if any(r.state == JobState.QUEUED for r in page) else None
        return [self.describe(row, positions) for row in page], (page[-1]["id"] if len(rows) > limit else None)

    def transitions(self, job: JobRecord) -> list[dict]:
        """The job's history: its state changes in the order they were recorded (a cluster's
        start may bear an earlier time than the submit), and the GPUs the queue took back while
        it ran, each after the changes recorded before it."""
        history = self.store.transitions(job.id)
        for event in gpu_use_events(job):
            before = [i for i, step in enumerate(history) if step["at"] <= event["at"]]
            history.insert(before[-1] + 1 if before else len(history), event)
        return [{**t, "at": iso(t["at"])} for t in history]

    def last_change(self) -> int:
        """The number of the newest state change recorded, by any server sharing the store."""
        return self.store.last_transition()

    def changes_after(self, seq: int) -> list[dict]:
        """State changes numbered after ``seq``, oldest first: ``seq``, ``job_id``, ``owner``, ``to``."""
        return self.store.transitions_after(seq)

    def meter_summary(self, caller: Caller, since: float, until: float) -> dict:
        jobs = self.store.held_between(since, until)
        if not caller.is_admin:
            jobs = [j for j in jobs if j.owner == caller.name]
        s = self.settings
        summary = meter.summary(jobs, since, until, self.clock(), s.gpu_hour_rate, s.currency)
        unmeasured = summary["used_gpu_hours"] is None and summary["gpu_seconds"] > 0
        return {
            "since": iso(since),
            "until": iso(until),
            **summary,
            "used_why_absent": self._why_unread() if unmeasured else None,
        }

    def gpu_pool(self, caller: Caller) -> dict:
        devices, running = self.scheduler.devices()
        queued = self.store.count((JobState.QUEUED,))
        return api_json.pool_view(caller, devices, len(running), queued, self.scheduler.gpu_watch)

    def _why_unread(self) -> str:
        watch = self.scheduler.gpu_watch
        return watch.unread() if watch else "the cluster's GPUs are read by the cluster, not by e31"

    def _outlook(self, job: JobRecord) -> dict:
        if job.state not in ACTIVE_STATES:
            return api_json.outlook_view(job.id, Forecast(), queued=False)
        return api_json.outlook_view(job.id, self.scheduler.forecast(), queued=job.state == JobState.QUEUED)

    def _meter(self, job: JobRecord) -> dict:
        now = self.clock()
        seconds, used = meter.gpu_seconds(job, now), meter.used_seconds(job, now, None, None)
        return meter.reading(seconds, self.settings.gpu_hour_rate, self.settings.currency, used)


def gpu_use_events(job: JobRecord) -> list[dict]:
    """The GPUs taken back from a running job (idle), as entries of its history."""
    running = JobState.RUNNING.value
    return [
        {
            "at": returned["at"],
            "from": running,
            "to": running,
            "reason": f"gave back {name_gpus([returned['device']])}: idle",
        }
        for attempt in (*job.attempts, job)
        for returned in attempt.get("returned") or ()
    ]
