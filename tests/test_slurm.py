"""The Slurm backend against a real one-node cluster that this suite starts (slurm_cluster.py):
two stand-in GPUs, real sbatch/squeue/sacct/scancel, real e31 servers and kernels.

Slurm enforces time limits in whole minutes and checks them every 30 s, so the timeout test's
job is submitted before the first test and checked by the last one: its minute overlaps the rest.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import ts, wait_for, wait_state, write_notebook
from server_process import ServerProcess
from slurm_cluster import SlurmCluster, why_no_slurm
from support import cannot_run_here

from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error
from e31_jupyter.core.job import JobSpec, Request
from e31_jupyter.execution.backends.slurm import (
    SlurmBackend,
    SlurmJob,
    deadline_limits,
    final_state,
    from_squeue,
    gpu_count,
    gres_indices,
    parse_slurm_duration,
    queue_position,
    slurm_duration,
)

TIMEOUT_JOB = "timeout-overlap"
SLEEPER = """
import os, pathlib, time
pathlib.Path("devices.txt").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
time.sleep(600)
"""


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """slurmctld, slurmd and munged for the whole session; Slurm commands find them via SLURM_CONF."""
    reason = why_no_slurm()
    if reason:
        cannot_run_here(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    environment = pytest.MonkeyPatch()
    environment.setenv("SLURM_CONF", str(cluster.conf))
    try:
        yield cluster
    finally:
        environment.undo()
        cluster.stop()


@pytest.fixture(scope="module")
def timeout_job(slurm, tmp_path_factory):
    """A 0-GPU job with max_runtime 1s (Slurm: one minute), submitted by the first test."""
    root = tmp_path_factory.mktemp("timeout")
    server = _slurm_server(root / "data", root).start()
    client = E31Client(server.url, server.token)
    notebook = write_notebook(root / "sleeper.ipynb", SLEEPER)
    job = client.submit(path=str(notebook), name=TIMEOUT_JOB, gpus=0, max_runtime="1s")
    yield server, client, job
    server.stop()


@pytest.fixture
def empty_cluster(slurm):
    """Each test ends with no job of its own left in Slurm."""
    yield
    mine = [i for i, name in _active_jobs(slurm) if name != TIMEOUT_JOB]
    if mine:
        slurm.run("scancel", *mine)
    wait_for(lambda: not [i for i, name in _active_jobs(slurm) if name != TIMEOUT_JOB], 30, what="an empty cluster")


@pytest.fixture
def start_slurm_server(slurm, empty_cluster, start_server):
    def start(*options: str, **kwargs) -> ServerProcess:
        return start_server(gpus=None, extra_args=["--E31.backend=slurm", *options], **kwargs)

    return start


@pytest.fixture
def server(start_slurm_server) -> ServerProcess:
    """conftest's ``client`` fixture talks to this server: jobs go to Slurm."""
    return start_slurm_server()


# --- against the cluster -----------------------------------------------------------------------


