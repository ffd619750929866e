"""Helpers for the tests: small notebooks, waiting for a job, reading times."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

EXAMPLES = Path(__file__).resolve().parent.parent / "example_notebooks"
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def benchmark_module(name: str):
    """A module of benchmarks/ by file name (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"{Path(name).stem}_benchmark", BENCHMARKS / name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def cannot_run_here(reason: str) -> None:
    """Skip a test that needs what this machine lacks; in CI (``CI`` set, as .ci/run is run),
    fail instead: there the project installs everything, and a skip would hide that it did not."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must be able to run this test: {reason}")
    pytest.skip(reason)


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


def why(data_dir: Path, job: dict) -> str:
    """For an assertion message: the job's reason and the end of its job.log."""
    log = data_dir / "jobs" / job["id"] / "job.log"
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no job.log)"
    return f"reason: {job.get('reason')!r}\njob.log:\n{tail}"


def ts(value: str | None) -> float | None:
    return dt.datetime.fromisoformat(value).timestamp() if value else None


def held_s(job: dict) -> float:
    """How long an ended job held its GPUs, as the meter charges it: from its start until its
    kernel ended and they went back (gpus_released_at), or until it ended if that came first (a
    server that found it ended after a restart records the kernel's end as its end)."""
    ends = [ts(job[key]) for key in ("gpus_released_at", "finished_at") if job.get(key)]
    return min(ends) - ts(job["started_at"])


TOKEN_PER_USER = '''
from jupyter_server.auth.identity import IdentityProvider, User


class TokenPerUser(IdentityProvider):
    """A stand-in for JupyterHub's provider: each token names a different user."""

    users = {USERS}

    def get_user(self, handler):
        token = handler.request.headers.get("Authorization", "").removeprefix("token ").strip()
        name = self.users.get(token)
        if name is None:
            return None
        handler._token_authenticated = True  # a token, not a cookie: no XSRF form token needed
        return User(username=name)


c.ServerApp.identity_provider_class = TokenPerUser
'''


def token_per_user(path: Path, users: dict[str, str], *lines: str) -> Path:
    """A server config file at ``path`` whose identity provider names a user per token
    (``{token: user name}``), with more config ``lines``; for ``--config=``."""
    path.write_text(TOKEN_PER_USER.replace("{USERS}", repr(users)) + "".join(f"{line}\n" for line in lines))
    return path
