"""A job gives its GPUs back when its kernel ends, not when its reports are made: the meter stops
there, and the next job in line starts on those GPUs while the first one's HTML report renders."""

from __future__ import annotations

import pytest
from support import ts, wait_for, wait_state, write_notebook

from e31_jupyter.cli.listing import format_job
from e31_jupyter.client import E31Client
from e31_jupyter.core import meter
from e31_jupyter.core.states import Cause, JobState
from e31_jupyter.service.store import Store

# Output enough that rendering its HTML report takes seconds.
LONG_OUTPUT = "for i in range(60000):\n    print(f'line {i}: ' + 'x' * 60)"


def test_the_meter_counts_until_the_gpus_were_given_back_or_the_job_ended():
    job = {"started_at": 100.0, "finished_at": None, "released_at": None, "granted": ["0", "1"]}
    assert meter.gpu_seconds(job, now=110.0) == 20.0  # running: held until now
    released = {**job, "released_at": 104.0}
    assert meter.gpu_seconds(released, now=110.0) == 8.0  # reports still being made: free
    assert meter.gpu_seconds({**released, "finished_at": 106.0}, now=200.0) == 8.0
    assert meter.gpu_seconds({**job, "finished_at": 103.0}, now=200.0) == 6.0  # ended before any release
    assert meter.gpu_seconds(released, now=110.0, since=102.0) == 4.0


def test_the_store_counts_a_released_job_as_holding_nothing(tmp_path):
    store = Store(tmp_path / "e31.sqlite")
    for job_id in ("a", "b"):
        store.insert_job(_queued(job_id), "submitted")
        store.transition(
            job_id, (JobState.QUEUED,), JobState.RUNNING, "granted", 10.0, cause=Cause.SCHEDULER,
            started_at=10.0, granted=["0"] if job_id == "a" else ["1"],
        )  # fmt: skip
    store.update("a", released_at=12.0)
    assert [job.id for job in store.holding()] == ["b"]
    assert [job.id for job in store.jobs((JobState.RUNNING,))] == ["b", "a"]  # both still running
    assert [job.id for job in store.held_between(13.0, 20.0)] == ["b"]  # a's hold ended at 12
    assert sorted(job.id for job in store.held_between(11.0, 20.0)) == ["a", "b"]
    store.close()


def _queued(job_id: str) -> dict:
    return {
        "id": job_id, "owner": "ann", "name": job_id, "team": "", "state": "queued", "gpus_requested": 1,
        "max_runtime_s": 60.0, "expected_runtime_s": None, "max_runtime_given": 0, "deadline": None,
        "submitted_at": 1.0,
    }  # fmt: skip


@pytest.mark.timeout(300)
def test_the_next_job_starts_on_the_gpu_while_the_first_ones_report_renders(start_server, tmp_path):
    server = start_server(gpus=["0"])
    client = E31Client(server.url, server.token)
    long = write_notebook(tmp_path / "long.ipynb", LONG_OUTPUT)
    quick = write_notebook(tmp_path / "quick.ipynb", "x = 1")
    first = client.submit(path=str(long), gpus=1, reports=["html"])
    second = client.submit(path=str(quick), gpus=1, reports=[])
    second = wait_state(client, second["id"], "succeeded", "failed", timeout=180)
    first = wait_state(client, first["id"], "succeeded", "failed", timeout=180)
    assert (first["state"], second["state"]) == ("succeeded", "succeeded"), (first["reason"], second["reason"])
    assert "html" in first["output"]["reports"]  # it made its report, after giving the GPU back
    released = ts(second["started_at"])
    assert ts(first["started_at"]) < released < ts(first["finished_at"])  # on first's GPU, before first ended
    held = first["meter"]["gpu_seconds"]
    assert held < ts(first["finished_at"]) - ts(first["started_at"]) - 0.5  # the report's time is not charged
    assert held == pytest.approx(released - ts(first["started_at"]), abs=0.5)
    freed = ts(first["gpus_released_at"])
    assert ts(first["started_at"]) < freed <= released < ts(first["finished_at"])
    assert held == pytest.approx(freed - ts(first["started_at"]), abs=0.01)  # exactly what the meter charges
    assert "released:  " in format_job(client.job(first["id"]))  # e31 status says so
    wait_for(lambda: client.gpus()["free"] == 1, what="the GPU to be free")
