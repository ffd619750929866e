"""Deleting an ended job's files, against a real server: the space comes back, the record, its
history and the GPU-hours stay, and whatever read the files says they are gone."""

from __future__ import annotations

import pytest
from conftest import wait_for, wait_state, write_notebook
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error


def test_an_ended_jobs_files_are_deleted_and_its_record_and_gpu_hours_stay(server, client, tmp_path):
    (tmp_path / "rows.csv").write_text("a\n" * 1000)
    nb = write_notebook(tmp_path / "writer.ipynb", "open('out.txt', 'w').write('x' * 5000)\nprint('done')")
    job = wait_state(
        client, client.submit(path=str(nb), gpus=1, data=[str(tmp_path / "rows.csv")])["id"], "succeeded", "failed"
    )
    assert job["state"] == "succeeded", job["reason"]
    folder = server.data_dir / "jobs" / job["id"]
    assert (folder / "work" / "out.txt").exists() and (folder / "work" / "rows.csv").exists()
    size = sum(f.lstat().st_size for f in folder.rglob("*") if not f.is_dir())
    charged = client.meter()["gpu_hours"]

    deleted = client.delete_files(job["id"])
    assert not folder.exists()
    assert deleted["files_deleted"]["bytes"] == size and deleted["files_deleted"]["by"] == job["owner"]
    assert (deleted["state"], deleted["reason"], deleted["meter"]) == (job["state"], job["reason"], job["meter"])
    assert client.meter()["gpu_hours"] == charged > 0
    last = client.job(job["id"])["transitions"][-1]
    assert (last["from"], last["to"]) == ("succeeded", "succeeded") and last["reason"].startswith(
        f"files deleted by {job['owner']} ("
    )

    reads = {
        "notebook": client.notebook, "report": client.report, "log": client.log_tail, "values": client.values,
        "a file": lambda job_id: client.download(job_id, "out.txt"), "resubmit": client.resubmit,
    }  # fmt: skip
    for what, read in reads.items():
        with pytest.raises(
            E31Error, match=f"Job {job['id']}'s files were deleted on .* by {job['owner']}: "
        ) as refused:
            read(job["id"])
        assert refused.value.status == 410, what
        assert "Its record and GPU-hours remain" in refused.value.message
    again = client.delete_files(job["id"])  # nothing more to do: the same record, no warning
    assert again["files_deleted"] == deleted["files_deleted"] and again["warnings"] == []


def test_a_queued_or_running_jobs_files_are_in_use_and_stay(client, gated):
    running = wait_state(client, gated.submit(client, "running", gpus=1)["id"], "running")
    queued = gated.submit(client, "queued", gpus=2)
    for job in (running, queued):
        with pytest.raises(
            E31Error, match=f"Job {job['id']} is {job['state']}, and its files are in use. Cancel it first"
        ) as refused:
            client.delete_files(job["id"])
        assert refused.value.status == 409
    gated.open("running")
    gated.open("queued")
    ended = wait_state(client, queued["id"], "succeeded", "failed")
    assert ended["state"] == "succeeded", ended["reason"]
    assert client.notebook(queued["id"])["cells"]  # nothing was deleted


def test_with_delete_files_after_the_files_of_jobs_that_ended_long_enough_ago_go_by_themselves(
    start_server, tmp_path, gated
):
    server = start_server(extra_args=["--E31.delete_files_after=3s"])
    client = E31Client(server.url, server.token)
    running = wait_state(client, gated.submit(client, "running", gpus=1)["id"], "running")
    nb = write_notebook(tmp_path / "quick.ipynb", "print('ran')")
    ended = wait_state(client, client.submit(path=str(nb))["id"], "succeeded", "failed")
    assert ended["state"] == "succeeded" and client.notebook(ended["id"])["cells"]  # kept at first
    gone = wait_for(lambda: client.job(ended["id"])["files_deleted"], timeout=30, what="the files to be deleted")
    assert gone["by"] == "e31 (c.E31.delete_files_after = 3s)" and gone["bytes"] > 0
    folder = server.data_dir / "jobs" / ended["id"]  # recorded first, then deleted (job_files.py)
    wait_for(lambda: not folder.exists(), timeout=30, what=f"{folder} to be deleted")
    assert client.job(ended["id"])["transitions"][-1]["reason"].startswith(
        "files deleted by e31 (c.E31.delete_files_after = 3s) ("
    )
    assert client.job(running["id"])["files_deleted"] is None  # a running job's are in use
    assert (server.data_dir / "jobs" / running["id"]).exists()
    gated.open("running")
