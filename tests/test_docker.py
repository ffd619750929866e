"""The Docker backend against a real engine: a dockerd this suite starts, images built here."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import ts, wait_for, wait_state, write_notebook
from docker_fixtures import BARE_IMAGE, FULL_IMAGE

import e31_jupyter
from e31_jupyter import magics
from e31_jupyter.cli.arguments import submit_body
from e31_jupyter.cli.parser import build_parser
from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.core.job import ContainerLimits, JobSpec, Limits, validate_image, validate_request
from e31_jupyter.execution import gpus
from e31_jupyter.execution.backends.docker import DockerBackend
from e31_jupyter.execution.jobdir import JobDir, write_json_atomic

ALLOWED = f"Allowed: {FULL_IMAGE}, {BARE_IMAGE}"
GATE = """
import os, pathlib, time
gate = pathlib.Path(os.environ["E31_JOB_DIR"]) / "gate"
started = time.time()
while not gate.exists() and time.time() - started < 120:
    time.sleep(0.05)
assert gate.exists(), "the test never opened the gate"
"""


@pytest.fixture
def start_docker_server(engine, start_server, monkeypatch):
    """Start e31 servers whose jobs run in containers on the test engine."""
    monkeypatch.setenv("DOCKER_HOST", engine.host)

    def start(*options: str, **kwargs):
        images = [f"--E31.docker_image={FULL_IMAGE}", f"--E31.docker_allowed_images={BARE_IMAGE}"]
        return start_server(extra_args=["--E31.backend=docker", *images, *options], **kwargs)

    return start


def open_gate(server, job_id: str) -> None:
    (server.data_dir / "jobs" / job_id / "gate").touch()


def running_container(engine, job_id: str):
    """The job's container once it runs. The store says "running" when the server asks the
    engine for the container, which is created, then started a moment later."""

    def started():
        containers = engine.job_containers(job_id)
        return containers if any(c.status == "running" for c in containers) else None

    containers = wait_for(started, what=f"the container of {job_id} to run")
    assert len(containers) == 1
    return containers[0]


# --- against the engine ------------------------------------------------------------------------


def test_a_notebook_job_runs_in_a_container_and_its_outputs_are_collected(engine, start_docker_server, tmp_path):
    server = start_docker_server()
    client = E31Client(server.url, server.token)
    notebook = write_notebook(
        tmp_path / "greet.ipynb",
        "import json, os, socket\n"
        "env = os.environ\n"
        "where = {'hostname': socket.gethostname(), 'job': env['E31_JOB_ID'],\n"
        "         'cuda': env['CUDA_VISIBLE_DEVICES'], 'nvidia': env['NVIDIA_VISIBLE_DEVICES']}\n"
        "json.dump(where, open('where.json', 'w'))",
        "print(greeting)\nopen('out.txt', 'w').write(greeting * 2)",
        GATE,
        parameters="greeting = 'hello'",
    )
    job = client.submit(path=str(notebook), parameters={"greeting": "hi from a container"})
    job = wait_state(client, job["id"], "running")
    container = running_container(engine, job["id"])
    assert container.status == "running" and container.image.tags == [FULL_IMAGE]
    assert container.labels["e31.job"] == job["id"]

    open_gate(server, job["id"])
    job = wait_state(client, job["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    assert {f["path"] for f in client.files(job["id"])} == {"where.json", "out.txt"}
    assert client.download(job["id"], "out.txt") == b"hi from a container" * 2
    where = json.loads(client.download(job["id"], "where.json"))
    assert where == {"hostname": container.id[:12], "job": job["id"], "cuda": "", "nvidia": "void"}
    assert "hi from a container" in client.log_tail(job["id"], 200)  # the worker's log, as locally
    assert "hi from a container" in client.report(job["id"])
    assert job["progress"]["cells_done"] == job["progress"]["cells_total"] == 4  # the user's (not the injected one)
    assert engine.job_containers(job["id"]) == []  # release removed the container


def test_inside_the_job_sees_only_its_mounts_no_network_its_memory_limit_and_its_uid(
    engine, start_docker_server, tmp_path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "table.csv").write_text("a,b\n")
    server = start_docker_server(
        "--E31.docker_user=1000:1000", "--E31.docker_memory=1g", f"--E31.docker_mounts={shared}:/data"
    )
    client = E31Client(server.url, server.token)
    notebook = write_notebook(
        tmp_path / "probe.ipynb",
        PROBE,
        parameters=f"secret = {str(secret)!r}\nport = {server.port}",
    )
    job = client.submit(path=str(notebook), memory="512m")
    job = wait_state(client, job["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    seen = json.loads(client.download(job["id"], "seen.json"))
    assert seen["host_file"] is False and secret.exists()
    assert seen["host_root"] == []  # the job's directory is there; nothing else of tmp_path
    assert seen["interfaces"] == ["lo"] and seen["server_reachable"] is False
    assert int(seen["memory_limit"]) == 512 << 20
    assert seen["big_child_exit"] == -9  # the limit is enforced: the kernel killed it
    assert seen["uid"] == 1000 and seen["gid"] == 1000
    assert seen["data"] == "a,b\n" and seen["data_writable"] is False
    assert seen["home"] == "/tmp"


PROBE = """
import json, os, socket, subprocess, sys

