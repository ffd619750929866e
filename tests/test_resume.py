"""Resume: a job that took checkpoints (--checkpoint) and failed continues from its last finished
cell, keeping its id, files, history and meter. A real server, real kernels and papermill."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import nbformat
import pytest
import requests
from support import held_s, ts, wait_for, wait_state, write_notebook

from e31_jupyter.client import E31Client
from e31_jupyter.core import meter

# Each cell notes that it ran in a file outside the job. The third waits on its first run, past any
# limit, so that the first run ends there however long the kernel took to start; run again, it goes on.
CELLS = (
    "import pathlib\nruns = pathlib.Path({runs!r})\nruns.open('a').write('c1\\n')\na = 41\nprint('a is', a)",
    "import time\nruns.open('a').write('c2\\n')\nb = a + 1\nlog = open('kept-open.txt', 'w')\ntime.sleep(1)",
    "import time\nruns.open('a').write('c3\\n')\nif runs.read_text().count('c3') == 1:\n    time.sleep(120)",
    "runs.open('a').write('c4\\n')\nassert b == 42\nprint('b is', b)",
)


def _notebook(tmp_path):
    runs = tmp_path / "runs.txt"
    return write_notebook(tmp_path / "long.ipynb", *(cell.format(runs=str(runs)) for cell in CELLS)), runs


def test_a_job_out_of_time_resumes_from_its_last_finished_cell_with_more_time(start_server, tmp_path):
    # Half of the run since the last checkpoint may go to the next one: after the second cell's
    # 1 s, its save is taken however loaded the machine (the default's 5% might not be).
    server = start_server(extra_args=["--E31.checkpoint_share=0.5"])
    client = E31Client(server.url, server.token)
    notebook, runs = _notebook(tmp_path)
    job = client.submit(path=str(notebook), gpus=1, max_runtime=15, checkpoint=True)
    first = wait_state(client, job["id"], "failed", "succeeded")
    assert first["reason"].startswith("timeout"), first["reason"]
    assert first["last_checkpoint"]["after_cell"] == 1  # cells 1 and 2 (0-based 0 and 1) finished
    assert first["last_checkpoint"]["cannot_save"].keys() == {"log"}  # an open file, named, not dropped
    assert "not saved: log (an open file" in client.log_tail(job["id"], 100)

    resumed = client.resume(job["id"], max_runtime=60)
    assert resumed["state"] in ("queued", "running") and resumed["id"] == job["id"]  # the GPU is free
    back_in_line = [t for t in client.job(job["id"])["transitions"] if t["from"] == "failed"]
    assert "resumed by" in back_in_line[0]["reason"] and "cell 2" in back_in_line[0]["reason"]
    assert any("max_runtime" in change for change in resumed["changed"]), resumed["changed"]
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]

    # The cells before the long one ran once; the long one twice (stopped, then run again).
    assert runs.read_text().split() == ["c1", "c2", "c3", "c3", "c4"]
    executed = nbformat.reads(json.dumps(client.notebook(job["id"])), as_version=4)
    assert "a is 41" in executed.cells[0].outputs[0]["text"]  # the first run's output, kept
    assert "b is 42" in executed.cells[3].outputs[0]["text"]
    # One attempt before this one; the meter is the sum of both holds.
    [attempt] = done["attempts"]
    assert attempt["state"] == "failed" and attempt["reason"].startswith("timeout")
    earlier = {"started_at": ts(attempt["started_at"]), "released_at": ts(attempt["gpus_released_at"]),
               "finished_at": ts(attempt["finished_at"]), "granted": attempt["gpus"]}  # fmt: skip
    assert done["meter"]["gpu_seconds"] == pytest.approx(meter.gpu_seconds(earlier, 0) + held_s(done), abs=0.01)
    assert done["meter"]["gpu_seconds"] > 15  # the first run's 15 s, and the second run's
    history = [t["to"] for t in client.job(job["id"])["transitions"]]
    assert history == ["queued", "running", "failed", "queued", "running", "succeeded"]
    status = _e31(server, "status", job["id"]).stdout
    assert "attempt:   1: " in status and "failed: timeout" in status
    assert "resumes:   after cell 3 (checkpoint of" in status, status  # the last one, before the last cell


def test_a_job_without_a_checkpoint_is_refused_with_the_resubmit_that_starts_it_over(client, server, tmp_path):
    notebook, _ = _notebook(tmp_path)
    job = wait_state(client, client.submit(path=str(notebook), max_runtime=3)["id"], "failed")
    answer = requests.post(
        f"{server.url}/e31/api/jobs/{job['id']}/resume", headers={"Authorization": f"token {server.token}"}, json={}
    )
    assert answer.status_code == 409
    message = answer.json()["message"]
    assert "no checkpoint" in message and "--checkpoint" in message and f"e31 resubmit {job['id']}" in message
    assert client.job(job["id"])["state"] == "failed"  # nothing changed

    cli = _e31(server, "resume", job["id"])
    assert cli.returncode != 0 and "no checkpoint" in cli.stderr


def test_only_a_failed_job_resumes_and_only_its_request_changes(client, tmp_path):
    notebook = write_notebook(tmp_path / "quick.ipynb", "x = 1")
    job = wait_state(client, client.submit(path=str(notebook), checkpoint=True)["id"], "succeeded")
    with pytest.raises(Exception, match="only a job that was suspended, or that failed"):
        client.resume(job["id"])
    with pytest.raises(Exception, match="not parameters"):
        client.resume(job["id"], parameters={"x": 2})


def _e31(server, *argv: str) -> subprocess.CompletedProcess:
    """The e31 command, talking to ``server``."""
    environment = {"E31_URL": server.url, "E31_TOKEN": server.token, "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "e31_jupyter.cli", *argv], env=environment, capture_output=True, text=True
    )


def test_a_job_lost_while_its_server_was_down_resumes_from_its_checkpoint_by_itself(start_server, tmp_path):
    """The server and the job's worker are SIGKILLed in the third cell; the restarted server puts
    the job back in line from its checkpoint, unasked. Only the cell that was lost runs again."""
    first = start_server(extra_args=["--E31.checkpoint_share=0.5"])
    client = E31Client(first.url, first.token)
    runs = tmp_path / "runs.txt"
    cells = [cell.format(runs=str(runs)) for cell in CELLS]
    notebook = write_notebook(tmp_path / "lost.ipynb", *cells)
    job = client.submit(path=str(notebook), gpus=1, checkpoint=True)
    wait_for(lambda: "c3" in (runs.read_text() if runs.exists() else ""), timeout=90, what="the third cell")
    first.kill()
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:
        handle = json.loads(db.execute("SELECT handle FROM jobs WHERE id = ?", (job["id"],)).fetchone()[0])
    os.kill(handle["pid"], signal.SIGKILL)  # the worker dies while no server watches; its kernel is orphaned

    second = start_server(extra_args=["--E31.checkpoint_share=0.5"])
    client = E31Client(second.url, second.token)
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c3", "c4"]
    [attempt] = done["attempts"]
    assert attempt["state"] == "failed" and attempt["reason"].startswith("lost")
    back = [t for t in client.job(job["id"])["transitions"] if t["from"] == "running" and t["to"] == "queued"]
    assert len(back) == 1 and "resume from its checkpoint after cell 2" in back[0]["reason"]


SUSPENDED_CELLS = (
    "import pathlib\nruns = pathlib.Path({runs!r})\nruns.open('a').write('c1\\n')\na = 41",
    "import time\nruns.open('a').write('c2\\n')\ntime.sleep(3)",
    "runs.open('a').write('c3\\n')\nb = a + 1",
    "runs.open('a').write('c4\\n')\nprint('b is', b)",
)


def test_a_suspended_job_ends_its_cell_gives_its_gpus_back_and_resumes_after_it(start_server, tmp_path):
    server = start_server()  # c.E31.suspend_grace (60 s) leaves the running cell time to end
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    notebook = write_notebook(tmp_path / "paused.ipynb", *(c.format(runs=str(runs)) for c in SUSPENDED_CELLS))
    job = client.submit(path=str(notebook), gpus=1, checkpoint=True)
    wait_for(lambda: "c2" in (runs.read_text() if runs.exists() else ""), timeout=90, what="the second cell")
    asked = _e31(server, "suspend", job["id"])
    assert asked.returncode == 0 and "suspending: asked by" in asked.stdout, asked.stderr

    paused = wait_state(client, job["id"], "suspended", "failed", "succeeded", "cancelled")
    assert paused["state"] == "suspended", paused["reason"]
    assert paused["reason"].startswith("suspended by") and "checkpoint after cell 2" in paused["reason"]
    assert runs.read_text().split() == ["c1", "c2"]  # the running cell ended; the next did not start
    assert client.gpus()["free"] == 2
    held = paused["meter"]["gpu_seconds"]
    assert held == pytest.approx(held_s(paused), abs=0.01)
    time.sleep(1)
    assert client.job(job["id"])["meter"]["gpu_seconds"] == held  # suspended: the meter stands

    client.resume(job["id"])
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c4"]  # each cell once
    [attempt] = done["attempts"]
    assert attempt["state"] == "suspended"
    assert done["meter"]["gpu_seconds"] == pytest.approx(held + held_s(done), abs=0.01)


def test_a_job_without_checkpoints_is_not_suspended(client, tmp_path):
    notebook = write_notebook(tmp_path / "plain.ipynb", "import time\ntime.sleep(30)")
    job = wait_state(client, client.submit(path=str(notebook), gpus=1)["id"], "running")
    with pytest.raises(Exception, match="takes no checkpoints"):
        client.suspend(job["id"])
    assert client.job(job["id"])["state"] == "running"
    client.cancel(job["id"])


LOOP = """import pathlib, time
import e31_jupyter.job as job
runs = pathlib.Path({runs!r})
start = job.restore("step", 0)
runs.open("a").write(f"start {{start}} resumed {{job.resumed()}}\\n")
for step in range(start, 12):
    runs.open("a").write(f"{{step}}\\n")
    time.sleep(0.3)
    job.checkpoint(step + 1, "step")
