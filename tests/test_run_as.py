"""A job runs as its submitter, with an environment that holds no secret of the server's."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import wait_state, write_notebook
from support import token_per_user, why
from traitlets import TraitError
from unix_users import make_user, open_to_users  # noqa: F401 (fixtures)

from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error
from e31_jupyter.execution import accounts
from e31_jupyter.execution.accounts import Account
from e31_jupyter.execution.job_env import SET_PER_JOB, check_configured, job_environment, passes
from e31_jupyter.server.config import E31

# What the job sees: who it runs as, its kernel's environment, and the environment its worker
# was started with (the kernel's parent; /proc shows a process's environment as it began).
WHO = """
import json, os
worker = os.getppid()
with open(f"/proc/{worker}/environ", "rb") as f:
    started_with = dict(item.decode().split("=", 1) for item in f.read().split(b"\\0") if b"=" in item)
with open(f"/proc/{worker}/cmdline", "rb") as f:
    worker_command = f.read().replace(b"\\0", b" ").decode()
seen = {"uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
        "kernel_env": dict(os.environ), "worker_env": started_with, "worker": worker_command}
json.dump(seen, open("who.json", "w"))
"""


def _who(server, job: dict) -> dict:
    return json.loads((server.data_dir / "jobs" / job["id"] / "work" / "who.json").read_text())


# --- the environment, in process ---------------------------------------------------------------


SERVER_ENV = {
    "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OPENBLAS_CORETYPE": "Haswell",
    "JUPYTER_PATH": "/srv/jupyter", "JUPYTER_CONFIG_DIR": "/home/server/.jupyter", "IPYTHONDIR": "/x",
    "E31_TOKEN": "t", "E31_URL": "http://localhost:8888", "JPY_PARENT_PID": "1", "JUPYTERHUB_API_TOKEN": "h",
    "AWS_SECRET_ACCESS_KEY": "s", "DB_PASSWORD": "p", "E31_TEST_SECRET": "x", "HOME": "/home/server",
    "SHARED_CACHE": "/cache", "LC_SECRET": "x",
}  # fmt: skip
SERVER = Account("server", 1000, 1000, (1000,), "/home/server")
ALICE = Account("alice", 1001, 1001, (1001, 27), "/home/alice")


def test_a_job_gets_the_allowlist_and_its_own_variables_and_never_a_secret():
    env = job_environment(
        ALICE, "j-1", {"CUDA_VISIBLE_DEVICES": "1"}, ["SHARED_CACHE", "WANDB_MODE=offline", "MY_TOKEN"],
        SERVER, SERVER_ENV,
    )  # fmt: skip
    assert env == {
        "PATH": "/usr/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "OPENBLAS_CORETYPE": "Haswell",
        "JUPYTER_PATH": "/srv/jupyter", "SHARED_CACHE": "/cache", "WANDB_MODE": "offline",
        "HOME": "/home/alice", "USER": "alice", "LOGNAME": "alice", "CUDA_VISIBLE_DEVICES": "1", "E31_JOB_ID": "j-1",
    }  # fmt: skip
    # The server's own Jupyter folders only for a job run as the server's account.
    own = job_environment(SERVER, "j-2", {}, [], SERVER, SERVER_ENV)
    assert own["JUPYTER_CONFIG_DIR"] == "/home/server/.jupyter" and own["IPYTHONDIR"] == "/x"
    assert "E31_TOKEN" not in own and "E31_URL" not in own
    # In a container, paths of this machine mean nothing.
    contained = job_environment(ALICE, "j-3", {}, [], None, SERVER_ENV, on_host=False)
    assert "PATH" not in contained and "JUPYTER_PATH" not in contained and contained["LANG"] == "C.UTF-8"


@pytest.mark.parametrize(
    "name", ["E31_TOKEN", "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JPY_PARENT_PID", "AWS_SECRET_ACCESS_KEY",
             "DB_Password", "E31_URL", "CUDA_VISIBLE_DEVICES", "HOME", "not a name"],
)  # fmt: skip
def test_credentials_and_what_e31_sets_cannot_be_configured_for_jobs(name):
    with pytest.raises(ValueError, match=r"c\.E31\.job_env: .* cannot be given to jobs"):
        check_configured([f"{name}=x"])
    with pytest.raises((TraitError, ValueError), match=r"cannot be given to jobs: .*Remove it from c\.E31\.job_env"):
        E31(job_env=["SHARED_CACHE", name])
    assert not passes(name)
    assert E31(job_env=["SHARED_CACHE", "WANDB_MODE=offline"]).job_env == ["SHARED_CACHE", "WANDB_MODE=offline"]


def test_who_a_job_runs_as_follows_jobs_run_as(monkeypatch):
    me = accounts.current()
    assert accounts.runs_as(me.name, "submitter") == me  # single-user: the server's own account
    assert accounts.runs_as("someone-else", "server") == me
    # Not root: it can start nobody else's processes, so it runs all as itself (a JupyterHub
    # single-user server, where the Hub names the user but the server runs as jovyan, say).
    monkeypatch.setattr(accounts, "can_switch_user", lambda: False)
    assert accounts.runs_as("someone-else", "submitter") == me
    monkeypatch.setattr(accounts, "can_switch_user", lambda: True)
    with pytest.raises(
        E31Error, match=r"^'no-such-user-e31' is not a Unix account on this machine.*c\.E31\.jobs_run_as"
    ):
        accounts.runs_as("no-such-user-e31", "submitter")


# --- a real job ---------------------------------------------------------------------------------


def test_a_jobs_environment_holds_no_token_nor_any_variable_the_server_does_not_pass_on(start_server, tmp_path):
    config = tmp_path / "env_config.py"
    config.write_text('c.E31.job_env = ["HOST_MARKER", "GIVEN_MARKER=given"]\n')
    server = start_server(
        extra_args=[f"--config={config}"],
        env={"E31_TEST_SECRET": "x", "HOST_MARKER": "from-server", "UNLISTED_MARKER": "y", "LC_E31_TEST": "C"},
    )
    client = E31Client(server.url, server.token)
    job = client.submit(path=str(write_notebook(tmp_path / "who.ipynb", WHO)))
    assert wait_state(client, job["id"], "succeeded", "failed")["state"] == "succeeded"
    seen = _who(server, job)
    assert "e31_jupyter.execution.worker" in seen["worker"]
    for env in (seen["kernel_env"], seen["worker_env"]):
        assert not {"E31_TOKEN", "E31_URL", "E31_TEST_SECRET", "UNLISTED_MARKER"} & set(env)
        assert not [name for name in env if "TOKEN" in name or "SECRET" in name]
        assert env["HOST_MARKER"] == "from-server" and env["GIVEN_MARKER"] == "given" and env["LC_E31_TEST"] == "C"
        assert env["E31_JOB_ID"] == job["id"]
    configured = {"HOST_MARKER", "GIVEN_MARKER"}
    unlisted = [n for n in seen["worker_env"] if not (passes(n) or n in SET_PER_JOB or n in configured)]
    assert unlisted == []  # the worker began with the allowlist, the job's own variables, and nothing else
    me = accounts.current()
    assert (seen["uid"], seen["worker_env"]["HOME"], seen["worker_env"]["USER"]) == (me.uid, me.home, me.name)


# --- as other Unix users (root) -----------------------------------------------------------------


def _start_as_root_for(start_server, tmp_path, open_to_users, users: dict[str, str], *extra: str):
    """A root server whose tokens name ``users`` (token: user name); its data directory and the
    folders above it enterable by the users' jobs."""
    users = {**users, "admin-token": accounts.current().name}  # the test's own look at the server
    config = token_per_user(tmp_path / "identity_config.py", users, *extra)
    open_to_users(tmp_path)
    server = start_server(token="admin-token", extra_args=[f"--config={config}"])
    if "server" not in "".join(extra):  # jobs run as their users: they may enter, not list
        for folder in (server.data_dir, server.data_dir / "jobs"):
            assert stat.S_IMODE(folder.stat().st_mode) == 0o711, folder
    return server


