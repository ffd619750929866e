"""A real e31 server in a subprocess, for the test suite and the benchmarks.

Each ``ServerProcess`` is a ``jupyter server`` with the e31 extension, its own port and token,
on a data directory of the caller's choosing (two of them on one directory share a queue).
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    def __init__(
        self,
        data_dir: Path,
        gpus: list[str] | None = ("0", "1"),
        root_dir: Path | None = None,
        token: str | None = None,
        extra_args: list[str] = (),
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.data_dir = Path(data_dir)
        self.gpus = gpus
        self.root_dir = Path(root_dir or self.data_dir.parent)
        # Its own token: a port taken by another test's server between free_port() and the bind
        # then answers 403 to wait_ready (and to this test's client), instead of passing for ours.
        self.token = token or f"e31-test-{secrets.token_hex(8)}"
        self.extra_args = list(extra_args)
        self.log_path = log_path or self.data_dir.parent / f"server-{id(self)}.log"
        self.env = dict(env or {})  # more environment variables for the server, over this process's
        self.port = None
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """``e31 serve`` (a Jupyter server with only the e31 extension) on this port and data dir."""
        from e31_jupyter.cli.launch import launcher_argv

        args = [
            f"--port={self.port}", "--ip=127.0.0.1", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}", f"--E31.data_dir={self.data_dir}",
            "--E31.stop_grace=2",
            "--ServerApp.port_retries=0",  # never another port, where another test's server may be
        ]  # fmt: skip
        if self.gpus:  # None or empty: NVML discovery, which finds none without a driver
            args.append(f"--E31.gpus={','.join(self.gpus)}")
        return launcher_argv("serve", args + self.extra_args)

    def start(self, timeout: float = 180, attempts: int = 3) -> ServerProcess:
        """Start on a free port. Tests run side by side (pytest-xdist), so another process may
        take that port between ``free_port()`` and the server's bind: then try another."""
        for attempt in range(attempts):
            self.port = free_port()
            self.log_file = open(self.log_path, "ab")
            env = {**os.environ, "JUPYTER_NO_CONFIG": "", "PYTHONUNBUFFERED": "1", **self.env}
            self.proc = subprocess.Popen(
                self.command(), stdout=self.log_file, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                self.log_file.close()
                taken = f"The port {self.port} is already in use" in self.log_text()
                if not taken or attempt == attempts - 1:
                    raise
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the e31 server exited early; see {self.log_path}")
            try:
                r = requests.get(
                    f"{self.url}/e31/api/gpus",
                    headers={"Authorization": f"token {self.token}"},
                    timeout=2,
                )
                if r.status_code == 200:
                    return
            except (requests.ConnectionError, requests.Timeout):  # not listening yet, or busy starting
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the e31 server did not answer within {timeout}s; see {self.log_path}")

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as when the machine's OOM killer strikes."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log_file.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log_file", None) and not self.log_file.closed:
            self.log_file.close()

    def log_text(self) -> str:
        return Path(self.log_path).read_text(errors="replace")
