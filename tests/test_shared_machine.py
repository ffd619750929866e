"""A GPU machine shared by real Unix users: one system scheduler (``e31 serve --system``, root, on
a Unix socket) and each user's own Jupyter server forwarding to it (``c.E31.scheduler_socket``).

Everything here is real: users made with useradd, servers run as them with runuser under the
default umask, jobs started as their submitters. Each test is one of the ways one user could
reach another's work, and shows that it now fails.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests
from server_process import free_port
from support import wait_for, wait_state, why, write_notebook
from unix_users import make_user, open_to_users  # noqa: F401 (fixtures)

from e31_jupyter.client import E31Client, socket_url

# The notebook of a job that tells who it ran as and what it could reach.
WHO = """
import json, os
def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as error:
        return type(error).__name__
json.dump({
    "uid": os.getuid(),
    "environ": dict(os.environ),
    "list_other_job": attempt(lambda: os.listdir(other_job)) if other_job else None,
    "write_other_values": attempt(lambda: open(os.path.join(other_job, "values", "x.pkl"), "wb")) if other_job else None,
}, open("who.json", "w"))
"""
# A gated job: runs until the test opens its gate (a file the job's user can see).
GATED = """
import os, pathlib, time
started = time.time()
while not os.path.exists(gate) and time.time() - started < 120:
    time.sleep(0.05)
