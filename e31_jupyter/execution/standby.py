"""A worker started ahead of its job.

A job's worker spends most of its first second starting Python and importing papermill, nbclient
and nbconvert, the same for every job. The local backend keeps one worker process that has done
that already and waits for a job on its stdin (``python -m e31_jupyter.execution.worker
--standby``). A job handed to it takes the process over: the job's environment, working folder and
log are set before anything of the job runs. The process serves that one job and ends with it, so
nothing of one job reaches another. A new standby is started as soon as one is taken.

Only jobs that run as the server's own account use it: a process cannot become another user
without root, and a root scheduler should not hold a process ahead for each of its users. The
first job after a server starts starts the first standby, so a server that runs no job keeps none.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.execution.quick_imports import skip_iri_parsers

STANDBY_FLAG = "--standby"
WORKER_MODULE = "e31_jupyter.execution.worker"


class Standby:
    """The server's side: one worker process kept ahead of the next job run as the server's account."""

    def __init__(self, python: str, env: dict[str, str]):
        self.python = python
        self.env = env  # a job's environment run as the server's account, without the job's own variables
        self._process: subprocess.Popen | None = None

    def take(self, jobdir: JobDir, env: dict[str, str]) -> subprocess.Popen | None:
        """The standby worker, now running the job of ``jobdir`` with ``env``, and a new standby
        started for the next job; None when there was none alive (start the worker afresh)."""
        process, self._process = self._process, None
        handed = process is not None and _hand_over(process, jobdir, env)
        self._process = self._start(cwd=jobdir.path.parent)
        return process if handed else None

    @property
    def pid(self) -> int | None:
        """The standby waiting now, if any."""
        return self._process.pid if self._process is not None else None

    def close(self) -> None:
        """End the standby (it also ends by itself once this process is gone: its stdin closes)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def _start(self, cwd: Path) -> subprocess.Popen:
        # The folder of job folders, the server's own: ``-m`` puts the working folder first on
        # the worker's sys.path, where no other user may put a module.
        return subprocess.Popen(
            [self.python, "-m", WORKER_MODULE, STANDBY_FLAG],
            cwd=cwd,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def _hand_over(process: subprocess.Popen, jobdir: JobDir, env: dict[str, str]) -> bool:
    """Give ``process`` its job; False when it has died (or dies as it is told)."""
    job = {"jobdir": str(jobdir.path), "cwd": str(jobdir.work), "log": str(jobdir.log), "env": env}
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(job).encode() + b"\n")
        process.stdin.close()
    except OSError:  # a broken pipe: it ended before its job came
        pass
    if process.poll() is None:
        return True
    process.wait()
    return False


def wait_for_job() -> str:
    """In a standby worker: import what every job needs, then wait for the server to hand over
    one job, and become that job's worker. Returns the job's folder; exits when the server went
    away first."""
    skip_iri_parsers()
    import_ahead()
    gc.freeze()  # what was imported stays: the job's collections need not walk it
    line = sys.stdin.buffer.readline()
    if not line:
        raise SystemExit(0)
    job = json.loads(line)
    _become(job)
    return job["jobdir"]


def import_ahead() -> None:
    """What a worker imports for every job: papermill's world, the kernel's client, and nbconvert
    with one report rendered (its templates and filters load on first use). A failure here is
    left for the job to meet and report."""
    import nbformat
    import papermill  # noqa: F401
    from jupyter_client.manager import AsyncKernelManager  # noqa: F401
    from papermill.engines import NBClientEngine  # noqa: F401

    try:
        from nbconvert import HTMLExporter

        HTMLExporter().from_notebook_node(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]))
    except Exception:
        pass


def _become(job: dict) -> None:
    """Take on the job's environment, working folder and log, as a worker started for it has."""
    os.environ.clear()
    os.environ.update(job["env"])
    tempfile.tempdir = None  # found again from the job's environment
    os.chdir(job["cwd"])
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(job["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
