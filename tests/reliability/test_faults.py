"""Faults: whatever dies, the queue neither loses nor duplicates work, and says what happened.

Each test names the invariant it checks.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import psutil
import pytest
import requests
from support import held_s, ts, wait_for, wait_state, write_notebook

from e31_jupyter.client import E31Client

SLOW_CELLS = ("import time, os\nopen('first.txt', 'w').write('done')\nprint('first cell done')", "time.sleep(600)")


def _worker_of(server, job_id: str) -> psutil.Process:
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        environ = _environ(child)
        if environ.get("E31_JOB_ID") == job_id and "e31_jupyter.execution.worker" in " ".join(child.cmdline()):
            return child
    raise AssertionError(f"no worker process for job {job_id}")


def _environ(process: psutil.Process) -> dict:
    try:
        return process.environ()
    except psutil.Error:
        return {}


def _job_processes(job_id: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter() if _environ(p).get("E31_JOB_ID") == job_id]


def _wait_for_cell(client, job_id: str, cells_done: int) -> None:
    wait_for(lambda: client.job(job_id)["progress"]["cells_done"] >= cells_done, what=f"{cells_done} cells done")


def test_worker_killed_mid_cell_fails_releases_and_keeps_partial_work(server, client, tmp_path):
    """Invariant: a killed worker -> failed with a reason that says so, GPUs free at once, the
    partly executed notebook and the log kept, nothing of the job left running."""
    job = client.submit(path=str(write_notebook(tmp_path / "slow.ipynb", *SLOW_CELLS)), gpus=2)
    _wait_for_cell(client, job["id"], 1)
    # Mid-cell: the second cell has started (cell indices count from 0).
    wait_for(lambda: client.job(job["id"])["progress"]["current_cell"] == 1, what="the second cell to start")
    _worker_of(server, job["id"]).send_signal(signal.SIGKILL)
    job = wait_state(client, job["id"], "failed", timeout=20)
    assert "killed by SIGKILL" in job["reason"]
    assert client.gpus()["free"] == 2
    executed = client.notebook(job["id"])
    assert executed["cells"][0]["metadata"]["papermill"]["status"] == "completed"
    assert "first cell done" in client.log_tail(job["id"], 100)  # the log kept
    wait_for(lambda: not _job_processes(job["id"]), timeout=10, what="the job's kernel to be gone")


def test_kernel_death_fails_the_job_saying_in_which_cell_and_how(client, tmp_path):
    """Invariant: the kernel dying mid-notebook -> failed, reason 'kernel died' with the cell and
    its exit status or signal, GPUs free."""
    nb = write_notebook(tmp_path / "die.ipynb", "x = 1", "import os\nos._exit(3)", "never = True")
    job = wait_state(client, client.submit(path=str(nb), gpus=1)["id"], "failed", "succeeded", timeout=60)
    assert (
        job["state"] == "failed"
        and job["reason"] == "kernel died in cell 2 of 3 ('import os'): it exited with status 3"
    )
    assert client.gpus()["free"] == 2
    assert client.notebook(job["id"])["cells"][0]["outputs"] == []  # the notebook is kept
    killed = write_notebook(
        tmp_path / "killed.ipynb", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "never = True"
    )
    job = wait_state(
        client, client.submit(path=str(killed), parameters={"n": 1})["id"], "failed", "succeeded", timeout=60
    )
    assert job["reason"].startswith(  # papermill's cell of the parameters is not counted
        "kernel died in cell 1 of 2 ('import os, signal'): killed by SIGKILL, most often by the out-of-memory killer"
    )


def test_server_killed_during_submits_leaves_whole_jobs_or_none(start_server, tmp_path):
    """Invariant: a submit in flight when the server dies is either fully recorded (and runs)
    or absent, with no half-made job directory."""
    data = tmp_path / "big-input"
    data.mkdir()
    for i in range(4):  # copying 200 MB into each job takes long enough to be killed mid-way
        (data / f"part{i}.bin").write_bytes(os.urandom(1 << 20) * 50)
    nb = write_notebook(tmp_path / "quick.ipynb", "x = 1")
    rng = random.Random(7)
    acknowledged: list[str] = []
    for _ in range(3):
        server = start_server()
        client = E31Client(server.url, server.token)
        answers: list[dict] = []

        def submit(client=client, answers=answers):
            try:
                answers.append(client.submit(path=str(nb), data=[str(data)], outputs=["none"]))
            except Exception:
                pass  # the server died under it: not acknowledged

        threads = [threading.Thread(target=submit) for _ in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0.3, 1.5))
        server.kill()
        for thread in threads:
            thread.join(30)
        acknowledged += [a["id"] for a in answers]

    server = start_server()
    client = E31Client(server.url, server.token)
    jobs = {j["id"]: j for j in client.jobs()}
    assert set(acknowledged) <= set(jobs)
    jobs_dir = server.data_dir / "jobs"
    assert sorted(p.name for p in jobs_dir.iterdir()) == sorted(jobs)  # no staging left, no orphan
    for job_id in jobs:
        assert sorted(p.name for p in (jobs_dir / job_id / "work" / "big-input").iterdir()) == [
            f"part{i}.bin" for i in range(4)
        ]
        assert wait_state(client, job_id, "succeeded", "failed")["state"] == "succeeded"


# CI-sized by default; E31_CRASH_LOOP_OPS=300 E31_CRASH_LOOP_KILLS=20 for the full run.
CRASH_LOOP_OPS = int(os.environ.get("E31_CRASH_LOOP_OPS", "40"))
CRASH_LOOP_KILLS = int(os.environ.get("E31_CRASH_LOOP_KILLS", "4"))


@pytest.mark.timeout(900)
def test_crash_loop_loses_nothing_and_runs_nothing_twice(start_server, tmp_path):
    """Invariants, after a stream of submits and cancels with the server SIGKILLed at random
    moments and restarted: every acknowledged submit exists; no job ran twice; no two running
    jobs ever held the same GPU; each job's meter equals its recorded hold interval."""
    runs = tmp_path / "runs.txt"
    nb = write_notebook(
        tmp_path / "short.ipynb",
        "import os, time\nwith open(runs, 'a') as f:\n    f.write(os.environ['E31_JOB_ID'] + '\\n')\ntime.sleep(0.3)",
        parameters="runs = ''",
    )
    rng = random.Random(31)
    kill_at = sorted(rng.sample(range(5, CRASH_LOOP_OPS), CRASH_LOOP_KILLS))
    acknowledged, cancelled = [], []
    server = start_server()
    client = E31Client(server.url, server.token)
    for op in range(CRASH_LOOP_OPS):
        if kill_at and op == kill_at[0]:
            kill_at.pop(0)
            time.sleep(rng.uniform(0, 0.5))
            server.kill()
            server = start_server()
            client = E31Client(server.url, server.token)
        try:
            if acknowledged and rng.random() < 0.25:
                victim = rng.choice(acknowledged)
                client.cancel(victim)
                cancelled.append(victim)
            else:
                job = client.submit(path=str(nb), parameters={"runs": str(runs)}, gpus=rng.choice([1, 1, 2]))
                acknowledged.append(job["id"])
        except Exception as error:  # a cancel of a job that already ended: 409
            assert "already ended" in str(error), error

    jobs = {}
    for job_id in acknowledged:
        jobs[job_id] = wait_state(client, job_id, "succeeded", "failed", "cancelled", timeout=300)
    ran = runs.read_text().split() if runs.exists() else []
    assert len(ran) == len(set(ran)), "a job ran twice"
    assert set(ran) <= set(acknowledged)
    for job in jobs.values():
        assert job["state"] != "failed", (job["id"], job["reason"])
        if job["started_at"]:
            assert job["meter"]["gpu_seconds"] == pytest.approx(len(job["gpus"]) * held_s(job), abs=0.01)
        if job["state"] == "succeeded":
            assert job["id"] in ran
    holds = [
        (gpu, ts(j["started_at"]), ts(j["started_at"]) + held_s(j), j["id"])  # held until released
        for j in jobs.values() if j["started_at"] for gpu in j["gpus"]
    ]  # fmt: skip
    for gpu in {h[0] for h in holds}:
        intervals = sorted(h[1:] for h in holds if h[0] == gpu)
        for (_, end, first), (start, _, second) in zip(intervals, intervals[1:]):
            assert end <= start, f"GPU {gpu} held by {first} and {second} at once"
    print(f"crash loop: {CRASH_LOOP_OPS} operations, {CRASH_LOOP_KILLS} server kills, "
          f"{len(acknowledged)} submits, {len(cancelled)} cancels, {len(ran)} runs")  # fmt: skip


