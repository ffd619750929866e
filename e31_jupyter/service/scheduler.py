"""The scheduler: what decides when a job starts, starts it, watches it and records its end.

``Scheduler`` is the interface the queue (user actions) and the views use. ``LocalScheduler``
is e31's own: the policy orders the queued jobs into a line, a pass starts what fits on the
configured GPUs, and a process backend (local, Docker) runs each job; ``ClusterScheduler``
(cluster_scheduler.py) follows a cluster's scheduler (Slurm) instead. Only the server that holds
the data directory's lock schedules (``Leadership``); the others submit and read.

Everything here runs on the server's event loop; process waits run in threads and report back
to the loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Protocol

from e31_jupyter.core import policies, policy
from e31_jupyter.core.after import broken_reason
from e31_jupyter.core.errors import Conflict, E31Error
from e31_jupyter.core.forecast import Forecast
from e31_jupyter.core.job import ON_TIMEOUT_SUSPEND, JobSpec
from e31_jupyter.core.queue_order import Line
from e31_jupyter.core.states import SUSPENDS, Cause, JobState, StopRequest
from e31_jupyter.core.text import format_seconds, name_gpus
from e31_jupyter.execution import accounts, nvml
from e31_jupyter.execution import gpus as gpu_inventory
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.backends import ProcessBackend
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.service import resumption
from e31_jupyter.service.admission import Revision
from e31_jupyter.service.gpu_watch import GpuWatch
from e31_jupyter.service.job_files import JobFiles, Retention
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.leadership import Leadership
from e31_jupyter.service.line_keeper import LineKeeper
from e31_jupyter.service.room import RoomMaker
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.store import Store

log = logging.getLogger("e31")

TIMED_PASS_S = 1.0  # how often it schedules with nothing new (deadlines become hopeless)
TIME_LIMIT = "(time limit)"  # who asked a job to suspend when its max_runtime was up (--on-timeout suspend)
PASS_GAP_S = 0.05  # submits and cancels closer than this (or than 2 passes' time) share one pass
RELEASE_POLL_S = 0.05  # how often a running job's folder is looked at for the sign its kernel ended

Device = tuple[str, bool, "JobRecord | None"]  # a GPU's name, whether it is busy, and the job holding it


class Places(Protocol):
    """Each queued job's place in line (1 = next), by its id."""

    def get(self, job_id: str, /) -> int | None: ...


class Scheduler(Protocol):
    @property
    def gpu_watch(self) -> GpuWatch | None:
        """Readings of the GPUs it hands out (None: a cluster's, which e31 does not read)."""
        ...

    """What the queue and the views ask of whichever scheduler decides."""

    @property
    def is_scheduler(self) -> bool: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def hand_over(self, job_id: str, spec: JobSpec) -> dict:
        """Fields to record with a job just recorded (a cluster takes it here)."""
        ...

    async def submitted(self, job: JobRecord) -> None:
        """A job was recorded whole: it takes its place."""
        ...

    async def hand_change(self, job: JobRecord, revision: Revision) -> None:
        """A queued job's request is about to change (a cluster changes it first, or refuses)."""
        ...

    def request_changed(self, job: JobRecord, after_changed: bool) -> None: ...

    async def cancel(self, job: JobRecord, by: str, request: StopRequest = StopRequest.CANCEL) -> None:
        """Withdraw a queued (or suspended) job, or stop a running one; Conflict once it has
        ended. ``StopRequest.SUSPEND``: stop a running job at its cell's end, with a checkpoint
        (the queue has checked it and recorded the request)."""
        ...

    def positions(self) -> Places: ...

    def forecast(self) -> Forecast: ...

    async def would_take(
        self, spec: JobSpec, job: policy.Pending, waiting_for: list[str], now: float
    ) -> tuple[int | None, Forecast]:
        """The place in line and forecast a job would have if it were submitted now."""
        ...

    def devices(self) -> tuple[list[Device], list[JobRecord]]:
        """The GPUs and who holds each, with the running jobs."""
        ...


