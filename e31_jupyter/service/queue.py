"""The queue service: submit, cancel, schedule, and release when a job's process ends.

Any number of Jupyter servers may share one data directory. All of them submit, cancel and read
through the store; exactly one of them, the holder of an OS file lock, is the *scheduler*: it
starts jobs, watches their processes, enforces limits and releases GPUs. When it dies the lock
goes with it and another server (or the same one restarted) takes over and adopts the jobs,
which kept running meanwhile in their own sessions.

Everything here runs on the server's event loop; process waits run in threads and report back
to the loop.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import math
import os
import secrets
import shutil
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

from e31_jupyter.core import meter, policy, sweep
from e31_jupyter.core.after import Standing, broken_reason, standing
from e31_jupyter.core.errors import Conflict, E31Error, Gone, InvalidRequest, NotFound
from e31_jupyter.core.forecast import Forecast, run_forward
from e31_jupyter.core.job import MAX_IDS, MAX_PAGE_SIZE, PAGE_SIZE, JobSpec, iso, validate_text
from e31_jupyter.core.queue_order import Line
from e31_jupyter.core.states import ACTIVE_STATES, JobState
from e31_jupyter.core.text import format_moment, format_seconds, format_size
from e31_jupyter.execution import accounts
from e31_jupyter.execution import gpus as gpu_inventory
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.jobdir import JobDir, write_json_atomic
from e31_jupyter.service import api_views as views
from e31_jupyter.service import datadir
from e31_jupyter.service.admission import Admission, Caller, Revision
from e31_jupyter.service.policy_input import History, PendingJobs, pending
from e31_jupyter.service.settings import Settings
from e31_jupyter.service.staging import Staging, body_again
from e31_jupyter.service.store import Store

log = logging.getLogger("e31")

TICK_S = 0.2  # how often the scheduler looks for other servers' writes and time limits
TIMED_PASS_S = 1.0  # how often it schedules with nothing new (deadlines become hopeless)
PASS_GAP_S = 0.05  # submits and cancels closer than this (or than 2 passes' time) share one pass
CHECK_ID = "(checked)"  # the id a checked job has in the line it is checked against; no job's id
LINE_MAX_AGE_S = 1.0  # how stale a place in line may be shown after the queue changed
RETENTION_CHECK_S = 600.0  # how often the scheduler looks for jobs whose files are due for deletion
LOCK_RETRY_S = 1.0  # how often a server that is not the scheduler tries to become it
# What a resubmit may change; the rest comes from the earlier job.
RESUBMIT_CHANGES = frozenset({
    "gpus", "max_runtime", "expected_runtime", "deadline", "name", "team", "parameters", "outputs", "reports",
    "after",
})  # fmt: skip


class Queue:
    def __init__(self, data_dir: Path, backend, settings: Settings, clock=time.time):
        self.data_dir = Path(data_dir)
        self.jobs_root = self.data_dir / "jobs"
        self.inbox = self.data_dir / "inbox"  # where a kernel on this machine stages captured values
        self.backend = backend
        self.settings = settings
        self.clock = clock
        self.policy = policy.POLICIES[settings.policy]
        others = settings.many_users and accounts.jobs_run_as_others(settings.jobs_run_as)
        mode = datadir.mode_for(jobs_run_as_others=others)
        _ensure_writable(self.data_dir, mode)
        datadir.private_folder(self.jobs_root, mode)
        datadir.private_folder(self.inbox, mode)
        self.staging = Staging(self.jobs_root, self.inbox, per_user=settings.system)
        self.store = Store(self.data_dir / "e31.sqlite")
        self.admission = Admission(self.store, settings, self.data_dir, backend)
        self.is_scheduler = False
        self._lock_file = None
        self._stopping: set[str] = set()  # running jobs being stopped by this scheduler
        self._watched: set[str] = set()
        self._seen_version = -1  # the store's data_version at the last look
        self._last_pass = 0.0  # time.monotonic() of the last scheduling pass
        self._last_sweep = 0.0  # time.monotonic() of the last look for files due for deletion
        self._sweep: asyncio.Future | None = None  # that look, while it deletes
        self._pass_s = 0.0  # how long it took
        self._pass_due = False  # a pass is set to run soon (_schedule_soon)
        self._line: Line | None = None  # the queue in order, for places in line
        self._pending_jobs = PendingJobs()  # the queued jobs as the policy sees them, kept between passes
        self._line_seen: policy.Snapshot | None = None  # what the policy saw when the line was made
        self._forecast: tuple[Line | None, Forecast] = (None, Forecast())  # a line's forecast
        self._line_made = (0.0, (0, 0))  # when (time.monotonic()) and at which store.version()
        # Queued jobs out of the line, waiting for others: where they stand, and the job.
        self._held: dict[str, tuple[Standing, policy.Pending]] = {}
        self.history = History(  # inventory None: a cluster's
            self.store,
            machine_gpus=len(settings.inventory or ()),
            long_share=settings.long_jobs_share,
            max_gpus_per_owner=settings.max_gpus_per_user,
        )
        self._ticker: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- life cycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.staging.sweep(self.store.job_ids(), self.jobdir)
        self._try_to_become_scheduler()
        self._ticker = asyncio.create_task(self._tick_forever())
        check = getattr(self.backend, "check_default_image", None)
        if check is not None:  # a container's image: said in the log before a job waits for it
            self._loop.run_in_executor(None, check)

    async def stop(self) -> None:
        """Stop scheduling. Running jobs go on; the next scheduler adopts them."""
        if self._ticker:
            self._ticker.cancel()
        if self._lock_file:
            self._lock_file.close()
            self._lock_file = None
        self.is_scheduler = False
        self.store.close()

    def _try_to_become_scheduler(self) -> None:
        lock_file = open(self.data_dir / "scheduler.lock", "a+")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock_file.close()
            return
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(f"{os.getpid()}\n")
        lock_file.flush()
        self._lock_file = lock_file
        self.is_scheduler = True
        log.info("e31: this server schedules the queue in %s", self.data_dir)
        self._adopt_running_jobs()
        self.schedule()

    async def _tick_forever(self) -> None:
        last_lock_try = 0.0
        while True:
            await asyncio.sleep(TICK_S)
            try:
                if self.is_scheduler:
                    self._tick()
                elif time.monotonic() - last_lock_try >= LOCK_RETRY_S:
                    last_lock_try = time.monotonic()
                    self._try_to_become_scheduler()
            except Exception:  # a bad tick must not stop the queue
                log.exception("e31: scheduler tick failed")

    def _tick(self) -> None:
        now = self.clock()
        for job in self.store.jobs((JobState.RUNNING.value,)):
            if job["id"] in self._stopping:
                continue
            if job["stop_requested"]:
                self._stop_job(job)
            elif now > job["started_at"] + job["max_runtime_s"]:
                self.store.update(job["id"], stop_requested="timeout")
                self._stop_job({**job, "stop_requested": "timeout"})
        # Submits and cancels of other servers show as a new store version: schedule at once.
        # Otherwise a pass a second is enough to expire jobs whose deadlines became hopeless.
        version = self.store.data_version()
        if version != self._seen_version or time.monotonic() - self._last_pass >= TIMED_PASS_S:
            self._seen_version = version
            self.schedule()
        self._delete_old_files_when_due()

    def _delete_old_files_when_due(self) -> None:
        """Start deleting the files of jobs that ended ``delete_files_after_s`` ago, now and then
        (more often for a short setting), one sweep at a time."""
        after = self.settings.delete_files_after_s
        if after is None or (self._sweep is not None and not self._sweep.done()):
            return
        if time.monotonic() - self._last_sweep < min(RETENTION_CHECK_S, after / 2):
            return
        self._last_sweep = time.monotonic()
        self._sweep = asyncio.ensure_future(self._delete_old_files(after))

    async def _delete_old_files(self, after: float) -> None:
        by = f"e31 (c.E31.delete_files_after = {format_seconds(after)})"
        for job in self.store.ended_with_files(self.clock() - after, limit=100):
            try:
                await self._delete_files(job, by)
            except Exception:  # one job's files must not stop the others'
                log.exception("e31: deleting the files of job %s failed", job["id"])

    # --- user actions ---------------------------------------------------------------------

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
        job = self.store.get(job_id)
        if job["state"] == JobState.QUEUED.value:
            self._rejoin_line(job)
        self._schedule_soon()
        return self.describe(job), proposal.warnings

    async def check(self, caller: Caller, body: dict, kernels: list[str], root_dir: Path, again: bool = False) -> dict:
        """What submitting ``body`` now would give, with nothing submitted: the same refusals
        and warnings, and the place in line and expected start the job would have."""
        now = self.clock()
        proposal = await self._propose(caller, body, kernels, root_dir, now, again)
        record = _record_fields(CHECK_ID, caller, proposal.spec, body, now)
        waiting = self._standing(record).waiting_for
        place, outlook = await self._would_take(proposal.spec, pending(record), waiting, now)
        return {
            "submitted": False,
            "name": record["name"],
            "queue_position": place,
            **views.outlook_view(CHECK_ID, outlook),
            "waiting_for": waiting,
            "request": views.request_view(record),
            "work": views.work_view(record["spec"]),
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

    async def _would_take(
        self, spec: JobSpec, job: policy.Pending, waiting_for: list[str], now: float
    ) -> tuple[int | None, Forecast]:
        """The place in line a job would take if it were submitted now (none while it would
        wait for ``waiting_for``), and the forecast of the queue with it (``job`` is ``spec`` as
        the policy sees it)."""
        line = self.positions()
        if self.store.version() != self._line_made[1]:  # the queue changed since: a check must be exact
            self._make_line(now)
            line = self._line
        moment = replace(self._line_seen, now=max(now, self._line_seen.now))
        held = self._waiting_jobs()
        if waiting_for:
            return None, run_forward(self.policy.walk, line.ordered, moment, [*held, (job, waiting_for)], line.key)
        return line.place_of(job), run_forward(self.policy.walk, line.ordered_with(job), moment, held, line.key)

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
        os.rename(self.staging.folder(job_id), self.jobdir(job_id).path)
        try:
            handed_over = await self._hand_over(job_id, spec)
        except BaseException:
            self.store.delete_job(job_id)
            shutil.rmtree(self.jobdir(job_id).path, ignore_errors=True)
            raise
        if handed_over:
            self.store.update(job_id, **handed_over)

    async def _hand_over(self, job_id: str, spec: JobSpec) -> dict:
        """Fields to record with a new job; where a cluster scheduler takes jobs at submit
        (cluster_queue.py), this is where it gets them. Here, the queue keeps them."""
        return {}

    async def cancel(self, caller: Caller, job_id: str) -> dict:
        job = self.visible_job(caller, job_id)
        now = self.clock()
        reason = f"cancelled by {caller.name}"
        if job["state"] == JobState.QUEUED.value:
            if self.store.transition(job_id, ("queued",), "cancelled", reason, now, finished_at=now):
                self._leave_line(job_id)
                self._schedule_soon()
                return self.describe(self.store.get(job_id))
            job = self.store.get(job_id)  # it started meanwhile: cancel the running job
        if job["state"] != JobState.RUNNING.value:
            raise Conflict(f"Job {job_id} has already ended ({job['state']}); there is nothing to cancel.")
        if not job["stop_requested"]:
            self.store.update(job_id, stop_requested="cancel", reason=f"cancelling: {reason}")
        if self.is_scheduler and job_id not in self._stopping:
            self._stop_job({**job, "stop_requested": "cancel"})
        return self.describe(self.store.get(job_id))

    async def update(self, caller: Caller, job_id: str, changes: dict) -> dict:
        """Change a queued job's request (GPUs, run times, deadline), name, team or the jobs it
        runs after in place: it keeps its id, its files and the jobs that wait for it, and takes
        its place in line anew. The change is recorded in its history."""
        job = self._still_queued(self.visible_job(caller, job_id))
        now = self.clock()
        revision = self.admission.revise(caller, job, changes, now)
        if revision.fields:
            await self._hand_change(job, revision)
            spec = {**job["spec"], **revision.spec_changes}
            reason = f"changed by {caller.name}: {'; '.join(revision.changed)}"
            if not self.store.transition(job_id, ("queued",), "queued", reason, now, **revision.fields, spec=spec):
                self._still_queued(self.store.get(job_id))  # it started or ended meanwhile: raises
            self._revise_spec_file(job_id, revision)
            if "after_jobs" in revision.fields:
                self._line = None  # who waits for whom changed: the line is made anew when next asked
            else:
                self._rejoin_line(self.store.get(job_id))
            self._forecast = (None, Forecast())  # the line changed in place: forecast it again
            self._schedule_soon()
        return {**self.describe(self.store.get(job_id)), "changed": revision.changed, "warnings": revision.warnings}

    async def _hand_change(self, job: dict, revision: Revision) -> None:
        """Where a cluster scheduler holds queued jobs (cluster_queue.py), a change is made there
        first. Here, the queue holds them."""

    async def delete_files(self, caller: Caller, job_id: str) -> dict:
        """Delete an ended job's files (its notebook, data, values, outputs, reports and log) to
        free their space. Its record stays: its state, history and the GPU-hours it was charged.
        Recorded before the files go, so a server that dies half-way leaves a job that says so,
        and deleting again finishes the work."""
        job = self.visible_job(caller, job_id)
        if job["state"] in ACTIVE_STATES:
            raise Conflict(
                f"Job {job_id} is {job['state']}, and its files are in use. Cancel it first "
                f"(e31 cancel {job_id}), then delete its files."
            )
        left = await self._delete_files(job, caller.name)
        warnings = [f"{len(left)} file(s) could not be deleted: {'; '.join(left[:3])}"] if left else []
        return {**self.describe(self.store.get(job_id)), "warnings": warnings}

    async def _delete_files(self, job: dict, by: str) -> list[str]:
        """Record that ``by`` deletes the ended job's files, then delete them; what could not go."""
        jobdir = self.jobdir(job["id"])
        if not job["result"].get("deleted"):
            size = await asyncio.to_thread(jobdir.size)
            deleted = {"at": self.clock(), "by": by, "bytes": size}
            reason = f"files deleted by {by} ({format_size(size)})"
            result = {**job["result"], "deleted": deleted}
            state = job["state"]
            self.store.transition(job["id"], (state,), state, reason, deleted["at"], keep_reason=True, result=result)
        return await asyncio.to_thread(jobdir.delete)

    def files_of(self, caller: Caller, job_id: str) -> tuple[dict, JobDir]:
        """The job and its folder, for what reads the job's files; refused once they are deleted."""
        job = self.visible_job(caller, job_id)
        deleted = job["result"].get("deleted")
        if deleted:
            when = format_moment(iso(deleted["at"]), seconds=False, utc=True)
            raise Gone(
                f"Job {job_id}'s files were deleted on {when} by {deleted['by']}: its notebook, data, "
                f"values, outputs and log are gone. Its record and GPU-hours remain (e31 status {job_id})."
            )
        return job, self.jobdir(job_id)

    def _still_queued(self, job: dict) -> dict:
        if job["state"] != JobState.QUEUED.value:
            where = "is running" if job["state"] == JobState.RUNNING.value else f"has already ended ({job['state']})"
            raise Conflict(
                f"Job {job['id']} {where}; only a queued job's request can change. "
                "To run it again with another request: e31 resubmit."
            )
        return job

    def _revise_spec_file(self, job_id: str, revision: Revision) -> None:
        """The job's ``spec.json`` says what it asks for now (a resubmit starts from it)."""
        jobdir = self.jobdir(job_id)
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

    def _rejoin_line(self, job: dict) -> None:
        """A queued job takes its place in line (new, or its request changed), unless it waits
        for others."""
        self._leave_line(job["id"])
        line = self.positions()
        if isinstance(line, Line) and self._standing(job).ready:
            line.join(pending(job))

    def visible_job(self, caller: Caller, job_id: str) -> dict:
        job = self.store.get(job_id) if isinstance(job_id, str) else None
        if job is None or not (caller.is_admin or job["owner"] == caller.name):
            raise NotFound(f"No job {job_id!r}. List your jobs with `e31 jobs`.")
        return job

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
            after = (mark["submitted_at"], mark["id"])
        owner = None if caller.is_admin else caller.name
        states = (state,) if state else None
        rows = self.store.jobs(states, owner=owner, fingerprint=fingerprint, ids=ids, before=after, limit=limit + 1)
        page = rows[:limit]
        positions = self.positions() if any(r["state"] == JobState.QUEUED.value for r in page) else {}
        return [self.describe(row, positions) for row in page], (page[-1]["id"] if len(rows) > limit else None)

    def transitions(self, job_id: str) -> list[dict]:
        return [{**t, "at": iso(t["at"])} for t in self.store.transitions(job_id)]

    def last_change(self) -> int:
        """The number of the newest state change recorded, by any server sharing the store."""
        return self.store.last_transition()

    def changes_after(self, seq: int) -> list[dict]:
        """State changes numbered after ``seq``, oldest first: ``seq``, ``job_id``, ``owner``, ``to``."""
        return self.store.transitions_after(seq)

    def jobdir(self, job_id: str) -> JobDir:
        return JobDir(self.jobs_root / job_id)

    # --- views ----------------------------------------------------------------------------

    def positions(self) -> Line:
        """Place in line of each queued job (``.get(id)``, 1 = next), in the order the policy
        would start them: at most LINE_MAX_AGE_S old once the queue has changed."""
        made_at, version = self._line_made
        age = time.monotonic() - made_at
        if self._line is None or (age >= LINE_MAX_AGE_S and (
            self.store.version() != version or age >= (self.policy.refresh_s or math.inf)
        )):  # fmt: skip
            self._make_line(self.clock())
        return self._line

    def _make_line(self, now: float, running: list[dict] | None = None) -> policy.Snapshot:
        """Put the queued jobs in line as of ``now``: the line as it was, with the jobs that
        joined and left since, while the policy's priorities hold (``_keys_hold``); else a new
        one. Returns what the policy sees now."""
        version = self.store.version()
        rows = self.store.queued_requests()
        self._held = self._holding(rows)
        queued = [job for job in self._pending_jobs.of(rows) if job.id not in self._held]
        if running is None:
            running = self.store.jobs((JobState.RUNNING.value,), brief=True)
        snapshot = self.history.snapshot(now, self.settings.inventory, running)
        if self._keys_hold(now):
            self._line.follow(queued)
        else:
            self._line = Line(self.policy.priority, snapshot, queued)
        self._line_seen = snapshot
        self._line_made = (time.monotonic(), version)
        self._forecast = (None, Forecast())
        return snapshot

    def _keys_hold(self, now: float) -> bool:
        """Whether the line's priority keys are still the policy's (``Policy.refresh_s``): the
        simulator's queue is re-sorted as often, so the live queue orders jobs as the replays did."""
        if self._line is None:
            return False
        age = now - self._line.snapshot.now
        return 0 <= age < (self.policy.refresh_s if self.policy.refresh_s is not None else math.inf)

    def _holding(self, rows) -> dict[str, tuple[Standing, policy.Pending]]:
        """The queued jobs (store rows) still waiting for others, or that others let down: where
        each stands, and the job as the policy sees it."""
        waiting = [r for r in rows if r["after_jobs"] != "[]"]
        if not waiting:
            return {}
        after = {r["id"]: json.loads(r["after_jobs"]) for r in waiting}
        states = self.store.states(sorted({job_id for ids in after.values() for job_id in ids}))
        found = {r["id"]: (standing(after[r["id"]], states), pending(r)) for r in waiting}
        return {job_id: held for job_id, held in found.items() if not held[0].ready}

    def _standing(self, job: dict) -> Standing:
        """Where one job (a store row or a record) stands with the jobs it runs after."""
        after = job["after_jobs"]
        return standing(after, self.store.states(after)) if after else Standing()

    def forecast(self) -> Forecast:
        """What is expected of the jobs at the head of the line (``forecast.py``), worked out
        once per line, when first asked."""
        line = self.positions()
        if self._forecast[0] is not line:
            forecast = run_forward(self.policy.walk, line.ordered, self._line_seen, self._waiting_jobs(), line.key)
            self._forecast = (line, forecast)
        return self._forecast[1]

    def _waiting_jobs(self) -> list[tuple[policy.Pending, list[str]]]:
        """The jobs out of the line that may still run, each with the jobs it waits for."""
        return [(job, where.waiting_for) for where, job in self._held.values() if not where.broken]

    def _leave_line(self, job_id: str) -> None:
        if self._line is not None:
            self._line.leave(job_id)

    def describe(self, job: dict, positions: dict[str, int] | None = None) -> dict:
        """The job as the API shows it, with what the queue knows of it now."""
        queued = job["state"] == JobState.QUEUED.value
        if positions is None and queued:
            positions = self.positions()
        return views.job_view(
            job,
            position=(positions or {}).get(job["id"]),
            outlook=self._outlook(job),
            waiting_for=self._standing(job).waiting_for if queued else [],
            meter=self._meter(job),
            progress=self._progress(job),
        )

    def _progress(self, job: dict) -> dict:
        """How far the notebook has got: live while it runs, as recorded once it has ended."""
        if job["state"] == JobState.RUNNING.value:
            return self.jobdir(job["id"]).read_json(self.jobdir(job["id"]).progress, {})
        return job["result"].get("progress", {})

    def _outlook(self, job: dict) -> dict:
        if job["state"] not in ACTIVE_STATES:
            return views.outlook_view(job["id"], Forecast(), queued=False)
        return views.outlook_view(job["id"], self.forecast(), queued=job["state"] == JobState.QUEUED.value)

    def _meter(self, job: dict) -> dict:
        seconds = meter.gpu_seconds(job, self.clock())
        return meter.reading(seconds, self.settings.gpu_hour_rate, self.settings.currency)

    def meter_summary(self, caller: Caller, since: float, until: float) -> dict:
        jobs = self.store.held_between(since, until)
        if not caller.is_admin:
            jobs = [j for j in jobs if j["owner"] == caller.name]
        s = self.settings
        return {
            "since": iso(since),
            "until": iso(until),
            **meter.summary(jobs, since, until, self.clock(), s.gpu_hour_rate, s.currency),
        }

    def gpu_pool(self, caller: Caller) -> dict:
        running = self.store.jobs((JobState.RUNNING.value,))
        holders = gpu_inventory.holders(self.settings.inventory, running)
        return self._pool_view(caller, [(d, job is not None, job) for d, job in holders.items()], running)

    def _pool_view(self, caller: Caller, devices: list[tuple[str, bool, dict | None]], running: list) -> dict:
        return views.pool_view(caller, devices, len(running), self.store.count((JobState.QUEUED.value,)))

    # --- scheduling (only on the scheduler) -----------------------------------------------

    def schedule(self) -> None:
        """Ask the policy what to start and what to expire, and do it."""
        if not self.is_scheduler:
            return
        started = self._last_pass = time.monotonic()
        now = self.clock()
        running = self.store.jobs((JobState.RUNNING.value,), brief=True)
        snapshot = self._make_line(now, running)
        self._expire_held(now)
        if len(self._line) == 0:
            return
        decision = self.policy.walk(self._line.ordered, snapshot)
        for job_id, reason in decision.expire:
            self.store.transition(job_id, ("queued",), "expired", reason, now, finished_at=now)
            self._line.leave(job_id)
        free = gpu_inventory.free_devices(self.settings.inventory, running)
        for job_id in decision.start:
            gpus = self._line.job(job_id).gpus
            devices, free = free[:gpus], free[gpus:]
            self._start_job(job_id, devices, now)
            self._line.leave(job_id)
        self._pass_s = time.monotonic() - started

    def _expire_held(self, now: float) -> None:
        """Jobs whose earlier jobs ended without succeeding, or whose deadline passed while they
        waited for them, expire: they can no longer run as asked."""
        for job_id, (where, job) in self._held.items():
            if where.broken:
                reason = broken_reason(where.broken)
            elif job.deadline is not None and job.deadline < now:
                reason = f"deadline passed while it waited for {', '.join(where.waiting_for)}"
            else:
                continue
            self.store.transition(job_id, ("queued",), "expired", reason, now, finished_at=now)

    def _schedule_soon(self) -> None:
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
        self._loop.call_later(delay, self._scheduled_pass)

    def _scheduled_pass(self) -> None:
        self._pass_due = False
        try:
            self.schedule()
        except Exception:  # like a tick: a bad pass must not stop the queue
            log.exception("e31: scheduling pass failed")

    def _start_job(self, job_id: str, devices: list[str], now: float) -> None:
        if not self.jobdir(job_id).path.exists():
            return  # recorded this instant by another server, which is moving its files in place
        granted = f"granted GPU(s) {', '.join(devices)}" if devices else "started (no GPUs)"
        if not self.store.transition(job_id, ("queued",), "running", granted, now, started_at=now, granted=devices):
            return  # cancelled a moment ago
        self._begin(job_id, devices)

    def _begin(self, job_id: str, devices: list[str]) -> None:
        """Start the process of a job recorded as running on ``devices``, as the account it runs
        as (decided here, once); a job that cannot run as it fails at start, saying why."""
        try:
            account = self._account_of(self.store.get(job_id))
        except E31Error as error:
            self._launched(job_id, None, error.message)
            return
        if getattr(self.backend, "starts_slowly", False):
            self._loop.run_in_executor(None, self._launch_in_thread, job_id, devices, account)
        else:
            self._launched(job_id, *self._launch(job_id, devices, account))

    def _account_of(self, job: dict) -> Account:
        """The Unix account ``job`` runs as (c.E31.jobs_run_as); E31Error when it cannot run here."""
        return accounts.runs_as(job["owner"], self.settings.jobs_run_as)

    def _account_or_none(self, job_id: str) -> Account | None:
        """The account the job runs as, or None for one that never could (nothing of it runs)."""
        try:
            return self._account_of(self.store.get(job_id))
        except E31Error:
            return None

    def _launch(self, job_id: str, devices: list[str], account: Account) -> tuple[dict | None, str]:
        """Start the job's worker: its handle, or why it could not start."""
        try:
            return self.backend.start(job_id, self.jobdir(job_id), devices, account), ""
        except Exception as error:
            log.exception("e31: could not start job %s", job_id)
            return None, str(error) or type(error).__name__

    def _launch_in_thread(self, job_id: str, devices: list[str], account: Account) -> None:
        outcome = self._launch(job_id, devices, account)
        self._loop.call_soon_threadsafe(self._launched, job_id, *outcome)

    def _launched(self, job_id: str, handle: dict | None, error: str) -> None:
        if handle is None:
            self._finish(job_id, None, self.clock(), start_error=error)
            return
        self.store.update(job_id, handle=json.dumps(handle))
        self._watch(job_id, handle)
        if job_id in self._stopping:  # cancelled or timed out while it was starting
            self._stop_job({"id": job_id, "handle": json.dumps(handle)})

    def _watch(self, job_id: str, handle: dict) -> None:
        """Wait for the job's process in a thread; report its end to the event loop."""
        self._watched.add(job_id)
        loop = self._loop

        def wait():
            exit_code = self.backend.wait(handle)
            ended_at = self.clock()
            loop.call_soon_threadsafe(self._finish, job_id, exit_code, ended_at)

        threading.Thread(target=wait, name=f"e31-wait-{job_id}", daemon=True).start()

    def _stop_job(self, job: dict) -> None:
        """End a running job's processes (SIGTERM, grace, SIGKILL); its watcher then finishes it."""
        self._stopping.add(job["id"])
        handle = _unjson(job["handle"])
        if handle is None:
            return
        asyncio.get_running_loop().run_in_executor(None, self.backend.stop, job["id"], handle, self.settings.grace_s)

    def _finish(self, job_id: str, exit_code: int | None, ended_at: float, start_error: str = "") -> None:
        """The job's process has ended: sweep leftovers, release its GPUs, record why it ended."""
        self._watched.discard(job_id)
        self._stopping.discard(job_id)
        job = self.store.get(job_id)
        if job is None or job["state"] != JobState.RUNNING.value:
            return
        self.backend.sweep(job_id, self._account_or_none(job_id))
        jobdir = self.jobdir(job_id)
        state, reason = _final_state(job, jobdir.read_json(jobdir.manifest), exit_code, start_error)
        if state == "failed" and _disk_full(jobdir.path, reason):
            reason = (
                f"disk full: the data directory ({self.data_dir}) ran out of space while the job "
                f"ran ({reason}). What it wrote is kept; free some space and run it again."
            )
        self.store.transition(
            job_id, ("running",), state, reason, ended_at, finished_at=ended_at, result=self._result_or_none(job_id)
        )
        self.schedule()

    def _result_or_none(self, job_id: str) -> dict:
        """``result_of``, or nothing when the job's folder cannot be read (a job that made its
        files links, say): the job ends and releases its GPUs all the same."""
        try:
            return self.result_of(job_id)
        except (E31Error, OSError, ValueError) as error:
            log.warning("e31: job %s ended, and what it handed back cannot be read: %s", job_id, error)
            return {}

    def result_of(self, job_id: str) -> dict:
        """What an ended job handed back, in short, for the record: read once, listed often."""
        jobdir = self.jobdir(job_id)
        manifest = jobdir.read_json(jobdir.manifest) or {}
        progress = jobdir.read_json(jobdir.progress) or {}
        return {
            "files_count": len(manifest.get("files", [])),
            "files_left_out": len(manifest.get("left_out", [])),
            "values": sorted(jobdir.values_index()),
            "reports": sorted(manifest.get("reports", {})),
            "after_work_failures": manifest.get("after_work_failures", []),
            "progress": {k: progress.get(k) for k in ("cells_done", "cells_total")},
        }

    def _adopt_running_jobs(self) -> None:
        """After a restart: watch jobs that still run; record the true end of those that ended."""
        for job in self.store.jobs((JobState.RUNNING.value,)):
            handle = _unjson(job["handle"]) or self._recover_handle(job["id"])
            if handle is not None and self.backend.adopt(job["id"], handle):
                log.info("e31: adopted running job %s", job["id"])
                self._watch(job["id"], handle)
                continue
            jobdir = self.jobdir(job["id"])
            if handle is None and not job["stop_requested"] and jobdir.never_started():
                self._start_unstarted(job)
                continue
            manifest = jobdir.read_json(jobdir.manifest)
            ended_at = (manifest or {}).get("finished_at") or jobdir.last_sign_of_life()
            self._finish(job["id"], None, max(ended_at or job["started_at"], job["started_at"]))

    def _start_unstarted(self, job: dict) -> None:
        """A server killed after recording a job as running but before starting its process: the
        job still holds its GPUs, so it starts on them now, and the meter counts from now."""
        self.backend.sweep(job["id"], self._account_or_none(job["id"]))  # e.g. a container created but never started
        devices = job["granted"]
        on = f" on GPU(s) {', '.join(devices)}" if devices else ""
        reason = (
            f"started after a restart{on}: the server had stopped before the job's process began, so nothing had run"
        )
        now = self.clock()
        self.store.transition(job["id"], ("running",), "running", reason, now, started_at=now)
        log.info("e31: starting job %s, which the last server recorded as running but never started", job["id"])
        self._begin(job["id"], devices)

    def _recover_handle(self, job_id: str) -> dict | None:
        """A server killed between starting a job and recording its handle: find the job's
        process by its job id, so a running job is adopted rather than taken for lost."""
        recover = getattr(self.backend, "recover", None)
        handle = recover(job_id, self._account_or_none(job_id)) if recover else None
        if handle is not None:
            self.store.update(job_id, handle=json.dumps(handle))
        return handle


