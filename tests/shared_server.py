"""One real e31 server for a whole test module, each test as a user of its own.

Starting a server costs seconds, and most tests of the CLI, the magics and the API need only one
that no other test's jobs disturb. A module that imports these fixtures
(``from shared_server import server, shared_server  # noqa: F401``) has its ``server`` (and so
``client``, ``e31``, ``kernel``) served by one server for all its tests: each test gets a token of
its own, which names a user of its own, so it sees only its own jobs, its own ``last`` and its own
meter. What the tests do share, the GPUs and the line, is left idle between them: when a test ends,
its unfinished jobs are cancelled and waited for, and the next test starts on free GPUs.

Under pytest-xdist a module's tests are split in two groups (conftest.py), each run on one worker,
one test after the other, with a server of its own. A test that needs a server configured
otherwise, or one that has run nothing yet, uses ``start_server``.
"""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest
from server_process import ServerProcess
from support import token_per_user, wait_for

from e31_jupyter.client import E31Client

ADMIN_TOKEN = f"shared-admin-{secrets.token_hex(8)}"  # its own per test process: see ServerProcess.token
USERS = 300  # tokens made at start: more than any module has tests


@dataclass
class ServerUser:
    """What a test sees of the shared server: the server's address, its own token."""

    url: str
    token: str
    data_dir: Path
    root_dir: Path
    process: ServerProcess

    def log_text(self) -> str:
        return self.process.log_text()


class SharedServer:
    def __init__(self, folder: Path, root_dir: Path):
        tokens = {f"user-token-{n}": f"user{n}" for n in range(USERS)}
        config = token_per_user(
            folder / "shared_identity.py",
            {**tokens, ADMIN_TOKEN: "e31admin"},
            'c.E31.admin_users = ["e31admin"]',
            'c.E31.jobs_run_as = "server"',  # the users are names, not Unix accounts
        )
        self.process = ServerProcess(folder / "data", root_dir=root_dir, token=ADMIN_TOKEN,
                                     extra_args=[f"--config={config}"])  # fmt: skip
        self.admin = None
        self._numbers = itertools.count()

    def start(self) -> SharedServer:
        self.process.start()
        self.admin = E31Client(self.process.url, ADMIN_TOKEN)
        return self

    def new_user(self) -> ServerUser:
        n = next(self._numbers)
        assert n < USERS, "more tests than tokens: raise USERS"
        p = self.process
        return ServerUser(p.url, f"user-token-{n}", p.data_dir, p.root_dir, p)

    def settle(self, user: ServerUser) -> None:
        """Cancel what ``user`` left queued or running, and wait until nothing runs or waits (a job
        whose kernel ended gives its GPUs back before its reports are made: it still runs)."""
        mine = E31Client(user.url, user.token)
        for state in ("queued", "running"):
            for job in mine.jobs(state=state):
                try:
                    mine.cancel(job["id"])
                except Exception:
                    pass  # ended meanwhile
        wait_for(self._idle, 60, what="the shared server to run nothing after the test")

    def _idle(self) -> bool:
        pool = self.admin.gpus()
        return pool["free"] == pool["total"] and pool["running"] == 0 and pool["queued"] == 0

    def stop(self) -> None:
        self.process.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """The module's server; its root folder holds every test's tmp_path (data must be inside it)."""
    shared = SharedServer(tmp_path_factory.mktemp("shared"), root_dir=tmp_path_factory.getbasetemp())
    try:
        yield shared.start()
    finally:
        shared.stop()


@pytest.fixture
def server(shared_server):
    """This test's user of the module's shared server; its jobs are ended when the test ends."""
    user = shared_server.new_user()
    yield user
    shared_server.settle(user)
