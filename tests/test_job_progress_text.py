"""A job's progress bars reach its log: in a job's kernel, ``tqdm.auto`` draws tqdm's text bars,
not its notebook widgets (which leave only their 0% line in a log), in whole notebooks and in
``%%e31`` cells alike; a job that does not use tqdm does not import it, and the user's own
kernel keeps its widgets."""

from __future__ import annotations

from conftest import wait_state, write_notebook
from kernels import Kernel, kernel  # noqa: F401 (kernel: a fixture)
from kernels import job_id_in as _job_id
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

PROGRESS = "import time\nfrom tqdm.auto import tqdm\nfor i in tqdm(range(50)):\n    time.sleep(0.01)\nprint(type(tqdm).__module__, tqdm.__mro__[1].__module__)"


def _bars(log: str) -> list[str]:
    """The progress bars' lines in a job's log (tqdm redraws its line with a carriage return)."""
    return [part.strip() for line in log.splitlines() for part in line.split("\r") if "|" in part and "%" in part]


def test_a_notebook_jobs_tqdm_auto_bar_reaches_the_log_to_its_end(client, tmp_path):
    notebook = write_notebook(
        tmp_path / "bars.ipynb",
        "import sys, os\nprint('tqdm loaded:', 'tqdm' in sys.modules, 'startup:', 'PYTHONSTARTUP' in os.environ, "
        "'left:', [name for name in globals() if 'e31' in name])",
        PROGRESS,
    )
    job = wait_state(client, client.submit(path=str(notebook))["id"], "succeeded", "failed")
    log = client.log_tail(job["id"], 200)
    assert job["state"] == "succeeded", (job["reason"], log)
    assert "tqdm loaded: False startup: False left: []" in log  # not imported before a cell asks; nothing left
    assert client.notebook(job["id"])["cells"][0]["execution_count"] == 1  # the startup ran before the first cell
    bars = _bars(log)
    assert any("100%" in bar and "50/50" in bar for bar in bars), log
    assert "ipywidgets" not in log and "tqdm.notebook" not in log, log


def test_a_cells_tqdm_auto_bar_reaches_the_log_and_the_users_kernel_keeps_its_widgets(kernel, client):
    job_id = _job_id(kernel.run(f"%%e31 submit\n{PROGRESS}"))
    job = wait_state(client, job_id, "succeeded", "failed")
    log = client.log_tail(job_id, 200)
    assert job["state"] == "succeeded", (job["reason"], log)
    assert any("100%" in bar and "50/50" in bar for bar in _bars(log)), log
    here = kernel.run("from tqdm.auto import tqdm\nprint(tqdm.__mro__[1].__module__)")
    assert here.stdout.strip() == "tqdm.notebook", here  # the user's own kernel: widgets, as before
