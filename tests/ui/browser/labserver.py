"""A real `jupyter lab` with the e31 queue, in a subprocess, for the browser tests."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests
from server_process import free_port

from e31_jupyter.cli.launch import launcher_argv

CHROMIUM = "/usr/bin/chromium"
# Debian's Chromium, headless, with nothing that reaches the network (FACTS.md).
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--disable-dev-shm-usage",
]  # fmt: skip


class LabProcess:
    """`e31 lab` on a temporary root and data directory, with GPUs "0" and "1"."""

    def __init__(self, root: Path, token: str = "e31-ui-token"):
        self.root = Path(root)
        self.token = token
        self.home = self.root.parent / "lab-home"
        self.data_dir = self.home / "e31-data"
        self.log_path = self.home / "lab.log"
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> LabProcess:
        settings = self.home / "settings"
        (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
        # No news or update checks: they would reach for the network and pop up notifications.
        (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False})
        )
        args = [
            "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            f"--E31.data_dir={self.data_dir}", "--E31.gpus=0,1", "--E31.stop_grace=2",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.home / 'workspaces'}",
        ]  # fmt: skip
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "JUPYTER_CONFIG_DIR": str(self.home / "config"),
            "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"),
        }
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            launcher_argv("lab", args), stdout=self.log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, cwd=self.root,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited early; see {self.log_path}:\n{self.log_text()[-3000:]}")
            try:
                if requests.get(f"{self.url}/e31/api/gpus", headers=self.headers, timeout=2).ok:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not answer within {timeout}s; see {self.log_path}")

    @property
    def headers(self) -> dict:
        return {"Authorization": f"token {self.token}"}

    def lab_url(self, workspace: str, tree: str | None = None) -> str:
        """A fresh workspace (JupyterLab would reopen earlier tabs otherwise)."""
        path = f"/lab/workspaces/{workspace}" + (f"/tree/{tree}" if tree else "")
        return f"{self.url}{path}?reset&token={self.token}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


# --- pytest fixtures, imported by the browser_*.py test modules ---------------------------------


REPO = Path(__file__).resolve().parents[3]
ARTIFACTS = REPO / "test-artifacts" / "ui"


class _Shared:
    """One instance per process for a session fixture that several test modules import.

    Each module that imports a fixture defines it anew, so pytest sets up a "session" fixture
    once per module; a second Playwright would fail ("Sync API inside the asyncio loop"), a
    second JupyterLab would only cost time. The first module starts it, the last one stops it.
    """

    def __init__(self):
        self.value = None
        self.users = 0

    def acquire(self, start):
        if self.users == 0:
            self.value = start()
        self.users += 1
        return self.value

    def release(self, stop) -> None:
        self.users -= 1
        if self.users == 0:
            stop(self.value)
            self.value = None


_lab, _browser = _Shared(), _Shared()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    def start():
        root = tmp_path_factory.mktemp("ui") / "root"
        root.mkdir()
        return LabProcess(root).start()

    yield _lab.acquire(start)
    _lab.release(LabProcess.stop)


@pytest.fixture(scope="session")
def browser():
    def start():
        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        return playwright, playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

    def stop(value):
        playwright, chromium = value
        chromium.close()
        playwright.stop()

    yield _browser.acquire(start)[1]
    _browser.release(stop)


@pytest.fixture
def context(browser):
    """A fresh browser profile per test (its own localStorage: no announcements seen yet)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    ctx.set_default_timeout(30000)
    yield ctx
    ctx.close()


@pytest.fixture
def api(lab):
    from e31_jupyter.client import E31Client

    client = E31Client(lab.url, lab.token)
    yield client
    stop_active_jobs(client)


def stop_active_jobs(client) -> None:
    """Cancel every queued and running job and wait until they have stopped: the next test
    finds the GPUs free."""
    for job in client.jobs():
        if job["state"] in ("queued", "running"):
            client.cancel(job["id"])
    deadline = time.monotonic() + 30
    while any(j["state"] in ("queued", "running") for j in client.jobs()):
        assert time.monotonic() < deadline, "jobs did not stop after the test"
        time.sleep(0.2)


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
