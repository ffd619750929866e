"""A job's files as the service sees them: its folder, what it handed back (read once for the
record), and deleting them, by a user or by the retention setting, with its record kept."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from e31_jupyter.core.errors import E31Error, Gone
from e31_jupyter.core.job import iso
from e31_jupyter.core.states import Cause, JobState
from e31_jupyter.core.text import format_moment, format_seconds, format_size
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.store import Store

log = logging.getLogger("e31")


class JobFiles:
    def __init__(self, jobs_root: Path, store: Store, clock: Callable[[], float]):
        self.jobs_root = jobs_root
        self.store = store
        self.clock = clock

    def jobdir(self, job_id: str) -> JobDir:
        return JobDir(self.jobs_root / job_id)

    def readable(self, job: JobRecord) -> JobDir:
        """The job's folder, for what reads its files; refused once they are deleted."""
        deleted = job.result.get("deleted")
        if deleted:
            when = format_moment(iso(deleted["at"]), seconds=False, utc=True)
            raise Gone(
                f"Job {job['id']}'s files were deleted on {when} by {deleted['by']}: its notebook, data, "
                f"values, outputs and log are gone. Its record and GPU-hours remain (e31 status {job['id']})."
            )
        return self.jobdir(job.id)

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
            "progress": {k: progress.get(k) for k in ("cells_done", "cells_total", "checkpoint", "users_cells")},
        }

    def result_or_none(self, job_id: str) -> dict:
        """``result_of``, or nothing when the job's folder cannot be read (a job that made its
        files links, say): the job ends and releases its GPUs all the same."""
        try:
            return self.result_of(job_id)
        except (E31Error, OSError, ValueError) as error:
            log.warning("e31: job %s ended, and what it handed back cannot be read: %s", job_id, error)
            return {}

    def progress(self, job: JobRecord) -> dict:
        """How far the notebook has got: live while it runs, as recorded once it has ended."""
        if job.state == JobState.RUNNING:
            jobdir = self.jobdir(job.id)
            return {**jobdir.read_json(jobdir.progress, {}), "last_line": jobdir.last_printed_line()}
        return job.result.get("progress", {})

    async def delete(self, job: JobRecord, by: str) -> list[str]:
        """Record that ``by`` deletes the ended job's files, then delete them; what could not go.
        Recorded first, so a server that dies half-way leaves a job that says so, and deleting
        again finishes the work."""
        jobdir = self.jobdir(job.id)
        if not job.result.get("deleted"):
            size = await asyncio.to_thread(jobdir.size)
            deleted = {"at": self.clock(), "by": by, "bytes": size}
            reason = f"files deleted by {by} ({format_size(size)})"
            result = {**job.result, "deleted": deleted}
            state = job.state
            self.store.transition(
                job.id, (state,), state, reason, deleted["at"], cause=Cause.USER, keep_reason=True, result=result
            )
        return await asyncio.to_thread(jobdir.delete)

    async def delete_old(self, after_s: float) -> None:
        """Delete the files of jobs that ended ``after_s`` ago (c.E31.delete_files_after)."""
        by = f"e31 (c.E31.delete_files_after = {format_seconds(after_s)})"
        for job in self.store.ended_with_files(self.clock() - after_s, limit=100):
            try:
                await self.delete(job, by)
            except Exception:  # one job's files must not stop the others'
                log.exception("e31: deleting the files of job %s failed", job.id)


class Retention:
    """Deletes the files of jobs that ended ``after_s`` ago, now and then (more often for a short
    setting), one pass at a time; the scheduler calls ``when_due`` on every tick."""

    CHECK_S = 600.0  # how often to look for jobs whose files are due for deletion

    def __init__(self, files: JobFiles, after_s: float | None):
        self.files = files
        self.after_s = after_s
        self._last = 0.0  # time.monotonic() of the last look
        self._deleting: asyncio.Future | None = None  # that look, while it deletes

    def when_due(self) -> None:
        after = self.after_s
        if after is None or (self._deleting is not None and not self._deleting.done()):
            return
        if time.monotonic() - self._last < min(self.CHECK_S, after / 2):
            return
        self._last = time.monotonic()
        self._deleting = asyncio.ensure_future(self.files.delete_old(after))
