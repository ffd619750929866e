"""The live queue feeds the e31 policy the same demand of short jobs that could not wait as the
simulator does."""

from __future__ import annotations

import time

from e31_jupyter.service.queue import Queue
from e31_jupyter.service.settings import Settings


def _job(job_id: str, submitted_at: float, gpus: int, expected_s: float, slack_s: float | None = 600.0) -> dict:
    return {
        "id": job_id, "owner": "ann", "name": job_id, "team": "", "state": "queued",
        "gpus_requested": gpus, "max_runtime_s": 86400.0, "expected_runtime_s": expected_s,
        "max_runtime_given": 0, "submitted_at": submitted_at,
        "deadline": None if slack_s is None else submitted_at + expected_s + slack_s,
    }  # fmt: skip


def _demand(queue: Queue, now: float) -> float:
    return queue.scheduler.line.history.snapshot(now, queue.settings.inventory, []).demand.lately(now)


def test_short_jobs_of_the_last_day_that_could_not_wait_are_counted_once_whoever_recorded_them(tmp_path):
    queue = Queue(tmp_path / "data", backend=None, settings=Settings(inventory=[str(i) for i in range(8)]))
    now = time.time() // 3600 * 3600 + 1800  # mid-hour: the jobs below share an hour's bucket
    queue.store.insert_job(_job("old", now - 2 * 86400, 4, 600.0), "submitted")  # more than a day ago
    queue.store.insert_job(_job("short", now - 60, 2, 1800.0), "submitted")
    queue.store.insert_job(_job("long", now - 30, 2, 10 * 3600.0), "submitted")  # not short
    queue.store.insert_job(_job("patient", now - 20, 2, 1800.0, slack_s=None), "submitted")  # no deadline: it can wait
    assert _demand(queue, now) == 2 * 1800.0 / 3600.0

    queue.store.insert_job(_job("more", now - 10, 1, 3600.0), "submitted")
    assert _demand(queue, now) == (2 * 1800.0 + 3600.0) / 3600.0  # no job twice
    queue.store.close()
