"""The scheduler when a cluster's scheduler (Slurm) decides: each job is handed over at submit,
and e31 follows what the cluster says.

Slurm picks when a job starts and on which GPUs; e31's own policy and inventory are not used.
Everything about a job that e31 needs again is in the store (the backend's handle, the last
state and reason seen), and the rest is asked of the cluster, so a restarted server simply
polls again. The worker inside the job is the same as with a process backend.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

from e31_jupyter.core.after import broken_reason
from e31_jupyter.core.errors import Conflict, E31Error
from e31_jupyter.core.forecast import Forecast
from e31_jupyter.core.job import JobSpec
from e31_jupyter.core.policy import Pending
from e31_jupyter.core.states import ACTIVE_STATES, FINAL_STATES, Cause, JobState, StopRequest
from e31_jupyter.execution import accounts
from e31_jupyter.execution.backends import BackendStatus, ClusterBackend
from e31_jupyter.service.admission import Revision
from e31_jupyter.service.gpu_watch import GpuWatch
from e31_jupyter.service.job_files import JobFiles, Retention
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.leadership import Leadership
from e31_jupyter.service.policy_input import standing_of
from e31_jupyter.service.scheduler import Device, after_work_reason, cancelled_reason, suspended_reason
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.store import Store

log = logging.getLogger("e31")

POLL_S = 1.0  # how often the cluster's view is read (squeue costs the controller a little)
HAND_OVER_S = 120.0  # a job still without a handle this long after submit lost its server mid-hand-over


class ClusterScheduler:
    def __init__(
        self, store: Store, files: JobFiles, backend: ClusterBackend, settings: Settings, clock, data_dir: Path
    ):
        self.store = store
        self.files = files
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.leadership = Leadership(data_dir, elected=lambda: self.poll_soon(force=True), tick=self._tick)
        self.retention = Retention(files, settings.delete_files_after_s)
        self.gpu_watch: GpuWatch | None = None  # the cluster's GPUs are its own to read, not e31's
        self._last_poll = 0.0
        self._poll_task: asyncio.Task | None = None
        self._last_poll_error = ""

    @property
    def is_scheduler(self) -> bool:
        return self.leadership.holds

    async def start(self) -> None:
        await self.leadership.start()

    async def stop(self) -> None:
        if self._poll_task:
            self._poll_task.cancel()
        await self.leadership.stop()

    def _tick(self) -> None:
        self.poll_soon()
        self.retention.when_due()

    # --- what the queue tells it ----------------------------------------------------------

    async def hand_over(self, job_id: str, spec: JobSpec) -> dict:
        """Submit to the cluster, as the account the job runs as: if the cluster refuses the
        job (an unknown partition, say), or it cannot run as its submitter here, the user gets
        the message and no job exists."""
        after = self._handles_of_active(spec.after)
        job = self.store.job(job_id)
        account = accounts.runs_as(job.owner, self.settings.jobs_run_as)
        handle = await asyncio.to_thread(self.backend.submit, job_id, self.files.jobdir(job_id), spec, after, account)
        return {"handle": json.dumps(handle)}

    async def submitted(self, job: JobRecord) -> None:
        if job.state == JobState.CANCELLED and job.handle:  # cancelled while it was being handed over
            await asyncio.to_thread(self.backend.cancel, job.id, job.handle)

    async def hand_change(self, job: JobRecord, revision: Revision) -> None:
        """Slurm holds the job's request: it changes there first, and where Slurm refuses, it
        changes nowhere."""
        if not job.handle:
            raise Conflict(f"Job {job['id']} is still being handed to the cluster; change it in a moment.")
        spec = JobSpec(**{**job.spec, **revision.spec_changes}, request=revision.request)
        after = self._handles_of_active(spec.after) if "after" in revision.spec_changes else None
        await asyncio.to_thread(self.backend.update, job.id, job.handle, spec, job.request, after)

    def request_changed(self, job: JobRecord, after_changed: bool) -> None:
        """The cluster already has the change (``hand_change``)."""

    async def cancel(self, job: JobRecord, by: str, request: StopRequest = StopRequest.CANCEL) -> None:
        job_id = job.id
        if request == StopRequest.SUSPEND:
            await self._suspend(job, by)
            return
        if job.state in FINAL_STATES:
            raise Conflict(f"Job {job_id} has already ended ({job['state']}); there is nothing to cancel.")
        if not job.handle:  # still being handed over: it is withdrawn once it has a handle
            now = self.clock()
            reason = f"cancelled by {by}"
            self.store.transition(
                job_id, (JobState.QUEUED,), JobState.CANCELLED, reason, now, cause=Cause.USER, finished_at=now
            )
            return
        self.store.update(
            job_id, stop_requested=StopRequest.CANCEL, stop_by=by, reason=f"cancelling: cancelled by {by}"
        )
        await asyncio.to_thread(self.backend.cancel, job_id, job.handle)
        self.poll_soon(force=True)

    async def _suspend(self, job: JobRecord, by: str) -> None:
        """SIGUSR1 to a running job's worker; ``scancel`` if it has not ended within the grace."""
        handle = job.handle
        if handle is None:  # running, so the cluster has it; its handle is recorded a moment later
            raise Conflict(f"Job {job.id} is still being handed to the cluster; suspend it in a moment.")
        # Slurm says a job runs once its batch script starts, before the worker listens for this.
        await asyncio.to_thread(self.files.jobdir(job.id).wait_for_worker, self.settings.suspend_grace_s)
        await asyncio.to_thread(self.backend.suspend, job.id, handle)

        def stop_if_still_running() -> None:
            still = self.store.get(job.id)
            if still is not None and still.state == JobState.RUNNING and still.handle == handle:
                asyncio.get_running_loop().run_in_executor(None, self.backend.cancel, job.id, handle)

        asyncio.get_running_loop().call_later(self.settings.suspend_grace_s, stop_if_still_running)
        self.poll_soon(force=True)

    def _handles_of_active(self, after: list[str]) -> list[dict]:
        """The cluster's handles of the jobs of ``after`` that have not ended: the cluster holds
        the job until they succeed (those that already did hold nothing up; the cluster may have
        forgotten them)."""
        handles = []
        for job_id in after:
            job = self.store.job(job_id)
            if job.state not in ACTIVE_STATES:
                continue
            if not job.handle:
                raise Conflict(f"after: job {job_id} is still being handed to the cluster; try again in a moment.")
            handles.append(job.handle)
        return handles

    # --- what the views ask -------------------------------------------------------------------

    def positions(self) -> dict[str, int]:
        """Places in the cluster's queue, as the last poll of the cluster recorded them."""
        return self.store.queue_positions()

    def forecast(self) -> Forecast:
        return Forecast()  # the cluster decides; e31 does not forecast its queue

    async def would_take(
        self, spec: JobSpec, job: Pending, waiting_for: list[str], now: float
    ) -> tuple[int | None, Forecast]:
        """No place in line (the cluster's priorities decide it); the start is the cluster's
        own estimate, which also says whether it would take the job at all. Of a job that
        would wait for others, the cluster can say nothing yet."""
        if waiting_for:
            return None, Forecast()
        start = await asyncio.to_thread(self.backend.expected_start, spec)
        if start is None:
            return None, Forecast()
        start = max(start, now)
        estimate = spec.request.runtime_estimate()
        deadline = spec.request.deadline
        if deadline is not None and start + estimate > deadline:
            return None, Forecast(expired={job.id})  # as Slurm's --deadline would do
        return None, Forecast(starts={job.id: start}, ends={job.id: start + estimate} if estimate else {})

    def devices(self) -> tuple[list[Device], list[JobRecord]]:
        running = self.store.jobs((JobState.RUNNING,))
        holders = {(job.node, device): job for job in running for device in job.granted}
        devices = [
            (f"{gpu['node']}:{gpu['device']}", gpu["busy"], holders.get((gpu["node"], gpu["device"])))
            for gpu in self.backend.pool()
        ]
        return devices, running

    # --- following the cluster (only on the e31 scheduler server) -----------------------------

    def poll_soon(self, force: bool = False) -> None:
        """Ask the cluster again, in a thread (squeue on a big cluster takes a while): the
        server's event loop never waits for it."""
        if not self.is_scheduler or self._poll_task or (not force and time.monotonic() - self._last_poll < POLL_S):
            return
        self._last_poll = time.monotonic()
        self._poll_task = asyncio.get_running_loop().create_task(self._poll())

    schedule_soon = poll_soon

    async def _poll(self) -> None:
        try:
            active = {job.id: job for job in self.store.jobs(ACTIVE_STATES)}
            handles = {i: j.handle for i, j in active.items() if j.handle}
            unhanded = [j for i, j in active.items() if i not in handles]
            if unhanded:
                await asyncio.to_thread(self._find_unhanded, unhanded)
            if not handles:
                return
            statuses = await asyncio.to_thread(self.backend.poll, handles)
            self._last_poll_error = ""
        except E31Error as error:  # the cluster is unreachable for now: say so once, try again
            if error.message != self._last_poll_error:
                log.warning("e31: could not ask the cluster: %s", error.message)
            self._last_poll_error = error.message
            return
        except Exception:  # a bad poll must not stop the queue
            log.exception("e31: following the cluster failed")
            return
        finally:
            self._poll_task = None
        for job_id, status in statuses.items():
            job = self.store.get(job_id)  # as it is now: a cancel may have come meanwhile
            if job is not None and job.state in ACTIVE_STATES:
                self._follow(job, status)
        for job_id, handle in self._expire_let_down():
            await asyncio.to_thread(self.backend.cancel, job_id, handle)

    def _expire_let_down(self) -> list[tuple[str, dict]]:
        """Queued jobs whose earlier jobs ended without succeeding expire; returns those the
        cluster must drop too (it would keep them pending, their dependency never satisfied)."""
        now, dropped = self.clock(), []
        for row in self.store.queued_requests():
            if row["after_jobs"] == "[]":
                continue
            where = standing_of(self.store, {"after_jobs": json.loads(row["after_jobs"])})
            if not where.broken:
                continue  # the cluster holds it until they succeed
            reason = broken_reason(where.broken)
            job_id = row["id"]
            if self.store.transition(
                job_id, (JobState.QUEUED,), JobState.EXPIRED, reason, now, cause=Cause.SCHEDULER, finished_at=now
            ):
                handle = self.store.job(job_id).handle
                if handle:
                    dropped.append((job_id, handle))
        return dropped

    def _find_unhanded(self, jobs: list[JobRecord]) -> None:
        """Jobs whose server stopped while handing them to the cluster: the cluster may have
        taken one (then it is followed from now on), or not (then it never will)."""
        now = self.clock()
        for job in jobs:
            if now - job.submitted_at < HAND_OVER_S:
                continue  # its server may still be at it
            handle = self.backend.find(job.id, self.files.jobdir(job.id))
            if handle is not None:
                self.store.update(job.id, handle=json.dumps(handle))
            else:
                reason = "lost: the server stopped before the cluster took the job"
                self.store.transition(
                    job.id, (JobState.QUEUED,), JobState.FAILED, reason, now, cause=Cause.RESTART, finished_at=now
                )

    def _follow(self, job: JobRecord, status: BackendStatus) -> None:
        """Record what the cluster says of one job: new reason or place in line, a start, an end."""
        started = status.started_at is not None
        if job.state == JobState.QUEUED and status.state != JobState.QUEUED and started:
            self.store.transition(
                job.id, (JobState.QUEUED,), JobState.RUNNING, status.start_reason(), status.started_at,
                cause=Cause.SCHEDULER, started_at=status.started_at, granted=status.granted, node=status.node,
                position=None,
            )  # fmt: skip
        if status.state in FINAL_STATES:
            state, reason = self._final(job, status)
            cause = _cause_of_end(job, state)
            self.store.transition(
                job.id, ACTIVE_STATES, state, reason, status.finished_at or self.clock(), cause=cause,
                finished_at=status.finished_at or self.clock(), result=self.files.result_or_none(job.id),
            )  # fmt: skip
        elif (
            status.state == JobState.QUEUED
            and not job.stop_requested
            and ((status.reason, status.position) != (job.reason, job.position))
        ):
            self.store.update(job.id, reason=status.reason, position=status.position)

    def _final(self, job: JobRecord, status: BackendStatus) -> tuple[str, str]:
        """The cluster's verdict, with the worker's own reason when the notebook failed."""
        if status.state == JobState.CANCELLED and job.stop_requested == StopRequest.CANCEL:
            return status.state, cancelled_reason(job)
        if status.timed_out:  # its processes were signalled: what the worker saw of that is no reason
            return status.state, status.reason
        jobdir = self.files.jobdir(job.id)
        manifest = jobdir.read_json(jobdir.manifest) or {}
        if job.stop_requested == StopRequest.SUSPEND and manifest.get("status") not in (
            JobState.SUCCEEDED,
            JobState.FAILED,
        ):
            return JobState.SUSPENDED, suspended_reason(job, manifest)
        if status.state == JobState.FAILED and manifest.get("status") == JobState.FAILED:
            return status.state, manifest.get("reason") or status.reason
        if status.state == JobState.SUCCEEDED and manifest.get("status") == JobState.SUCCEEDED:
            return status.state, after_work_reason(manifest) or status.reason
        return status.state, status.reason


def _cause_of_end(job: JobRecord, state: str) -> Cause:
    """What ended a job the cluster says has ended: the process, unless it never ran (a user's
    cancel, or the cluster withdrawing or expiring it)."""
    if job.state == JobState.RUNNING:
        return Cause.PROCESS_END
    if state == JobState.CANCELLED and job.stop_requested == StopRequest.CANCEL:
        return Cause.USER
    if state in (JobState.CANCELLED, JobState.EXPIRED):
        return Cause.SCHEDULER
    return Cause.PROCESS_END
