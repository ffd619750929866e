"""On a machine with an NVIDIA GPU: what a job does with its GPU, read through NVML by a real
server, with real CUDA work (cupy or torch, whichever is installed). Skipped elsewhere, saying
why; tests/test_gpu_watch.py and tests/test_gpu_use.py show the same logic on scripted readings.

Run on a GPU machine: ``python -m pytest -n 0 -p no:cacheprovider tests/test_real_gpus.py -v``.
Last run: 2026-12-04 on an NVIDIA H200 (driver 580.159.04, cupy 14.2): 4 passed in 167 s."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest
from support import wait_for, wait_state, write_notebook

from e31_jupyter.client import E31Client
from e31_jupyter.execution import nvml


def _why_not_here() -> str:
    if not nvml.device_ids():
        return "needs an NVIDIA GPU and its driver (NVML finds none here)"
    if not _cuda_library():
        return "needs cupy or torch with CUDA to make real GPU work"
    return ""


def _cuda_library() -> str:
    return next((name for name in ("cupy", "torch") if importlib.util.find_spec(name)), "")


pytestmark = pytest.mark.skipif(bool(_why_not_here()), reason=_why_not_here() or "runs here")

# A loop of matrix multiplies for SECONDS, in whichever CUDA library there is.
WORK = {
    "cupy": (
        "import time, cupy as cp\n"
        "a = cp.random.rand(8192, 8192, dtype=cp.float32)\n"
        "end = time.time() + {seconds}\n"
        "while time.time() < end:\n"
        "    (a @ a).sum().item()\n"
    ),
    "torch": (
        "import time, torch\n"
        "a = torch.rand(8192, 8192, device='cuda')\n"
        "end = time.time() + {seconds}\n"
        "while time.time() < end:\n"
        "    (a @ a).sum().item()\n"
    ),
}


def _first_gpu() -> tuple[str, str]:
    """The first GPU's index and UUID."""
    import pynvml

    pynvml.nvmlInit()
    try:
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
        return "0", uuid.decode() if isinstance(uuid, bytes) else uuid
    finally:
        pynvml.nvmlShutdown()


@pytest.fixture
def gpu_server(start_server):
    """A server handing out the first GPU by its UUID, reading it every second, warning of a GPU
    idle for 10 s."""
    _, uuid = _first_gpu()
    server = start_server(
        gpus=[uuid],
        extra_args=["--E31.gpu_sample_s=1", "--E31.idle_gpu_after=10s", "--E31.idle_gpu_threshold=5"],
    )
    return server, E31Client(server.url, server.token), uuid


def test_a_cuda_job_reports_its_utilisation_and_memory_and_sees_its_gpu_by_uuid(gpu_server, tmp_path):
    server, client, uuid = gpu_server
    notebook = write_notebook(
        tmp_path / "work.ipynb",
        "import os\nopen('visible.txt', 'w').write(os.environ['CUDA_VISIBLE_DEVICES'])",
        WORK[_cuda_library()].format(seconds=20),
    )
    job = client.submit(path=str(notebook), gpus=1, max_runtime="10m")
    job = wait_state(client, job["id"], "succeeded", "failed", timeout=300)
    assert job["state"] == "succeeded", job["reason"]
    assert job["gpus"] == [uuid]
    assert client.download(job["id"], "visible.txt").decode() == uuid
    use = job["gpu_use"]
    print("gpu_use:", {k: v for k, v in use.items() if k != "series"}, "points:", len(use["series"]))
    assert use["available"] is True, use["why_absent"]
    assert use["util_peak"] > 50 and use["util_mean"] > 0
    assert use["memory_peak_bytes"] >= 256 << 20  # an 8192x8192 float32 matrix and its product
    assert 0 < use["used_gpu_hours"] <= use["held_gpu_hours"]
    assert use["power_peak_w"] is None or use["power_peak_w"] > 0


def test_a_job_that_sleeps_on_its_gpu_is_warned_that_it_is_idle(gpu_server, tmp_path):
    server, client, _ = gpu_server
    notebook = write_notebook(tmp_path / "sleep.ipynb", "import time\ntime.sleep(30)")
    job = client.submit(path=str(notebook), gpus=1, max_runtime="10m")
    job = wait_state(client, job["id"], "succeeded", "failed", timeout=300)
    assert job["state"] == "succeeded", job["reason"]
    idle = job["gpu_use"]["idle"]
    print("idle:", idle)
    assert idle is not None and "has been below 5% utilisation for 10s" in idle["message"]
    assert "e31: warning: GPU" in client.log_tail(job["id"], 50)


