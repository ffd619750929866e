"""On a shared server nobody sees or touches another user's jobs, except admins."""

from __future__ import annotations

import pytest
import requests
from conftest import wait_state

from e31_jupyter.client import E31Client

IDENTITIES = '''
from jupyter_server.auth.identity import IdentityProvider, User


class TokenPerUser(IdentityProvider):
    """A stand-in for JupyterHub's provider: each token names a different user."""

    users = {"alice-token": "alice", "bob-token": "bob", "boss-token": "boss"}

    def get_user(self, handler):
        token = handler.request.headers.get("Authorization", "").removeprefix("token ").strip()
        name = self.users.get(token)
        if name is None:
            return None
        handler._token_authenticated = True  # a token, not a cookie: no XSRF form token needed
        return User(username=name)


c.ServerApp.identity_provider_class = TokenPerUser
c.E31.admin_users = ["boss"]
'''


@pytest.fixture
def users(start_server, tmp_path):
    config = tmp_path / "users_config.py"
    config.write_text(IDENTITIES)
    server = start_server(token="boss-token", extra_args=[f"--config={config}"])
    return {name: E31Client(server.url, f"{name}-token") for name in ("alice", "bob", "boss")}, server


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
