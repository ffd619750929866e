"""The line: queued jobs in the order the policy would start them, as of one moment.

Each job's place in line is asked for often (every job page, every list, every submit's answer)
while the queue can be long, so the order is kept with each job's priority key: a place is one
bisection, and a new job joins without sorting the queue again. Pure: the queue decides when a
line is too old and makes a new one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any, Callable, Sequence

from .policy import Pending, Snapshot


class Line:
    def __init__(self, priority: Callable[[Pending, Snapshot], Any], snapshot: Snapshot, pending: Sequence[Pending]):
        self._key = lambda job: priority(job, snapshot)
        self._keys = {job.id: self._key(job) for job in pending}
        self._jobs = {job.id: job for job in pending}
        self.ordered = sorted(pending, key=lambda job: self._keys[job.id])  # the line as made
        self._sorted = [self._keys[job.id] for job in self.ordered]

    def key(self, job: Pending) -> Any:
        """The job's priority key in this line: smaller goes first."""
        return self._key(job)

    def get(self, job_id: str, default: int | None = None) -> int | None:
        """The job's place (1 = next), or ``default`` when it is not in this line."""
        key = self._keys.get(job_id)
        return default if key is None else bisect_left(self._sorted, key) + 1

    def join(self, job: Pending) -> int:
        """Put a job that was queued after this line was made in its place; returns the place."""
        if job.id not in self._keys:
            self._keys[job.id] = self._key(job)
            self._jobs[job.id] = job
            insort(self._sorted, self._keys[job.id])
        return self.get(job.id)

    def leave(self, job_id: str) -> None:
        """Take out a job that started or ended; the ones behind it move up."""
        key = self._keys.pop(job_id, None)
        self._jobs.pop(job_id, None)
        if key is not None:
            del self._sorted[bisect_left(self._sorted, key)]

    def place_of(self, job: Pending) -> int:
        """The place a job not in line would take if it joined now (behind jobs of equal key);
        the line does not change."""
        return bisect_right(self._sorted, self._key(job)) + 1

    def ordered_with(self, job: Pending) -> list[Pending]:
        """The jobs now in line with ``job`` in the place it would take, in order."""
        members = sorted(self._jobs.values(), key=lambda j: self._keys[j.id])
        place = self.place_of(job) - 1
        return [*members[:place], job, *members[place:]]

    def __len__(self) -> int:
        return len(self._keys)