def after_work_reason(manifest: dict) -> str:
    """A succeeded job's reason: what went wrong after its notebook ran ("" when nothing did)."""
    failures = manifest.get("after_work_failures") or []
    if not failures:
        return ""
    return "the notebook succeeded; after it, " + "; ".join(f["reason"] for f in failures)


def _disk_full(path: Path, reason: str) -> bool:
    if "No space left on device" in reason:
        return True
    try:
        return shutil.disk_usage(path).free < 1 << 20
    except OSError:
        return False


def _record_fields(job_id: str, caller: Caller, spec: JobSpec, body: dict, now: float) -> dict:
    request = spec.request
    return {
        "id": job_id, "owner": caller.name, "name": spec.name, "team": spec.team,
        "state": JobState.QUEUED.value, "gpus_requested": request.gpus,
        "max_runtime_s": request.max_runtime_s, "expected_runtime_s": request.expected_runtime_s,
        "max_runtime_given": int(request.max_runtime_given), "deadline": request.deadline,
        "submitted_at": now, "fingerprint": validate_text(body, "fingerprint"),
        "spec": {k: v for k, v in spec.to_dict().items() if k != "request"}, "after_jobs": spec.after,
    }  # fmt: skip


def _final_state(job: dict, manifest: dict | None, exit_code: int | None, start_error: str) -> tuple[str, str]:
    """The process decides the state: a stop we asked for, else the worker's manifest, else how
    the process ended."""
    if start_error:
        return "failed", f"could not start: {start_error}"
    if job["stop_requested"] == "cancel":
        return "cancelled", job["reason"].removeprefix("cancelling: ") or "cancelled"
    if job["stop_requested"] == "timeout":
        return "failed", f"timeout: ran longer than max_runtime ({format_seconds(job['max_runtime_s'])})"
    if manifest and manifest.get("status") == "succeeded":
        return "succeeded", after_work_reason(manifest)
    if manifest and manifest.get("status") == "failed":
        return "failed", manifest.get("reason") or "the notebook failed"
    if exit_code is not None and exit_code < 0:
        return "failed", f"worker killed by {signal.Signals(-exit_code).name}; partial results kept"
    return "failed", "lost: the job's process ended without writing a result manifest"


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


def _unjson(value):
    return json.loads(value) if value else None
