"""A job as a detached process on this machine: ``python -m e31_jupyter.worker JOBDIR``.

The worker runs in its own session, so it outlives the Jupyter server; every process of the job
(the worker, its kernel, anything they start) carries ``E31_JOB_ID`` in its environment, which is
how ``sweep`` finds stragglers that left the process group (Jupyter kernels start their own).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil

from ..gpus import visible_devices_env
from ..jobdir import JobDir

JOB_ID_VAR = "E31_JOB_ID"


class LocalBackend:
    def __init__(self, python: str | None = None):
        self.python = python or sys.executable
        self._children: dict[int, subprocess.Popen] = {}  # workers this process started

    def start(self, job_id: str, jobdir: JobDir, devices: list[str]) -> dict:
        env = {**os.environ, **visible_devices_env(devices), JOB_ID_VAR: job_id}
        env.pop("JPY_PARENT_PID", None)
        with open(jobdir.log, "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", "e31_jupyter.worker", str(jobdir.path)],
                cwd=jobdir.work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._children[proc.pid] = proc
        return {"pid": proc.pid, "created": psutil.Process(proc.pid).create_time()}

    def adopt(self, job_id: str, handle: dict | None) -> bool:
        """True when the job's worker from ``handle`` is still alive (and is that same process)."""
        return self._process(handle) is not None

    def recover(self, job_id: str) -> dict | None:
        """The handle of the job's worker, found by the job id in its environment."""
        for process in self._job_processes(job_id, None):
            if "e31_jupyter.worker" in " ".join(_safe(process.cmdline) or []):
                return {"pid": process.pid, "created": process.create_time()}
        return None

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
        targets = self._job_processes(job_id, handle)
        _signal_all(targets, signal.SIGTERM)
        _, alive = psutil.wait_procs(targets, timeout=grace)
        _signal_all(alive, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5)

    def sweep(self, job_id: str) -> None:
        """Kill what the job left running after its worker ended (an orphaned kernel, say)."""
        leftovers = self._job_processes(job_id, None)
        _signal_all(leftovers, signal.SIGKILL)
        psutil.wait_procs(leftovers, timeout=5)

    def _process(self, handle: dict | None) -> psutil.Process | None:
        if not handle:
            return None
        try:
            process = psutil.Process(handle["pid"])
            if abs(process.create_time() - handle["created"]) > 0.01:
                return None  # the pid was reused by an unrelated process
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return process
        except psutil.Error:
            return None

    def _job_processes(self, job_id: str, handle: dict | None) -> list[psutil.Process]:
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
        return list(found.values())


def _safe(call, *args, **kwargs):
    try:
        return call(*args, **kwargs)
    except psutil.Error:
        return None


def _signal_all(processes: list[psutil.Process], sig: int) -> None:
    for process in processes:
        _safe(process.send_signal, sig)
