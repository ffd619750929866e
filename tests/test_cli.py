"""The ``e31`` command against a real server: submit, follow, inspect, collect, cancel, errors."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from datetime import date, datetime, timedelta
from datetime import time as dt_time
from urllib.parse import urlparse

import nbformat
import psutil
import pytest
from conftest import EXAMPLES, ts, wait_for, wait_state, write_notebook
from server_process import free_port
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter.cli import main
from e31_jupyter.client import E31Client
from e31_jupyter.notebook import values

TRAIN = str(EXAMPLES / "train.ipynb")
JOB_FIELDS = {
    "id", "name", "state", "reason", "queue_position", "request", "gpus", "meter", "progress",
    "submitted_at", "started_at", "finished_at",
}  # fmt: skip


@pytest.fixture
def e31(server, capsys):
    """Run ``e31 --url URL --token TOKEN ARGS...`` in this process: (exit code, stdout, stderr)."""

    def run(*args) -> tuple[int, str, str]:
        code = main(["--url", server.url, "--token", server.token, *map(str, args)])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def e31_process(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m e31_jupyter.cli ARGS...`` as its own process, for what only a process shows."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("E31_")} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "e31_jupyter.cli", *map(str, args)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


def submitted_id(err: str) -> str:
    """The job id from the first line ``submit --wait`` prints to stderr."""
    return err.split()[0]


@pytest.fixture
def trained(e31, client):
    """A finished run of the example notebook with 3 epochs on 1 GPU, charged to team vision."""
    code, out, err = e31("submit", TRAIN, "-p", "epochs", 3, "--gpus", 1, "--team", "vision")
    assert code == 0, out + err
    job_id = out.split()[0]
    assert wait_state(client, job_id, "succeeded", "failed")["state"] == "succeeded"
    return job_id


def assert_one_line_error(code: int, out: str, err: str, *words: str) -> None:
    assert code == 2
    assert out == ""
    assert err.startswith("e31: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err


# -- submit -----------------------------------------------------------------------------------


def test_submit_wait_prints_succeeded_and_exits_zero(e31, client):
    code, out, err = e31("submit", TRAIN, "-p", "epochs", 3, "--gpus", 1, "--wait")
    assert code == 0, out + err
    job_id = submitted_id(err)
    assert re.fullmatch(rf"{re.escape(job_id)}  succeeded  (<0\.001|0\.00\d) GPU-h\n", out)  # 1 GPU, seconds
    job = client.job(job_id)
    assert job["state"] == "succeeded"
    assert job["work"]["parameters"] == {"epochs": 3} and job["request"]["gpus"] == 1


def test_lists_mappings_and_untyped_text_reach_the_notebook_by_yaml_file_and_raw_parameters(e31, client, tmp_path):
    notebook = write_notebook(
        tmp_path / "shapes.ipynb",
        "import json, pathlib\n"
        "pathlib.Path('seen.json').write_text(json.dumps({'layers': layers, 'optim': optim, 'tag': tag, 'lr': lr}))",
        parameters="layers = [8]\noptim = {}\ntag = ''\nlr = 0.5",
    )
    (tmp_path / "base.yaml").write_text("optim:\n  name: adam\n  betas: [0.9, 0.99]\nlr: 0.1\n")
    code, out, err = e31(
        "submit", notebook, "-f", tmp_path / "base.yaml", "-y", "{layers: [64, 128], lr: 0.2}", "-p", "lr", "0.3",
        "-r", "tag", "001", "--wait",
    )  # fmt: skip
    assert code == 0, out + err
    job = client.job(submitted_id(err))
    expected = {"layers": [64, 128], "optim": {"name": "adam", "betas": [0.9, 0.99]}, "tag": "001", "lr": 0.3}
    assert job["work"]["parameters"] == expected
    dest = tmp_path / "out"
    assert e31("collect", job["id"], "--to", dest)[0] == 0
    assert json.loads((dest / "files" / "seen.json").read_text()) == expected


def test_parameters_that_cannot_be_read_are_refused_before_anything_is_submitted(e31, client, tmp_path):
    before = len(client.jobs())
    assert_one_line_error(*e31("submit", TRAIN, "-y", "[1, 2]"), "-y: it holds a list", "-y '{layers: [64, 128]")
    assert_one_line_error(*e31("submit", TRAIN, "-y", "{epochs: 3"), "-y: cannot read it as YAML")
    assert_one_line_error(*e31("submit", TRAIN, "-y", "start: 2024-01-01"), "'start'", "is a date", "Quote it")
    assert_one_line_error(*e31("submit", TRAIN, "-f", tmp_path / "none.yaml"), "none.yaml", "cannot read")
    assert len(client.jobs()) == before


def test_the_data_a_warning_suggests_works_as_typed_from_another_folder(e31, client, tmp_path, monkeypatch):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "rows.csv").write_text("a\nb\n")
    write_notebook(tmp_path / "exp" / "count.ipynb", "print(len(open('rows.csv').readlines()), 'rows')")
    monkeypatch.chdir(tmp_path)
    code, out, err = e31("submit", "exp/count.ipynb", "--check")
    assert code == 0 and "give it as data (--data exp/rows.csv)" in err
    code, out, err = e31("submit", "exp/count.ipynb", "--data", "exp/rows.csv", "--wait")  # as it says
    assert code == 0 and "warning" not in err, err
    assert "2 rows" in client.log_tail(submitted_id(err))


def test_a_notebook_naming_a_kernel_this_server_lacks_runs_on_the_one_given_with_kernel(e31, client, tmp_path):
    """papermill's own test notebooks name the kernel `python`: `papermill -k python3` runs them."""
    named = write_notebook(tmp_path / "named.ipynb", "import sys\nprint('ran on Python', sys.version_info[0])",
                           parameters="epochs = 1", kernel="python")  # fmt: skip
    assert_one_line_error(*e31("submit", named), "kernel 'python'", "Available kernels: ", "--kernel")
    assert_one_line_error(*e31("submit", named, "--kernel", "nope"), "no kernel 'nope'", "python3")
    code, out, err = e31("submit", named, "-k", "python3", "-p", "epochs", 2, "--wait")
    assert code == 0, out + err
    job = client.job(submitted_id(err))
    assert job["work"]["kernel"] == "python3" and "ran on Python 3" in client.log_tail(job["id"])
    code, out, err = e31("resubmit", job["id"], "--wait")  # on the kernel it ran on
    assert code == 0, out + err
    assert client.job(submitted_id(err))["work"]["kernel"] == "python3"