def reachable(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return True
    except OSError:
        return False

def memory_limit():
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        if os.path.exists(path):
            return open(path).read().strip()

def writable(path):
    try:
        open(path, "w").close()
        return True
    except OSError:
        return False

job_dir = os.environ["E31_JOB_DIR"]
root = os.path.dirname(os.path.dirname(os.path.dirname(job_dir)))  # tmp_path on the host
big = subprocess.run([sys.executable, "-c", "b'x' * (700 << 20)"])
seen = {
    "host_file": os.path.exists(secret),
    "host_root": sorted(set(os.listdir(root)) - {"data"}),
    "interfaces": sorted(os.listdir("/sys/class/net")),
    "server_reachable": reachable(port),
    "memory_limit": memory_limit(),
    "big_child_exit": big.returncode,
    "uid": os.getuid(),
    "gid": os.getgid(),
    "data": open("/data/table.csv").read(),
    "data_writable": writable("/data/new.csv"),
    "home": os.environ["HOME"],
}
json.dump(seen, open("seen.json", "w"))
"""


def test_a_kernel_over_its_memory_limit_fails_the_job_saying_so(engine, start_docker_server, tmp_path):
    server = start_docker_server()
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "greedy.ipynb", "x = 1", "big = b'x' * (700 << 20)", "never = True")
    job = wait_state(client, client.submit(path=str(notebook), memory="256m")["id"], "failed", "succeeded")
    assert job["reason"].startswith(
        "kernel died in cell 2 of 3 (\"big = b'x' * (700 << 20)\"): killed by SIGKILL, most often by the "
        "out-of-memory killer"
    )
    assert engine.job_containers(job["id"]) == []


def test_cancel_stops_the_container_within_the_grace_period_and_removes_it(engine, start_docker_server, tmp_path):
    server = start_docker_server()  # stop_grace is 2 s
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "forever.ipynb", "import time\ntime.sleep(600)")
    job = wait_state(client, client.submit(path=str(notebook))["id"], "running")
    wait_for(lambda: client.job(job["id"])["progress"]["current_cell"] is not None, what="the cell to run")
    running_container(engine, job["id"])

    asked = time.time()
    client.cancel(job["id"])
    job = wait_state(client, job["id"], "cancelled", "failed", "succeeded", timeout=20)
    assert job["state"] == "cancelled"
    assert ts(job["finished_at"]) - asked < 2 + 2  # the grace period, and a little slack
    assert engine.job_containers(job["id"]) == []


PAUSED_CELLS = (
    "import pathlib\nruns = pathlib.Path('runs.txt')\nruns.open('a').write('c1\\n')\na = 41",
    "import time\nruns.open('a').write('c2\\n')\ntime.sleep(3)",
    "runs.open('a').write('c3\\n')\nb = a + 1",
    "runs.open('a').write('c4\\n')\nassert b == 42",
)


def test_a_container_job_suspended_at_a_cells_end_resumes_after_it(engine, start_docker_server, tmp_path):
    """The worker in the container gets the suspend (SIGUSR1), ends its cell, saves a checkpoint
    (the kernel imports e31 from the package mounted read-only), and the resumed run goes on."""
    server = start_docker_server()
    client = E31Client(server.url, server.token)
    job = client.submit(path=str(write_notebook(tmp_path / "paused.ipynb", *PAUSED_CELLS)), checkpoint=True)
    runs = server.data_dir / "jobs" / job["id"] / "work" / "runs.txt"
    wait_for(lambda: runs.exists() and "c2" in runs.read_text(), timeout=90, what="the second cell")
    client.suspend(job["id"])
    paused = wait_state(client, job["id"], "suspended", "failed", "succeeded", "cancelled")
    assert paused["state"] == "suspended" and "checkpoint after cell 2" in paused["reason"], paused["reason"]
    assert runs.read_text().split() == ["c1", "c2"]
    wait_for(lambda: engine.job_containers(job["id"]) == [], timeout=20, what="its container to go")

    client.resume(job["id"])
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c4"]


def test_a_restarted_server_adopts_running_containers_and_finds_ended_ones(engine, start_docker_server, tmp_path):
    """Also a container whose handle the server never recorded: it is found by its job label."""
    notebook = write_notebook(tmp_path / "gated.ipynb", GATE, "open('done.txt', 'w').write('done')")
    first = start_docker_server()
    client = E31Client(first.url, first.token)
    survivor, finisher = (client.submit(path=str(notebook)) for _ in range(2))
    survivor, finisher = (wait_state(client, job["id"], "running") for job in (survivor, finisher))
    survivor_container = running_container(engine, survivor["id"])
    finisher_container = running_container(engine, finisher["id"])
    first.kill()

    open_gate(first, finisher["id"])  # it ends while no server watches
    wait_for(lambda: finisher_container.reload() or finisher_container.status == "exited", what="it to end")
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:  # as if killed before recording it
        db.execute("UPDATE jobs SET handle = NULL WHERE id = ?", (survivor["id"],))
    second = start_docker_server()
    client = E31Client(second.url, second.token)
    finisher = wait_state(client, finisher["id"], "succeeded", "failed", timeout=10)
    assert finisher["state"] == "succeeded", finisher["reason"]
    manifest = json.loads((second.data_dir / "jobs" / finisher["id"] / "manifest.json").read_text())
    assert ts(finisher["finished_at"]) == pytest.approx(manifest["finished_at"], abs=0.01)  # its true end
    assert engine.job_containers(finisher["id"]) == []

    adopted = client.job(survivor["id"])
    assert adopted["state"] == "running" and adopted["started_at"] == survivor["started_at"]
    assert engine.job_containers(survivor["id"])[0].id == survivor_container.id
    open_gate(second, survivor["id"])
    survivor = wait_state(client, survivor["id"], "succeeded", "failed")
    assert survivor["state"] == "succeeded", survivor["reason"]
    assert client.download(survivor["id"], "done.txt") == b"done"
    assert engine.job_containers(survivor["id"]) == []


def test_a_container_created_but_never_started_before_the_server_died_is_replaced_and_run(
    engine, start_docker_server, tmp_path
):
    """A server killed between creating a job's container and starting it: the next server
    removes that container and starts the job in a new one (its name is the job's, so the old
    one must go first), instead of failing a job that never ran."""
    notebook = write_notebook(tmp_path / "gated.ipynb", GATE, "open('done.txt', 'w').write('done')")
    first = start_docker_server()
    client = E31Client(first.url, first.token)
    job = wait_state(client, client.submit(path=str(notebook))["id"], "running")
    container = running_container(engine, job["id"])
    first.kill()
    container.remove(force=True)
    jobdir = first.data_dir / "jobs" / job["id"]
    for written in ("baseline.json", "progress.json", "executed.ipynb"):  # as if it never ran
        (jobdir / written).unlink(missing_ok=True)
    (jobdir / "job.log").write_bytes(b"")
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:
        db.execute("UPDATE jobs SET handle = NULL WHERE id = ?", (job["id"],))
    created = engine.client.containers.create(
        FULL_IMAGE, ["true"], name=f"e31-{job['id']}", labels={"e31.job": job["id"]}
    )

    second = start_docker_server()
    client = E31Client(second.url, second.token)
    restarted = wait_state(client, job["id"], "running")
    assert "started after a restart" in restarted["transitions"][-1]["reason"]
    replacement = running_container(engine, job["id"])
    assert replacement.id != created.id
    open_gate(second, job["id"])
    done = wait_state(client, job["id"], "succeeded", "failed")
    assert done["state"] == "succeeded", done["reason"]
    assert client.download(job["id"], "done.txt") == b"done"
    assert engine.job_containers(job["id"]) == []


def test_an_image_without_papermill_fails_the_job_and_says_so(engine, start_docker_server, tmp_path):
    server = start_docker_server()
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "n.ipynb", "1 + 1")
    job = wait_state(client, client.submit(path=str(notebook), image=BARE_IMAGE)["id"], "failed", "succeeded")
    assert job["state"] == "failed"
    assert f"the image {BARE_IMAGE!r} cannot run e31 jobs" in job["reason"]
    assert "No module named 'papermill'" in job["reason"]
    assert "must contain Python 3.10+ (python3) with papermill, ipykernel, nbconvert" in job["reason"]
    # neither the probes (the job's, and the start's of the default image, which may still run) nor the job is left
    # sparse: a container removed between the listing and its inspection does not raise
    wait_for(
        lambda: engine.client.containers.list(all=True, sparse=True) == [], what="the probe containers to be removed"
    )

    with pytest.raises(E31Error, match=f"'elsewhere:latest' is not allowed here. {ALLOWED}"):
        client.submit(path=str(notebook), image="elsewhere:latest")


def test_gpus_on_an_engine_without_gpu_support_fail_at_start_and_go_back_to_the_pool(
    engine, start_docker_server, tmp_path
):
    server = start_docker_server()  # two configured GPUs; this engine has no NVIDIA runtime
    client = E31Client(server.url, server.token)
    notebook = write_notebook(tmp_path / "n.ipynb", "1 + 1")
    job = wait_state(client, client.submit(path=str(notebook), gpus=1)["id"], "failed", "succeeded")
    assert job["state"] == "failed"
    assert job["reason"].startswith("could not start: the Docker engine could not start the container:")
    assert 'could not select device driver "" with capabilities: [[gpu]]' in job["reason"]
    assert client.gpus()["free"] == 2
    assert engine.job_containers(job["id"]) == []


def test_the_engine_receives_the_granted_gpus_and_exactly_these_mounts(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", engine.host)
    backend = DockerBackend(image=FULL_IMAGE, memory_bytes=1 << 30, cpus=1.5, user="1000:1000")
    jobdir = _job_directory(tmp_path / "jobs" / "j-1")
    container = backend.create("j-1", jobdir, ["1", "3"])
    try:
        config, host = container.attrs["Config"], container.attrs["HostConfig"]
        assert host["DeviceRequests"] == [
            {"Driver": "", "Count": 0, "DeviceIDs": ["1", "3"], "Capabilities": [["gpu"]], "Options": {}}
        ]
        env = dict(item.split("=", 1) for item in config["Env"])
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"  # the granted GPUs, as the container numbers them
        assert "NVIDIA_VISIBLE_DEVICES" not in env  # the engine sets it from the device request
        mounts = {(m["Source"], m["Target"], m.get("ReadOnly", False)) for m in host["Mounts"]}
        package = str(Path(e31_jupyter.__file__).resolve().parent)
        job = str(jobdir.path)
        assert mounts == {(job, job, False), (package, "/opt/e31/e31_jupyter", True)}  # and nothing else
        assert host["Binds"] is None and host["Tmpfs"] == {"/tmp": "mode=1777"}
        assert host["NetworkMode"] == "none"
        assert host["Memory"] == host["MemorySwap"] == 1 << 30 and host["NanoCpus"] == 1_500_000_000
        assert host["CapDrop"] == ["ALL"] and host["Init"] is True and not host["Privileged"]
        assert config["User"] == "1000:1000" and config["Labels"] == {"e31.job": "j-1"}
        assert config["WorkingDir"] == str(jobdir.work)
    finally:
        container.remove(force=True)

    container = backend.create("j-2", _job_directory(tmp_path / "jobs" / "j-2"), [])
    try:
        assert not container.attrs["HostConfig"]["DeviceRequests"]
        env = dict(item.split("=", 1) for item in container.attrs["Config"]["Env"])
        assert env["NVIDIA_VISIBLE_DEVICES"] == "void" and env["CUDA_VISIBLE_DEVICES"] == ""
    finally:
        container.remove(force=True)


@pytest.mark.skipif(
    not (shutil.which("nvidia-container-runtime-hook") and gpus.discover()),
    reason="needs an NVIDIA GPU and the NVIDIA container toolkit",
)
def test_on_a_gpu_machine_the_container_sees_exactly_its_gpu(engine, start_docker_server, tmp_path):
    server = start_docker_server(gpus=None)  # the inventory NVML reports
    client = E31Client(server.url, server.token)
    notebook = write_notebook(
        tmp_path / "smi.ipynb",
        "import subprocess\nopen('gpus.txt', 'w').write(subprocess.run(['nvidia-smi', '-L'], "
        "capture_output=True, text=True).stdout)",
    )
    job = wait_state(client, client.submit(path=str(notebook), gpus=1)["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job["reason"]
    listed = client.download(job["id"], "gpus.txt").decode().strip().splitlines()
    assert len(listed) == 1 and _uuid_of(job["gpus"][0]) in listed[0]


# --- what a container queue accepts (no engine needed) -------------------------------------------

CONTAINERS = ContainerLimits(FULL_IMAGE, [BARE_IMAGE], max_memory_bytes=8 << 30, max_cpus=4)


def test_the_image_defaults_and_must_be_allowed():
    limits = Limits(["0"], 3600.0, ["python3"], CONTAINERS)
    assert validate_image({}, limits) == FULL_IMAGE
    assert validate_image({"image": BARE_IMAGE}, limits) == BARE_IMAGE
    with pytest.raises(InvalidRequest, match=f"'other' is not allowed here. {ALLOWED}"):
        validate_image({"image": "other"}, limits)
    with pytest.raises(InvalidRequest, match="no default image"):
        validate_image({}, Limits(["0"], 3600.0, ["python3"], ContainerLimits()))


def test_memory_and_cpus_default_to_the_configured_limits_and_may_not_exceed_them():
    limits = Limits(["0"], 3600.0, ["python3"], CONTAINERS)
    request, _ = validate_request({}, limits, now=0)
    assert (request.memory_bytes, request.cpus) == (8 << 30, 4)
    request, _ = validate_request({"memory": "512m", "cpus": 0.5}, limits, now=0)
    assert (request.memory_bytes, request.cpus) == (512 << 20, 0.5)
    with pytest.raises(InvalidRequest, match="memory: asked for 16g, but jobs here may have at most 8g"):
        validate_request({"memory": "16g"}, limits, now=0)
    with pytest.raises(InvalidRequest, match="cpus: asked for 8, but jobs here may have at most 4"):
        validate_request({"cpus": 8}, limits, now=0)
    with pytest.raises(InvalidRequest, match="cannot read 'lots' as an amount of memory"):
        validate_request({"memory": "lots"}, limits, now=0)


def test_a_queue_without_containers_refuses_an_image_rather_than_ignore_it():
    local = Limits(["0"], 3600.0, ["python3"])
    with pytest.raises(InvalidRequest, match="image, memory: this queue runs jobs as processes"):
        validate_request({"image": FULL_IMAGE, "memory": "1g"}, local, now=0)
    assert validate_image({}, local) == ""


def test_the_cli_and_the_magics_pass_image_memory_and_cpus():
    argv = ["submit", "n.ipynb", "--image", BARE_IMAGE, "--memory", "8g", "--cpus", "2"]
    args = build_parser().parse_args(argv)
    assert {k: submit_body(args)[k] for k in ("image", "memory", "cpus")} == {
        "image": BARE_IMAGE, "memory": "8g", "cpus": 2.0,
    }  # fmt: skip
    cell = magics._request(magics._cell_parser().parse_args(["--image", BARE_IMAGE, "--memory", "1g"]))
    assert cell["image"] == BARE_IMAGE and cell["memory"] == "1g" and "cpus" not in cell


def _job_directory(path):
    jobdir = JobDir(path)
    jobdir.work.mkdir(parents=True)
    write_json_atomic(jobdir.spec, JobSpec("n", "n.ipynb", "python3", image=FULL_IMAGE).to_dict())
    return jobdir


def _uuid_of(device: str) -> str:
    import pynvml

    pynvml.nvmlInit()
    try:
        return pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(int(device)))
    finally:
        pynvml.nvmlShutdown()