def test_two_jobs_run_a_third_pends_cancel_and_meter(timeout_job, server, client, slurm, gated):
    a, b, c = (gated.submit(client, name, gpus=1, max_runtime="10m") for name in "abc")
    a, b = (wait_state(client, j["id"], "running", timeout=30) for j in (a, b))
    c = wait_for(lambda: _with_reason(client, c["id"], "Resources"), 15, what="c to pend for Resources")
    assert c["state"] == "queued" and c["queue_position"] == 1 and c["meter"]["gpu_seconds"] == 0
    assert {a["gpus"][0], b["gpus"][0]} == {"0", "1"}
    seen = {j["id"]: _devices_seen(server, j["id"]) for j in (a, b)}  # what each job's process saw
    assert seen == {a["id"]: a["gpus"][0], b["id"]: b["gpus"][0]}

    slurm_a = slurm.job_info(_slurm_id(server, a["id"]))  # what was asked of sbatch
    assert slurm_a["JobName"] == "a" and slurm_a["TimeLimit"] == "00:10:00"
    assert slurm_a["StdOut"] == str(_jobdir(server, a["id"]) / "job.log")
    assert "gpu:1" in slurm_a["TresPerNode"] and slurm_a["Requeue"] == "0"
    pool = client.gpus()
    assert pool["total"] == 2 and pool["free"] == 0
    assert {g["job"] for g in pool["gpus"]} == {a["id"], b["id"]}
    with pytest.raises(E31Error) as refused:  # more GPUs than any node has: Slurm says so at once
        gated.submit(client, "too-big", gpus=3)
    assert "Requested node configuration is not available" in refused.value.message
    with pytest.raises(E31Error) as checked:  # and a check says the same (sbatch --test-only)
        client.check(path=str(gated.notebook), gpus=3)
    assert checked.value.message == refused.value.message

    # A check: Slurm's own estimate of the start (the 10-minute limits of the jobs ahead), no
    # place in line (Slurm's priorities decide it), and nothing queued.
    jobs, queued = {j["id"] for j in client.jobs()}, _slurm_queue(slurm)
    check = client.check(path=str(gated.notebook), gpus=1, max_runtime="20m", expected_runtime="5m")
    start = ts(check["expected_start"])
    assert ts(a["started_at"]) + 540 <= start <= ts(b["started_at"]) + 1260, check
    assert ts(check["expected_end"]) == pytest.approx(start + 300, abs=0.01)
    assert check["queue_position"] is None and check["expected_to_expire"] is False
    late = client.check(path=str(gated.notebook), gpus=1, max_runtime="20m", expected_runtime="5m", deadline="+6m")
    assert late["expected_to_expire"] is True and late["expected_start"] is None
    assert {j["id"] for j in client.jobs()} == jobs and _slurm_queue(slurm) == queued

    client.cancel(c["id"])  # pending: gone without ever holding a GPU
    c = wait_state(client, c["id"], "cancelled", timeout=15)
    assert c["started_at"] is None and c["meter"]["gpu_seconds"] == 0 and "cancelled by" in c["reason"]
    client.cancel(a["id"])  # running: scancel, and the meter stops where Slurm says it ended
    a = wait_state(client, a["id"], "cancelled", timeout=30)
    assert "cancelled by" in a["reason"]
    _assert_meter_is_slurms(server, slurm, a)

    gated.open("b")
    b = wait_state(client, b["id"], "succeeded", "failed", timeout=60)
    assert b["state"] == "succeeded", (b["reason"], client.log_tail(b["id"], 40))
    assert client.download(b["id"], "devices.txt").decode() == b["gpus"][0]
    assert b["progress"]["cells_done"] == b["progress"]["cells_total"] and b["files_count"] == 1
    assert "e31 worker: succeeded" in client.log_tail(b["id"], 5)  # Slurm wrote the worker's output there
    _assert_meter_is_slurms(server, slurm, b)
    assert [(t["from"], t["to"]) for t in client.job(b["id"])["transitions"]] == [
        (None, "queued"), ("queued", "running"), ("running", "succeeded"),
    ]  # fmt: skip


def _slurm_queue(slurm) -> list[str]:
    return sorted(slurm.run("squeue", "--noheader", "--format=%i").stdout.split())