class LocalScheduler:
    """e31's own scheduler, for process backends (local, Docker)."""

    def __init__(
        self, store: Store, files: JobFiles, backend: ProcessBackend, settings: Settings, clock, data_dir: Path
    ):
        self.store = store
        self.files = files
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.data_dir = data_dir
        self.policy = policies.POLICIES[settings.policy]
        self.leadership = Leadership(data_dir, elected=self._elected, tick=self._tick)
        self.retention = Retention(files, settings.delete_files_after_s)
        self.inventory: list[str] = settings.inventory or []  # a cluster's has none: not this scheduler
        self.gpu_watch = GpuWatch(store, files, self.inventory, settings.gpu_watch, nvml.read, clock)
        self.line = LineKeeper(store, self.policy, settings, clock, busy_outside=lambda: self.gpu_watch.busy)
        self.room = RoomMaker(store, files) if self.policy.preempts else None  # c.E31.preempt
        self._warned: set[str] = set()  # running jobs told that their time limit is near
        self._stopping: set[str] = set()  # running jobs being stopped by this scheduler
        self._seen_version = -1  # the store's data_version at the last look
        self._last_pass = 0.0  # time.monotonic() of the last scheduling pass
        self._pass_s = 0.0  # how long it took
        self._pass_due = False  # a pass is set to run soon (schedule_soon)
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def is_scheduler(self) -> bool:
        return self.leadership.holds

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.leadership.start()
        # A container's image: what it lacks is said in the log before a job waits for it.
        self._loop.run_in_executor(None, self.backend.check_default_image)

    async def stop(self) -> None:
        await self.leadership.stop()
        self.backend.close()

    def _elected(self) -> None:
        self._adopt_running_jobs()
        self.schedule()

    def _tick(self) -> None:
        now = self.clock()
        for job in self.store.jobs((JobState.RUNNING,)):
            if job.id in self._stopping:
                continue
            if job.stop_requested:  # asked of another server, or before a restart
                self._stop(job.id, job.handle, suspend=job.stop_requested in SUSPENDS)
            elif now > (job.started_at or now) + job.max_runtime_s:  # a running job has started_at
                suspend = job.spec.get("on_timeout") == ON_TIMEOUT_SUSPEND
                if suspend:
                    limit = format_seconds(job.max_runtime_s)
                    reason = (
                        f"suspending: its time limit ({limit}) is up; it stops at its cell's end, with a checkpoint"
                    )
                    self.store.update(job.id, stop_requested=StopRequest.SUSPEND, stop_by=TIME_LIMIT, reason=reason)
                else:
                    self.store.update(job.id, stop_requested=StopRequest.TIMEOUT)
                self._stop(job.id, job.handle, suspend=suspend)
            elif job.id not in self._warned and warning_due(job, now, self.settings.suspend_grace_s):
                self._warned.add(job.id)
                jobdir = self.files.jobdir(job.id)
                asyncio.get_running_loop().run_in_executor(
                    None, warn_once_begun, self.backend, job.id, jobdir, job.handle, self.settings
                )
        # Submits and cancels of other servers show as a new store version: schedule at once.
        # Otherwise a pass a second is enough to expire jobs whose deadlines became hopeless.
        version = self.store.version()[0]
        if version != self._seen_version or time.monotonic() - self._last_pass >= TIMED_PASS_S:
            self._seen_version = version
            self.schedule()
        self.retention.when_due()
        if self.gpu_watch.due():
            self.gpu_watch.in_background(then=self.schedule_soon)

    # --- what the queue tells it ----------------------------------------------------------

    async def hand_over(self, job_id: str, spec: JobSpec) -> dict:
        return {}  # the queue keeps its jobs itself

    async def submitted(self, job: JobRecord) -> None:
        if job.state == JobState.QUEUED:
            self.line.rejoin(job)
        self.schedule_soon()

    async def hand_change(self, job: JobRecord, revision: Revision) -> None:
        """Nothing to do first: the queue holds its jobs itself."""

    def request_changed(self, job: JobRecord, after_changed: bool) -> None:
        self.line.changed(job, after_changed)
        self.schedule_soon()

    async def cancel(self, job: JobRecord, by: str, request: StopRequest = StopRequest.CANCEL) -> None:
        job_id, now = job.id, self.clock()
        if request == StopRequest.SUSPEND:
            if self.is_scheduler and job_id not in self._stopping:
                self._stop(job.id, job.handle, suspend=True)
            return
        if job.state == JobState.SUSPENDED:
            if self.store.transition(
                job_id, (JobState.SUSPENDED,), JobState.CANCELLED, f"cancelled by {by}", now, cause=Cause.USER
            ):
                return
            job = self.store.job(job_id)  # resumed meanwhile
        if job.state == JobState.QUEUED:
            reason = f"cancelled by {by}"
            if self.store.transition(
                job_id, (JobState.QUEUED,), JobState.CANCELLED, reason, now, cause=Cause.USER, finished_at=now
            ):
                self.line.leave(job_id)
                self.schedule_soon()
                return
            job = self.store.job(job_id)  # it started meanwhile: cancel the running job
        if job.state != JobState.RUNNING:
            raise Conflict(f"Job {job_id} has already ended ({job['state']}); there is nothing to cancel.")
        if job.stop_requested != StopRequest.CANCEL:  # a suspend under way becomes a cancel
            self.store.update(
                job_id, stop_requested=StopRequest.CANCEL, stop_by=by, reason=f"cancelling: cancelled by {by}"
            )
        if self.is_scheduler and (job_id not in self._stopping or job.stop_requested in SUSPENDS):
            self._stop(job.id, job.handle)  # (a suspend under way is stopped now)

    # --- what the views ask ----------------------------------------------------------------

    def positions(self) -> Line:
        return self.line.positions()

    def forecast(self) -> Forecast:
        return self.line.forecast()

    async def would_take(
        self, spec: JobSpec, job: policy.Pending, waiting_for: list[str], now: float
    ) -> tuple[int | None, Forecast]:
        return self.line.would_take(job, waiting_for, now)

    def devices(self) -> tuple[list[Device], list[JobRecord]]:
        running = self.store.jobs((JobState.RUNNING,))
        holders = gpu_inventory.holders(self.inventory, [job for job in running if job.released_at is None])
        return [(d, job is not None, job) for d, job in holders.items()], running

    # --- the pass (only on the scheduler) ---------------------------------------------------

    def schedule(self) -> None:
        """Ask the policy what to start and what to expire, and do it."""
        if not self.is_scheduler:
            return
        started = self._last_pass = time.monotonic()
        now = self.clock()
        running = self.store.holding()
        snapshot = self.line.make(now, running)
        if self.room is not None:
            snapshot.running = self.room.suspendable(snapshot.running)
        self._expire_let_down(now)
        line = self.line.current
        assert line is not None
        if len(line) == 0:
            return
        decision = self.policy.walk(line.ordered, snapshot)
        for job_id, reason in decision.expire:
            self.store.transition(
                job_id, (JobState.QUEUED,), JobState.EXPIRED, reason, now, cause=Cause.SCHEDULER, finished_at=now
            )
            self.line.leave(job_id)
        for victim in self.room.suspend(decision) if self.room is not None else []:
            self._stop(victim.id, victim.handle, suspend=True)
        free = [d for d in gpu_inventory.free_devices(self.inventory, running) if d not in self.gpu_watch.busy]
        for job_id in decision.start:
            gpus = line.job(job_id).gpus
            if gpus > len(free):  # GPUs found busy outside the queue since the policy looked
                break
            devices, free = free[:gpus], free[gpus:]
            self._grant(job_id, devices, now)
            self.line.started(job_id)
        self._pass_s = time.monotonic() - started

    def _expire_let_down(self, now: float) -> None:
        """Jobs whose earlier jobs ended without succeeding, or whose deadline passed while they
        waited for them, expire: they can no longer run as asked."""
        for job_id, (where, job) in self.line.waiting_for_others.items():
            if where.broken:
                reason = broken_reason(where.broken)
            elif job.deadline is not None and job.deadline < now:
                reason = f"deadline passed while it waited for {', '.join(where.waiting_for)}"
            else:
                continue
            self.store.transition(
                job_id, (JobState.QUEUED,), JobState.EXPIRED, reason, now, cause=Cause.SCHEDULER, finished_at=now
            )

    def schedule_soon(self) -> None:
        """Schedule now, or, when the last pass was a moment ago, once for everything that
        happens until then: a burst of submits into a long queue costs a few passes, not one
        each."""
        if not self.is_scheduler or self._pass_due:
            return
        delay = self._last_pass + max(PASS_GAP_S, 2 * self._pass_s) - time.monotonic()
        if delay <= 0:
            self.schedule()
            return
        self._pass_due = True
        assert self._loop is not None
        self._loop.call_later(delay, self._scheduled_pass)

    def _scheduled_pass(self) -> None:
        self._pass_due = False
        try:
            self.schedule()
        except Exception:  # like a tick: a bad pass must not stop the queue
            log.exception("e31: scheduling pass failed")

    # --- a job's process: start, watch, stop, finish ----------------------------------------

    def _grant(self, job_id: str, devices: list[str], now: float) -> None:
        """Record the job as running on ``devices`` (the meter starts), then start it."""
        if not self.files.jobdir(job_id).path.exists():
            return  # recorded this instant by another server, which is moving its files in place
        granted = f"granted {name_gpus(devices)}" if devices else "started (no GPUs)"  # devices, not a count
        if not self.store.transition(
            job_id, (JobState.QUEUED,), JobState.RUNNING, granted, now, cause=Cause.SCHEDULER,
            started_at=now, granted=devices,
        ):  # fmt: skip
            return  # cancelled a moment ago
        self._start(job_id, devices)

    def _start(self, job_id: str, devices: list[str]) -> None:
        """Start the process of a job recorded as running on ``devices``, as the account it runs
        as (decided here, once); a job that cannot run as it fails at start, saying why. A
        backend that starts slowly (a container) is asked in a thread, off the event loop."""
        try:
            account = accounts.runs_as(self.store.job(job_id).owner, self.settings.jobs_run_as)
        except E31Error as error:
            self._started(job_id, None, error.message)
            return
        if not self.backend.starts_slowly:
            self._started(job_id, *self._backend_start(job_id, devices, account))
            return
        loop = self._loop
        assert loop is not None

        def in_thread() -> None:
            outcome = self._backend_start(job_id, devices, account)
            loop.call_soon_threadsafe(self._started, job_id, *outcome)

        loop.run_in_executor(None, in_thread)

    def _backend_start(self, job_id: str, devices: list[str], account: Account) -> tuple[dict | None, str]:
        """The job's worker, started: its handle, or why it could not start."""
        try:
            return self.backend.start(job_id, self.files.jobdir(job_id), devices, account), ""
        except Exception as error:
            log.exception("e31: could not start job %s", job_id)
            return None, str(error) or type(error).__name__

    def _started(self, job_id: str, handle: dict | None, error: str) -> None:
        if handle is None:
            self._finish(job_id, None, self.clock(), start_error=error)
            return
        self.store.update(job_id, handle=json.dumps(handle))
        self._watch(job_id, handle)
        if job_id in self._stopping:  # cancelled or timed out while it was starting
            self._stop(job_id, handle)

    def _watch(self, job_id: str, handle: dict) -> None:
        """Wait for the job's process in a thread, and report its end to the event loop; in
        another, look for the sign that its kernel has ended (``_release``)."""
        loop = self._loop
        assert loop is not None
        ended = threading.Event()
        released = self.files.jobdir(job_id).released

        def wait():
            exit_code = self.backend.wait(handle)
            ended.set()
            ended_at = self.clock()
            loop.call_soon_threadsafe(self._finish, job_id, exit_code, ended_at)

        def look_for_release():
            while not ended.wait(RELEASE_POLL_S):
                if released.exists():
                    loop.call_soon_threadsafe(self._release, job_id)
                    return

        threading.Thread(target=wait, name=f"e31-wait-{job_id}", daemon=True).start()
        threading.Thread(target=look_for_release, name=f"e31-release-{job_id}", daemon=True).start()

    def _release(self, job_id: str) -> None:
        """The job's kernel has ended: its GPUs go back to the pool and its meter stops now,
        while its worker goes on making its reports and collecting its files."""
        job = self.store.get(job_id)
        if job is None or job.state != JobState.RUNNING or job.released_at is not None:
            return
        self.store.update(job_id, released_at=self.clock())
        self.schedule()

    def _stop(self, job_id: str, handle: dict | None, suspend: bool = False) -> None:
        """End a running job's processes (SIGTERM, grace, SIGKILL), or with ``suspend`` ask its
        worker to stop at its cell's end first; its watcher then finishes it. A job still
        starting (no handle yet) is stopped once it has started (``_started``)."""
        self._stopping.add(job_id)
        if handle is None:
            return
        loop, grace = asyncio.get_running_loop(), self.settings.grace_s
        if suspend:
            jobdir = self.files.jobdir(job_id)
            loop.run_in_executor(None, suspend_once_begun, self.backend, job_id, jobdir, handle, self.settings)
        else:
            loop.run_in_executor(None, self.backend.stop, job_id, handle, grace)

    def _finish(self, job_id: str, exit_code: int | None, ended_at: float, start_error: str = "") -> None:
        """The job's process has ended: clean up what it left, release its GPUs, record why it ended."""
        self._stopping.discard(job_id)
        self._warned.discard(job_id)
        job = self.store.get(job_id)
        if job is None or job.state != JobState.RUNNING:
            return
        self.backend.clean_up(job_id, accounts.runs_as_or_none(job.owner, self.settings.jobs_run_as))
        jobdir = self.files.jobdir(job_id)
        state, reason = final_state(job, jobdir.read_json(jobdir.manifest), exit_code, start_error)
        if state == JobState.FAILED and disk_full(jobdir.path, reason):
            reason = (
                f"disk full: the data directory ({self.data_dir}) ran out of space while the job "
                f"ran ({reason}). What it wrote is kept; free some space and run it again."
            )
        self.store.transition(
            job_id, (JobState.RUNNING,), state, reason, ended_at, cause=Cause.PROCESS_END,
            finished_at=ended_at, result=self.files.result_or_none(job_id),
        )  # fmt: skip
        if state == JobState.SUSPENDED and job.stop_requested == StopRequest.MAKE_ROOM:
            if resumption.after_making_room(self.store, jobdir, self.store.job(job_id), self.clock()):
                self.line.rejoin(self.store.job(job_id))
        self.schedule()

    # --- after a restart --------------------------------------------------------------------

    def _adopt_running_jobs(self) -> None:
        """Watch jobs that still run; record the true end of those that ended meanwhile. Those
        whose worker's handle was recorded go first: finding the workers of the others may end
        what a dead server left behind, never one of theirs (``recover``)."""
        for job in sorted(self.store.jobs((JobState.RUNNING,)), key=lambda job: job.handle is None):
            handle = job.handle or self._recover_handle(job.id)
            if handle is not None and self.backend.adopt(job.id, handle):
                log.info("e31: adopted running job %s", job.id)
                self._watch(job.id, handle)
                continue
            jobdir = self.files.jobdir(job.id)
            if handle is None and not job.stop_requested and jobdir.never_started():
                self._start_again(job)
                continue
            manifest = jobdir.read_json(jobdir.manifest)
            started_at = job.started_at or self.clock()  # a running job has started_at
            ended_at = (manifest or {}).get("finished_at") or jobdir.last_sign_of_life() or started_at
            if manifest is None and resumption.after_loss(self.store, jobdir, job, ended_at, self.clock()):
                self.backend.clean_up(job.id, accounts.runs_as_or_none(job.owner, self.settings.jobs_run_as))
                self.line.rejoin(self.store.job(job.id))
                continue
            self._finish(job.id, None, max(ended_at, started_at))

    def _start_again(self, job: JobRecord) -> None:
        """A server killed after recording a job as running but before starting its process: the
        job still holds its GPUs, so it starts on them now, and the meter counts from now."""
        account = accounts.runs_as_or_none(job.owner, self.settings.jobs_run_as)
        self.backend.clean_up(job.id, account)  # e.g. a container never started
        devices = job.granted
        on = f" on GPU(s) {', '.join(devices)}" if devices else ""
        reason = (
            f"started after a restart{on}: the server had stopped before the job's process began, so nothing had run"
        )
        now = self.clock()
        self.store.transition(
            job.id, (JobState.RUNNING,), JobState.RUNNING, reason, now, cause=Cause.RESTART, started_at=now
        )
        log.info("e31: starting job %s, which the last server recorded as running but never started", job.id)
        self._start(job.id, devices)

    def _recover_handle(self, job_id: str) -> dict | None:
        """A server killed between starting a job and recording its handle: find the job's
        process by its job id, so a running job is adopted rather than taken for lost."""
        account = accounts.runs_as_or_none(self.store.job(job_id).owner, self.settings.jobs_run_as)
        handle = self.backend.recover(job_id, self.files.jobdir(job_id), account)
        if handle is not None:
            self.store.update(job_id, handle=json.dumps(handle))
        return handle