"""


def test_a_long_cell_that_saves_its_own_progress_resumes_where_it_had_got_to(start_server, tmp_path):
    """Within one long cell, e31_jupyter.job.checkpoint keeps what a cell's end cannot: the cell
    outlasts the suspend's grace and is stopped, and the resumed run restores its last step."""
    server = start_server(extra_args=["--E31.suspend_grace=1"])
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    notebook = write_notebook(tmp_path / "loop.ipynb", LOOP.format(runs=str(runs)))
    job = client.submit(path=str(notebook), gpus=1, checkpoint=True)
    wait_for(lambda: "3" in (runs.read_text().split() if runs.exists() else []), timeout=90, what="step 3")
    client.suspend(job["id"])
    paused = wait_state(client, job["id"], "suspended", "failed", "succeeded", "cancelled")
    assert paused["state"] == "suspended" and "outlasted the grace period" in paused["reason"], paused["reason"]

    resumed = client.resume(job["id"])
    assert any(
        "at the start, with the objects its code saved" in t["reason"] for t in client.job(job["id"])["transitions"]
    )
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    lines = runs.read_text().splitlines()
    second = next(i for i, line in enumerate(lines) if line.startswith("start") and i > 0)
    assert lines[0] == "start 0 resumed False"
    restarted_at = int(lines[second].split()[1])
    assert lines[second] == f"start {restarted_at} resumed True" and restarted_at >= 3
    first_run, second_run = [int(s) for s in lines[1:second]], [int(s) for s in lines[second + 1 :]]
    assert second_run == list(range(restarted_at, 12))  # from where it had got to, not from 0
    assert first_run[:restarted_at] == list(range(restarted_at))  # each saved step ran once
    assert resumed["id"] == job["id"]