def test_security_a_job_cannot_make_the_server_serve_outside_its_directory(client, server, tmp_path):
    """Invariant: symlinks and '..' written by a job never lead the server outside the job."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    nb = write_notebook(
        tmp_path / "escape.ipynb",
        f"import os\nos.symlink({str(secret)!r}, 'leak.txt')\nos.symlink('..', 'up')\n"
        "os.makedirs('sub', exist_ok=True)\nos.symlink('/etc', 'sub/etc')\nopen('real.txt', 'w').write('ok')",
    )
    job = wait_state(client, client.submit(path=str(nb))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    assert [f["path"] for f in client.files(job["id"])] == ["real.txt"]
    headers = {"Authorization": f"token {server.token}"}
    for path in ("leak.txt", "up/spec.json", "up%2Fspec.json", "sub/etc/passwd", "..%2F..%2Fe31.sqlite", "real.txt%00"):
        r = requests.get(f"{server.url}/e31/api/jobs/{job['id']}/files/{path}", headers=headers, timeout=10)
        assert r.status_code == 404, (path, r.status_code)
        assert b"not yours" not in r.content and b"root:" not in r.content


def test_security_cookie_requests_need_the_xsrf_token(server, tmp_path):
    """Invariant: a browser session (cookie) cannot be driven by another site: POSTs without the
    XSRF token are refused; GETs work."""
    session = requests.Session()
    session.get(f"{server.url}/api/status?token={server.token}", timeout=10)  # sets the login cookie
    assert session.get(f"{server.url}/e31/api/jobs", timeout=10).status_code == 200
    body = {"notebook": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}}
    refused = session.post(f"{server.url}/e31/api/jobs", json=body, timeout=10)
    assert refused.status_code == 403
    xsrf = session.cookies.get("_xsrf")
    if xsrf is None:
        session.get(f"{server.url}/lab", timeout=10)
        xsrf = session.cookies.get("_xsrf")
    if xsrf:
        allowed = session.post(f"{server.url}/e31/api/jobs", json=body, headers={"X-XSRFToken": xsrf}, timeout=10)
        assert allowed.status_code == 201, allowed.text
    assert len(E31Client(server.url, server.token).jobs()) == (1 if xsrf else 0)


def test_limits_queued_jobs_per_user_and_output_quota(start_server, gated, tmp_path):
    """Invariant: limits answer with a clear message and change nothing; a job over its output
    quota keeps what fits and says what was left out."""
    server = start_server(extra_args=["--E31.max_queued_per_user=2", "--E31.max_output_bytes=1500"])
    client = E31Client(server.url, server.token)
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2)["id"], "running")
    waiting = [gated.submit(client, f"w{i}", gpus=2) for i in range(2)]
    headers = {"Authorization": f"token {server.token}"}
    body = {"path": str(gated.notebook), "gpus": 2, "parameters": gated.params("w3")}
    r = requests.post(f"{server.url}/e31/api/jobs", json=body, headers=headers, timeout=10)
    assert r.status_code == 429 and "max_queued_per_user" in r.json()["message"]
    assert len(client.jobs()) == 3
    client.cancel(waiting[0]["id"])
    client.cancel(waiting[1]["id"])
    gated.open("blocker")
    wait_state(client, blocker["id"], "succeeded")

    nb = write_notebook(
        tmp_path / "big.ipynb",
        "open('small.txt', 'w').write('x' * 500)\nopen('medium.txt', 'w').write('y' * 900)\n"
        "open('large.txt', 'w').write('z' * 5000)",
    )
    job = wait_state(client, client.submit(path=str(nb))["id"], "succeeded", "failed")
    listing = requests.get(f"{server.url}/e31/api/jobs/{job['id']}/files", headers=headers, timeout=10).json()
    assert [f["path"] for f in listing["files"]] == ["medium.txt", "small.txt"]
    assert [f["path"] for f in listing["left_out"]] == ["large.txt"]
    assert job["files_left_out"] == 1
    assert "were not collected" in client.log_tail(job["id"], 20)


def test_an_unreadable_inputs_folder_and_huge_data_are_refused(start_server, tmp_path):
    server = start_server(extra_args=["--E31.max_input_bytes=1000"])
    client = E31Client(server.url, server.token)
    big = tmp_path / "big.bin"
    big.write_bytes(b"0" * 5000)
    nb = write_notebook(tmp_path / "x.ipynb", "x = 1")
    with pytest.raises(Exception, match="max_input_bytes"):
        client.submit(path=str(nb), data=[str(big)])
    with pytest.raises(Exception, match="inputs must be"):
        client.submit(path=str(nb), inputs=str(tmp_path))
    assert client.jobs() == []
    assert [p for p in (server.data_dir / "jobs").iterdir()] == []


def test_a_job_started_just_before_the_server_died_is_adopted_not_lost(start_server, gated):
    """Invariant: a server killed between starting a job and recording its process still has
    the job adopted after a restart (found by its job id), never taken for lost and killed."""
    import sqlite3

    first = start_server()
    client = E31Client(first.url, first.token)
    job = wait_state(client, gated.submit(client, "unrecorded", gpus=1)["id"], "running")
    first.kill()
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:  # as if the kill came a moment sooner
        db.execute("UPDATE jobs SET handle = NULL WHERE id = ?", (job["id"],))
    second = start_server()
    client = E31Client(second.url, second.token)
    assert client.job(job["id"])["state"] == "running"
    gated.open("unrecorded")
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert gated.runs.read_text().split() == [job["id"]]


def test_a_job_granted_gpus_just_before_the_server_died_starts_after_the_restart(start_server, gated):
    """Invariant: a server killed after recording a job as running but before starting its
    process leaves a job that never ran. The next server starts it on the GPUs it was granted,
    with the meter counting from that start, rather than failing it as lost; one cancelled in
    that moment stays cancelled and never runs."""
    import sqlite3

    first = start_server()
    client = E31Client(first.url, first.token)
    blocker = wait_state(client, gated.submit(client, "crash-blocker", gpus=2)["id"], "running")
    job = gated.submit(client, "unstarted", gpus=1)
    cancelled = gated.submit(client, "cancelled-unstarted", gpus=1)
    assert client.job(job["id"])["state"] == client.job(cancelled["id"])["state"] == "queued"
    first.kill()
    gated.open("crash-blocker")
    wait_for(lambda: not _job_processes(blocker["id"]), what="the blocker to end")
    down_since = time.time() - 3600  # the server has been down an hour: not charged, no timeout
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:  # what the store held at the kill
        for unstarted, device in ((job, "1"), (cancelled, "0")):
            db.execute(
                "UPDATE jobs SET state = 'running', reason = ?, started_at = ?, granted = ? WHERE id = ?",
                (f"granted GPU {device}", down_since, f'["{device}"]', unstarted["id"]),
            )
            db.execute(
                "INSERT INTO transitions (job_id, at, from_state, to_state, reason)"
                " VALUES (?, ?, 'queued', 'running', ?)",
                (unstarted["id"], down_since, f"granted GPU {device}"),
            )
            (first.data_dir / "jobs" / unstarted["id"] / "job.log").touch()  # opened, no worker yet
        db.execute(
            "UPDATE jobs SET stop_requested = 'cancel', stop_by = 'root', reason = 'cancelling: cancelled by root' WHERE id = ?",
            (cancelled["id"],),
        )

    second = start_server()
    client = E31Client(second.url, second.token)
    wait_for(lambda: gated.runs.read_text().split() == [blocker["id"], job["id"]], what="the job to start")
    running = client.job(job["id"])
    assert running["state"] == "running"
    assert ts(running["started_at"]) > down_since + 3000
    assert "started after a restart" in running["transitions"][-1]["reason"]
    gated.open("unstarted")
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert done["meter"]["gpu_hours"] < 0.1
    assert (first.data_dir / "jobs" / job["id"] / "work" / "devices.txt").read_text() == "1"
    assert wait_state(client, blocker["id"], "succeeded")["state"] == "succeeded"
    assert gated.runs.read_text().split() == [blocker["id"], job["id"]]
    withdrawn = client.job(cancelled["id"])
    assert (withdrawn["state"], withdrawn["reason"]) == ("cancelled", "cancelled by root")