def test_submit_wait_of_a_failing_notebook_exits_non_zero(e31, tmp_path):
    bad = write_notebook(tmp_path / "bad.ipynb", "raise ValueError('no convergence')")
    code, out, err = e31("submit", bad, "--wait")
    assert code == 1
    assert re.match(r"\S+  failed: .*ValueError: no convergence", out)
    log = e31("logs", out.split()[0])[1]  # the traceback, in plain text
    assert "Traceback" in log and "----> 1 raise ValueError('no convergence')" in log and "\x1b[" not in log


def test_wait_blocks_until_every_job_named_has_ended(e31, client, tmp_path):
    bad = write_notebook(tmp_path / "bad.ipynb", "raise ValueError('no convergence')")
    good = client.submit(path=TRAIN, parameters={"epochs": 1})
    failing = client.submit(path=str(bad))
    code, out, _ = e31("wait", good["id"], "last")
    assert code == 1  # one of them failed
    assert [line.split()[:3] for line in out.splitlines()] == [
        [good["id"], "train", "succeeded"], [failing["id"], "bad", "failed:"],
    ]  # fmt: skip
    assert e31("wait", good["id"])[0] == 0


def test_submit_without_wait_prints_the_id_and_returns(e31, client, gated):
    code, out, _ = e31("submit", gated.notebook, "-p", "gate", gated.params("nw")["gate"], "-p", "runs", gated.runs)
    assert code == 0
    job_id = out.split()[0]
    assert client.job(job_id)["state"] in ("queued", "running")
    gated.open("nw")
    assert wait_state(client, job_id, "succeeded", "failed")["state"] == "succeeded"


def test_submit_check_says_where_the_job_would_wait_and_submits_nothing(e31, client, gated):
    code, out, err = e31("submit", TRAIN, "-p", "epoch", 3, "--gpus", 2, "--expected-runtime", "1h", "--check")
    assert code == 0, err
    assert out == "train: would be queued (position 1, expected to start now, to end in 1h); nothing was submitted\n"
    assert "did you mean 'epochs'" in err
    code, _, err = e31("submit", TRAIN, "-p", "learning_rate", "0.1,0.01", "--check")  # several values: a sweep
    assert code == 0 and "For one job per value, submit with --sweep learning_rate=0.1,0.01." in err
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2, expected_runtime="2h")["id"], "running")
    code, out, _ = e31("submit", TRAIN, "--gpus", 1, "--max-runtime", "10m", "--deadline", "+30m", "--check")
    assert code == 0 and "(position 1, expected to expire: its deadline is out of reach)" in out
    assert [j["id"] for j in client.jobs()] == [blocker["id"]]
    refused = e31_process("submit", TRAIN, "--check", "--wait")
    assert refused.returncode == 2 and "not allowed with argument" in refused.stderr
    gated.open("blocker")