def test_a_deadline_that_cannot_be_met_expires_and_a_failing_cell_fails(server, client, slurm, gated, tmp_path):
    failing = write_notebook(tmp_path / "bad.ipynb", "x = 1", "raise ValueError('no convergence')")
    failing = client.submit(path=str(failing), gpus=0)  # runs beside the GPU jobs
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2)["id"], "running", timeout=30)
    # Slurm may start it until 60s (its least run time: a minute) before the deadline
    late = gated.submit(client, "late", gpus=1, deadline="+68s", expected_runtime="20s")
    assert wait_for(lambda: _with_reason(client, late["id"], "Resources"), 5, what="late to pend")
    late = wait_state(client, late["id"], "expired", timeout=30)
    assert "deadline" in late["reason"]
    assert late["started_at"] is None and late["meter"]["gpu_seconds"] == 0
    assert slurm.job_info(_slurm_id(server, late["id"]))["JobState"] == "DEADLINE"
    gated.open("blocker")
    assert wait_state(client, blocker["id"], "succeeded", "failed", timeout=60)["state"] == "succeeded"
    failing = wait_state(client, failing["id"], "failed", "succeeded", timeout=60)
    assert failing["state"] == "failed" and "ValueError: no convergence" in failing["reason"]  # the worker's words
    assert slurm.job_info(_slurm_id(server, failing["id"]))["JobState"] == "FAILED"


def test_slurm_holds_a_job_after_another_and_e31_drops_one_after_a_failure(server, client, slurm, gated, tmp_path):
    first = wait_state(client, gated.submit(client, "first", gpus=1, max_runtime="10m")["id"], "running", timeout=30)
    quick = write_notebook(tmp_path / "quick.ipynb", "x = 1")
    then = client.submit(path=str(quick), gpus=1, after=first["id"], name="then")
    assert then["waiting_for"] == [first["id"]]
    assert wait_for(lambda: _with_reason(client, then["id"], "Dependency"), 15, what="then to pend on its dependency")
    assert slurm.job_info(_slurm_id(server, then["id"]))["Dependency"].startswith(
        f"afterok:{_slurm_id(server, first['id'])}"
    )
    failing = client.submit(path=str(write_notebook(tmp_path / "bad.ipynb", "1 / 0")), gpus=0)
    doomed = client.submit(path=str(quick), gpus=0, after=failing["id"], name="doomed")
    doomed = wait_state(client, doomed["id"], "expired", "succeeded", "failed", "cancelled", timeout=60)
    assert doomed["state"] == "expired" and f"{failing['id']} failed" in doomed["reason"]
    assert wait_for(lambda: slurm.job_info(_slurm_id(server, doomed["id"]))["JobState"] == "CANCELLED", 15)
    gated.open("first")
    then = wait_state(client, then["id"], "succeeded", "failed", "expired", timeout=60)
    assert then["state"] == "succeeded" and ts(then["started_at"]) >= ts(client.job(first["id"])["finished_at"]) - 1


