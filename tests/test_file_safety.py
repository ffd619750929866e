"""Nothing is unpickled that another user could have written, the server serves nothing outside a
job's folder, the data directory is private, and data a caller could not read stays out."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
import requests
from conftest import wait_state, write_notebook
from support import token_per_user

from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.notebook import values
from e31_jupyter.service import datadir
from e31_jupyter.service.queue import _ensure_writable

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown to another user, and switch to one")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def saved(tmp_path) -> Path:
    folder = tmp_path / "values"
    values.save({"answer": 42, "rows": [1, 2, 3]}, folder)
    return folder


@pytest.fixture
def umask_002():
    """The umask of a shared machine: what a file gets by default is group-writable."""
    old = os.umask(0o002)
    yield
    os.umask(old)


@pytest.fixture
def open_folder():
    """A folder under /tmp that every user may enter (pytest's own are 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="e31-open-"))
    folder.chmod(0o755)
    yield folder
    for path in sorted(folder.rglob("*"), reverse=True):
        path.unlink() if not path.is_dir() or path.is_symlink() else path.rmdir()
    folder.rmdir()


# --- loading values -------------------------------------------------------------------------------


def test_values_saved_under_a_shared_umask_are_private_and_load(tmp_path, umask_002):
    folder = tmp_path / "values"
    values.save({"answer": 42}, folder)
    assert _mode(folder) == 0o700 and {_mode(p) for p in folder.iterdir()} == {0o600}
    assert values.load(folder) == {"answer": 42}


@as_root
def test_a_value_file_another_user_owns_is_refused_by_load_and_restore(saved):
    os.chown(saved / "answer.pkl", NOBODY, NOBODY)
    with pytest.raises(values.NotTrusted, match=r"answer\.pkl: the file belongs to nobody"):
        values.load(saved)
    loaded, failed, _ = values.restore(saved)
    assert loaded == {"rows": [1, 2, 3]}  # the others still come
    assert "not loaded" in failed["answer"] and "belongs to nobody" in failed["answer"]


@as_root
def test_values_in_a_folder_another_user_owns_are_refused(saved):
    os.chown(saved, NOBODY, NOBODY)
    for load in (values.load, values.restore, values.read_index):
        with pytest.raises(values.NotTrusted, match="the folder belongs to nobody"):
            load(saved)


@pytest.mark.parametrize("writable", [0o770, 0o707])
def test_a_values_folder_others_may_write_is_refused(saved, writable):
    saved.chmod(writable)
    with pytest.raises(values.NotTrusted, match=r"the folder is writable by .* chmod go-w"):
        values.load(saved)
    with pytest.raises(values.NotTrusted):
        values.restore(saved)


def test_a_group_writable_value_file_is_refused(saved):
    (saved / "answer.pkl").chmod(0o660)
    with pytest.raises(values.NotTrusted, match=r"answer\.pkl: the file is writable by its group"):
        values.load(saved)


def test_a_value_file_that_is_a_link_is_refused(saved, tmp_path):
    (saved / "answer.pkl").rename(tmp_path / "elsewhere.pkl")
    (saved / "answer.pkl").symlink_to(tmp_path / "elsewhere.pkl")
    with pytest.raises(values.NotTrusted, match=r"answer\.pkl: it is a link"):
        values.load(saved)
    assert "it is a link" in values.restore(saved)[1]["answer"]


def test_an_index_naming_a_file_out_of_the_folder_is_refused(saved, tmp_path):
    values.save({"x": 1}, tmp_path / "other")
    (saved / "values.json").write_text('{"x": {"type": "int", "size": 1, "files": ["../other/x.pkl"]}}')
    with pytest.raises(values.NotTrusted, match="never a path out of it"):
        values.load(saved)


# --- what the server serves from a job's folder ---------------------------------------------------

LINKING_JOB = """
import json, os
os.makedirs("../values", exist_ok=True)
os.symlink(SECRET, "../values/x.pkl")
with open("../values/values.json", "w") as f:
    json.dump({"x": {"type": "int", "size": 1, "files": ["x.pkl"]}}, f)
os.remove("../job.log")
os.symlink(SECRET, "../job.log")
"""


def test_a_job_that_links_its_log_and_values_to_a_host_file_gets_neither_served(server, client, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("HOST SECRET")
    nb = write_notebook(tmp_path / "link.ipynb", LINKING_JOB, parameters="SECRET = ''")
    job = wait_state(
        client, client.submit(path=str(nb), parameters={"SECRET": str(secret)})["id"], "succeeded", "failed"
    )
    jobdir = server.data_dir / "jobs" / job["id"]
    assert (jobdir / "job.log").is_symlink() and (jobdir / "values" / "x.pkl").is_symlink()
    headers = {"Authorization": f"token {server.token}"}
    for path in ("log", "log?tail=5", "values/x.pkl"):
        answer = requests.get(f"{server.url}/e31/api/jobs/{job['id']}/{path}", headers=headers, timeout=30)
        assert answer.status_code == 409, path
        assert "HOST SECRET" not in answer.text
        assert "is a link; e31 serves only files the job wrote in its folder" in answer.json()["message"]
    with pytest.raises(E31Error, match="is a link") as error:
        client.save_values(job["id"], tmp_path / "collected")
    assert error.value.status == 409


def test_a_link_in_a_middle_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "manifest.json").write_text('{"files": []}')
    job = JobDir(tmp_path / "job")
    job.path.mkdir()
    (job.path / "work").symlink_to(outside)
    with pytest.raises(E31Error, match="work of job job is a link"):
        job.open_file(job.work / "manifest.json")
    assert job.read_json(job.work / "manifest.json", "not read") == "not read"  # as if the job wrote none
    with pytest.raises(E31Error, match="not in the folder of job"):
        job.open_file(job.path / ".." / "outside" / "manifest.json")
    assert job.read_json(job.manifest, "missing") == "missing"


def test_values_collected_under_a_shared_umask_load(server, client, tmp_path, umask_002):
    nb = write_notebook(
        tmp_path / "v.ipynb", "from e31_jupyter import values\nvalues.save_outputs({'answer': 42}, ['answer'])"
    )
    job = wait_state(client, client.submit(path=str(nb))["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", client.log_tail(job["id"])
    folder = client.collect(job["id"], tmp_path / "collected") / "values"
    assert _mode(folder) == 0o700 and {_mode(p) for p in folder.iterdir()} == {0o600}
    assert values.load(folder) == {"answer": 42}


# --- the data directory ---------------------------------------------------------------------------


def test_a_fresh_server_keeps_its_data_private_under_a_shared_umask(start_server, tmp_path, umask_002):
    server = start_server()  # on tmp_path/data, which it makes
    client = E31Client(server.url, server.token)
    job = wait_state(client, client.submit(path=str(write_notebook(tmp_path / "x.ipynb", "x = 1")))["id"], "succeeded")
    data = server.data_dir
    for folder in (data, data / "jobs", data / "inbox", data / "jobs" / job["id"]):
        assert _mode(folder) == 0o700, folder
    assert _mode(data / "e31.sqlite") == 0o600
    assert {_mode(p) for p in data.glob("e31.sqlite*")} == {0o600}  # -wal and -shm follow it


def test_an_own_data_dir_open_to_others_is_made_private(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    _ensure_writable(data)
    assert _mode(data) == 0o700


@as_root
def test_a_data_dir_of_another_user_is_refused_and_says_what_to_do(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, NOBODY, NOBODY)
    with pytest.raises(E31Error, match="belongs to nobody, and this server runs as root") as error:
        _ensure_writable(data)
    assert "e31 serve --system" in error.value.message and "c.E31.data_dir" in error.value.message
    assert error.value.status == 503
    with pytest.raises(E31Error, match="belongs to nobody"):
        datadir.prepare(data)


@as_root
def test_a_manifest_the_server_may_not_read_is_a_clear_503_not_lost(open_folder):
    job = JobDir(open_folder / "job")
    job.path.mkdir(mode=0o755)
    job.manifest.write_text('{"status": "succeeded"}')
    job.manifest.chmod(0o600)
    os.seteuid(NOBODY)
    try:
        with pytest.raises(E31Error) as error:
            job.read_json(job.manifest)
    finally:
        os.seteuid(0)
    assert error.value.status == 503
    assert str(job.manifest) in error.value.message and "owned by root" in error.value.message
    assert "running as nobody" in error.value.message


# --- data a caller could not read ------------------------------------------------------------------

# nobody is a Unix account here; hubuser is not.
USERS = {"nobody-token": "nobody", "hubuser-token": "hubuser"}


@pytest.fixture
def callers(start_server, tmp_path):
    config = token_per_user(tmp_path / "users_config.py", USERS)
    server = start_server(token="nobody-token", extra_args=[f"--config={config}"])
    return {name: E31Client(server.url, f"{name}-token") for name in ("nobody", "hubuser")}


@as_root
def test_an_absolute_data_path_the_caller_could_not_read_is_refused(callers, tmp_path, open_folder):
    nb = str(write_notebook(tmp_path / "x.ipynb", "x = 1"))
    secret = open_folder / "secret.txt"
    secret.write_text("root's")
    secret.chmod(0o600)
    (open_folder / "link.txt").symlink_to(secret)
    hidden = open_folder / "folder"
    hidden.mkdir(mode=0o755)
    (hidden / "inside.txt").write_text("root's too")
    (hidden / "inside.txt").chmod(0o600)
    nobody = callers["nobody"]
    for data, refused in ((secret, secret), (open_folder / "link.txt", secret), (hidden, hidden / "inside.txt")):
        with pytest.raises(InvalidRequest, match=f"nobody may not read '{refused}'"):
            nobody.check(path=nb, data=[str(data)])
    readable = open_folder / "public.txt"
    readable.write_text("anyone's")
    readable.chmod(0o644)
    assert nobody.check(path=nb, data=[str(readable)])  # what nobody could read goes in


def test_a_caller_without_a_unix_account_names_only_paths_under_the_root_folder(callers, tmp_path):
    nb = str(write_notebook(tmp_path / "x.ipynb", "x = 1"))
    (tmp_path / "mine.txt").write_text("in the root folder")
    hubuser = callers["hubuser"]
    with pytest.raises(InvalidRequest, match="only paths under the server's root folder"):
        hubuser.check(path=nb, data=["/etc/hostname"])
    (tmp_path / "out").symlink_to("/etc")
    with pytest.raises(InvalidRequest, match="only paths under the server's root folder"):
        hubuser.check(path=nb, data=[str(tmp_path / "out" / "hostname")])
    assert hubuser.check(path=nb, data=[str(tmp_path / "mine.txt")])