def test_a_sweep_submits_one_job_per_combination(e31, client):
    sweep = ["--sweep", "epochs", 1, 2, "--sweep", "learning_rate=0.1,0.2"]  # both forms
    code, out, err = e31("submit", TRAIN, "--gpus", 1, *sweep, "--check")
    assert code == 0 and len(out.splitlines()) == 5 and client.jobs() == []
    assert (
        "train[epochs=2,learning_rate=0.2]: would be queued" in out and "nothing was submitted" in out.splitlines()[-1]
    )

    code, out, err = e31("submit", TRAIN, "--gpus", 1, *sweep, "--wait")
    assert code == 0, out + err
    lines = out.splitlines()
    assert [line.split()[1:3] for line in lines] == [
        ["train[epochs=1,learning_rate=0.1]", "succeeded"], ["train[epochs=1,learning_rate=0.2]", "succeeded"],
        ["train[epochs=2,learning_rate=0.1]", "succeeded"], ["train[epochs=2,learning_rate=0.2]", "succeeded"],
    ]  # fmt: skip
    jobs = [client.job(line.split()[0]) for line in lines]
    assert [job["work"]["parameters"] for job in jobs] == [
        {"epochs": 1, "learning_rate": 0.1}, {"epochs": 1, "learning_rate": 0.2},
        {"epochs": 2, "learning_rate": 0.1}, {"epochs": 2, "learning_rate": 0.2},
    ]  # fmt: skip
    assert "final loss after 2 epochs" in e31("logs", jobs[-1]["id"])[1]

    client.submit(path=TRAIN, name="trainer")  # not of the sweep
    code, out, _ = e31("jobs", "--name", "train[*", "--quiet")
    assert code == 0 and out.split() == [job["id"] for job in jobs][::-1]  # newest first
    code, out, _ = e31("jobs", "--name", "train[epochs=2*", "-n", 1)
    (row,) = out.splitlines()[1:]
    assert row.split()[:2] == [jobs[-1]["id"], "train[epochs=2,…arning_rate=0.2]"]  # cut in the middle
    assert e31("jobs", "--name", "nothing*")[1] == "No jobs named nothing*.\n"

    code, out, _ = e31("resubmit", jobs[-1]["id"], "-p", "epochs", 3)  # a point run again with another value
    again = client.job(out.split()[0])
    assert again["name"] == "train[epochs=3,learning_rate=0.2]"
    assert again["work"]["parameters"] == {"epochs": 3, "learning_rate": 0.2}
    code, out, _ = e31("resubmit", jobs[-1]["id"], "-p", "epochs", 3, "--name", "mine")
    assert client.job(out.split()[0])["name"] == "mine"  # a name given wins


def test_a_sweeps_jobs_say_their_places_and_starts_as_they_stand_once_all_are_in_line(e31, client, gated):
    wait_state(client, gated.submit(client, "blocker", gpus=2, expected_runtime="10m")["id"], "running")
    code, out, err = e31("submit", TRAIN, "--gpus", 1, "--expected-runtime", "5m", "--sweep", "epochs", 1, 2, 3, 4)
    assert code == 0, err
    lines = out.splitlines()
    assert [re.search(r"\(position (\d+)", line).group(1) for line in lines] == ["1", "2", "3", "4"], out
    assert all("expected to start in" in line for line in lines), out  # each point, not only the first
    listed = {job["id"]: job for job in client.jobs(state="queued")}
    for line in lines:  # as `e31 jobs` says right after
        assert f"(position {listed[line.split()[0]]['queue_position']}, " in line
    gated.open("blocker")


def test_a_sweep_refused_part_way_says_what_was_submitted(start_server, gated, capsys):
    server = start_server(extra_args=["--E31.max_queued_per_user=2"])
    client = E31Client(server.url, server.token)
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2)["id"], "running")
    sweep = ["submit", TRAIN, "--gpus", "2", "--sweep", "epochs", "1", "2", "3"]
    code = main(["--url", server.url, "--token", server.token, *sweep])
    out, err = capsys.readouterr()
    waiting = [job["id"] for job in client.jobs(state="queued")][::-1]
    assert len(waiting) == 2 and code == 2 and out == ""
    assert (
        "max_queued_per_user" in err
        and f"2 of the sweep's 3 jobs were submitted before that ({', '.join(waiting)})" in err
    )
    assert "train[epochs=3] and the rest were not" in err
    for job_id in waiting:
        client.cancel(job_id)
    gated.open("blocker")
    wait_state(client, blocker["id"], "succeeded")


