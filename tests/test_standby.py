"""A worker started ahead of its job (execution/standby.py): a job taken by it is the job's own
process from the first line of its code, with the job's environment, folder and log, one job per
process; its exit and a restart are handled as for a worker started for the job."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import time

import pytest
from support import wait_for, wait_state, write_notebook

from e31_jupyter.client import E31Client

# What a job's kernel sees of itself and of its worker (the kernel's parent).
WHO_AM_I = """
import json, os, pathlib
worker = os.getppid()
pathlib.Path("who.json").write_text(json.dumps({
    "job_id": os.environ.get("E31_JOB_ID"),
    "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    "server_only": os.environ.get("E31_TEST_SERVER_ONLY"),
    "cwd": os.getcwd(),
    "worker": worker,
    "worker_cmdline": pathlib.Path(f"/proc/{worker}/cmdline").read_text().rstrip("\\0").split("\\0"),
}))
print("hello from", os.environ.get("E31_JOB_ID"))
"""


def _run(client: E31Client, notebook, data_dir) -> dict:
    job = wait_state(client, client.submit(path=str(notebook), gpus=1)["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    return json.loads((data_dir / "jobs" / job["id"] / "work" / "who.json").read_text()) | {"job": job}


def test_jobs_after_the_first_are_taken_by_a_standby_each_its_own_process_with_its_own_environment(
    start_server, tmp_path
):
    server = start_server(env={"E31_TEST_SERVER_ONLY": "not for jobs"})
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "who.ipynb", WHO_AM_I)
    runs = [_run(client, notebook, server.data_dir) for _ in range(3)]

    assert "--standby" not in runs[0]["worker_cmdline"]  # the first job starts the first standby
    assert all(run["worker_cmdline"][-2:] == ["e31_jupyter.execution.worker", "--standby"] for run in runs[1:])
    assert len({run["worker"] for run in runs}) == 3  # one process per job
    for run in runs:
        job = run["job"]
        assert run["job_id"] == job["id"]
        assert run["devices"] == ",".join(job["gpus"])
        assert run["server_only"] is None  # the job's allowlist, not the server's environment
        assert run["cwd"] == str(server.data_dir / "jobs" / job["id"] / "work")
        assert f"hello from {job['id']}" in client.log_tail(job["id"])


def test_without_a_standby_every_job_starts_its_own_worker(start_server, tmp_path):
    server = start_server(extra_args=["--E31.standby_worker=False"])
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "who.ipynb", WHO_AM_I)
    runs = [_run(client, notebook, server.data_dir) for _ in range(2)]
    assert all(run["worker_cmdline"][-1] != "--standby" for run in runs)


def test_a_standby_worker_killed_mid_job_is_reported_by_its_signal(start_server, tmp_path):
    server = start_server()
    client = E31Client(server.url, server.token)
    _run(client, write_notebook(tmp_path / "who.ipynb", WHO_AM_I), server.data_dir)  # a standby now waits
    killer = write_notebook(tmp_path / "kill.ipynb", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    job = wait_state(client, client.submit(path=str(killer), gpus=1)["id"], "failed", "succeeded")
    assert job["reason"].startswith("worker killed by SIGKILL"), job["reason"]
    assert client.gpus()["free"] == 2


@pytest.mark.parametrize("handle_recorded", [True, False])
def test_a_restarted_server_adopts_a_job_a_standby_runs(start_server, tmp_path, gated, handle_recorded):
    """Found by its handle, or, when the server died before recording it, by the job's folder
    the standby works in (its environment is the one it started with, without the job's id)."""
    first = start_server()
    client = E31Client(first.url, first.token)
    _run(client, write_notebook(tmp_path / "who.ipynb", WHO_AM_I), first.data_dir)
    job = wait_state(client, gated.submit(client, "adopted", gpus=1)["id"], "running")
    wait_for(lambda: client.job(job["id"])["progress"]["cells_done"] >= 1, what="the job to be under way")
    first.kill()
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:
        worker = json.loads(db.execute("SELECT handle FROM jobs WHERE id = ?", (job["id"],)).fetchone()[0])["pid"]
        if not handle_recorded:
            db.execute("UPDATE jobs SET handle = NULL WHERE id = ?", (job["id"],))
    assert open(f"/proc/{worker}/cmdline").read().split("\0")[-2] == "--standby"

    second = start_server()
    client = E31Client(second.url, second.token)
    assert client.job(job["id"])["state"] == "running"
    if not handle_recorded:
        with sqlite3.connect(second.data_dir / "e31.sqlite") as db:
            found = db.execute("SELECT handle FROM jobs WHERE id = ?", (job["id"],)).fetchone()[0]
        assert json.loads(found)["pid"] == worker
    gated.open("adopted")
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert gated.runs.read_text().split() == [job["id"]]  # it ran once, not started again


def test_a_job_handed_to_a_standby_that_had_not_begun_it_runs_once_after_a_restart(start_server, tmp_path, gated):
    """A standby still importing when its server died holds the job it was handed, unread, and
    nothing in the job's folder says so: the restarted server starts the job itself, so it ends
    that standby, which would otherwise begin the job too once its imports were done (the crash
    loop test once saw a job run twice so). Stopped here, as a busy machine would make it slow."""
    first = start_server()
    client = E31Client(first.url, first.token)
    _run(client, write_notebook(tmp_path / "who.ipynb", WHO_AM_I), first.data_dir)  # a standby now waits
    standby = wait_for(lambda: _standbys_of(first.proc.pid), what="a standby worker")[0]
    os.kill(standby, signal.SIGSTOP)  # still importing when the job comes
    job = gated.submit(client, "once", gpus=1)
    wait_for(lambda: _handle(first.data_dir, job["id"]), what="the job handed to the standby")
    assert _handle(first.data_dir, job["id"])["pid"] == standby
    first.kill()
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:  # died before recording the handle
        db.execute("UPDATE jobs SET handle = NULL WHERE id = ?", (job["id"],))

    second = start_server()
    client = E31Client(second.url, second.token)
    with contextlib.suppress(ProcessLookupError):
        os.kill(standby, signal.SIGCONT)  # its imports done: it would read its job now
    gated.open("once")
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert "started after a restart" in done["transitions"][-2]["reason"]
    time.sleep(2)  # time enough for a standby let go on to run the open-gated notebook too
    assert gated.runs.read_text().split() == [job["id"]]
    assert not _alive(standby)


def _handle(data_dir, job_id: str) -> dict | None:
    with sqlite3.connect(data_dir / "e31.sqlite") as db:
        handle = db.execute("SELECT handle FROM jobs WHERE id = ?", (job_id,)).fetchone()[0]
    return json.loads(handle) if handle else None


def test_a_standby_ends_when_its_server_is_gone(start_server, tmp_path):
    server = start_server()
    client = E31Client(server.url, server.token)
    _run(client, write_notebook(tmp_path / "who.ipynb", WHO_AM_I), server.data_dir)
    standby = wait_for(lambda: _standbys_of(server.proc.pid), what="a standby worker")
    server.kill()  # no clean shutdown: the standby's stdin closes
    wait_for(lambda: not any(_alive(pid) for pid in standby), timeout=30, what="the standby to end")


def _standbys_of(parent: int) -> list[int]:
    import psutil

    return [
        child.pid
        for child in psutil.Process(parent).children(recursive=True)
        if child.cmdline()[-1:] == ["--standby"] and child.status() != psutil.STATUS_ZOMBIE
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split(") ")[1].startswith("Z")