def test_a_users_job_runs_as_that_user_in_a_folder_only_they_can_open(make_user, open_to_users, start_server, tmp_path):
    user = make_user("e31run")
    server = _start_as_root_for(
        start_server, tmp_path, open_to_users, {"user-token": user.name, "ghost-token": "ghost"}
    )
    notebook = write_notebook(tmp_path / "who.ipynb", WHO)
    client = E31Client(server.url, "user-token")
    job = client.submit(path=str(notebook))
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", why(server.data_dir, done)
    seen = _who(server, job)
    assert (seen["uid"], seen["gid"]) == (user.uid, user.gid)
    assert seen["groups"] == sorted(user.groups)
    env = seen["worker_env"]
    assert (env["HOME"], env["USER"], env["LOGNAME"]) == (user.home, user.name, user.name)
    assert not [name for name in env if "TOKEN" in name or name.startswith("JUPYTER_") and name != "JUPYTER_PATH"]
    folder = (server.data_dir / "jobs" / job["id"]).stat()
    assert folder.st_uid == user.uid and stat.S_IMODE(folder.st_mode) == 0o700
    for dirpath, dirnames, filenames in os.walk(server.data_dir / "jobs" / job["id"]):
        for name in dirnames + filenames:
            assert os.lstat(Path(dirpath, name)).st_uid == user.uid, Path(dirpath, name)

    ghost = E31Client(server.url, "ghost-token")
    failed = wait_state(ghost, ghost.submit(path=str(notebook))["id"], "failed", "succeeded")
    assert failed["reason"].startswith(
        "could not start: 'ghost' is not a Unix account on this machine, and jobs run as their submitter "
        '(c.E31.jobs_run_as = "submitter").'
    )
    assert 'c.E31.jobs_run_as = "server"' in failed["reason"]


def test_with_jobs_run_as_server_a_users_job_runs_as_the_server(make_user, open_to_users, start_server, tmp_path):
    user = make_user("e31srv")
    server = _start_as_root_for(
        start_server, tmp_path, open_to_users, {"user-token": user.name}, 'c.E31.jobs_run_as = "server"'
    )
    client = E31Client(server.url, "user-token")
    job = client.submit(path=str(write_notebook(tmp_path / "who.ipynb", WHO)))
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", why(server.data_dir, done)
    assert _who(server, job)["uid"] == 0
    assert (server.data_dir / "jobs" / job["id"]).stat().st_uid == 0