def test_after_holds_a_job_until_the_one_it_names_has_succeeded(e31, client, gated):
    first = wait_state(client, gated.submit(client, "first", gpus=1)["id"], "running")
    code, out, err = e31("submit", TRAIN, "--after", "last", "--name", "then", "--check")
    assert code == 0 and f"then: would be queued (waiting for {first['id']} to succeed" in out, err
    code, out, err = e31("submit", TRAIN, "--after", first["id"].split("-")[1], "--name", "then")
    assert code == 0 and f"queued (waiting for {first['id']} to succeed" in out, err  # and a forecast, once learnt
    then_id = out.split()[0]
    row = next(line for line in e31("jobs")[1].splitlines() if line.startswith(then_id))
    assert row.split()[2:4] == ["queued", "-"] and f"after {first['id'].split('-')[1]}" in row  # and when, once learnt
    gated.open("first")
    assert wait_state(client, then_id, "succeeded", "failed", "expired")["state"] == "succeeded"


def test_resubmit_runs_a_job_again_with_what_was_changed(e31, client, trained):
    code, out, err = e31("resubmit", trained, "-p", "epochs", 2, "--gpus", 2, "--check")
    assert code == 0, err
    assert (
        out.startswith("train: would be queued (position 1, expected to start now") and "nothing was submitted" in out
    )
    assert [j["id"] for j in client.jobs()] == [trained]

    code, out, err = e31("resubmit", trained.split("-")[1], "-p", "epochs", 2, "--name", "again", "--wait")
    assert code == 0, out + err
    again = client.job(submitted_id(err))
    assert again["id"] != trained and again["state"] == "succeeded" and again["name"] == "again"
    assert again["work"]["parameters"] == {"epochs": 2}  # merged over the earlier {"epochs": 3}
    assert (again["request"]["gpus"], again["team"]) == (1, "vision")  # kept from the earlier job
    assert "final loss after 2 epochs" in e31("logs", again["id"])[1]
    assert_one_line_error(*e31("resubmit", trained, "--gpus", 5), "asked for 5")


# -- jobs, status, logs -----------------------------------------------------------------------


def test_jobs_json_lists_jobs_with_the_documented_fields(e31, client, gated, trained):
    running = wait_state(client, gated.submit(client, "holder", gpus=2)["id"], "running")
    queued = gated.submit(client, "waiter", gpus=1, deadline="+6h")
    code, out, _ = e31("jobs", "--json")
    assert code == 0
    jobs = {job["id"]: job for job in json.loads(out)["jobs"]}
    assert set(jobs) == {trained, running["id"], queued["id"]}
    for job in jobs.values():
        assert JOB_FIELDS <= set(job)
        assert {"gpus", "max_runtime_s", "deadline"} <= set(job["request"])
        assert {"gpu_seconds", "gpu_hours", "cost"} <= set(job["meter"])
        assert {"cells_done", "cells_total"} <= set(job["progress"])

    done = jobs[trained]
    assert (done["name"], done["state"], done["queue_position"]) == ("train", "succeeded", None)
    assert len(done["gpus"]) == 1 and done["request"]["gpus"] == 1
    assert done["meter"]["gpu_seconds"] > 0
    assert done["meter"]["gpu_hours"] == pytest.approx(done["meter"]["gpu_seconds"] / 3600, abs=1e-6)
    assert done["progress"]["cells_done"] == done["progress"]["cells_total"] > 0
    assert ts(done["submitted_at"]) <= ts(done["started_at"]) <= ts(done["finished_at"])

    waiting = jobs[queued["id"]]
    assert (waiting["state"], waiting["queue_position"], waiting["gpus"]) == ("queued", 1, [])
    assert waiting["meter"]["gpu_seconds"] == 0 and waiting["started_at"] is None
    assert waiting["request"]["deadline"] is not None
    assert jobs[running["id"]]["request"]["max_runtime_s"] == 86400

    code, out, _ = e31("jobs", "--state", "queued", "--json")
    assert [job["id"] for job in json.loads(out)["jobs"]] == [queued["id"]]
    gated.open("holder")
    gated.open("waiter")