"""
# A job that makes its log and a value file links to a file only root may read.
LINKS = """
import os, pathlib
job = pathlib.Path(os.environ["E31_JOB_DIR"])
(job / "job.log").unlink()
os.symlink("/etc/shadow", job / "job.log")
(job / "values").mkdir(exist_ok=True)
os.symlink("/etc/shadow", job / "values" / "secret")
(job / "values" / "values.json").write_text('{"secret": {"type": "str", "size": 1, "files": ["secret"]}}')
"""


class Machine:
    """The shared machine: its folder, the system scheduler's socket and data, the users."""

    def __init__(self, root: Path, users: dict, admin_group: str):
        self.root = root
        self.socket = root / "e31.sock"
        self.data_dir = root / "data"
        self.users = users
        self.admin_group = admin_group
        self.scheduler: subprocess.Popen | None = None
        self.servers: list[subprocess.Popen] = []

    def start_scheduler(self) -> None:
        log = open(self.root / "scheduler.log", "ab")
        self.scheduler = subprocess.Popen(
            [sys.executable, "-m", "e31_jupyter.cli", "serve", "--system", f"--ServerApp.sock={self.socket}",
             f"--E31.data_dir={self.data_dir}", "--E31.gpus=0", f"--E31.admin_group={self.admin_group}",
             "--E31.stop_grace=2"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, "JUPYTER_NO_CONFIG": "1"},
        )  # fmt: skip
        wait_for(self._answers, timeout=180, what=f"the system scheduler (see {self.root / 'scheduler.log'})")

    def _answers(self) -> bool:
        if self.scheduler.poll() is not None:
            raise RuntimeError(f"the system scheduler exited; see {self.root / 'scheduler.log'}")
        return self.socket.exists() and self.direct("root").gpus() is not None

    def direct(self, name: str) -> E31Client:
        """A client on the socket as this test process (root), for checks."""
        assert name == "root"
        return E31Client(socket_url(str(self.socket)))

    def own_server(self, name: str, env: dict | None = None, extra: list[str] = ()) -> E31Client:
        """``name``'s own Jupyter server (run as them, umask 022, root dir their home), forwarding to
        the system scheduler; a client of it with its token."""
        account = self.users[name]
        port, token = free_port(), f"{name}-token"
        environ = {"PATH": os.environ["PATH"], "HOME": account.home, "USER": account.name, "LOGNAME": account.name,
                   "JUPYTER_NO_CONFIG": "1", "PYTHONUNBUFFERED": "1", **(env or {})}  # fmt: skip
        log = open(self.root / f"server-{name}.log", "ab")
        os.chown(self.root / f"server-{name}.log", account.uid, account.gid)
        self.servers.append(subprocess.Popen(
            ["runuser", "-u", account.name, "--", sys.executable, "-m", "e31_jupyter.cli", "serve",
             f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={account.home}", f"--E31.scheduler_socket={self.socket}", *extra],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environ, cwd=account.home,
            umask=0o022,
        ))  # fmt: skip
        client = E31Client(f"http://127.0.0.1:{port}", token)
        wait_for(lambda: _answers(client), timeout=180, what=f"{name}'s server (see {self.root}/server-{name}.log)")
        return client

    def as_user(self, name: str, code: str, env: dict | None = None) -> subprocess.CompletedProcess:
        """Python ``code`` run as ``name`` (umask 022), with the system scheduler's socket in $E31_SOCKET."""
        account = self.users[name]
        env = {"PATH": os.environ["PATH"], "HOME": account.home, "E31_SOCKET": str(self.socket), **(env or {})}
        return subprocess.run(
            ["runuser", "-u", account.name, "--", sys.executable, "-c", code],
            env=env, cwd=account.home, capture_output=True, text=True, timeout=120, umask=0o022,
        )  # fmt: skip

    def notebook(self, name: str, file: str, source: str, parameters: str | None = None) -> Path:
        """A notebook in ``name``'s home, theirs alone (0600)."""
        account = self.users[name]
        path = write_notebook(Path(account.home) / file, source, parameters=parameters)
        os.chown(path, account.uid, account.gid)
        os.chmod(path, 0o600)
        return path

    def stop(self) -> None:
        for process in [*self.servers, self.scheduler]:
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()


def _answers(client: E31Client) -> bool:
    try:
        client.gpus()
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def machine(make_user):
    if shutil.which("runuser") is None:
        pytest.skip("running servers as other users needs runuser (util-linux)")
    users = {name: make_user(name) for name in ("alice", "bob", "boss")}
    group = f"e31admins{os.getpid()}"
    subprocess.run(["groupadd", group], check=True)
    subprocess.run(["usermod", "-aG", group, users["boss"].name], check=True)
    root = Path(tempfile.mkdtemp(prefix="e31-machine-", dir="/tmp"))
    os.chmod(root, 0o755)
    shared = Machine(root, {name: _refreshed(account) for name, account in users.items()}, group)
    try:
        shared.start_scheduler()
        yield shared
    finally:
        shared.stop()
        subprocess.run(["groupdel", group], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _refreshed(account):
    from e31_jupyter.execution import accounts

    return accounts.by_name(account.name)  # with the groups usermod gave it


@pytest.fixture(scope="module")
def servers(machine):
    """alice's and boss's own servers; bob's is started by each test that needs one."""
    return {name: machine.own_server(name) for name in ("alice", "boss")}


def test_the_system_scheduler_owns_its_data_and_each_job_folder_is_its_submitters(machine, servers):
    alice = servers["alice"]
    job = alice.submit(path=str(machine.notebook("alice", "who.ipynb", WHO, "other_job = ''")), outputs=["who.json"])
    done = wait_state(alice, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", why(machine.data_dir, done)
    for path, mode in (
        (machine.data_dir, 0o711),
        (machine.data_dir / "jobs", 0o711),
        (machine.data_dir / "inbox", 0o711),
    ):
        info = path.stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, mode), path
    for name in ("e31.sqlite", "e31.sqlite-wal"):
        info = (machine.data_dir / name).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (0, 0o600), name
    folder = (machine.data_dir / "jobs" / job["id"]).stat()
    assert (folder.st_uid, stat.S_IMODE(folder.st_mode)) == (machine.users["alice"].uid, 0o700)


def test_a_job_runs_as_its_submitter_and_finds_no_token(machine, servers, tmp_path):
    bob = machine.own_server("bob", env={"E31_TOKEN": "bobs-secret-token"})
    notebook = machine.notebook("bob", "who.ipynb", WHO, "other_job = ''")
    job = bob.submit(path=notebook.name, outputs=["who.json"])  # relative to bob's root dir: read by his server
    done = wait_state(bob, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", why(machine.data_dir, done)
    seen = json.loads(bob.download(job["id"], "who.json"))
    assert seen["uid"] == machine.users["bob"].uid
    assert seen["environ"]["USER"] == machine.users["bob"].name
    assert not [name for name in seen["environ"] if "TOKEN" in name]
    assert "bobs-secret-token" not in json.dumps(seen) and "bob-token" not in json.dumps(seen)


def test_a_job_cannot_read_or_write_another_users_job_folder(machine, servers):
    alice = servers["alice"]
    theirs = alice.submit(path=str(machine.notebook("alice", "gated.ipynb", GATED, "gate = ''")),
                          parameters={"gate": "/nonexistent"}, max_runtime=60)  # fmt: skip
    wait_state(alice, theirs["id"], "running", "failed")
    bob = machine.own_server("bob")
    other_job = str(machine.data_dir / "jobs" / theirs["id"])
    job = bob.submit(path=machine.notebook("bob", "who.ipynb", WHO, "other_job = ''").name,
                     parameters={"other_job": other_job}, outputs=["who.json"])  # fmt: skip
    done = wait_state(bob, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", why(machine.data_dir, done)
    seen = json.loads(bob.download(job["id"], "who.json"))
    assert seen["list_other_job"] == "PermissionError"
    assert seen["write_other_values"] == "PermissionError"
    alice.cancel(theirs["id"])


def test_a_spoofed_logname_and_a_self_granted_admin_change_nothing(machine, servers):
    alice = servers["alice"]
    theirs = alice.submit(path=str(machine.notebook("alice", "gated.ipynb", GATED, "gate = ''")),
                          parameters={"gate": "/nonexistent"}, max_runtime=60)  # fmt: skip
    bob = machine.own_server("bob", env={"LOGNAME": machine.users["alice"].name, "USER": machine.users["alice"].name},
                             extra=[f"--E31.admin_users={machine.users['bob'].name}"])  # fmt: skip
    info = bob.info()
    assert (info["user"], info["admin"]) == (machine.users["bob"].name, False)
    assert theirs["id"] not in [job["id"] for job in bob.jobs()]
    with pytest.raises(Exception) as refused:
        bob.cancel(theirs["id"])
    assert getattr(refused.value, "status", None) == 404
    assert alice.job(theirs["id"])["state"] in ("queued", "running")
    # Straight to the socket, with whatever a process claims, the kernel still names bob.
    result = machine.as_user("bob", (
        "import os; os.environ['LOGNAME'] = os.environ['USER'] = 'root'\n"
        "from e31_jupyter.client import E31Client\n"
        "info = E31Client().info(); print(info['user'], info['admin'])"
    ))  # fmt: skip
    assert result.stdout.split() == [machine.users["bob"].name, "False"], result.stderr
    alice.cancel(theirs["id"])


def test_two_users_queue_for_one_gpu_and_admins_are_the_admin_groups_members(machine, servers):
    alice, boss = servers["alice"], servers["boss"]
    gate = Path(machine.users["alice"].home) / "gate-open"
    first = alice.submit(path=str(machine.notebook("alice", "gated.ipynb", GATED, "gate = ''")),
                         parameters={"gate": str(gate)}, gpus=1)  # fmt: skip
    assert wait_state(alice, first["id"], "running")["gpus"] == ["0"]
    bob = machine.own_server("bob")
    second = bob.submit(path=machine.notebook("bob", "who.ipynb", WHO, "other_job = ''").name, gpus=1)
    assert bob.job(second["id"])["state"] == "queued" and bob.job(second["id"])["queue_position"] == 1
    assert {first["id"], second["id"]} <= {job["id"] for job in boss.jobs()}  # boss is in the admin group
    assert boss.info()["admin"] is True
    assert boss.gpus()["gpus"][0]["job"] == first["id"]  # an admin sees whose job holds the GPU
    assert bob.gpus()["gpus"][0] == {**bob.gpus()["gpus"][0], "job": None, "owner": machine.users["alice"].name}
    gate.touch()
    assert wait_state(alice, first["id"], "succeeded", "failed")["state"] == "succeeded"
    assert wait_state(bob, second["id"], "succeeded", "failed")["state"] == "succeeded"
    meter = boss.meter()
    assert {machine.users["alice"].name, machine.users["bob"].name} <= set(meter["by_user"])
    gated = alice.submit(path=str(machine.notebook("alice", "gated.ipynb", GATED, "gate = ''")),
                         parameters={"gate": "/nonexistent"}, max_runtime=60)  # fmt: skip
    wait_state(alice, gated["id"], "running")
    assert boss.cancel(gated["id"])["id"] == gated["id"]
    assert wait_state(alice, gated["id"], "cancelled", "failed")["state"] == "cancelled"


def test_data_the_submitter_could_not_read_is_refused(machine, servers):
    alice = machine.users["alice"]
    secret = Path(alice.home) / "secret.txt"
    secret.write_text("alice's secret\n")
    os.chown(secret, alice.uid, alice.gid)
    os.chmod(secret, 0o600)
    bob = machine.own_server("bob")
    notebook = machine.notebook("bob", "who.ipynb", WHO, "other_job = ''").name
    with pytest.raises(Exception, match="you cannot read"):
        bob.submit(path=notebook, data=[str(secret)])  # read by bob's own server, as bob
    with pytest.raises(Exception, match="you cannot read"):
        bob.submit(path=str(Path(alice.home) / "who.ipynb"))
    # Straight to the socket, naming the file: the system scheduler reads no path for anyone.
    raw = machine.as_user("bob", (
        "import json, requests_unixsocket, os\n"
        "from e31_jupyter.client import socket_url\n"
        f"body = {{'notebook': {{'cells': [], 'metadata': {{}}, 'nbformat': 4, 'nbformat_minor': 5}}, 'data': [{str(secret)!r}]}}\n"
        "r = requests_unixsocket.Session().post(socket_url(os.environ['E31_SOCKET']) + '/e31/api/jobs', json=body)\n"
        "print(r.status_code, r.json()['message'])\n"
        f"r = requests_unixsocket.Session().post(socket_url(os.environ['E31_SOCKET']) + '/e31/api/jobs', json={{'path': {str(secret)!r}}})\n"
        "print(r.status_code, r.json()['message'])\n"
    ))  # fmt: skip
    first, second = raw.stdout.splitlines()
    assert first.startswith("400 ") and "is not in your inbox" in first, raw.stderr
    assert second.startswith("400 ") and "reads no file for you" in second


def test_links_a_job_makes_in_its_folder_serve_nothing(machine, servers):
    alice = servers["alice"]
    job = alice.submit(path=str(machine.notebook("alice", "links.ipynb", LINKS)))
    wait_state(alice, job["id"], "succeeded", "failed")
    for path in ("log", "values/secret"):
        response = requests.get(f"{alice.api}jobs/{job['id']}/{path}", headers=alice.session.headers, timeout=10)
        assert 400 <= response.status_code < 500 and "root:" not in response.text, (path, response.text)


def test_the_e31_command_of_a_user_without_a_server_talks_to_the_socket_and_hands_data_over(machine, servers):
    alice = machine.users["alice"]
    Path(alice.home, "rows.csv").write_text("1,2\n")
    os.chown(Path(alice.home, "rows.csv"), alice.uid, alice.gid)
    notebook = machine.notebook("alice", "count.ipynb", "open('n.txt', 'w').write(open('rows.csv').read())")
    result = machine.as_user("alice", (
        "import sys; from e31_jupyter.cli import main\n"
        f"sys.exit(main(['submit', {notebook.name!r}, '--data', 'rows.csv', '--output', 'n.txt', '--wait']))"
    ))  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    job_id = result.stdout.split()[0]
    assert servers["alice"].download(job_id, "n.txt") == b"1,2\n"
    inbox = machine.data_dir / "inbox" / str(alice.uid)
    assert (inbox.stat().st_uid, stat.S_IMODE(inbox.stat().st_mode)) == (alice.uid, 0o700)


def test_the_system_scheduler_refuses_to_run_as_anyone_but_root(machine):
    result = machine.as_user(
        "bob", "import sys; from e31_jupyter.cli import main; sys.exit(main(['serve', '--system']))"
    )
    assert result.returncode == 2
    assert "the system scheduler runs as root" in result.stderr


def test_a_server_forwarding_to_a_scheduler_that_is_down_says_so(machine):
    account = machine.users["bob"]
    port = free_port()
    log = machine.root / "server-down.log"
    server = subprocess.Popen(
        ["runuser", "-u", account.name, "--", sys.executable, "-m", "e31_jupyter.cli", "serve", f"--port={port}",
         "--ip=127.0.0.1", "--IdentityProvider.token=t", f"--E31.scheduler_socket={machine.root / 'none.sock'}"],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT, env={"PATH": os.environ["PATH"], "HOME": account.home},
        cwd=account.home,
    )  # fmt: skip
    try:

        def answer() -> list:  # a list: a 503 response is falsy itself
            try:
                return [
                    requests.get(
                        f"http://127.0.0.1:{port}/e31/api/jobs", headers={"Authorization": "token t"}, timeout=5
                    )
                ]
            except requests.ConnectionError:
                return []

        [response] = wait_for(answer, timeout=180, what="the forwarding server")
        assert response.status_code == 503
        assert "does not answer" in response.json()["message"] and "e31 serve --system" in response.json()["message"]
    finally:
        server.terminate()
        server.wait(10)


def test_a_cell_hands_its_values_over_and_gets_its_results_back(machine, servers):
    """%%e31 in alice's kernel: the values it captures go into her inbox on the scheduler, and
    what the job returns comes back into the kernel, loaded as hers."""
    result = machine.as_user("alice", (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'e31_jupyter')\n"
        "ip.user_ns['x'] = 21\n"
        "ip.run_cell('%%e31 submit --wait --name doubled\\ny = x * 2\\nimport os\\nwho = os.getuid()')\n"
        "print('RESULT', ip.user_ns.get('y'), ip.user_ns.get('who'))\n"
    ), env={"E31_URL": servers["alice"].url})  # fmt: skip
    assert f"RESULT 42 {machine.users['alice'].uid}" in result.stdout, result.stdout + result.stderr


def test_a_pickle_another_user_planted_is_refused_at_collect(machine):
    """bob swaps the values of a job alice collected into a folder their group shares: alice's
    kernel refuses to load them, naming the file and bob."""
    bob = machine.users["bob"]
    shared = machine.root / "project"  # a group folder both may write (setgid, 2777 for the test)
    shared.mkdir()
    os.chmod(shared, 0o2777)
    planted = machine.as_user("bob", (
        "import os, pathlib, pickle\n"
        f"folder = pathlib.Path({str(shared / 'values')!r}); folder.mkdir(mode=0o755)\n"
        "class Boom:\n"
        "    def __reduce__(self): return (os.system, ('touch /tmp/e31-owned-by-bob',))\n"
        "(folder / 'result.pkl').write_bytes(pickle.dumps(Boom()))\n"
        "(folder / 'values.json').write_text('{\"result\": {\"type\": \"int\", \"size\": 1, \"files\": [\"result.pkl\"]}}')\n"
    ))  # fmt: skip
    assert planted.returncode == 0, planted.stderr
    loaded = machine.as_user("alice", (
        "from e31_jupyter import values\n"
        f"try:\n    print(values.restore(__import__('pathlib').Path({str(shared / 'values')!r})))\n"
        "except Exception as error:\n    print('REFUSED', error)\n"
    ))  # fmt: skip
    assert "REFUSED" in loaded.stdout and bob.name in loaded.stdout, loaded.stdout + loaded.stderr
    assert not Path("/tmp/e31-owned-by-bob").exists()
    assert Path(shared / "values").owner() == bob.name
