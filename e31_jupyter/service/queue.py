"""The queue: what users ask of it. Submit (and check a submit first), resubmit, change a queued
job's request, cancel, suspend a running job and resume it (or a failed one) from its
checkpoint, delete an ended job's files.

A job either exists whole (its folder and its record) or not at all. The scheduler
(``scheduler.py``, or ``cluster_scheduler.py`` for a cluster) decides when it starts and follows
it to its end; ``job_views.py`` answers what the API reads. Any number of Jupyter servers may
share one data directory: all submit and read through the store, one of them schedules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import cast

from e31_jupyter.core import sweep
from e31_jupyter.core.errors import Conflict, E31Error, InvalidRequest
from e31_jupyter.core.job import JobSpec, validate_text
from e31_jupyter.core.states import ACTIVE_STATES, RESUMABLE, Cause, JobState, StopRequest
from e31_jupyter.execution import accounts
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.backends import CLUSTER_BACKENDS, ClusterBackend, ProcessBackend
from e31_jupyter.execution.jobdir import JobDir, write_json_atomic
from e31_jupyter.service import api_json, datadir, resumption
from e31_jupyter.service.admission import Admission, Caller, Revision
from e31_jupyter.service.cluster_scheduler import ClusterScheduler
from e31_jupyter.service.job_files import JobFiles
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.job_views import JobViews
from e31_jupyter.service.policy_input import pending, standing_of
from e31_jupyter.service.scheduler import LocalScheduler, Scheduler
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.staging import Staging, body_again
from e31_jupyter.service.store import Store

CHECK_ID = "(checked)"  # the id a checked job has in the line it is checked against; no job's id
# What a resume may change of the job's request.
RESUME_CHANGES = ("gpus", "max_runtime", "expected_runtime", "deadline")
# What a resubmit may change; the rest comes from the earlier job.
RESUBMIT_CHANGES = frozenset({
    "gpus", "max_runtime", "expected_runtime", "deadline", "name", "team", "parameters", "outputs", "reports",
    "after", "kernel", "checkpoint", "on_timeout",
})  # fmt: skip


class Queue:
    def __init__(
        self, data_dir: Path, backend: ProcessBackend | ClusterBackend | None, settings: Settings, clock=time.time,
        backend_name: str = "local",
    ):  # fmt: skip
        self.data_dir = Path(data_dir)
        self.settings = settings
        self.clock = clock
        others = settings.many_users and accounts.jobs_run_as_others(settings.jobs_run_as)
        mode = datadir.mode_for(jobs_run_as_others=others)
        _ensure_writable(self.data_dir, mode)
        jobs_root, self.inbox = self.data_dir / "jobs", self.data_dir / "inbox"
        self.store = Store(self.data_dir / "e31.sqlite")
        cluster = backend_name in CLUSTER_BACKENDS
        if cluster:
            shared = cast(ClusterBackend, backend).claim_shared_dir(self.data_dir)  # job files where the nodes see them
            if shared is not None:
                jobs_root, self.inbox = shared / "jobs", shared / "inbox"
        datadir.private_folder(jobs_root, mode)
        datadir.private_folder(self.inbox, mode)
        self.files = JobFiles(jobs_root, self.store, clock)
        self.backend_name = backend_name
        self.scheduler: Scheduler = (
            ClusterScheduler(self.store, self.files, cast(ClusterBackend, backend), settings, clock, self.data_dir)
            if cluster
            else LocalScheduler(self.store, self.files, cast(ProcessBackend, backend), settings, clock, self.data_dir)
        )
        self.views = JobViews(self.store, self.scheduler, self.files, settings, clock)
        self.staging = Staging(jobs_root, self.inbox, per_user=settings.system)
        self.admission = Admission(self.store, settings, self.data_dir, backend)

    async def start(self) -> None:
        self.staging.finish_interrupted(self.store.job_ids(), self.files.jobdir)
        await self.scheduler.start()

    async def stop(self) -> None:
        """Stop scheduling. Running jobs go on; the next scheduler adopts them."""
        await self.scheduler.stop()
        self.store.close()

    async def submit(
        self, caller: Caller, body: dict, kernels: list[str], root_dir: Path, again: bool = False
    ) -> tuple[dict, list[str]]:
        """Check the request, stage the job's directory, then record it. A job either exists
        whole (directory and record) or not at all. ``again``: ``body`` is an earlier job's, as
        the queue recorded it (``resubmit``)."""
        now = self.clock()
        proposal = await self._propose(caller, body, kernels, root_dir, now, again)
        job_id = _new_job_id()
        await asyncio.to_thread(
            self.staging.stage, job_id, proposal.spec, proposal.notebook, proposal.data, proposal.inputs
        )
        await self._record(job_id, proposal.spec, _record_fields(job_id, caller, proposal.spec, body, now))
        await self.scheduler.submitted(self.store.job(job_id))
        return self.views.describe(self.store.job(job_id)), proposal.warnings

    async def check(self, caller: Caller, body: dict, kernels: list[str], root_dir: Path, again: bool = False) -> dict:
        """What submitting ``body`` now would give, with nothing submitted: the same refusals
        and warnings, and the place in line and expected start the job would have."""
        now = self.clock()
        proposal = await self._propose(caller, body, kernels, root_dir, now, again)
        record = _record_fields(CHECK_ID, caller, proposal.spec, body, now)
        waiting = standing_of(self.store, record).waiting_for
        place, outlook = await self.scheduler.would_take(proposal.spec, pending(record), waiting, now)
        return {
            "submitted": False,
            "name": record["name"],
            "queue_position": place,
            **api_json.outlook_view(CHECK_ID, outlook),
            "waiting_for": waiting,
            "request": api_json.request_view(record),
            "work": api_json.work_view(record["spec"]),
            "warnings": proposal.warnings,
        }

    async def _propose(self, caller: Caller, body: dict, kernels: list[str], root_dir: Path, now: float, again: bool):
        """The job ``body`` asks for, checked (``Admission.propose``); a system scheduler first
        makes sure that it reads nothing but what the caller handed over (or, ``again``, what
        it recorded of the caller's own job)."""
        if self.settings.system and isinstance(body, dict) and not again:
            self.staging.check_handed_over(body, self._account(caller))
        return await self.admission.propose(caller, body, kernels, root_dir, now)

    def inbox_for(self, caller: Caller) -> Path:
        """Where ``caller``'s kernels stage captured values and their server hands over data."""
        return self.staging.inbox_of(self._account(caller)) if self.settings.system else self.inbox

    @staticmethod
    def _account(caller: Caller) -> Account:
        account = accounts.by_name(caller.name)
        if account is None:  # the system scheduler names callers after their uid: not reached
            raise InvalidRequest(f"{caller.name!r} is not a Unix account on this machine.")
        return account

    async def resubmit(
        self, caller: Caller, job_id: str, changes: dict, kernels: list[str], root_dir: Path
    ) -> tuple[dict, list[str]]:
        """A new job from an earlier one (``body_again``), with ``changes``."""
        return await self.submit(caller, self._body_again(caller, job_id, changes), kernels, root_dir, again=True)

    async def check_resubmit(
        self, caller: Caller, job_id: str, changes: dict, kernels: list[str], root_dir: Path
    ) -> dict:
        """What ``resubmit`` would give now, as ``check`` says it; nothing is submitted."""
        return await self.check(caller, self._body_again(caller, job_id, changes), kernels, root_dir, again=True)

    def _body_again(self, caller: Caller, job_id: str, changes: dict) -> dict:
        """The submit body of a new job from an earlier one: its stored notebook, parameters,
        data sources, captured values and request, with ``changes`` (RESUBMIT_CHANGES) applied.
        The deadline is not carried over: it was the earlier job's."""
        unknown = sorted(set(changes) - RESUBMIT_CHANGES)
        if unknown:
            raise InvalidRequest(
                f"Cannot change {', '.join(unknown)} when resubmitting; allowed: {', '.join(sorted(RESUBMIT_CHANGES))}."
            )
        _, jobdir = self.files_of(caller, job_id)
        spec = jobdir.read_json(jobdir.spec)
        if spec is None or not jobdir.input_notebook.exists():
            raise Conflict(f"Job {job_id} has no stored notebook to run again.")
        body = body_again(jobdir, spec)
        if self.settings.system and body["data"]:
            raise Conflict(
                f"Job {job_id} brought data, which was handed over to the system scheduler and is now the job's. "
                "Submit the notebook again with its --data instead (e31 submit ... --data ...)."
            )
        if isinstance(changes.get("parameters"), dict):
            parameters = {**body["parameters"], **changes["parameters"]}
            changes = {"name": sweep.renamed(body["name"], parameters), **changes, "parameters": parameters}
        return {**body, **changes}

    async def _record(self, job_id: str, spec: JobSpec, record: dict) -> None:
        """Record the staged job, then move its directory into place. A crash before the record
        leaves a staging folder that the next start removes (nobody was told of the job); a
        crash after it leaves one that the next start moves into place (the job was recorded)."""
        try:
            self.store.insert_job(record, reason=f"submitted by {record['owner']}")
        except BaseException:
            shutil.rmtree(self.staging.folder(job_id), ignore_errors=True)
            raise
        os.rename(self.staging.folder(job_id), self.files.jobdir(job_id).path)
        try:
            handed_over = await self.scheduler.hand_over(job_id, spec)
        except BaseException:
            self.store.delete_job(job_id)
            shutil.rmtree(self.files.jobdir(job_id).path, ignore_errors=True)
            raise
        if handed_over:
            self.store.update(job_id, **handed_over)

    async def cancel(self, caller: Caller, job_id: str) -> dict:
        """Withdraw a queued job, or stop a running one (it ends as cancelled once its process has)."""
        job = self.views.visible_job(caller, job_id)
        await self.scheduler.cancel(job, caller.name)
        return self.views.describe(self.store.job(job_id))

    async def update(self, caller: Caller, job_id: str, changes: dict) -> dict:
        """Change a queued job's request (GPUs, run times, deadline), name, team or the jobs it
        runs after in place: it keeps its id, its files and the jobs that wait for it, and takes
        its place in line anew. The change is recorded in its history."""
        job = self._still_queued(self.views.visible_job(caller, job_id))
        now = self.clock()
        revision = self.admission.revise(caller, job, changes, now)
        if revision.fields:
            await self.scheduler.hand_change(job, revision)
            spec = {**job.spec, **revision.spec_changes}
            reason = f"changed by {caller.name}: {'; '.join(revision.changed)}"
            queued = (JobState.QUEUED,)
            if not self.store.transition(
                job_id, queued, JobState.QUEUED, reason, now, cause=Cause.USER, **revision.fields, spec=spec
            ):
                self._still_queued(self.store.job(job_id))  # it started or ended meanwhile: raises
            self._revise_spec_file(job_id, revision)
            self.scheduler.request_changed(self.store.job(job_id), after_changed="after_jobs" in revision.fields)
        described = self.views.describe(self.store.job(job_id))
        return {**described, "changed": revision.changed, "warnings": revision.warnings}

    async def suspend(self, caller: Caller, job_id: str) -> dict:
        """Stop a running job at the end of its running cell (within the grace period), with a
        checkpoint, and give its GPUs back: it waits, suspended, until resumed."""
        job = self.views.visible_job(caller, job_id)
        if job.state == JobState.QUEUED:
            raise Conflict(f"Job {job_id} is queued and holds no GPUs: there is nothing to suspend.")
        if job.state != JobState.RUNNING:
            raise Conflict(f"Job {job_id} is {job.state}; only a running job can be suspended.")
        if not job.spec.get("checkpoint"):
            raise Conflict(
                f"Job {job_id} takes no checkpoints (it was not submitted with --checkpoint), so a suspend would lose "
                f"its work. Cancel it (e31 cancel {job_id}) if its GPUs are needed."
            )
        if job.stop_requested:
            raise Conflict(f"Job {job_id} is already being stopped ({job.stop_requested}).")
        reason = f"suspending: asked by {caller.name}; it stops at its cell's end, with a checkpoint"
        self.store.update(job_id, stop_requested=StopRequest.SUSPEND, stop_by=caller.name, reason=reason)
        await self.scheduler.cancel(self.store.job(job_id), caller.name, StopRequest.SUSPEND)
        return self.views.describe(self.store.job(job_id))

    async def resume(self, caller: Caller, job_id: str, changes: dict) -> dict:
        """Put a failed or suspended job back in line to continue from its last checkpoint, with
        ``changes`` (RESUME_CHANGES) to its request, and with a corrected ``notebook`` if given
        (the cells its checkpoint covers unchanged). It keeps its id, its files, its history and
        its meter: the run that ended becomes one of its attempts. A cluster takes it again."""
        job = self.views.visible_job(caller, job_id)
        changes = dict(changes) if isinstance(changes, dict) else changes
        fixed = changes.pop("notebook", None) if isinstance(changes, dict) else None
        jobdir, after = self._resumable(job, changes)
        if fixed is not None:
            going_on = resumption.corrected(jobdir, _valid_notebook(fixed))
            write_json_atomic(jobdir.resume_from, going_on)
            write_json_atomic(jobdir.input_notebook, fixed)  # a resubmit runs the corrected notebook
            after += ", with a corrected notebook"
        now = self.clock()
        revision = self.admission.revise(caller, job, changes, now) if changes else None
        fields = dict(revision.fields) if revision else {}
        warnings = list(revision.warnings) if revision else []
        if "deadline" not in changes and job.deadline is not None and job.deadline <= now:
            fields["deadline"] = None
            warnings.append("its deadline had passed: it is resumed without one (give --deadline for another)")
        reason = f"resumed by {caller.name} from its checkpoint {after}"
        jobdir.start_again()  # before a cluster takes it: its worker may start at once
        request = revision.request if revision else job.request
        if "deadline" in fields and fields["deadline"] is None:
            request = dataclasses.replace(request, deadline=None)
        spec = JobSpec(**{**job.spec, **(revision.spec_changes if revision else {})}, request=request)
        fields.update(await self.scheduler.hand_over(job_id, spec))
        if not resumption.back_in_line(self.store, job, reason, now, Cause.USER, {}, **fields):
            raise Conflict(f"Job {job_id} changed while it was being resumed; look at it again (e31 status {job_id}).")
        if revision is not None:
            self._revise_spec_file(job_id, revision)
        await self.scheduler.submitted(self.store.job(job_id))
        described = self.views.describe(self.store.job(job_id))
        return {**described, "changed": revision.changed if revision else [], "warnings": warnings}

    def _resumable(self, job: JobRecord, changes: dict) -> tuple[JobDir, str]:
        """The folder of a job that may be resumed, and the words for the cell its checkpoint
        follows; Conflict (or InvalidRequest) saying why not and what to do instead."""
        unknown = sorted(set(changes) - set(RESUME_CHANGES)) if isinstance(changes, dict) else []
        if not isinstance(changes, dict) or unknown:
            raise InvalidRequest(
                f"A resume may change only {', '.join(RESUME_CHANGES)} of the job's request, and give a "
                "corrected notebook"
                + (f", not {', '.join(unknown)}" if unknown else "")
                + ". To change more, resubmit it (e31 resubmit)."
            )
        if job.state not in RESUMABLE:
            raise Conflict(
                f"Job {job.id} is {job.state}; only a job that was suspended, or that failed (out of time, lost, "
                f"or a cell raised), can be resumed. To run it again from the top: e31 resubmit {job.id}."
            )
        jobdir = self.files.readable(job)
        after = resumption.checkpoint_words(jobdir)
        if after is None:
            asked = (
                "it was not asked for one (--checkpoint)"
                if not job.spec.get("checkpoint")
                else ("it ended before its first cell finished")
            )
            raise Conflict(
                f"Job {job.id} has no checkpoint to resume from: {asked}. "
                f"Start it over from the top: e31 resubmit {job.id}."
            )
        return jobdir, after

    async def delete_files(self, caller: Caller, job_id: str) -> dict:
        """Delete an ended job's files (its notebook, data, values, outputs, reports and log) to
        free their space. Its record stays: its state, history and the GPU-hours it was charged.
        Recorded before the files go (``JobFiles.delete``)."""
        job = self.views.visible_job(caller, job_id)
        if job.state in ACTIVE_STATES:
            raise Conflict(
                f"Job {job_id} is {job['state']}, and its files are in use. Cancel it first "
                f"(e31 cancel {job_id}), then delete its files."
            )
        left = await self.files.delete(job, caller.name)
        warnings = [f"{len(left)} file(s) could not be deleted: {'; '.join(left[:3])}"] if left else []
        return {**self.views.describe(self.store.job(job_id)), "warnings": warnings}

    def files_of(self, caller: Caller, job_id: str) -> tuple[JobRecord, JobDir]:
        """A job the caller may see and its folder, for what reads its files; refused once they are deleted."""
        job = self.views.visible_job(caller, job_id)
        return job, self.files.readable(job)

    def _still_queued(self, job: JobRecord) -> JobRecord:
        if job.state != JobState.QUEUED:
            where = "is running" if job.state == JobState.RUNNING else f"has already ended ({job['state']})"
            raise Conflict(
                f"Job {job['id']} {where}; only a queued job's request can change. "
                "To run it again with another request: e31 resubmit."
            )
        return job

    def _revise_spec_file(self, job_id: str, revision: Revision) -> None:
        """The job's ``spec.json`` says what it asks for now (a resubmit starts from it)."""
        jobdir = self.files.jobdir(job_id)
        spec = jobdir.read_json(jobdir.spec)
        if spec is None:
            return
        request = revision.request
        spec["request"].update(
            gpus=request.gpus, max_runtime_s=request.max_runtime_s, expected_runtime_s=request.expected_runtime_s,
            deadline=request.deadline, max_runtime_given=request.max_runtime_given,
        )  # fmt: skip
        spec.update(revision.spec_changes)
        write_json_atomic(jobdir.spec, spec)


def _valid_notebook(notebook) -> dict:
    """A notebook given inline (nbformat 4 JSON), or InvalidRequest saying what is wrong with it."""
    import nbformat

    try:
        nbformat.validate(nbformat.from_dict(notebook))
    except Exception as error:
        raise InvalidRequest(f"notebook: not a valid notebook (nbformat 4): {str(error).splitlines()[0]}") from None
    return notebook


def _record_fields(job_id: str, caller: Caller, spec: JobSpec, body: dict, now: float) -> dict:
    request = spec.request
    return {
        "id": job_id, "owner": caller.name, "name": spec.name, "team": spec.team,
        "state": JobState.QUEUED, "gpus_requested": request.gpus,
        "max_runtime_s": request.max_runtime_s, "expected_runtime_s": request.expected_runtime_s,
        "max_runtime_given": int(request.max_runtime_given), "deadline": request.deadline,
        "submitted_at": now, "fingerprint": validate_text(body, "fingerprint"),
        "spec": {k: v for k, v in spec.to_dict().items() if k != "request"}, "after_jobs": spec.after,
    }  # fmt: skip


def _ensure_writable(data_dir: Path, mode: int = datadir.PRIVATE) -> None:
    """Give the data directory ``mode`` (datadir.prepare) and check that this server may write in it."""
    try:
        datadir.prepare(data_dir, mode)
        probe = data_dir / f".write-test-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as error:
        raise E31Error(
            f"The e31 data directory {str(data_dir)!r} is not writable ({error.strerror or error}). "
            "Fix its permissions, or point c.E31.data_dir (--E31.data_dir=...) at a writable folder.",
            status=500,
        ) from None


def _new_job_id() -> str:
    return time.strftime("%y%m%d") + "-" + secrets.token_hex(4)