def test_a_long_cell_sees_the_suspend_and_ends_early_so_its_checkpoint_follows_it(start_server, tmp_path):
    server = start_server()
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    loop = (
        f"import pathlib, time\nimport e31_jupyter.job as job\nruns = pathlib.Path({str(runs)!r})\n"
        "for step in range(600):\n    runs.open('a').write(f'{step}\\n')\n    time.sleep(0.1)\n"
        "    if job.stopping():\n        runs.open('a').write('stopping\\n')\n        break\n"
    )
    notebook = write_notebook(tmp_path / "early.ipynb", loop, "runs.open('a').write('after\\n')")
    job = client.submit(path=str(notebook), gpus=1, checkpoint=True)
    wait_for(lambda: "5" in (runs.read_text().split() if runs.exists() else []), timeout=90, what="step 5")
    client.suspend(job["id"])
    paused = wait_state(client, job["id"], "suspended", "failed", "succeeded", "cancelled")
    assert paused["state"] == "suspended" and "checkpoint after cell 1" in paused["reason"], paused["reason"]
    assert runs.read_text().split()[-1] == "stopping"  # the cell saw it and ended itself, long before 600 steps

    client.resume(job["id"])
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split()[-2:] == ["stopping", "after"]  # the loop did not run again


def test_a_job_asked_to_suspend_at_its_time_limit_ends_its_cell_and_waits_for_more_time(start_server, tmp_path):
    server = start_server()
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    notebook = write_notebook(tmp_path / "limited.ipynb", *(c.format(runs=str(runs)) for c in SUSPENDED_CELLS))
    with pytest.raises(Exception, match="add --checkpoint"):
        client.submit(path=str(notebook), on_timeout="suspend")
    cli = _e31(server, "submit", str(notebook), "--max-runtime", "3", "--checkpoint", "--on-timeout", "suspend")
    assert cli.returncode == 0, cli.stderr
    job_id = client.jobs()[0]["id"]
    paused = wait_state(client, job_id, "suspended", "failed", "succeeded", "cancelled")
    assert paused["state"] == "suspended", paused["reason"]
    assert paused["reason"].startswith("suspended at its time limit (3s) at a cell's end")
    # The cell running at the limit ended and the next did not start. Which cell that was depends
    # on how long the kernel took to start (the limit may even fall before the first cell).
    after = paused["last_checkpoint"]["after_cell"]
    assert f"checkpoint after cell {after + 1}" in paused["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c4"][: after + 1]

    client.resume(job_id, max_runtime=60)
    done = wait_state(client, job_id, "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c4"]


