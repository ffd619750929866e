"""c.E31.max_gpus_per_user against a real server: a user's jobs hold at most so many GPUs at
once, the next one waits (saying why) though GPUs are free, and starts when one of them ends."""

from __future__ import annotations

import pytest
from conftest import wait_for, wait_state

from e31_jupyter.cli import main
from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error


def test_a_users_jobs_hold_at_most_the_cap_and_the_next_starts_when_one_ends(start_server, gated, capsys):
    server = start_server(gpus=["0", "1", "2"], extra_args=["--E31.max_gpus_per_user=2"])
    client = E31Client(server.url, server.token)
    first, second = (wait_state(client, gated.submit(client, name, gpus=1)["id"], "running") for name in ("a", "b"))
    third = gated.submit(client, "c", gpus=1)
    waiting = wait_for(lambda: (job := client.job(third["id"]))["held_back"] and job, 10, what="c to be held back")
    assert waiting["state"] == "queued" and client.gpus()["free"] == 1  # a GPU free all the same
    said = f"{third['owner']}'s jobs already hold 2 GPU(s), and one user's jobs may hold at most 2 at once"
    assert said in waiting["held_back"]
    code = main(["--url", server.url, "--token", server.token, "jobs"])
    out = capsys.readouterr().out
    assert code == 0 and f"{third['id']}  {waiting['held_back']}" in out  # e31 jobs says why it waits

    gated.open("a")
    assert wait_state(client, first["id"], "succeeded", "failed")["state"] == "succeeded"
    started = wait_state(client, third["id"], "running")
    assert started["held_back"] is None and len(started["gpus"]) == 1
    for name in ("b", "c"):
        gated.open(name)
    assert wait_state(client, second["id"], "succeeded", "failed")["state"] == "succeeded"


def test_a_job_asking_for_more_than_the_cap_is_refused_naming_the_setting(start_server, gated):
    server = start_server(gpus=["0", "1", "2"], extra_args=["--E31.max_gpus_per_user=2"])
    client = E31Client(server.url, server.token)
    with pytest.raises(E31Error) as refused:
        gated.submit(client, "big", gpus=3)
    assert refused.value.status == 400
    assert refused.value.message == (
        "gpus: asked for 3, but one user's jobs may hold at most 2 GPU(s) at once on this queue "
        "(c.E31.max_gpus_per_user). Ask for at most 2."
    )
    assert client.jobs() == []
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2)["id"], "running")
    waiting = gated.submit(client, "waiting", gpus=1)
    with pytest.raises(E31Error) as refused:
        client.update(waiting["id"], gpus=3)  # a change is held to it too
    assert refused.value.status == 400 and "(c.E31.max_gpus_per_user). Ask for at most 2." in refused.value.message
    assert client.job(waiting["id"])["request"]["gpus"] == 1
    for name in ("blocker", "waiting"):
        gated.open(name)
    assert wait_state(client, blocker["id"], "succeeded", "failed")["state"] == "succeeded"