def test_a_pending_job_changes_in_slurm_and_in_e31_alike(server, client, slurm, gated):
    blocker = wait_state(
        client, gated.submit(client, "blocker", gpus=2, max_runtime="10m")["id"], "running", timeout=30
    )
    job = gated.submit(client, "job", gpus=1, max_runtime="10m", expected_runtime="5m", deadline="+2h")
    assert wait_for(lambda: _with_reason(client, job["id"], "Resources"), 15, what="the job to pend")
    slurm_id = _slurm_id(server, job["id"])

    with pytest.raises(E31Error) as refused:  # checked as a submit is: more GPUs than any node has
        client.update(job["id"], gpus=3, name="too-big")
    assert refused.value.status == 400 and "Requested node configuration is not available" in refused.value.message
    for change, field in (({"deadline": None}, "deadline"), ({"gpus": 0}, "gpus")):  # Slurm cannot undo these
        with pytest.raises(E31Error, match=f"^{field}: Slurm cannot") as refused:
            client.update(job["id"], **change)
        assert refused.value.status == 400
    info = slurm.job_info(slurm_id)
    assert (info["JobName"], info["TimeLimit"], info["TimeMin"]) == ("job", "00:10:00", "00:05:00")
    assert "gpu:1" in info["TresPerNode"] and client.job(job["id"])["request"]["gpus"] == 1  # nothing changed

    changed = client.update(
        job["id"], gpus=2, max_runtime="20m", expected_runtime="10m", deadline="+3h", name="bigger"
    )  # fmt: skip
    assert [c.split()[0] for c in changed["changed"]] == [
        "gpus", "max_runtime", "expected_runtime", "deadline", "name",
    ]  # fmt: skip
    info = slurm.job_info(slurm_id)  # Slurm holds the same request as e31 shows
    assert (info["JobName"], info["TimeLimit"], info["TimeMin"]) == ("bigger", "00:20:00", "00:10:00")
    assert "gpu:2" in info["TresPerNode"]
    deadline = time.localtime(ts(changed["request"]["deadline"]))
    assert info["Deadline"] == time.strftime("%Y-%m-%dT%H:%M:%S", deadline)
    assert changed["state"] == "queued" and client.job(job["id"])["transitions"][-1]["reason"].startswith("changed by ")
    waiting = client.update(job["id"], after=blocker["id"])  # Slurm holds it until the blocker has succeeded
    assert waiting["waiting_for"] == [blocker["id"]]
    assert slurm.job_info(slurm_id)["Dependency"] == f"afterok:{_slurm_id(server, blocker['id'])}(unfulfilled)"
    assert client.update(job["id"], after=[])["changed"] == [f"after {blocker['id']} -> none"]
    assert slurm.job_info(slurm_id)["Dependency"] == "(null)"

    backend = SlurmBackend()  # one that has just started: Slurm refuses, and says why in e31's words
    spec = JobSpec("blocker", "gated.ipynb", "python3", request=Request(gpus=2, max_runtime_s=600))
    with pytest.raises(E31Error, match="has just started in Slurm") as started:
        backend.update(blocker["id"], {"slurm_id": _slurm_id(server, blocker["id"])}, spec, spec.request)
    assert started.value.status == 409

    gated.open("blocker")
    running = wait_state(client, job["id"], "running", timeout=60)
    assert sorted(running["gpus"]) == ["0", "1"]  # Slurm gave it the two it now asks for
    with pytest.raises(E31Error, match="only a queued job") as refused:
        client.update(job["id"], gpus=1)
    assert refused.value.status == 409
    gated.open("job")
    assert wait_state(client, job["id"], "succeeded", "failed", timeout=60)["state"] == "succeeded"


def test_a_restarted_server_shows_what_slurm_did_meanwhile(start_slurm_server, slurm, gated):
    first = start_slurm_server()
    client = E31Client(first.url, first.token)
    long = wait_state(client, gated.submit(client, "long", gpus=1)["id"], "running", timeout=30)
    short = wait_state(client, gated.submit(client, "short", gpus=1)["id"], "running", timeout=30)
    waiting = gated.submit(client, "waiting", gpus=1)
    first.kill()  # nothing of a Slurm job lives only in the server
    with sqlite3.connect(first.data_dir / "e31.sqlite") as db:  # as if it died in the midst of sbatch
        db.execute("UPDATE jobs SET handle = NULL, submitted_at = submitted_at - 600 WHERE id = ?", (waiting["id"],))
    gated.open("short")
    wait_for(lambda: slurm.job_info(_slurm_id(first, short["id"]))["JobState"] == "COMPLETED", 60,
             what="short to end while no server runs")  # fmt: skip

    second = start_slurm_server()
    client = E31Client(second.url, second.token)
    short = wait_state(client, short["id"], "succeeded", timeout=10)
    _assert_meter_is_slurms(second, slurm, short)  # Slurm's start and end, not when they were seen
    again = client.job(long["id"])
    assert again["state"] == "running" and again["gpus"] == long["gpus"] and again["started_at"] == long["started_at"]
    waiting = wait_state(client, waiting["id"], "running", timeout=30)  # found in Slurm; took short's GPU
    assert waiting["gpus"] == short["gpus"]
    for name in ("long", "waiting"):
        gated.open(name)
    for job in (long, waiting):
        assert wait_state(client, job["id"], "succeeded", "failed", timeout=60)["state"] == "succeeded"


