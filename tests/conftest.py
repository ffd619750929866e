"""Fixtures: real e31 servers (subprocesses) on a temporary data directory, and small notebooks."""

from __future__ import annotations

from pathlib import Path

import pytest
from server_process import ServerProcess
from support import EXAMPLES, GATED, ts, wait_for, wait_state, write_notebook  # noqa: F401 (re-exported)

from e31_jupyter.client import E31Client


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