def test_jobs_table_shows_one_row_per_job(e31, trained):
    code, out, _ = e31("jobs")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["ID", "NAME", "STATE", "POS", "STARTS", "GPUS", "GPU-H", "AGE"]
    assert row.split()[:6] == [trained, "train", "succeeded", "-", "-", "1"]


def test_status_shows_the_job_and_its_history(e31, trained):
    code, out, _ = e31("status", trained, "--json")
    assert code == 0
    job = json.loads(out)
    assert (job["id"], job["state"], job["reason"]) == (trained, "succeeded", "")
    assert [(t["from"], t["to"]) for t in job["transitions"]] == [
        (None, "queued"), ("queued", "running"), ("running", "succeeded"),
    ]  # fmt: skip

    code, out, _ = e31("status", trained)
    assert code == 0
    assert f"job:       {trained}" in out.splitlines() and "state:     succeeded" in out.splitlines()
    assert "params:    epochs=3" in out.splitlines() and "request:   1 GPU, max 1d" in out.splitlines()
    assert "history:" in out and "running -> succeeded" in out


def test_a_job_is_named_by_enough_of_its_id_or_as_the_newest(e31, client, gated, trained):
    for ref in (trained.split("-")[1][:4], trained[:11], trained.upper()):
        code, out, err = e31("status", ref)
        assert code == 0 and f"job:       {trained}" in out.splitlines(), (ref, err)
    newest = wait_state(client, gated.submit(client, "newest", gpus=1)["id"], "running")
    assert json.loads(e31("status", "last", "--json")[1])["id"] == newest["id"]
    assert e31("logs", "last", "--tail", 1)[0] == 0
    together = os.path.commonprefix([trained, newest["id"]])  # the date, at least
    assert_one_line_error(*e31("status", together), f"'{together}' could be any of 2 jobs", newest["id"], trained)
    assert_one_line_error(*e31("cancel", "ab"), "too short", "`last`")
    code, out, _ = e31("cancel", "last")
    assert code == 0 and out.startswith(f"{newest['id']}  ")
    assert wait_state(client, newest["id"], "cancelled", "succeeded", timeout=30)["state"] == "cancelled"


def test_last_before_any_job_is_a_clear_error(e31):
    assert_one_line_error(*e31("status", "last"), "no jobs yet")


def test_logs_print_the_jobs_log_and_its_tail(e31, trained):
    code, out, _ = e31("logs", trained)
    assert code == 0
    assert out.splitlines()[-1] == "e31 worker: succeeded"
    code, tail, _ = e31("logs", trained, "--tail", 1)
    assert (code, tail) == (0, "e31 worker: succeeded\n")


def test_logs_show_what_the_notebook_printed(e31, trained):
    out = e31("logs", trained)[1]
    assert "granted GPUs: " in out and "final loss after 3 epochs" in out


def test_a_log_holds_what_the_cells_printed_line_by_line_and_nothing_of_papermills(e31, client, tmp_path):
    printing = write_notebook(
        tmp_path / "prints.ipynb",
        "print('epoch 1')\nprint('epoch 2')",
        "1 + 1",
        "import sys\nprint('warn', file=sys.stderr)",
    )
    job = wait_state(client, client.submit(path=str(printing))["id"], "succeeded", "failed")
    assert e31("logs", job["id"])[1] == "epoch 1\nepoch 2\n2\nwarn\ne31 worker: succeeded\n"


def test_a_running_job_shows_the_last_line_it_printed(client, tmp_path):
    gate = tmp_path / "gate"
    printing = write_notebook(
        tmp_path / "epochs.ipynb",
        "import os, time\nfor epoch in range(1, 4):\n    print(f'epoch {epoch}/12', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}):\n    time.sleep(0.1)",
    )
    job = client.submit(path=str(printing))
    running = wait_for(
        lambda: (j := client.job(job["id"]))["progress"]["last_line"] == "epoch 3/12" and j, what="the last line"
    )
    assert running["state"] == "running"
    gate.touch()
    ended = wait_state(client, job["id"], "succeeded", "failed")
    assert ended["progress"]["last_line"] is None  # only while it runs


# -- collect ----------------------------------------------------------------------------------