def test_a_cell_runs_through_slurm_and_is_collected(start_slurm_server, slurm, tmp_path):
    from kernels import Kernel

    server = start_slurm_server(  # store and jobs apart; a variable of the server's that no job may see
        f"--E31.slurm_shared_dir={tmp_path / 'shared'}", env={"E31_TEST_SECRET": "x", "E31_TOKEN": "leaked"}
    )
    kernel = Kernel(server, tmp_path)
    try:
        kernel.run("%load_ext e31_jupyter\nimport numpy as np\nweights = np.arange(10.0)")
        out = kernel.run(
            "%%e31 submit --gpus 1 --name cell --wait\nimport os\n"
            "total = float(weights.sum())\nseen = os.environ['CUDA_VISIBLE_DEVICES']\n"
            "leaked = sorted(k for k in os.environ if k in ('E31_TEST_SECRET', 'E31_TOKEN'))\n"
            "open('note.txt', 'w').write('from slurm')",
            timeout=180,
        )
        assert out.error == "", out.error
        assert kernel.value("total") == "45.0"
        assert kernel.value("seen") in ("'0'", "'1'")
        assert kernel.value("leaked") == "[]"  # sbatch exported the allowlist alone
        assert (tmp_path / "e31-outputs" / "cell" / "note.txt").read_text() == "from slurm"
        assert list((tmp_path / "shared" / "jobs").iterdir())  # the job's files went to the shared folder
    finally:
        kernel.stop()


PAUSED_CELLS = (
    "import pathlib\nruns = pathlib.Path('runs.txt')\nruns.open('a').write('c1\\n')\na = 41",
    "import time\nruns.open('a').write('c2\\n')\ntime.sleep(3)",
    "runs.open('a').write('c3\\n')\nb = a + 1",
    "runs.open('a').write('c4\\n')\nassert b == 42",
)


def test_a_slurm_job_suspended_at_a_cells_end_is_resubmitted_to_slurm_when_resumed(client, server, slurm, tmp_path):
    job = client.submit(path=str(write_notebook(tmp_path / "paused.ipynb", *PAUSED_CELLS)), gpus=1, checkpoint=True)
    runs = server.data_dir / "jobs" / job["id"] / "work" / "runs.txt"
    wait_for(lambda: runs.exists() and "c2" in runs.read_text(), timeout=120, what="the second cell")
    first_slurm_id = _slurm_id(server, job["id"])
    client.suspend(job["id"])  # scancel --batch --signal=USR1: the worker ends its cell, saves, stops
    paused = wait_state(client, job["id"], "suspended", "failed", "succeeded", "cancelled", timeout=120)
    assert paused["state"] == "suspended" and "checkpoint after cell 2" in paused["reason"], paused["reason"]
    assert runs.read_text().split() == ["c1", "c2"]

    client.resume(job["id"])
    done = wait_state(client, job["id"], "succeeded", "failed", timeout=120)
    assert done["state"] == "succeeded", done["reason"]
    assert runs.read_text().split() == ["c1", "c2", "c3", "c4"]
    assert _slurm_id(server, job["id"]) != first_slurm_id  # a new Slurm job for the same e31 job
    assert [a["state"] for a in done["attempts"]] == ["suspended"]


def _slurm_id(server, job_id: str) -> str:
    import json
    import sqlite3

    with sqlite3.connect(server.data_dir / "e31.sqlite") as db:
        return json.loads(db.execute("SELECT handle FROM jobs WHERE id = ?", (job_id,)).fetchone()[0])["slurm_id"]


def test_slurm_refusing_a_job_creates_none_and_says_why(start_slurm_server, tmp_path, gated):
    for options, message in (
        (["--E31.slurm_partition=nope"], "Invalid partition name specified"),
        (["--E31.slurm_partition=team", "--E31.slurm_account=other"], "Invalid account"),
    ):
        server = start_slurm_server(*options, data_dir=tmp_path / options[-1].split("=")[1])
        refusing = E31Client(server.url, server.token)
        with pytest.raises(E31Error) as refused:
            gated.submit(refusing, "refused", gpus=1)
        assert refused.value.status == 400 and message in refused.value.message
        assert "Slurm" in refused.value.message
        with pytest.raises(E31Error) as checked:
            refusing.check(path=str(gated.notebook), gpus=1)
        assert (checked.value.status, checked.value.message) == (400, refused.value.message)
        assert refusing.jobs() == []
        assert list((server.data_dir / "jobs").iterdir()) == []


