"""A job as a detached process on this machine: ``python -m e31_jupyter.execution.worker JOBDIR``,
or a worker started ahead and handed the job (``standby.py``).

The worker runs in its own session, so it outlives the Jupyter server; every process of the job
(the worker, its kernel, anything they start) carries ``E31_JOB_ID`` in its environment, which is
how ``clean_up`` finds stragglers that left the process group (Jupyter kernels start their own).

A job runs as its account (``accounts.runs_as``): a root server starts the worker with the
account's uid, gid and groups, in a folder given to it, with an environment that holds no secret
(``job_env``). Stopping and cleaning up signal only processes of that account: a process of another
user that sets ``E31_JOB_ID`` to the job's id is left alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from e31_jupyter.core.errors import E31Error
from e31_jupyter.execution import accounts
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.gpus import visible_devices_env
from e31_jupyter.execution.job_env import JOB_ID_VAR, job_environment
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.execution.standby import STANDBY_FLAG, WORKER_MODULE, Standby


class LocalBackend:
    starts_slowly = False
    container_limits = None

    def __init__(self, python: str | None = None, job_env: Sequence[str] = (), standby: bool = True):
        self.python = python or sys.executable
        self.job_env = list(job_env)  # c.E31.job_env: more variables for every job
        self._children: dict[int, subprocess.Popen] = {}  # workers this process started
        self._adopted: set[int] = set()  # workers of jobs adopted after a restart
        self._standby: Standby | None = None
        if standby:  # c.E31.standby_worker
            server = accounts.current()
            env = job_environment(server, "", {}, self.job_env, server)
            self._standby = Standby(self.python, {k: v for k, v in env.items() if k != JOB_ID_VAR})

    def start(self, job_id: str, jobdir: JobDir, devices: list[str], account: Account | None = None) -> dict:
        """Start the worker as ``account`` (default: the server's own) on ``devices``."""
        server = accounts.current()
        account = account or server
        _check_reachable(account, jobdir)
        env = job_environment(account, job_id, visible_devices_env(devices), self.job_env, server)
        with open(jobdir.log, "ab") as log:
            accounts.give_folder(jobdir.path, account.uid, account.gid)  # the log in it too
            proc = self._standby_worker(jobdir, env, account, server) or subprocess.Popen(
                [self.python, "-m", WORKER_MODULE, str(jobdir.path)],
                cwd=jobdir.work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **_as_user(account, server),
            )
        self._children[proc.pid] = proc
        return _handle(psutil.Process(proc.pid), account.uid)

    def _standby_worker(self, jobdir: JobDir, env: dict, account: Account, server: Account):
        """The standby worker, handed the job, for a job run as the server's own account."""
        if self._standby is None or account.uid != server.uid:
            return None
        return self._standby.take(jobdir, env)

    def close(self) -> None:
        """End the standby worker (jobs that run go on)."""
        if self._standby is not None:
            self._standby.close()

    def adopt(self, job_id: str, handle: dict | None) -> bool:
        """True when the job's worker from ``handle`` is still alive (and is that same process)."""
        worker = self._process(handle)
        if worker is not None:
            self._adopted.add(worker.pid)
        return worker is not None

    def recover(self, job_id: str, jobdir: JobDir, account: Account | None = None) -> dict | None:
        """The handle of the job's worker, found among the processes of ``account`` (default:
        the server's) by the job id in its environment, or, for a worker that was a standby
        (whose environment was set after it started), by the job's folder it works in. Asked
        after the jobs whose worker is known were adopted: it first ends the standbys a dead
        server left that had not begun a job (``_end_standbys_left_behind``)."""
        uid = (account or accounts.current()).uid
        self._end_standbys_left_behind(jobdir.path.parent, uid)
        for process in self._job_processes(job_id, None, uid):
            if WORKER_MODULE in " ".join(_safe(process.cmdline) or []):
                return _handle(process, uid)
        for process in _standbys(uid):
            if _works_on(process, job_id):
                return _handle(process, uid)
        return None

    def _end_standbys_left_behind(self, jobs_folder: Path, uid: int) -> None:
        """End the standby workers of this data directory that a dead server left and that have not
        begun a job: still importing when it died, one may yet read the job it was handed and
        begin it, though nothing in the job's folder says so, and this server starts that job
        itself. Its own standby and the workers it adopted are spared. Each is stopped first
        (SIGSTOP), so it cannot begin its job between the look at its folder and the kill; one
        found at work on a job goes on, to be found by that job's folder."""
        spared = self._adopted | {self._standby.pid if self._standby is not None else None}
        for process in _standbys(uid):
            if process.pid in spared or not _works_in(process, jobs_folder):
                continue
            _safe(process.send_signal, signal.SIGSTOP)
            _wait_for_status(process, psutil.STATUS_STOPPED)
            if _works_in(process, jobs_folder):
                _signal_all([process], signal.SIGKILL)
                # dead once a zombie: its new parent (init) reaps it when it will, and waiting for
                # that held up the server's start by seconds
                _wait_for_status(process, psutil.STATUS_ZOMBIE)
            else:
                _safe(process.send_signal, signal.SIGCONT)

    def wait(self, handle: dict) -> int | None:
        child = self._children.pop(handle["pid"], None)
        if child is not None:
            return child.wait()
        process = self._process(handle)
        if process is None:
            return None
        try:
            return process.wait()  # not our child: psutil polls it, the exit code is unknown
        except psutil.NoSuchProcess:
            return None

    def stop(self, job_id: str, handle: dict, grace: float) -> None:
        """SIGTERM to the job's processes, SIGKILL to whatever is left after ``grace`` seconds."""
        targets = self._job_processes(job_id, handle, _uid_of(handle))
        _signal_all(targets, signal.SIGTERM)
        _, alive = psutil.wait_procs(targets, timeout=grace)
        _signal_all(alive, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5)

    def warn(self, job_id: str, handle: dict) -> None:
        worker = self._process(handle)
        if worker is not None:
            _safe(worker.send_signal, signal.SIGUSR2)

    def suspend(self, job_id: str, handle: dict, grace: float, stop_grace: float) -> None:
        """SIGUSR1 to the worker (it stops at its cell's end, saving a checkpoint); ``stop`` after
        ``grace`` seconds if it has not ended by then."""
        worker = self._process(handle)
        if worker is None:
            return
        _safe(worker.send_signal, signal.SIGUSR1)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:  # polled: the watcher's wait reaps it and reads its exit code
            if self._process(handle) is None:
                return
            time.sleep(0.1)
        self.stop(job_id, handle, stop_grace)

    def clean_up(self, job_id: str, account: Account | None = None) -> None:
        """Kill what the job left running after its worker ended (an orphaned kernel, say): its
        processes that run as ``account`` (default: the server's)."""
        leftovers = self._job_processes(job_id, None, (account or accounts.current()).uid)
        _signal_all(leftovers, signal.SIGKILL)
        psutil.wait_procs(leftovers, timeout=5)

    def check_default_image(self) -> None:
        """No image: nothing to check."""

    def _process(self, handle: dict | None) -> psutil.Process | None:
        if not handle:
            return None
        try:
            process = psutil.Process(handle["pid"])
            if abs(process.create_time() - handle["created"]) > 0.01:
                return None  # the pid was reused by an unrelated process
            if not _runs_as(process, _uid_of(handle)):
                return None
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return process
        except psutil.Error:
            return None

    def _job_processes(self, job_id: str, handle: dict | None, uid: int) -> list[psutil.Process]:
        """The worker of ``handle`` and its children, and every process of ``uid`` that carries
        the job's id."""
        found: dict[int, psutil.Process] = {}
        worker = self._process(handle)
        if worker is not None:
            found[worker.pid] = worker
            for child in _safe(worker.children, recursive=True) or []:
                found[child.pid] = child
        me = os.getpid()
        for process in psutil.process_iter():
            if process.pid in found or process.pid == me:
                continue
            environ = _safe(process.environ)
            if environ and environ.get(JOB_ID_VAR) == job_id:
                found[process.pid] = process
        return [p for p in found.values() if _runs_as(p, uid)]


def _check_reachable(account: Account, jobdir: JobDir) -> None:
    """A job run as another account must be able to enter the folders above its own."""
    closed = accounts.closed_folder(account, jobdir.path)
    if closed is not None:
        raise E31Error(
            f"{account.name} cannot enter {closed}, above the job's folder, so the job cannot run as "
            f"{account.name}. Let other users enter it (chmod o+x {closed}; mode 0711 lists nothing): "
            "each job's own folder stays 0700, its owner's alone."
        )


def _standbys(uid: int) -> list[psutil.Process]:
    """The processes of ``uid`` started as standby workers (whether or not handed a job since)."""
    return [
        process
        for process in psutil.process_iter()
        if (_safe(process.cmdline) or [])[-2:] == [WORKER_MODULE, STANDBY_FLAG] and _runs_as(process, uid)
    ]


def _works_in(process: psutil.Process, folder: Path) -> bool:
    cwd = _safe(process.cwd)
    return cwd is not None and Path(cwd) == folder.resolve()


def _wait_for_status(process: psutil.Process, status: str, timeout: float = 2.0) -> None:
    """Until ``process`` is in ``status`` or gone: a signal sent to it takes hold when it is next
    scheduled."""
    deadline = time.monotonic() + timeout
    while _safe(process.status) not in (status, None) and time.monotonic() < deadline:
        time.sleep(0.01)


def _works_on(process: psutil.Process, job_id: str) -> bool:
    """Whether ``process`` works in the job's working folder (``JOB_ID/work``)."""
    cwd = _safe(process.cwd)
    return cwd is not None and Path(cwd).parts[-2:] == (job_id, "work")


def _as_user(account: Account, server: Account) -> dict:
    """Popen's arguments that run a process as ``account`` (set before exec; only root may)."""
    if account.uid == server.uid:
        return {}
    return {"user": account.uid, "group": account.gid, "extra_groups": list(account.groups)}


def _runs_as(process: psutil.Process, uid: int) -> bool:
    """Whether ``process`` runs as ``uid`` (a process of another user is never the job's)."""
    uids = _safe(process.uids)
    return uids is not None and uids.real == uid


def _handle(process: psutil.Process, uid: int) -> dict:
    """What the store keeps of a worker: enough to find it again, and whose it is."""
    return {"pid": process.pid, "created": process.create_time(), "uid": uid}


def _uid_of(handle: dict) -> int:
    """The account a handle's job runs as (handles from before jobs ran as their submitter: the
    server's)."""
    return handle.get("uid", os.geteuid())


def _safe(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except psutil.Error:
        return None


def _signal_all(processes: list[psutil.Process], sig: int) -> None:
    for process in processes:
        _safe(process.send_signal, sig)