def test_collect_writes_the_notebook_report_and_files(e31, trained, tmp_path):
    dest = tmp_path / "out"
    code, out, _ = e31("collect", trained, "--to", dest)
    assert code == 0 and out == f"Collected job {trained} into {dest}\n"

    assert json.loads((dest / "job.json").read_text())["id"] == trained
    assert not (dest / "values").exists()  # a notebook's job returns no values
    executed = nbformat.read(dest / "train.executed.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "epochs = 3" in injected[0].source
    assert "final loss after 3 epochs" in (dest / "train.executed.html").read_text()

    header, *rows = (dest / "files" / "metrics.csv").read_text().splitlines()
    assert header == "epoch,loss"
    assert [row.split(",")[0] for row in rows] == ["0", "1", "2"]
    assert [float(row.split(",")[1]) for row in rows] == pytest.approx(
        [math.exp(-0.1 * epoch) + 0.05 for epoch in range(3)]
    )
    assert (dest / "files" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_collect_into_a_folder_holding_another_jobs_output_takes_a_folder_of_its_own(e31, client, trained, tmp_path):
    other = wait_state(client, client.submit(path=TRAIN, parameters={"epochs": 1})["id"], "succeeded")["id"]
    dest = tmp_path / "results"
    assert e31("collect", trained, "--to", dest)[:2] == (0, f"Collected job {trained} into {dest}\n")
    code, out, _ = e31("collect", other, "--to", dest)
    assert code == 0 and out.startswith(f"Collected job {other} into {dest}-{other}\n")
    assert json.loads((dest / "job.json").read_text())["id"] == trained  # untouched
    assert json.loads((tmp_path / f"results-{other}" / "job.json").read_text())["id"] == other
    assert e31("collect", trained, "--to", dest)[1] == f"Collected job {trained} into {dest}\n"  # its own again


def test_collect_of_several_jobs_gives_each_a_folder(e31, client, gated, trained, tmp_path):
    other = wait_state(client, client.submit(path=TRAIN, parameters={"epochs": 1})["id"], "succeeded")
    busy = wait_state(client, gated.submit(client, "busy", gpus=1)["id"], "running")
    code, out, err = e31("collect", trained, other["id"], busy["id"], "--to", tmp_path / "all")
    assert code == 2 and "still running" in err
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == sorted([f"e31-{trained}", f"e31-{other['id']}"])
    assert json.loads((tmp_path / "all" / f"e31-{other['id']}" / "job.json").read_text())["id"] == other["id"]
    assert (tmp_path / "all" / f"e31-{trained}" / "files" / "metrics.csv").is_file()
    assert len(out.splitlines()) == 2
    gated.open("busy")


def test_collect_brings_the_values_a_cell_returned(e31, client, tmp_path):
    # The job's values as a %%e31 cell's results cell hands them back.
    cell = "import json\nfrom e31_jupyter.values import save_outputs\nscores = {'a': [1, 2]}\nsave_outputs(globals(), ['scores', 'json'])"
    notebook = write_notebook(tmp_path / "cell.ipynb", cell)
    job_id = e31("submit", notebook)[1].split()[0]
    assert wait_state(client, job_id, "succeeded", "failed")["state"] == "succeeded"
    dest = tmp_path / "out"
    code, out, _ = e31("collect", job_id, "--to", dest)
    assert code == 0 and out.splitlines()[0] == f"Collected job {job_id} into {dest}"
    assert out.splitlines()[1] == (
        f"  values scores, json in {dest / 'values'}; in Python: e31_jupyter.values.load({str(dest / 'values')!r})"
    )
    assert values.load(str(dest / "values")) == {"scores": {"a": [1, 2]}}  # json is a module: imported, not pickled
    assert values.restore(dest / "values")[0]["json"] is json


def test_interrupting_a_wait_says_the_job_goes_on(server, client, gated):
    job = wait_state(client, gated.submit(client, "held", gpus=1)["id"], "running")
    env = {k: v for k, v in os.environ.items() if not k.startswith("E31_")}
    command = [sys.executable, "-m", "e31_jupyter.cli", "--url", server.url, "--token", server.token, "wait", job["id"]]
    waiting = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background parent may ignore it
    )  # fmt: skip
    wait_for(lambda: _talks_to(waiting.pid, server.url), what="e31 wait to reach the server")  # past its start-up
    waiting.send_signal(signal.SIGINT)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 130 and out == ""
    assert (
        err.strip()
        == "e31: interrupted. Jobs already submitted go on: `e31 jobs` lists them, `e31 cancel JOB` stops one."
    )
    assert client.job(job["id"])["state"] == "running"
    gated.open("held")


def _talks_to(pid: int, url: str) -> bool:
    process = psutil.Process(pid)
    connections = getattr(process, "net_connections", process.connections)(kind="tcp")  # psutil < 6: connections
    return any(c.raddr and c.raddr.port == urlparse(url).port for c in connections)


def test_collect_before_the_job_ends_is_refused(e31, client, gated, tmp_path):
    job = wait_state(client, gated.submit(client, "busy", gpus=1)["id"], "running")
    assert_one_line_error(*e31("collect", job["id"], "--to", tmp_path / "out"), "still running")
    assert not (tmp_path / "out").exists()
    gated.open("busy")


# -- cancel -----------------------------------------------------------------------------------


def test_cancel_ends_a_running_job_and_frees_its_gpu(e31, client, gated):
    job = wait_state(client, gated.submit(client, "victim", gpus=1)["id"], "running")
    code, out, _ = e31("cancel", job["id"])
    assert code == 0 and out.startswith(f"{job['id']}  ")
    job = wait_state(client, job["id"], "cancelled", "failed", "succeeded", timeout=30)
    assert job["state"] == "cancelled" and "cancelled by" in job["reason"]
    assert json.loads(e31("gpus", "--json")[1])["free"] == 2


def test_cancel_of_a_finished_job_is_refused(e31, trained):
    assert_one_line_error(*e31("cancel", trained), "already ended")


def test_cancel_of_several_jobs_cancels_each_it_can(e31, client, gated, trained):
    running = wait_state(client, gated.submit(client, "running", gpus=2)["id"], "running")
    queued = gated.submit(client, "queued", gpus=1)
    assert_one_line_error(*e31("cancel", running["id"], "nosuchjob"), "nosuchjob")  # nothing cancelled
    assert client.job(running["id"])["state"] == "running"
    code, out, err = e31("cancel", running["id"], trained, queued["id"])
    assert code == 2 and "already ended" in err and trained in err
    assert [line.split()[0] for line in out.splitlines()] == [running["id"], queued["id"]]
    assert wait_state(client, queued["id"], "cancelled")["state"] == "cancelled"
    assert wait_state(client, running["id"], "cancelled", "succeeded", timeout=30)["state"] == "cancelled"


# -- delete -----------------------------------------------------------------------------------


def test_delete_frees_an_ended_jobs_files_and_status_and_collect_say_so(e31, client, gated, trained, tmp_path):
    running = wait_state(client, gated.submit(client, "running", gpus=1)["id"], "running")
    code, out, err = e31("delete", trained, running["id"])
    assert code == 2 and running["id"] in err and "Cancel it first" in err
    assert re.fullmatch(rf"{trained}  files deleted \([\d.]+ [KM]B freed\); the record stays\n", out), out
    code, out, _ = e31("status", trained)
    assert code == 0 and re.search(r"files: +deleted \d{4}-\d\d-\d\d [\d:]+ \S+ by \S+ \([\d.]+ [KM]B freed\)", out), (
        out
    )
    assert "succeeded -> succeeded  files deleted by" in out
    assert_one_line_error(*e31("collect", trained, "--to", tmp_path / "back"), "files were deleted", "e31 status")
    assert not (tmp_path / "back").exists()
    gated.open("running")


# -- update -----------------------------------------------------------------------------------


def _local_8am_after(days: int) -> float:
    return datetime.combine(date.today() + timedelta(days=days), dt_time(8)).timestamp()


def test_update_changes_each_queued_job_it_can_and_names_the_one_it_cannot(e31, client, gated):
    running = wait_state(client, gated.submit(client, "running", gpus=2)["id"], "running")
    first = gated.submit(client, "first", gpus=1, deadline="+3h")
    second = gated.submit(client, "second", gpus=1)
    assert_one_line_error(*e31("update", first["id"]), "Say what to change", "--deadline")
    code, out, err = e31("update", first["id"], running["id"], second["id"], "--deadline", "+1h", "--gpus", "2")
    assert code == 2 and err.count("\n") == 1 and running["id"] in err and "only a queued job" in err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == [first["id"], second["id"]]
    assert "changed gpus 1 -> 2; deadline " in lines[0] and "now queued (position " in lines[0]
    assert re.search(r"changed gpus 1 -> 2; deadline none -> \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC;", lines[1])
    assert [client.job(j["id"])["request"]["gpus"] for j in (first, second)] == [2, 2]
    code, out, _ = e31("update", first["id"], "--no-deadline", "--json")
    assert code == 0 and json.loads(out)["request"]["deadline"] is None
    tomorrow_8am = [_local_8am_after(days) for days in (1, 2)]  # the second, should the test run across midnight
    code, out, _ = e31("update", first["id"], "--deadline", "tomorrow", "8am", "--json")  # typed without quotes
    assert code == 0 and ts(json.loads(out)["request"]["deadline"]) in tomorrow_8am
    assert_one_line_error(*e31("update", second["id"], "--after", "last"), "cannot run after itself")  # its newest
    code, out, _ = e31("update", second["id"], "--after", first["id"], "--after", running["id"])
    assert code == 0 and f"changed after none -> {first['id']}, {running['id']}; now queued (waiting for" in out
    code, out, _ = e31("update", second["id"], "--no-after")
    assert code == 0 and f"changed after {first['id']}, {running['id']} -> none" in out
    for name in ("running", "first", "second"):
        gated.open(name)


# -- meter and gpus ---------------------------------------------------------------------------


def test_meter_json_reports_usage_by_user_and_team(e31, client, trained):
    code, out, _ = e31("meter", "--json")
    assert code == 0
    meter = json.loads(out)
    assert {"since", "until", "gpu_seconds", "gpu_hours", "cost", "currency", "by_user", "by_team"} <= set(meter)
    held = client.job(trained)["meter"]["gpu_seconds"]
    assert meter["gpu_seconds"] == pytest.approx(held, abs=0.01)
    assert meter["by_team"]["vision"]["gpu_seconds"] == pytest.approx(held, abs=0.01)
    assert sum(u["gpu_seconds"] for u in meter["by_user"].values()) == pytest.approx(held, abs=0.01)


def test_gpus_json_shows_who_holds_which_gpu(e31, client, gated):
    job = wait_state(client, gated.submit(client, "holder", gpus=1)["id"], "running")
    code, out, _ = e31("gpus", "--json")
    assert code == 0
    pool = json.loads(out)
    assert (pool["total"], pool["free"], pool["running"], pool["queued"], pool["source"]) == (
        2, 1, 1, 0, "configured",
    )  # fmt: skip
    assert {g["id"]: g["job"] for g in pool["gpus"]} == {
        job["gpus"][0]: job["id"],
        ({"0", "1"} - set(job["gpus"])).pop(): None,
    }
    gated.open("holder")


def test_status_and_gpus_say_why_gpu_use_is_not_measured_on_a_machine_without_nvml(e31, client, gated):
    job = wait_state(client, gated.submit(client, "unread", gpus=1)["id"], "running")
    wait_for(lambda: (client.job(job["id"])["gpu_use"] or {}).get("why_absent"), what="the GPUs to be read")
    code, out, _ = e31("status", job["id"])
    assert code == 0
    assert "GPU use:   not measured: NVML is not available on this machine (no NVIDIA driver)" in out
    code, out, _ = e31("gpus")
    assert code == 0 and "UTIL" in out
    assert "no readings: NVML is not available on this machine (no NVIDIA driver)" in out
    gated.open("unread")
    wait_state(client, job["id"], "succeeded")
    code, out, _ = e31("meter")
    assert code == 0 and "GPU-hours used are not measured: NVML is not available on this machine" in out


# -- errors -----------------------------------------------------------------------------------


def test_status_of_an_unknown_job_is_a_one_line_error(server):
    result = e31_process("--url", server.url, "--token", server.token, "status", "nosuchjob")
    assert_one_line_error(result.returncode, result.stdout, result.stderr, "nosuchjob")


def test_submit_asking_more_gpus_than_exist_names_the_inventory(e31, client):
    assert_one_line_error(*e31("submit", TRAIN, "--gpus", 5), "asked for 5", "2 GPU(s): 0, 1")
    assert client.jobs() == []


def test_a_bad_token_is_a_clear_error(server, capsys):
    code = main(["--url", server.url, "--token", "not-the-token", "jobs"])
    assert_one_line_error(code, *capsys.readouterr(), "check the token")


def test_no_server_at_the_url_is_a_clear_error(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code = main(["--url", url, "--token", "t", "jobs"])
    assert_one_line_error(code, *capsys.readouterr(), "Cannot reach the e31 server", url)


def test_the_server_is_found_from_the_environment(server, tmp_path):
    env = {"E31_URL": server.url, "E31_TOKEN": server.token}
    result = e31_process("gpus", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total"] == 2

    nb = write_notebook(tmp_path / "ok.ipynb", "print('hello from the job')")
    result = e31_process("submit", nb, "--wait", env=env)
    assert result.returncode == 0, result.stderr
    assert " succeeded " in result.stdout


def test_a_wrong_token_in_the_environment_is_a_clear_error(server):
    result = e31_process("jobs", env={"E31_URL": server.url, "E31_TOKEN": "not-the-token"})
    assert_one_line_error(result.returncode, result.stdout, result.stderr, "check the token")
