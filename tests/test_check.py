"""Checking a submit without submitting (``POST /e31/api/check``, ``e31 submit --check``): the
same refusals and warnings as a submit, and where the job would wait, with nothing created."""

from __future__ import annotations

import re
import time

import pytest
from support import ts, wait_for, wait_state

from e31_jupyter.cli import main
from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error


def _made(client, tmp_path) -> tuple[list[str], list[str]]:
    """The jobs, and what submits left in the data directory (job folders, staging, inbox)."""
    data = tmp_path / "data"
    return [j["id"] for j in client.jobs()], sorted(p.name for f in ("jobs", "inbox") for p in (data / f).iterdir())


def test_a_check_says_where_the_job_would_wait_and_creates_nothing(client, gated, tmp_path):
    """Nothing has finished on this server, so run times are what the jobs declared."""
    blocker = gated.submit(client, "blocker", gpus=2, max_runtime="4h", expected_runtime="2h")
    blocker = wait_state(client, blocker["id"], "running")
    first = gated.submit(client, "first", gpus=2, max_runtime="1h")
    made = _made(client, tmp_path)

    check = client.check(
        path=str(gated.notebook), gpus=1, max_runtime="30m", data=[str(gated.notebook)],
        parameters={"gat": "x"},
    )  # fmt: skip
    started = ts(blocker["started_at"])
    assert check["submitted"] is False and check["name"] == "gated"
    assert check["queue_position"] == 2  # behind first, which came first
    assert ts(check["expected_start"]) == pytest.approx(started + 7200 + 3600, abs=0.01)
    assert ts(check["expected_end"]) == pytest.approx(started + 7200 + 3600 + 1800, abs=0.01)
    assert check["expected_to_expire"] is False
    assert check["request"]["gpus"] == 1 and check["request"]["max_runtime_s"] == 1800
    assert check["work"]["kernel"] == "python3" and check["work"]["data"] == [str(gated.notebook)]
    assert any("did you mean 'gate'" in w for w in check["warnings"]), check["warnings"]

    assert _made(client, tmp_path) == made  # nothing queued, staged or copied
    assert client.job(first["id"])["queue_position"] == 1  # the line is as it was

    # A deadline the forecast cannot meet: it would be given up on before it starts.
    late = client.check(path=str(gated.notebook), gpus=1, max_runtime="30m", deadline="+40m")
    assert late["expected_to_expire"] is True and late["expected_start"] is None
    for name in ("blocker", "first"):
        gated.open(name)


def test_a_check_refuses_what_a_submit_refuses_with_the_same_message(client, gated):
    for body in ({"path": str(gated.notebook), "gpus": 3}, {"path": "missing.ipynb"}, {"notebook": 7}):
        with pytest.raises(E31Error) as checked:
            client.check(**body)
        with pytest.raises(E31Error) as submitted:
            client.submit(**body)
        assert checked.value.status == submitted.value.status == 400
        assert checked.value.message == submitted.value.message
    assert client.jobs() == []


def test_a_check_with_free_gpus_would_start_now(client, gated):
    check = client.check(path=str(gated.notebook), gpus=2, expected_runtime="10m")
    assert check["queue_position"] == 1
    assert ts(check["expected_start"]) == pytest.approx(ts(check["expected_end"]) - 600, abs=0.01)
    assert check["warnings"] == [] and client.jobs() == []


def test_a_job_held_back_while_gpus_are_free_says_why(start_server, gated, capsys):
    """Five GPUs: jobs expected to run over a day may hold 3 of them while they can wait, once
    short jobs that could not wait have come; before that nothing is kept for them."""
    server = start_server(gpus=[str(n) for n in range(5)])
    client = E31Client(server.url, server.token)
    first = wait_state(client, gated.submit(client, "first", gpus=3, max_runtime="3d")["id"], "running")
    beside = gated.submit(client, "beside", gpus=1, max_runtime="3d")  # no short job yet: it starts
    wait_state(client, beside["id"], "running")
    short = gated.submit(client, "short", gpus=1, max_runtime="10m", deadline="+30m")  # it could not wait
    short = wait_state(client, short["id"], "running")
    client.cancel(short["id"])  # a short job came (had it succeeded, the long jobs' run times would look short)
    wait_state(client, short["id"], "cancelled")
    second = gated.submit(client, "second", gpus=1, max_runtime="3d")  # no deadline: it can wait

    held = wait_for(lambda: client.job(second["id"])["held_back"], what="second to be held back")
    assert "jobs expected to run over 24 h already hold 4 GPUs" in held and "at most 60% of the GPUs (3)" in held
    assert "while they can wait and short jobs keep coming" in held
    assert re.search(r"a day after the last short job came \(in (\d+\.\d) h if no other comes\)", held)
    second = client.job(second["id"])
    assert second["state"] == "queued" and second["queue_position"] == 1
    # the forecast takes short jobs to keep coming: when the first ends
    assert ts(second["expected_start"]) == pytest.approx(ts(first["started_at"]) + 3 * 86400, abs=1)
    assert main(["--url", server.url, "--token", server.token, "status", second["id"]]) == 0
    assert f"held back though GPUs are free: {held}" in capsys.readouterr().out
    assert main(["--url", server.url, "--token", server.token, "jobs"]) == 0
    assert f"Held back though GPUs are free:\n  {second['id']}  {held}\n" in capsys.readouterr().out

    short = client.check(path=str(gated.notebook), gpus=1, max_runtime="10m")  # behind second, yet it starts now
    assert short["held_back"] is None and short["queue_position"] == 2
    assert ts(short["expected_start"]) == pytest.approx(time.time(), abs=10)
    assert client.job(first["id"])["held_back"] is None  # running
    for name in ("first", "beside", "second"):
        gated.open(name)
    client.cancel(second["id"])


def test_the_queue_sets_long_jobs_share(start_server, gated):
    server = start_server(gpus=[str(n) for n in range(5)], extra_args=["--E31.long_jobs_share=1"])
    client = E31Client(server.url, server.token)
    first = gated.submit(client, "first", gpus=3, max_runtime="3d")
    second = gated.submit(client, "second", gpus=1, max_runtime="3d")  # no limit: it starts beside the first
    for job in (first, second):
        wait_state(client, job["id"], "running")
        gated.open(job["name"])
