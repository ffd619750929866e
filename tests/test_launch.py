"""The two ways to run e31 (JupyterLab with the queue, and the headless queue) and its config."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import requests
from conftest import wait_for
from server_process import ServerProcess, free_port

from e31_jupyter.client import E31Client


def _get(url: str, token: str) -> int | None:
    try:
        return requests.get(url, headers={"Authorization": f"token {token}"}, timeout=5).status_code
    except requests.ConnectionError:
        return None


def _start_lab(port: int, token: str, data_dir, root_dir) -> subprocess.Popen:
    """``e31 lab`` on ``port``, its log in ``root_dir/lab.log``."""
    command = [
        sys.executable, "-m", "e31_jupyter.cli", "lab", "--no-browser", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--E31.data_dir={data_dir}", f"--ServerApp.root_dir={root_dir}",
    ]  # fmt: skip
    with open(root_dir / "lab.log", "wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_e31_lab_serves_jupyterlab_with_the_queue(tmp_path):
    port, token = free_port(), "lab-token"
    lab = _start_lab(port, token, tmp_path / "data", tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _get(f"{base}/e31/api/gpus", token) == 200, timeout=180, what="e31 lab")
        assert _get(f"{base}/lab", token) == 200
        assert (tmp_path / "data" / "e31.sqlite").exists()
    finally:
        lab.terminate()
        lab.wait(20)


def test_e31_serve_runs_only_the_queue(server):
    assert _get(f"{server.url}/e31/api/gpus", server.token) == 200
    assert _get(f"{server.url}/lab", server.token) == 404


@pytest.mark.slow
def test_configuration_file_sets_the_inventory_and_rate(tmp_path):
    config = tmp_path / "e31_config.py"
    config.write_text(
        'c.E31.gpus = ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]\n'
        "c.E31.gpu_hour_rate = 2.5\n"
        'c.E31.currency = "EUR"\n'
        'c.E31.default_max_runtime = "90m"\n'
    )
    server = ServerProcess(tmp_path / "data", gpus=None, extra_args=[f"--config={config}"]).start()
    try:
        client = E31Client(server.url, server.token)
        pool = client.gpus()
        assert [g["id"] for g in pool["gpus"]] == ["GPU-aaaa", "GPU-bbbb", "GPU-cccc"]
        assert pool["source"] == "configured"
        assert client.meter()["currency"] == "EUR"
        nb = tmp_path / "x.ipynb"
        nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
        job = client.submit(path=str(nb), gpus=3)
        assert job["request"]["max_runtime_s"] == 5400
    finally:
        server.stop()


def test_without_a_driver_the_inventory_is_empty(start_server, tmp_path):
    if os.path.exists("/dev/nvidiactl"):
        return  # a machine with an NVIDIA driver discovers its GPUs instead
    server = start_server(gpus=None)
    pool = E31Client(server.url, server.token).gpus()
    assert pool == {**pool, "gpus": [], "total": 0, "source": "nvml"}


@pytest.mark.slow
def test_an_unwritable_data_directory_is_a_clear_start_up_error(tmp_path):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    server = ServerProcess(blocker / "data", gpus=["0"], root_dir=tmp_path, log_path=tmp_path / "server.log")
    try:
        with pytest.raises(RuntimeError, match="exited early"):
            server.start(timeout=180)
        assert server.proc.returncode == 1
        assert "Traceback" not in server.log_text()
        assert "is not writable" in server.log_text()
        assert "c.E31.data_dir" in server.log_text()
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize(
    "setting, message",
    [
        ("--E31.long_jobs_share=1.5", "c.E31.long_jobs_share is 1.5, but it is a share of the GPUs, from 0 to 1"),
        ("--E31.default_max_runtime=abc", "c.E31.default_max_runtime: cannot read 'abc' as a duration"),
        ("--E31.delete_files_after=soon", "c.E31.delete_files_after: cannot read 'soon' as a duration"),
        ("--E31.gpu_hour_rate=-1", "c.E31.gpu_hour_rate must be 0 or more."),
        ("--E31.max_gpus_per_user=-1", "c.E31.max_gpus_per_user is -1: give the most GPUs one user's jobs may hold"),
        ("--E31.gpus=0,gpu1", "c.E31.gpus: 'gpu1' is not a GPU id. Give device indices, GPU-... UUIDs or MIG-... ids"),
        ('--E31.gpus=["0", "1"', "c.E31.gpus: '[\"0\"' is not a GPU id."),
    ],
)
def test_a_bad_setting_is_a_clear_start_up_error(tmp_path, setting, message):
    server = ServerProcess(tmp_path / "data", gpus=["0"], root_dir=tmp_path, extra_args=[setting])
    try:
        with pytest.raises(RuntimeError, match="exited early"):
            server.start(timeout=180)
        assert server.proc.returncode == 1
        assert message in server.log_text()
        assert "Traceback" not in server.log_text()
    finally:
        server.stop()


@pytest.mark.slow
def test_jupyterlab_whose_queue_cannot_start_answers_503_with_why(tmp_path):
    """JupyterLab has other work than the queue: it keeps serving, and every e31 call says why
    the queue is not there (never a 500, never a 404 that looks like a missing job)."""
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    port, token = free_port(), "lab-token"
    lab = _start_lab(port, token, blocker / "data", tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _get(f"{base}/lab", token) == 200, timeout=180, what="e31 lab")
        for method, path in (("GET", "jobs"), ("POST", "jobs"), ("GET", "jobs/x/log")):
            answer = requests.request(method, f"{base}/e31/api/{path}", headers={"Authorization": f"token {token}"},
                                      json={}, timeout=10)  # fmt: skip
            assert answer.status_code == 503, (method, path, answer.text)
            message = answer.json()["message"]
            assert message.startswith("The e31 queue of this server did not start: ")
            assert "is not writable" in message and "c.E31.data_dir" in message
    finally:
        lab.terminate()
        lab.wait(20)


@pytest.mark.parametrize("given", ['["0", "1"]', "0,1", "[0, 1]"])
def test_gpus_may_be_given_as_a_list_or_with_commas(given):
    from e31_jupyter.server.config import E31

    assert E31(gpus=[given]).gpus == ["0", "1"]
    assert E31(gpus=["GPU-0a1b-2c3d", "MIG-GPU-0a1b/1/0"]).gpus == ["GPU-0a1b-2c3d", "MIG-GPU-0a1b/1/0"]


@pytest.mark.parametrize(
    "argument, devices",
    [
        ("0,1", ["0", "1"]),
        ("GPU-e2a52934-ff37-0fcb-2721-e41ac72f245f", ["GPU-e2a52934-ff37-0fcb-2721-e41ac72f245f"]),
        ("GPU-0a1b,MIG-GPU-0a1b/1/0", ["GPU-0a1b", "MIG-GPU-0a1b/1/0"]),
        ('["GPU-0a1b", "2"]', ["GPU-0a1b", "2"]),
    ],
)
def test_gpus_on_the_command_line_reach_the_queue_as_given(argument, devices):
    """The server reads its command line before it knows E31 (an extension's class): a UUID
    was once read as no setting at all, and the queue handed out every GPU NVML found."""
    from jupyter_server.serverapp import ServerApp

    from e31_jupyter.server.config import E31

    app = ServerApp()
    app.parse_command_line([f"--E31.gpus={argument}"])
    assert E31(config=app.config).gpus == devices