def suspend_once_begun(backend: ProcessBackend, job_id: str, jobdir: JobDir, handle: dict, settings: Settings) -> None:
    """Ask a job's worker to suspend once it has begun (a job runs from the moment its process
    starts, before the worker listens for the request); it has the rest of the grace period."""
    waited = jobdir.wait_for_worker(settings.suspend_grace_s)
    backend.suspend(job_id, handle, max(0.0, settings.suspend_grace_s - waited), settings.grace_s)


def warning_due(job: JobRecord, now: float, grace: float) -> bool:
    """Whether a running job's time limit is within ``grace``: its code is told then
    (``e31_jupyter.job.stopping()``), so that a long cell can save its work and end. A job whose
    whole limit is that short is not told: it would see it from its start."""
    return job.max_runtime_s > grace and now > (job.started_at or now) + job.max_runtime_s - grace


def warn_once_begun(
    backend: ProcessBackend, job_id: str, jobdir: JobDir, handle: dict | None, settings: Settings
) -> None:
    """Tell a job's worker its time limit is near, once it has begun (before, the signal would end it)."""
    if handle is not None:
        jobdir.wait_for_worker(settings.suspend_grace_s)
        backend.warn(job_id, handle)


def after_work_reason(manifest: dict) -> str:
    """A succeeded job's reason: what went wrong after its notebook ran ("" when nothing did)."""
    failures = manifest.get("after_work_failures") or []
    if not failures:
        return ""
    return "the notebook succeeded; after it, " + "; ".join(f["reason"] for f in failures)


