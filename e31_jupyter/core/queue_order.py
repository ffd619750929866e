"""The line: queued jobs in the order the policy would start them, as of one moment.

Each job's place in line is asked for often (every job page, every list, every submit's answer)
while the queue can be long, so the order is kept with each job's priority key: a place is one
bisection, and a new job joins without sorting the queue again. Keys are worked out on the
snapshot the line was made with: a line lasts while the policy's priorities do
(``Policy.refresh_s``), jobs joining and leaving it (``follow``), as the simulator's queue does.
Pure: the queue decides when a line is too old and makes a new one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from e31_jupyter.core.policy import Pending, Snapshot


class Line:
    def __init__(self, priority: Callable[[Pending, Snapshot], Any], snapshot: Snapshot, pending: Sequence[Pending]):
        self.snapshot = snapshot  # what the keys were worked out on
        self._key = lambda job: priority(job, snapshot)
        keyed = sorted(((self._key(job), job) for job in pending), key=itemgetter(0))
        self._sorted = [key for key, _ in keyed]  # each job's key, in line order
        self._order = [job for _, job in keyed]
        self._members = {job.id: (key, job) for key, job in keyed}

    @property
    def ordered(self) -> list[Pending]:
        """The jobs now in line, in order."""
        return list(self._order)

    def key(self, job: Pending) -> Any:
        """The job's priority key in this line: smaller goes first."""
        return self._key(job)

    def get(self, job_id: str, default: int | None = None) -> int | None:
        """The job's place (1 = next), or ``default`` when it is not in this line."""
        member = self._members.get(job_id)
        return default if member is None else bisect_left(self._sorted, member[0]) + 1

    def job(self, job_id: str) -> Pending:
        """The job of that id in line."""
        return self._members[job_id][1]

    def join(self, job: Pending) -> int:
        """Put a job that was queued after this line was made in its place; returns the place."""
        if job.id not in self._members:
            key = self._key(job)
            self._members[job.id] = (key, job)
            at = bisect_left(self._sorted, key)
            self._sorted.insert(at, key)
            self._order.insert(at, job)
        place = self.get(job.id)
        assert place is not None  # it is in line now
        return place

    def leave(self, job_id: str) -> None:
        """Take out a job that started or ended; the ones behind it move up."""
        member = self._members.pop(job_id, None)
        if member is not None:
            at = bisect_left(self._sorted, member[0])
            del self._sorted[at], self._order[at]

    def follow(self, pending: Sequence[Pending]) -> None:
        """Make the line hold just ``pending``, the queue as it is now: jobs no longer in it, or
        whose request changed (another ``Pending``), leave; new ones join. Kept jobs keep their
        keys, so one pass over a long queue that barely changed costs no sort."""
        now = {job.id: job for job in pending}
        gone = [job_id for job_id, (_, job) in self._members.items() if now.get(job_id) is not job]
        if gone:
            for job_id in gone:
                del self._members[job_id]
            kept = [at for at, job in enumerate(self._order) if job.id in self._members]
            self._sorted = [self._sorted[at] for at in kept]
            self._order = [self._order[at] for at in kept]
        for job in pending:
            if job.id not in self._members:
                self.join(job)

    def place_of(self, job: Pending) -> int:
        """The place a job not in line would take if it joined now (behind jobs of equal key);
        the line does not change."""
        return bisect_right(self._sorted, self._key(job)) + 1

    def ordered_with(self, job: Pending) -> list[Pending]:
        """The jobs now in line with ``job`` in the place it would take, in order."""
        place = self.place_of(job) - 1
        return [*self._order[:place], job, *self._order[place:]]

    def __len__(self) -> int:
        return len(self._members)
