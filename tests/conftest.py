"""Fixtures: real e31 servers (subprocesses) on a temporary data directory, and small notebooks.

Tiers and parallel runs (markers registered in pyproject.toml): a test that uses a real server,
the Slurm cluster, dockerd or real Unix users is marked ``slow`` here, by the fixtures it uses
(other slow tests carry ``@pytest.mark.slow`` themselves); ``slurm`` and ``docker`` mark the
tests that need those daemons. Under pytest-xdist (``--dist loadgroup``), the tests that share
one such thing run on one worker, one after the other: one Slurm cluster (its two GPUs and queue
are global state), one dockerd, the real-user tests (they open /root and pytest's temporary
folders to other users for a while, and put their modes back), and each module's shared server
(shared_server.py: a module's tests share one server, a user per test).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from docker_fixtures import DockerEngine, build_test_images, why_no_docker
from server_process import ServerProcess
from support import EXAMPLES, GATED, cannot_run_here, ts, wait_for, wait_state, write_notebook  # noqa: F401 (re-exported)

from e31_jupyter.client import E31Client

SERVER_FIXTURES = {"start_server", "server", "client", "live", "shared_server"}  # live: test_fuzz.py's own server
# fixture -> (markers, xdist group): what a test that uses it needs, and shares with others
SHARED = {
    "slurm": (("slurm", "slow"), "slurm"),
    "engine": (("docker", "slow"), "docker"),
    "make_user": (("slow",), "unix-users"),
    "open_to_users": (("slow",), "unix-users"),
}


# The longest single tests (minutes each), started first so that no worker is left with one at
# the end; xdist's loadgroup sends the groups (largest first) and then the rest in this order.
LONGEST_FIRST = (
    "tests/ui/test_browser.py::",
    "tests/reliability/test_fuzz.py::",
    "tests/reliability/test_faults.py::test_crash_loop",
    "tests/reliability/test_faults.py::test_server_killed_during_submits",
    "tests/reliability/test_load.py::",
    "tests/ui/test_ts_units.py::",
    "tests/ui/test_cell_widget_outputs.py::",
    "tests/ui/test_gpu_use_page.py::",
)


def _rank(item) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))


SHARED_SERVER_HALVES = 2  # a module's tests split in this many groups, a worker and a server each


def _shared_server_groups(items) -> dict:
    """item -> its group: a module's tests alternate between its groups (in collection order),
    so that no one worker is left with a whole module of minutes."""
    seen: dict = {}
    groups = {}
    for item in items:
        if "shared_server" in item.fixturenames:
            n = seen[item.module] = seen.get(item.module, -1) + 1
            groups[item] = f"shared-server:{item.module.__name__}:{n % SHARED_SERVER_HALVES}"
    return groups


@pytest.hookimpl(tryfirst=True)  # before -m selects and xdist groups by these marks
def pytest_collection_modifyitems(config, items):
    items.sort(key=_rank)  # stable: otherwise in collection order
    shared_server_groups = _shared_server_groups(items)
    for item in items:
        names = set(item.fixturenames)
        if names & SERVER_FIXTURES:
            item.add_marker(pytest.mark.slow)
        for fixture, (marks, group) in SHARED.items():
            if fixture in names:
                for mark in marks:
                    item.add_marker(getattr(pytest.mark, mark))
                item.add_marker(pytest.mark.xdist_group(group))
        if item in shared_server_groups:  # shared_server.py: a module's tests in turn on one server
            item.add_marker(pytest.mark.xdist_group(shared_server_groups[item]))


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


@pytest.fixture(scope="session")
def engine(tmp_path_factory):
    """dockerd on its own socket with e31-test:full and e31-test:bare, for the whole session
    (here, not in a test module, so that test_docker.py and test_after_work.py share one)."""
    reason = why_no_docker()
    if reason:
        cannot_run_here(reason)
    engine = DockerEngine(tmp_path_factory.mktemp("dockerd")).start()
    try:
        build_test_images(engine, engine.root)
        yield engine
    finally:
        engine.stop()


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
