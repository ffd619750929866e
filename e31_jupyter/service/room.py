"""Making room for a job that cannot wait (c.E31.preempt, the e31-preempt policy): the suspends a
pass decides (``Decision.suspend``) are asked of the jobs' workers, and the job they make room
for starts on a later pass, once their GPUs are free. A job so suspended goes back in line at
once (``resumption.after_making_room``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from e31_jupyter.core import policy
from e31_jupyter.core.states import JobState, StopRequest
from e31_jupyter.service.job_files import JobFiles
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.store import Store


class RoomMaker:
    def __init__(self, store: Store, files: JobFiles):
        self.store = store
        self.files = files
        self._making: dict[str, set[str]] = {}  # a job that cannot wait -> the jobs suspending for it

    def suspendable(self, running: Sequence[policy.Running]) -> list[policy.Running]:
        """``running`` as the policy sees them, those that take checkpoints and are not being
        stopped marked suspendable from their last checkpoint (or their start, before the first)."""
        return [self._as_suspendable(job) for job in running]

    def _as_suspendable(self, job: policy.Running) -> policy.Running:
        record = self.store.get(job.id)
        if record is None or record.stop_requested or not record.spec.get("checkpoint"):
            return job
        jobdir = self.files.jobdir(job.id)
        saved = ((jobdir.read_json(jobdir.progress, {}) or {}).get("checkpoint") or {}).get("saved_at")
        checkpointed = max(float(saved), job.started_at) if isinstance(saved, (int, float)) else job.started_at
        return dataclasses.replace(job, deadline=record.deadline, checkpointed_at=checkpointed)

    def suspend(self, decision: policy.Decision) -> list[JobRecord]:
        """Record the suspends of ``decision`` (a job that room is already being made for gets no
        more), and take the jobs they make room for out of its starts; the jobs to stop now."""
        waiting = self._still_making()
        to_stop = []
        for victim_id, for_id in decision.suspend:
            job = self.store.get(victim_id)
            if for_id in waiting or job is None or job.state != JobState.RUNNING or job.stop_requested:
                continue
            reason = (
                f"suspending: the queue makes room for {for_id}, which cannot wait; it stops at its cell's end, "
                "with a checkpoint, and goes back in line"
            )
            self.store.update(victim_id, stop_requested=StopRequest.MAKE_ROOM, stop_by=for_id, reason=reason)
            self._making.setdefault(for_id, set()).add(victim_id)
            to_stop.append(self.store.job(victim_id))
        for_them = {for_id for _, for_id in decision.suspend}
        decision.start = [job_id for job_id in decision.start if job_id not in for_them]
        return to_stop

    def _still_making(self) -> set[str]:
        """The jobs room is being made for: a job suspending for them still holds its GPUs."""
        for for_id, victims in list(self._making.items()):
            if not any(self._holds(victim) for victim in victims):
                del self._making[for_id]
        return set(self._making)

    def _holds(self, job_id: str) -> bool:
        job = self.store.get(job_id)
        return job is not None and job.state == JobState.RUNNING and job.released_at is None