def suspended_reason(job: JobRecord, manifest: dict | None) -> str:
    """Why a job that was asked to suspend stopped where it did: at a cell's end with its
    checkpoint, or, the cell outlasting the grace period, stopped in it (its last checkpoint stands)."""
    by = f" by {job.stop_by}" if job.stop_by else ""
    if job.stop_by == TIME_LIMIT:
        by = f" at its time limit ({format_seconds(job.max_runtime_s)})"
    if job.stop_requested == StopRequest.MAKE_ROOM:
        by = f" by the queue, to make room for {job.stop_by}, which could not wait,"
    if manifest and manifest.get("status") == JobState.SUSPENDED:
        return f"{JobState.SUSPENDED}{by} at a cell's end; {manifest.get('reason', '')}"
    stopped = "the running cell outlasted the grace period and was stopped; its last checkpoint stands"
    return f"{JobState.SUSPENDED}{by}: {stopped}"


def cancelled_reason(job: JobRecord) -> str:
    """Why a job that was stopped on request ended (``StopRequest.CANCEL``, by whom)."""
    return f"{JobState.CANCELLED} by {job.stop_by}" if job.stop_by else str(JobState.CANCELLED)


def final_state(job: JobRecord, manifest: dict | None, exit_code: int | None, start_error: str) -> tuple[JobState, str]:
    """The process decides the state: a stop we asked for, else the worker's manifest, else how
    the process ended."""
    if start_error:
        return JobState.FAILED, f"could not start: {start_error}"
    if job.stop_requested == StopRequest.CANCEL:
        return JobState.CANCELLED, cancelled_reason(job)
    if job.stop_requested == StopRequest.TIMEOUT:
        return JobState.FAILED, f"timeout: ran longer than max_runtime ({format_seconds(job['max_runtime_s'])})"
    if job.stop_requested in SUSPENDS and (manifest or {}).get("status") not in (
        JobState.SUCCEEDED,
        JobState.FAILED,
    ):
        return JobState.SUSPENDED, suspended_reason(job, manifest)
    if manifest and manifest.get("status") == JobState.SUCCEEDED:
        return JobState.SUCCEEDED, after_work_reason(manifest)
    if manifest and manifest.get("status") == JobState.FAILED:
        return JobState.FAILED, manifest.get("reason") or "the notebook failed"
    if exit_code is not None and exit_code < 0:
        return JobState.FAILED, f"worker killed by {signal.Signals(-exit_code).name}; partial results kept"
    return JobState.FAILED, "lost: the job's process ended without writing a result manifest"


def disk_full(path: Path, reason: str) -> bool:
    if "No space left on device" in reason:
        return True
    try:
        return shutil.disk_usage(path).free < 1 << 20
    except OSError:
        return False
