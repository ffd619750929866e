"""A real IPython kernel for tests of the magics, started as a Jupyter server starts one."""

from __future__ import annotations

import os
import queue
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field

import pytest
from jupyter_client.manager import KernelManager


@dataclass
class Output:
    stdout: str = ""
    stderr: str = ""
    displays: list[dict] = field(default_factory=list)
    error: str = ""
    comms: list[dict] = field(default_factory=list)  # comm_open and comm_msg data: widget state


class Kernel:
    """A real IPython kernel, started the way a Jupyter server starts one (with E31_URL/TOKEN).
    It talks over unix sockets in a short folder of its own, as the worker's kernels do
    (``worker._job_kernels``): over TCP a kernel binds the ports its client picked a moment
    before, and a test starting a kernel beside it can take one ("Kernel didn't respond")."""

    def __init__(self, server, cwd):
        env = {**os.environ, "E31_URL": server.url, "E31_TOKEN": server.token}
        self._sockets = tempfile.mkdtemp(prefix="e31k-")
        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(self._sockets, "kernel"))
        self.manager.start_kernel(cwd=str(cwd), env=env)
        self._connect()

    def _connect(self):
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run(self, code: str, timeout: float = 120) -> Output:
        out = Output()
        self.client.execute_interactive(code, output_hook=lambda message: _record(out, message), timeout=timeout)
        return out

    def listen(self, seconds: float) -> Output:
        """What the kernel sends over the next ``seconds`` while no cell runs (a widget's
        background thread, say), for whichever cell it is sent."""
        out = Output()
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                _record(out, self.client.get_iopub_msg(timeout=left))
            except queue.Empty:
                break
        return out

    def value(self, expression: str) -> str:
        return self.run(f"print(repr({expression}))").stdout.strip()

    def restart(self):
        self.client.stop_channels()
        self.manager.restart_kernel(now=True)
        self._connect()

    def stop(self):
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)
        shutil.rmtree(self._sockets, ignore_errors=True)


def _record(out: Output, message: dict) -> None:
    kind, content = message["msg_type"], message["content"]
    if kind == "stream":
        setattr(out, content["name"], getattr(out, content["name"]) + content["text"])
    elif kind in ("display_data", "execute_result"):
        out.displays.append(content["data"])
    elif kind == "error":
        out.error = "\n".join(content["traceback"])
    elif kind in ("comm_open", "comm_msg"):
        out.comms.append(content.get("data", {}))


@pytest.fixture
def kernel(server, tmp_path):
    k = Kernel(server, tmp_path)
    k.run("%load_ext e31_jupyter")
    yield k
    k.stop()


def job_id_in(output: Output) -> str:
    """The id of the job a submit printed."""
    match = re.search(r"e31: job (\S+) ", output.stdout)
    assert match, (output.stdout, output.stderr, output.error)
    return match.group(1)
