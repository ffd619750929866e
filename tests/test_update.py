"""Changing a queued job in place (``PATCH /jobs/{id}``, ``e31 update``): a real server, real
kernels, the real SQLite file."""

from __future__ import annotations

import json
import time

import pytest
from conftest import wait_state
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter.core.errors import InvalidRequest


def test_a_queued_job_takes_its_new_request_keeps_its_id_and_those_waiting_for_it(client, gated):
    hog = wait_state(client, gated.submit(client, "hog", gpus=2)["id"], "running")
    early = gated.submit(client, "early", gpus=1, deadline="+2h", expected_runtime="1m")
    late = gated.submit(client, "late", gpus=1, deadline="+3h", expected_runtime="1m")
    after = client.submit(path=str(gated.notebook), name="after", parameters=gated.params("after"), after=late["id"])
    assert (client.job(early["id"])["queue_position"], client.job(late["id"])["queue_position"]) == (1, 2)

    late = client.update(late["id"], deadline="+1h", gpus=2, name="urgent", team="vision")
    assert late["state"] == "queued" and late["name"] == "urgent"
    assert [c.split()[0] for c in late["changed"]] == ["gpus", "deadline", "name", "team"]
    assert late["request"]["gpus"] == 2 and late["queue_position"] == 1  # earliest deadline now
    assert client.job(early["id"])["queue_position"] == 2
    history = client.job(late["id"])["transitions"]
    assert (history[-1]["from"], history[-1]["to"]) == ("queued", "queued")
    assert history[-1]["reason"].startswith("changed by ") and "gpus 1 -> 2" in history[-1]["reason"]
    assert client.job(after["id"])["waiting_for"] == [late["id"]]

    again = client.check_resubmit(late["id"])  # a resubmit starts from the job as it is now
    assert again["name"] == "urgent" and again["request"]["gpus"] == 2

    gated.open("hog")
    started = wait_state(client, late["id"], "running")
    assert len(started["gpus"]) == 2  # the new request is what it was granted
    gated.open("late")  # its gate is named by the parameter it was submitted with
    assert wait_state(client, late["id"], "succeeded")["state"] == "succeeded"
    gated.open("early")
    gated.open("after")
    assert wait_state(client, after["id"], "succeeded")["state"] == "succeeded"
    assert wait_state(client, early["id"], "succeeded")["state"] == "succeeded"
    assert hog["id"] != late["id"]


def test_a_deadline_or_expected_run_time_can_be_cleared_and_nothing_changed_changes_nothing(client, gated):
    hog = wait_state(client, gated.submit(client, "hog", gpus=2)["id"], "running")
    job = gated.submit(client, "job", gpus=1, deadline="+2h", expected_runtime="10m", max_runtime="1h")
    renamed = client.update(job["id"], name="renamed")  # its deadline, not named, is not changed
    assert (
        renamed["changed"] == ["name job -> renamed"] and renamed["request"]["deadline"] == job["request"]["deadline"]
    )
    job = client.update(job["id"], deadline=None, expected_runtime=None)
    assert job["request"]["deadline"] is None and job["request"]["expected_runtime_s"] is None
    assert job["request"]["max_runtime_s"] == 3600  # what was not named stays
    before = client.job(job["id"])["transitions"]
    same = client.update(job["id"], gpus=1, max_runtime="1h")
    assert same["changed"] == [] and client.job(job["id"])["transitions"] == before
    gated.open("hog")
    gated.open("job")
    assert wait_state(client, job["id"], "succeeded")["state"] == "succeeded"
    assert hog["state"] == "running"


def test_the_jobs_a_queued_job_runs_after_change_and_a_cycle_is_refused(server, client, gated):
    first = wait_state(client, gated.submit(client, "first", gpus=1)["id"], "running")  # one GPU stays free
    then = gated.submit(client, "then", gpus=2)  # cannot start beside it
    last = gated.submit(client, "last", gpus=1, after=then["id"])
    assert client.job(then["id"])["queue_position"] == 1

    then = client.update(then["id"], gpus=1, after=first["id"].split("-")[1][:4])  # the client resolves a short id
    assert then["changed"] == ["gpus 2 -> 1", f"after none -> {first['id']}"]
    assert then["waiting_for"] == [first["id"]] and then["queue_position"] is None  # out of the line
    assert then["request"]["after"] == [first["id"]]
    spec = json.loads((server.data_dir / "jobs" / then["id"] / "spec.json").read_text())
    assert spec["after"] == [first["id"]]
    time.sleep(2)  # passes of the scheduler: a GPU is free, and it fits, but it waits for "first"
    assert client.job(then["id"])["state"] == "queued"

    for ref, words in ((last["id"], "which waits for it: neither would ever start"), (then["id"], "after itself")):
        with pytest.raises(InvalidRequest, match=words):
            client.update(then["id"], after=ref)
    assert client.job(then["id"])["request"]["after"] == [first["id"]]  # a refusal changes nothing

    last = client.update(last["id"], after=[])  # after nothing any more: it starts on the free GPU
    assert last["changed"] == [f"after {then['id']} -> none"]
    assert wait_state(client, last["id"], "running")["state"] == "running"
    gated.open("first")
    first = wait_state(client, first["id"], "succeeded")
    then = wait_state(client, then["id"], "running")
    assert then["started_at"] >= first["finished_at"]
    gated.open("then")
    gated.open("last")
    assert wait_state(client, then["id"], "succeeded")["state"] == "succeeded"
    assert wait_state(client, last["id"], "succeeded")["state"] == "succeeded"