def test_a_gpu_used_outside_the_queue_makes_a_queued_job_wait_until_that_process_ends(gpu_server, tmp_path):
    server, client, uuid = gpu_server
    outside = subprocess.Popen(
        [sys.executable, "-c", WORK[_cuda_library()].format(seconds=25)],
        env={"CUDA_VISIBLE_DEVICES": uuid, "PATH": "/usr/bin:/bin"},
    )
    try:
        pool = wait_for(
            lambda: (p := client.gpus())["gpus"][0]["busy_outside"] and p, timeout=60, what="the GPU busy outside"
        )
        print("pool:", pool)
        assert outside.pid in [p["pid"] for p in pool["gpus"][0]["outside"]]
        notebook = write_notebook(tmp_path / "after.ipynb", "print('ran')")
        job = client.submit(path=str(notebook), gpus=1, max_runtime="10m")
        time.sleep(3)
        waiting = client.job(job["id"])
        print("waiting:", waiting["state"], waiting["held_back"])
        assert waiting["state"] == "queued" and "in use outside the queue" in (waiting["held_back"] or "")
    finally:
        outside.wait(timeout=120)
    job = wait_state(client, job["id"], "succeeded", "failed", timeout=120)
    assert job["state"] == "succeeded", job["reason"]
    assert job["started_at"] is not None


def test_with_release_an_idle_gpu_the_job_holds_no_memory_on_goes_to_the_next_job_and_one_it_holds_memory_on_stays(
    start_server, tmp_path
):
    """``c.E31.idle_gpu_action = 'release'`` on a real GPU: a job that allocated memory and then
    sleeps keeps its GPU (only warned); a job that never touched it gives it back while it still
    runs, and a job waiting for a GPU starts on it."""
    _, uuid = _first_gpu()
    server = start_server(
        gpus=[uuid],
        extra_args=[
            "--E31.gpu_sample_s=1", "--E31.idle_gpu_after=10s", "--E31.idle_gpu_threshold=5",
            "--E31.idle_gpu_action=release",
        ],
    )  # fmt: skip
    client = E31Client(server.url, server.token)
    holds = {
        "cupy": "import time, cupy as cp\nkept = cp.zeros(64 << 20, dtype=cp.float32)\ncp.cuda.Device().synchronize()\ntime.sleep(25)",
        "torch": "import time, torch\nkept = torch.zeros(64 << 20, device='cuda')\ntorch.cuda.synchronize()\ntime.sleep(25)",
    }[_cuda_library()]
    holder = client.submit(path=str(write_notebook(tmp_path / "holds.ipynb", holds)), gpus=1, max_runtime="10m")
    holder = wait_state(client, holder["id"], "succeeded", "failed", timeout=300)
    assert holder["state"] == "succeeded", holder["reason"]
    print("holder:", holder["gpu_use"]["idle"], holder["gpu_use"]["returned"])
    assert holder["gpu_use"]["returned"] == [] and holder["gpus"] == [uuid]
    assert "hold memory on it: kept" in holder["gpu_use"]["idle"]["message"]

    sleeper = client.submit(
        path=str(write_notebook(tmp_path / "sleeps.ipynb", "import time\ntime.sleep(45)")), gpus=1, max_runtime="10m"
    )
    wait_state(client, sleeper["id"], "running", timeout=120)
    waiting = client.submit(
        path=str(write_notebook(tmp_path / "next.ipynb", "print('ran')")), gpus=1, max_runtime="10m"
    )
    after = wait_state(client, waiting["id"], "succeeded", "failed", timeout=120)
    assert after["state"] == "succeeded", after["reason"]
    assert after["gpus"] == [uuid]
    sleeper = client.job(sleeper["id"])
    print("sleeper:", sleeper["state"], sleeper["gpu_use"]["returned"], sleeper["meter"])
    assert sleeper["state"] == "running"  # it gave its GPU back while it still ran
    assert [r["device"] for r in sleeper["gpu_use"]["returned"]] == [uuid] and sleeper["gpus"] == []
    assert any(t["reason"] == f"gave back {uuid}: idle" for t in sleeper["transitions"])
    sleeper = wait_state(client, sleeper["id"], "succeeded", "failed", timeout=120)
    assert sleeper["state"] == "succeeded", sleeper["reason"]
    held = sleeper["gpu_use"]["held_gpu_hours"]
    print("sleeper held GPU-h:", held)
    assert 0 < held < 30 / 3600  # counted until its GPU went back (after some 10 s idle), not for its 45 s
