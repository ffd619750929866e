"""On a shared server nobody sees or touches another user's jobs, except admins."""

from __future__ import annotations

import pytest
import requests
from conftest import wait_state
from support import token_per_user, wait_for

from e31_jupyter.client import E31Client

USERS = {"alice-token": "alice", "bob-token": "bob", "boss-token": "boss"}
# The identities here are not Unix users: every job runs as the server (no isolation on disk).
CONFIG = ('c.E31.admin_users = ["boss"]', 'c.E31.jobs_run_as = "server"')


def _start_users(start_server, tmp_path, *extra_args: str, **kwargs):
    config = token_per_user(tmp_path / "users_config.py", USERS, *CONFIG)
    server = start_server(token="boss-token", extra_args=[f"--config={config}", *extra_args], **kwargs)
    return {name: E31Client(server.url, f"{name}-token") for name in ("alice", "bob", "boss")}, server


@pytest.fixture
def users(start_server, tmp_path):
    return _start_users(start_server, tmp_path)


def test_a_users_gpus_are_capped_and_the_free_ones_go_to_others_behind_in_line(start_server, tmp_path, gated):
    clients, _ = _start_users(start_server, tmp_path, "--E31.max_gpus_per_user=2", gpus=["0", "1", "2"])
    alice, bob = clients["alice"], clients["bob"]
    for name in ("a1", "a2"):
        wait_state(alice, gated.submit(alice, name, gpus=1)["id"], "running")
    third = gated.submit(alice, "a3", gpus=1)  # first in line, but alice is at her cap
    capped = "alice's jobs already hold 2 GPU(s), and one user's jobs may hold at most 2"
    held = wait_for(lambda: alice.job(third["id"])["held_back"], timeout=10, what="a3 held back with GPU 2 free")
    assert held.startswith(capped)
    bobs = wait_state(bob, gated.submit(bob, "b1", gpus=1)["id"], "running")
    assert bobs["gpus"] == ["2"]
    held = alice.job(third["id"])
    assert held["state"] == "queued" and held["queue_position"] == 1
    gated.open("b1")  # a GPU frees, and still not for alice
    assert wait_state(bob, bobs["id"], "succeeded", "failed")["state"] == "succeeded"
    held = wait_for(lambda: (job := alice.job(third["id"]))["held_back"] and job, timeout=10, what="a3 held back again")
    assert held["state"] == "queued" and held["held_back"].startswith(capped) and bob.gpus()["free"] == 1
    gated.open("a1")
    assert wait_state(alice, third["id"], "running")["state"] == "running"
    for name in ("a2", "a3"):
        gated.open(name)


def test_users_see_only_their_own_jobs(users, gated):
    clients, server = users
    alice, bob, boss = clients["alice"], clients["bob"], clients["boss"]
    job = wait_state(alice, gated.submit(alice, "alices", gpus=1)["id"], "running")
    assert job["owner"] == "alice"
    assert [j["id"] for j in alice.jobs()] == [job["id"]]
    assert bob.jobs() == []
    for path in ("", "/log", "/files", "/notebook", "/report", "/files/devices.txt"):
        r = requests.get(f"{server.url}/e31/api/jobs/{job['id']}{path}",
                         headers={"Authorization": "token bob-token"}, timeout=10)  # fmt: skip
        assert r.status_code == 404, path  # not 403: whether the job exists does not leak
    r = requests.post(f"{server.url}/e31/api/jobs/{job['id']}/cancel",
                      headers={"Authorization": "token bob-token"}, timeout=10)  # fmt: skip
    assert r.status_code == 404
    assert alice.job(job["id"])["state"] == "running"
    pool = bob.gpus()
    assert all(g["job"] is None for g in pool["gpus"])  # bob sees a busy GPU, not whose job
    assert bob.meter()["gpu_seconds"] == 0

    # the admin sees everything and may cancel
    assert [j["id"] for j in boss.jobs()] == [job["id"]]
    boss.cancel(job["id"])
    job = wait_state(alice, job["id"], "cancelled")
    assert job["reason"] == "cancelled by boss"
    assert set(boss.meter()["by_user"]) == {"alice"}