def test_one_shared_folder_serves_one_data_directory(start_slurm_server, tmp_path):
    start_slurm_server(f"--E31.slurm_shared_dir={tmp_path / 'shared'}", data_dir=tmp_path / "one")
    with pytest.raises(RuntimeError):
        start_slurm_server(f"--E31.slurm_shared_dir={tmp_path / 'shared'}", data_dir=tmp_path / "two")
    log = "\n".join(p.read_text() for p in tmp_path.glob("server-*.log"))
    assert "holds the jobs of the data directory" in log and str(tmp_path / "one") in log


def test_a_cap_on_each_users_gpus_is_left_to_slurm_and_said_so_at_start_up(start_slurm_server, tmp_path):
    with pytest.raises(RuntimeError, match="exited early"):
        start_slurm_server("--E31.max_gpus_per_user=1")
    log = "\n".join(p.read_text() for p in tmp_path.glob("server-*.log"))
    assert "c.E31.max_gpus_per_user is for queues e31 schedules" in log and "MaxTRESPerUser=gres/gpu=N" in log
    assert "Traceback" not in log


def test_timeout_fails_the_job_as_slurm_stops_it(timeout_job, slurm):
    """Last on purpose: its job was submitted before the first test (Slurm counts minutes)."""
    server, client, job = timeout_job
    job = wait_state(client, job["id"], "failed", "succeeded", timeout=150)
    assert job["state"] == "failed" and job["reason"].startswith("timeout"), job["reason"]
    assert "1m" in job["reason"]  # the limit Slurm enforced: whole minutes
    assert 60 <= ts(job["finished_at"]) - ts(job["started_at"]) < 120
    assert slurm.job_info(_slurm_id(server, job["id"]))["JobState"] == "TIMEOUT"
    assert job["gpus"] == [] and job["meter"]["gpu_seconds"] == 0
    assert (_jobdir(server, job["id"]) / "work" / "devices.txt").read_text() == ""  # no GPUs: sees none


# --- Slurm's words, without a cluster ----------------------------------------------------------


def test_a_deadline_asks_slurm_for_the_least_run_time_that_fits():
    now = 1_000_000.0
    assert deadline_limits(now + 3600, 600, 86400, now)[1] == "00:10:00"
    assert deadline_limits(now + 3600, 0, 86400, now)[1] == "00:01:00"  # no estimate: a minute
    assert deadline_limits(now + 3600, 7200, 7200, now)[1] == ""  # the limit is the estimate
    assert deadline_limits(now + 30, 20, 86400, now)[1] == ""  # cannot fit: Slurm expires it


def test_slurm_time_formats():
    assert slurm_duration(2) == "00:01:00"  # Slurm enforces whole minutes: rounded up
    assert slurm_duration(5400) == "01:30:00"
    assert slurm_duration(86400 + 61) == "1-00:02:00"
    assert parse_slurm_duration("1-02:03:04") == 93784
    assert parse_slurm_duration("05:00") == 300
    assert parse_slurm_duration("UNLIMITED") is None


def test_gpus_from_gres():
    assert gres_indices(["gpu:1(IDX:1)"]) == ["1"]
    assert gres_indices(["gpu:a100:4(IDX:0-1,3,5)"]) == ["0", "1", "3", "5"]
    assert gres_indices(["gpu:0(IDX:N/A)"]) == []
    assert gpu_count("gpu:2") == 2
    assert gpu_count("gpu:a100:4(S:0-1),gpu:v100:2") == 6
    assert gpu_count("(null)") == 0


