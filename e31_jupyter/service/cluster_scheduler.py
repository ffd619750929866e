"""The queue when a cluster scheduler (Slurm) decides: e31 hands each job over at submit and
follows what the scheduler says.

Slurm picks when a job starts and on which GPUs; e31's own policy and inventory are not used.
Everything about a job that e31 needs again is in the store (the backend's handle, the last
state and reason seen), and the rest is asked of the scheduler, so a restarted server simply
polls again. The worker inside the job is the same as with the local backend.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from e31_jupyter.core.after import broken_reason
from e31_jupyter.core.errors import Conflict, E31Error
from e31_jupyter.core.forecast import Forecast
from e31_jupyter.core.job import JobSpec, Request
from e31_jupyter.core.policy import Pending
from e31_jupyter.core.states import ACTIVE_STATES, FINAL_STATES, JobState
from e31_jupyter.execution.backends import BackendStatus
from e31_jupyter.service.admission import Caller, Revision
from e31_jupyter.service.queue import Queue, after_work_reason

log = logging.getLogger("e31")

POLL_S = 1.0  # how often the scheduler's view is read (squeue costs the controller a little)
HAND_OVER_S = 120.0  # a job still without a handle this long after submit lost its server mid-hand-over


class ClusterQueue(Queue):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._last_poll = 0.0
        self._poll_task: asyncio.Task | None = None
        self._last_poll_error = ""
        shared = self.backend.claim_shared_dir(self.data_dir)  # job files where the nodes see them
        if shared is not None:
            self.jobs_root, self.inbox = shared / "jobs", shared / "inbox"
            self.jobs_root.mkdir(exist_ok=True)
            self.inbox.mkdir(mode=0o700, exist_ok=True)

    async def stop(self) -> None:
        if self._poll_task:
            self._poll_task.cancel()
        await super().stop()

    async def _hand_over(self, job_id: str, spec: JobSpec) -> dict:
        """Submit to the cluster, as the account the job runs as: if the scheduler refuses the
        job (an unknown partition, say), or it cannot run as its submitter here, the user gets
        the message and no job exists."""
        after = self._handles_of_active(spec.after)
        account = self._account_of(self.store.get(job_id))
        handle = await asyncio.to_thread(self.backend.submit, job_id, self.jobdir(job_id), spec, after, account)
        return {"handle": json.dumps(handle)}

    def _handles_of_active(self, after: list[str]) -> list[dict]:
        """The cluster's handles of the jobs of ``after`` that have not ended: the cluster holds
        the job until they succeed (those that already did hold nothing up; the cluster may have
        forgotten them)."""
        handles = []
        for job_id in after:
            job = self.store.get(job_id)
            if job["state"] not in ACTIVE_STATES:
                continue
            if not job["handle"]:
                raise Conflict(f"after: job {job_id} is still being handed to the cluster; try again in a moment.")
            handles.append(json.loads(job["handle"]))
        return handles

    async def _record(self, job_id: str, spec: JobSpec, record: dict) -> None:
        await super()._record(job_id, spec, record)
        job = self.store.get(job_id)
        if job["state"] == JobState.CANCELLED.value:  # cancelled while it was being handed over
            await asyncio.to_thread(self.backend.cancel, job_id, json.loads(job["handle"]))

    async def cancel(self, caller: Caller, job_id: str) -> dict:
        job = self.visible_job(caller, job_id)
        if job["state"] in FINAL_STATES:
            raise Conflict(f"Job {job_id} has already ended ({job['state']}); there is nothing to cancel.")
        reason = f"cancelled by {caller.name}"
        if not job["handle"]:  # still being handed over: it is withdrawn once it has a handle
            self.store.transition(job_id, ACTIVE_STATES, "cancelled", reason, self.clock(), finished_at=self.clock())
            return self.describe(self.store.get(job_id))
        self.store.update(job_id, stop_requested="cancel", reason=f"cancelling: {reason}")
        await asyncio.to_thread(self.backend.cancel, job_id, json.loads(job["handle"]))
        self.schedule(force=True)
        return self.describe(self.store.get(job_id))

    async def _hand_change(self, job: dict, revision: Revision) -> None:
        """Slurm holds the job's request: it changes there first, and where Slurm refuses, it
        changes nowhere."""
        if not job["handle"]:
            raise Conflict(f"Job {job['id']} is still being handed to the cluster; change it in a moment.")
        spec = JobSpec(**{**job["spec"], **revision.spec_changes}, request=revision.request)
        before = Request(
            gpus=job["gpus_requested"], max_runtime_s=job["max_runtime_s"],
            expected_runtime_s=job["expected_runtime_s"], deadline=job["deadline"],
            max_runtime_given=bool(job["max_runtime_given"]),
        )  # fmt: skip
        after = self._handles_of_active(spec.after) if "after" in revision.spec_changes else None
        await asyncio.to_thread(self.backend.update, job["id"], json.loads(job["handle"]), spec, before, after)

    def positions(self) -> dict[str, int]:
        """Places in the cluster's queue, as the last poll of the cluster recorded them."""
        return self.store.queue_positions()

    def forecast(self) -> Forecast:
        return Forecast()  # the cluster decides; e31 does not forecast its queue

    async def _would_take(
        self, spec: JobSpec, job: Pending, waiting_for: list[str], now: float
    ) -> tuple[None, Forecast]:
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

    def gpu_pool(self, caller: Caller) -> dict:
        running = self.store.jobs((JobState.RUNNING.value,))
        holders = {(job["node"], device): job for job in running for device in job["granted"]}
        devices = [
            (f"{gpu['node']}:{gpu['device']}", gpu["busy"], holders.get((gpu["node"], gpu["device"])))
            for gpu in self.backend.pool()
        ]
        return self._pool_view(caller, devices, running)

    # --- following the scheduler (only on the e31 scheduler server) -----------------------

    def _tick(self) -> None:
        self.schedule()
        self._delete_old_files_when_due()

    def _adopt_running_jobs(self) -> None:
        self.schedule(force=True)  # everything is asked of the cluster again

    def schedule(self, force: bool = False) -> None:
        """Ask the cluster again, in a thread (squeue on a big cluster takes a while): the
        server's event loop never waits for it."""
        if not self.is_scheduler or self._poll_task or (not force and time.monotonic() - self._last_poll < POLL_S):
            return
        self._last_poll = time.monotonic()
        self._poll_task = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        try:
            active = {job["id"]: job for job in self.store.jobs(ACTIVE_STATES)}
            handles = {i: json.loads(j["handle"]) for i, j in active.items() if j["handle"]}
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
            if job is not None and job["state"] in ACTIVE_STATES:
                self._follow(job, status)
        for job_id, handle in self._expire_let_down():
            await asyncio.to_thread(self.backend.cancel, job_id, handle)

    def _expire_let_down(self) -> list[tuple[str, dict]]:
        """Queued jobs whose earlier jobs ended without succeeding expire; returns those the
        cluster must drop too (it would keep them pending, their dependency never satisfied)."""
        now, dropped = self.clock(), []
        for job_id, (where, _) in self._holding(self.store.queued_requests()).items():
            if not where.broken:
                continue  # the cluster holds it until they succeed
            reason = broken_reason(where.broken)
            if self.store.transition(job_id, ("queued",), "expired", reason, now, finished_at=now):
                handle = self.store.get(job_id)["handle"]
                if handle:
                    dropped.append((job_id, json.loads(handle)))
        return dropped

    def _find_unhanded(self, jobs: list[dict]) -> None:
        """Jobs whose server stopped while handing them to the cluster: the cluster may have
        taken one (then it is followed from now on), or not (then it never will)."""
        now = self.clock()
        for job in jobs:
            if now - job["submitted_at"] < HAND_OVER_S:
                continue  # its server may still be at it
            handle = self.backend.find(job["id"], self.jobdir(job["id"]))
            if handle is not None:
                self.store.update(job["id"], handle=json.dumps(handle))
            else:
                reason = "lost: the server stopped before the cluster took the job"
                self.store.transition(job["id"], ("queued",), "failed", reason, now, finished_at=now)

    def _follow(self, job: dict, status: BackendStatus) -> None:
        """Record what the cluster says of one job: new reason or place in line, a start, an end."""
        started = status.started_at is not None
        if job["state"] == JobState.QUEUED.value and status.state != JobState.QUEUED.value and started:
            self.store.transition(
                job["id"], ("queued",), "running", status.start_reason(), status.started_at,
                started_at=status.started_at, granted=status.granted, node=status.node, position=None,
            )  # fmt: skip
        if status.state in FINAL_STATES:
            state, reason = self._final(job, status)
            self.store.transition(
                job["id"], ACTIVE_STATES, state, reason, status.finished_at or self.clock(),
                finished_at=status.finished_at or self.clock(), result=self._result_or_none(job["id"]),
            )  # fmt: skip
        elif (
            status.state == JobState.QUEUED.value
            and not job["stop_requested"]
            and ((status.reason, status.position) != (job["reason"], job["position"]))
        ):
            self.store.update(job["id"], reason=status.reason, position=status.position)

    def _final(self, job: dict, status: BackendStatus) -> tuple[str, str]:
        """The cluster's verdict, with the worker's own reason when the notebook failed."""
        if status.state == JobState.CANCELLED.value and job["stop_requested"] == "cancel":
            return status.state, job["reason"].removeprefix("cancelling: ")
        jobdir = self.jobdir(job["id"])
        manifest = jobdir.read_json(jobdir.manifest) or {}
        if status.state == JobState.FAILED.value and manifest.get("status") == "failed":
            return status.state, manifest.get("reason") or status.reason
        if status.state == JobState.SUCCEEDED.value and manifest.get("status") == "succeeded":
            return status.state, after_work_reason(manifest) or status.reason
        return status.state, status.reason