def test_a_suspend_asked_while_the_kernel_starts_reaches_it_once_it_answers(start_server, tmp_path):
    # A kernel that takes 3 s to start: a SIGUSR1 before its startup file has run would end it.
    # The worker tells it only once it answers; the first cell sees the request and the job
    # stops after it.
    spec = tmp_path / "jupyter" / "kernels" / "slow-python"
    spec.mkdir(parents=True)
    launch = f'sleep 3; exec {sys.executable} -m ipykernel_launcher -f "$0"'
    argv = ["sh", "-c", launch, "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Slow", "language": "python"}))
    server = start_server(env={"JUPYTER_PATH": str(tmp_path / "jupyter")})
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    told = (
        f"import pathlib, time\nfrom e31_jupyter.job import stopping\nruns = pathlib.Path({str(runs)!r})\n"
        "for _ in range(100):\n    if stopping(): break\n    time.sleep(0.05)\n"
        "runs.open('a').write(f'c1-told-{stopping()}\\n')"
    )
    notebook = write_notebook(tmp_path / "slow.ipynb", told, "runs.open('a').write('c2\\n')", kernel="slow-python")
    job_id = client.submit(path=str(notebook), gpus=1, checkpoint=True)["id"]
    wait_state(client, job_id, "running")
    client.suspend(job_id)

    paused = wait_state(client, job_id, "suspended", "failed", "succeeded", "cancelled")
    assert paused["state"] == "suspended", paused["reason"]
    assert runs.exists() and runs.read_text().split() == ["c1-told-True"], paused["reason"]
    client.resume(job_id)
    done = wait_state(client, job_id, "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1-told-True", "c2"]


def test_a_failed_cell_corrected_resumes_from_it_and_an_earlier_cell_changed_is_refused(start_server, tmp_path):
    server = start_server(extra_args=["--E31.checkpoint_share=0.5"])
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    cells = [
        f"import pathlib, time\nruns = pathlib.Path({str(runs)!r})\nruns.open('a').write('c1\\n')\na = 41",
        "runs.open('a').write('c2\\n')\nb = a + 1\ntime.sleep(0.5)",
        "runs.open('a').write('c3\\n')\nraise ValueError('a bug')",
        "runs.open('a').write('c4\\n')\nassert c == 43",
    ]
    notebook = write_notebook(tmp_path / "buggy.ipynb", *cells)
    job = wait_state(client, client.submit(path=str(notebook), gpus=1, checkpoint=True)["id"], "failed", "succeeded")
    assert "ValueError: a bug" in job["reason"] and job["last_checkpoint"]["after_cell"] == 1

    fixed = nbformat.read(notebook, as_version=4)
    fixed.cells[0].source += "  # changed"
    (tmp_path / "changed-early.ipynb").write_text(nbformat.writes(fixed))
    refused = _e31(server, "resume", job["id"], "--notebook", str(tmp_path / "changed-early.ipynb"))
    assert (
        refused.returncode != 0
        and "Cell 1 ('import pathlib, time') of the corrected notebook differs" in refused.stderr
    )
    assert client.job(job["id"])["state"] == "failed"

    fixed = nbformat.read(notebook, as_version=4)
    fixed.cells[2].source = "runs.open('a').write('c3\\n')\nc = b + 1"
    (tmp_path / "fixed.ipynb").write_text(nbformat.writes(fixed))
    resumed = _e31(server, "resume", job["id"], "--notebook", str(tmp_path / "fixed.ipynb"))
    assert resumed.returncode == 0, resumed.stderr
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c3", "c4"]  # only the corrected cell ran again
    assert "c = b + 1" in "".join(client.notebook(job["id"])["cells"][2]["source"])


def test_a_long_cell_is_told_its_time_limit_is_near_and_ends_in_time(start_server, tmp_path):
    # Told suspend_grace (10 s here) before its 20 s limit: the loop saves and ends, and the job
    # succeeds instead of timing out. (The kernel has started by then, however busy the machine.)
    server = start_server(extra_args=["--E31.suspend_grace=10"])
    client = E31Client(server.url, server.token)
    told = tmp_path / "told.txt"
    cell = (
        "import time, pathlib\nfrom e31_jupyter import job\nbegan = time.time()\n"
        "while not job.stopping() and time.time() - began < 60:\n    time.sleep(0.05)\n"
        f"pathlib.Path({str(told)!r}).write_text(repr(time.time()))"
    )
    notebook = write_notebook(tmp_path / "loop.ipynb", cell)
    done = wait_state(client, client.submit(path=str(notebook), max_runtime="20s")["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert 9.9 < float(told.read_text()) - ts(done["started_at"]) < 20.0  # at 10 s (the tick's second), not before