@pytest.mark.parametrize(
    "state, e31_state, words",
    [
        ("COMPLETED", "succeeded", ""),
        ("TIMEOUT", "failed", "timeout"),
        ("DEADLINE", "expired", "deadline"),
        ("CANCELLED", "cancelled", "scancel"),
        ("NODE_FAIL", "failed", "node failure"),
        ("OUT_OF_MEMORY", "failed", "out of memory"),
        ("FAILED", "failed", "exit code 3"),
    ],
)
def test_slurm_states_in_e31_words(state, e31_state, words):
    got_state, reason = final_state(SlurmJob("7", state, exit_code=3, time_limit_s=60))
    assert got_state == e31_state and words in reason


def test_place_in_line_is_slurms_order():
    def pending(slurm_id, priority, submitted, partition="gpu"):
        return SlurmJob(slurm_id, "PENDING", priority=priority, submitted=submitted, partitions=frozenset([partition]))

    jobs = [
        pending("1", 10, 5),
        pending("2", 20, 9),
        pending("3", 10, 1),
        pending("4", 99, 0, "cpu"),
        pending("5", 0, 0),
    ]
    assert [queue_position(j, jobs) for j in jobs] == [3, 1, 2, 1, None]  # 5 is held


def test_squeue_json_of_later_slurm_versions_reads_the_same():
    newer = {
        "job_id": 9, "job_state": ["RUNNING"], "state_reason": "None", "batch_host": "n1",
        "gres_detail": ["gpu:2(IDX:0-1)"], "start_time": {"set": True, "infinite": False, "number": 100},
        "end_time": {"set": True, "infinite": False, "number": 200}, "time_limit": {"set": True, "number": 5},
        "priority": {"set": True, "number": 3}, "submit_time": {"set": True, "number": 50}, "partition": "gpu",
        "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
    }  # fmt: skip
    job = from_squeue(newer)
    assert (job.state, job.node, job.gpus, job.start, job.time_limit_s, job.exit_code) == (
        "RUNNING", "n1", ["0", "1"], 100.0, 300.0, 0,
    )  # fmt: skip


# --- helpers -----------------------------------------------------------------------------------


def _slurm_server(data_dir: Path, root: Path) -> ServerProcess:
    return ServerProcess(data_dir, gpus=None, root_dir=root, extra_args=["--E31.backend=slurm"])


def _active_jobs(slurm: SlurmCluster) -> list[tuple[str, str]]:
    lines = slurm.run("squeue", "--noheader", "--format=%i %j").stdout.splitlines()
    return [tuple(line.split(maxsplit=1)) for line in lines if line.strip()]


def _with_reason(client, job_id: str, word: str) -> dict | None:
    job = client.job(job_id)
    return job if word in job["reason"] else None


def _store_row(server, job_id: str) -> dict:
    with sqlite3.connect(server.data_dir / "e31.sqlite") as db:
        db.row_factory = sqlite3.Row
        return dict(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())


def _slurm_id(server, job_id: str) -> str:
    return json.loads(_store_row(server, job_id)["handle"])["slurm_id"]


def _jobdir(server, job_id: str) -> Path:
    return Path(json.loads(_store_row(server, job_id)["handle"])["jobdir"])


def _devices_seen(server, job_id: str) -> str:
    path = _jobdir(server, job_id) / "work" / "devices.txt"
    return wait_for(lambda: path.exists() and path.read_text(), 60, what=f"{job_id} to write devices.txt")


def _assert_meter_is_slurms(server, slurm: SlurmCluster, job: dict) -> None:
    """The meter is Slurm's elapsed time x the GPUs Slurm allocated, within a second."""
    info = slurm.job_info(_slurm_id(server, job["id"]))
    elapsed = parse_slurm_duration(info["RunTime"])
    assert job["meter"]["gpu_seconds"] == pytest.approx(elapsed * len(job["gpus"]), abs=1.0)
    assert job["meter"]["gpu_seconds"] > 0
