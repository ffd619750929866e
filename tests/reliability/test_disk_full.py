"""The data directory's disk fills up during a job (a small filesystem made by the test)."""

from __future__ import annotations

import os
import subprocess

import pytest
import requests
from support import cannot_run_here, wait_state, write_notebook

from e31_jupyter.client import E31Client


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MB filesystem (tmpfs; mounting needs root, as in CI)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        cannot_run_here("mounting a small filesystem needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount_point)], check=True)
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_fails_that_job_clearly_and_harms_nothing_else(start_server, small_disk, tmp_path):
    """Invariant: the job that fills the disk fails with a reason that says so; earlier jobs,
    their files and the store are intact; the server keeps answering, and says why it cannot
    take new work."""
    server = start_server(data_dir=small_disk / "data")
    client = E31Client(server.url, server.token)
    small = write_notebook(tmp_path / "small.ipynb", "open('result.txt', 'w').write('kept')")
    done = wait_state(client, client.submit(path=str(small))["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]

    filler = write_notebook(
        tmp_path / "filler.ipynb",
        "chunk = b'0' * (1 << 20)\nwith open('fill.bin', 'wb') as f:\n    for _ in range(200):\n        f.write(chunk)",
    )
    full = wait_state(client, client.submit(path=str(filler), gpus=1)["id"], "failed", "succeeded", timeout=120)
    assert full["state"] == "failed"
    assert full["reason"].startswith("disk full"), full["reason"]
    assert client.gpus()["free"] == 2

    assert client.job(done["id"])["state"] == "succeeded"
    assert client.download(done["id"], "result.txt") == b"kept"
    assert {j["id"] for j in client.jobs()} == {done["id"], full["id"]}
    headers = {"Authorization": f"token {server.token}"}
    more = requests.post(f"{server.url}/e31/api/jobs", json={"path": str(small)}, headers=headers, timeout=30)
    if more.status_code != 201:  # no room left to stage it: a clear refusal, not a crash
        assert more.status_code == 507 and "free some space" in more.json()["message"], more.text
