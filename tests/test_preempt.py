"""c.E31.preempt: the queue suspends a running job that takes checkpoints to start one that
cannot wait, and the suspended job goes back in line and goes on from its checkpoint. A real
server, real kernels and papermill; the decision is the e31-preempt policy's (test_policies.py)."""

from __future__ import annotations

import pytest
from server_process import ServerProcess
from support import wait_for, wait_state, write_notebook

from e31_jupyter.client import E31Client

# Each cell notes that it ran in a file outside the job; one cell a second.
STEADY = "import pathlib, time\nruns = pathlib.Path({runs!r})\nruns.open('a').write('a{n}\\n')\ntime.sleep(1)"


def _steady_notebook(tmp_path, runs, cells: int = 12):
    return write_notebook(tmp_path / "steady.ipynb", *(STEADY.format(runs=str(runs), n=n) for n in range(cells)))


def test_the_queue_suspends_a_job_that_can_afford_it_for_one_that_cannot_wait(start_server, tmp_path):
    server = start_server(gpus=["0"], extra_args=["--E31.preempt=True"])
    client = E31Client(server.url, server.token)
    runs = tmp_path / "runs.txt"
    steady = client.submit(path=str(_steady_notebook(tmp_path, runs)), gpus=1, checkpoint=True)
    wait_for(lambda: "a2" in (runs.read_text() if runs.exists() else ""), timeout=90, what="the third cell")

    # 5 minutes of work due in under 6: it must start within a minute, and the GPU is taken
    urgent_cell = f"import pathlib\npathlib.Path({str(runs)!r}).open('a').write('urgent\\n')"
    urgent = client.submit(
        path=str(write_notebook(tmp_path / "urgent.ipynb", urgent_cell)), gpus=1, max_runtime="5m", deadline="+350s"
    )
    done = wait_state(client, urgent["id"], "succeeded", "failed", "expired", "cancelled")
    assert done["state"] == "succeeded", done["reason"]

    finished = wait_state(client, steady["id"], "succeeded", "failed", "cancelled", "suspended")
    assert finished["state"] == "succeeded", finished["reason"]
    steps = [(t["to"], t["reason"]) for t in finished["transitions"]]
    assert [to for to, _ in steps] == ["queued", "running", "suspended", "queued", "running", "succeeded"]
    assert f"by the queue, to make room for {urgent['id']}, which could not wait" in steps[2][1]
    assert steps[3][1].startswith(f"back in line: the queue suspended it to make room for {urgent['id']}")
    lines = runs.read_text().split()
    # the urgent job ran between two of the steady job's cells, and no cell ran twice
    assert "urgent" in lines and [line for line in lines if line != "urgent"] == [f"a{n}" for n in range(12)]
    assert finished["attempts"] and len(finished["attempts"]) == 1
    assert finished["suspended_for"] == urgent["id"] and done["suspended_for"] is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, says",
    [
        (["--E31.policy=edf"], "c.E31.preempt works with the e31 policy, and c.E31.policy is edf"),
        (["--E31.backend=slurm"], "with the slurm backend Slurm decides which job runs"),
    ],
)
def test_preempt_where_the_queue_cannot_suspend_is_a_clear_start_up_error(tmp_path, args, says):
    server = ServerProcess(
        tmp_path / "data", gpus=["0"], root_dir=tmp_path, log_path=tmp_path / "server.log",
        extra_args=["--E31.preempt=True", *args],
    )  # fmt: skip
    try:
        with pytest.raises(RuntimeError, match="exited early"):
            server.start(timeout=180)
        assert "Traceback" not in server.log_text()
        assert says in server.log_text()
    finally:
        server.stop()
