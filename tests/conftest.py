"""Fixtures: real e31 servers (subprocesses) on a temporary data directory, and small notebooks."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from e31_jupyter.client import E31Client
from e31_jupyter.testing import ServerProcess

EXAMPLES = Path(__file__).resolve().parent.parent / "example_notebooks"


@pytest.fixture
def start_server(tmp_path):
    """Start e31 servers on ``tmp_path/data`` (or another data dir); all are stopped at the end."""
    started: list[ServerProcess] = []

    def start(data_dir: Path | None = None, **kwargs) -> ServerProcess:
        server = ServerProcess(data_dir or tmp_path / "data", root_dir=tmp_path, **kwargs)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(start_server) -> ServerProcess:
    return start_server()


@pytest.fixture
def client(server) -> E31Client:
    return E31Client(server.url, server.token)


def write_notebook(path: Path, *sources: str, parameters: str | None = None, kernel="python3") -> Path:
    """A notebook of code cells (the first tagged ``parameters`` when given)."""
    nb = new_notebook()
    nb.metadata.kernelspec = {"name": kernel, "display_name": kernel, "language": "python"}
    if parameters is not None:
        nb.cells.append(new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells.extend(new_code_cell(s) for s in sources)
    nbformat.write(nb, path)
    return path


GATED = """
import os, pathlib, time
pathlib.Path("devices.txt").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
with open(runs, "a") as f:
    f.write(os.environ["E31_JOB_ID"] + "\\n")
started = time.time()
while not os.path.exists(gate) and time.time() - started < 120:
    time.sleep(0.05)
assert os.path.exists(gate), "the test never opened the gate"
"""


@pytest.fixture
def gated(tmp_path):
    """A notebook that records its devices and job id, then waits until the test opens its gate."""
    path = write_notebook(tmp_path / "gated.ipynb", GATED, parameters="gate = ''\nruns = ''")

    class Gated:
        notebook = path
        runs = tmp_path / "runs.txt"

        def params(self, name: str) -> dict:
            return {"gate": str(tmp_path / f"gate-{name}"), "runs": str(self.runs)}

        def open(self, name: str) -> None:
            (tmp_path / f"gate-{name}").touch()

        def submit(self, client, name: str, **request) -> dict:
            return client.submit(path=str(path), name=name, parameters=self.params(name), **request)

    return Gated()


def wait_for(predicate, timeout: float = 60, interval: float = 0.1, what: str = "condition"):
    """Poll until ``predicate()`` returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_state(client, job_id: str, *states: str, timeout: float = 90) -> dict:
    def reached():
        job = client.job(job_id)
        return job if job["state"] in states else None

    return wait_for(reached, timeout, what=f"job {job_id} to be {' or '.join(states)}")


def ts(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value).timestamp() if value else None
