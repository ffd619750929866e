"""Lists a page at a time, jobs asked for by id, and places in line that follow the queue."""

from __future__ import annotations

from dataclasses import replace

import pytest
import requests
from support import ts, wait_for, wait_state, write_notebook

from e31_jupyter.core import policies
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import Pending, Snapshot
from e31_jupyter.core.queue_order import Line


def _queue_behind_a_blocker(client, gated, count: int) -> tuple[dict, list[dict]]:
    """A job holding both GPUs, and ``count`` two-GPU jobs waiting behind it, oldest first."""
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2)["id"], "running")
    waiting = [gated.submit(client, f"waiting{i}", gpus=2) for i in range(count)]
    return blocker, waiting


def test_pages_follow_one_another_without_gaps_or_repeats(server, client, gated):
    blocker, waiting = _queue_behind_a_blocker(client, gated, 7)
    api = f"{server.url}/e31/api/jobs"
    headers = {"Authorization": f"token {server.token}"}
    newest_first = [j["id"] for j in reversed(waiting)] + [blocker["id"]]

    seen, before = [], None
    while True:
        page = requests.get(
            api, params={"limit": 3, **({"before": before} if before else {})}, headers=headers, timeout=30
        ).json()
        assert len(page["jobs"]) <= 3
        seen += [j["id"] for j in page["jobs"]]
        before = page["next"]
        if before is None:
            break
    assert seen == newest_first
    assert [j["id"] for j in client.jobs()] == newest_first  # the client follows the pages
    assert [j["id"] for j in client.jobs(limit=2)] == newest_first[:2]
    assert [j["id"] for j in client.jobs(state="queued", limit=100)] == newest_first[:-1]

    wanted = [waiting[5]["id"], blocker["id"], "no-such-job"]
    assert {j["id"] for j in client.jobs(ids=wanted)} == {waiting[5]["id"], blocker["id"]}

    for params, field in (({"limit": 0}, "limit"), ({"limit": 5000}, "limit"), ({"limit": "ten"}, "limit")):
        refused = requests.get(api, params=params, headers=headers, timeout=30)
        assert refused.status_code == 400 and field in refused.json()["message"]
    unknown = requests.get(api, params={"before": "nope"}, headers=headers, timeout=30)
    assert unknown.status_code == 404 and "nope" in unknown.json()["message"]
    gated.open("blocker")


def test_places_in_line_move_up_when_a_job_ahead_leaves(client, gated):
    _, waiting = _queue_behind_a_blocker(client, gated, 4)
    assert [j["queue_position"] for j in waiting] == [1, 2, 3, 4]  # each submit's answer
    assert [client.job(j["id"])["queue_position"] for j in waiting] == [1, 2, 3, 4]

    client.cancel(waiting[1]["id"])
    assert client.job(waiting[1]["id"])["queue_position"] is None
    places = lambda: [client.job(j["id"])["queue_position"] for j in (waiting[0], *waiting[2:])]  # noqa: E731
    wait_for(lambda: places() == [1, 2, 3], timeout=10, what="the jobs behind the cancelled one to move up")
    gated.open("blocker")
    wait_state(client, waiting[0]["id"], "running")
    wait_for(lambda: [client.job(j["id"])["queue_position"] for j in waiting[2:]] == [1, 2], timeout=10,
             what="the jobs behind the started one to move up")  # fmt: skip


def _snapshot() -> Snapshot:
    return Snapshot(now=1000.0, cluster=Cluster.one_machine(8, 0))


def test_a_line_gives_the_policys_order_and_takes_joins_and_leaves():
    jobs = [Pending(f"j{i}", 1, submitted_at=i, max_runtime=60, estimate=60, deadline=5000 - 100 * i) for i in range(6)]
    edf = policies.POLICIES["edf"]
    line = Line(edf.priority, _snapshot(), jobs[:5])
    order = [j.id for j in edf.order(jobs[:5], _snapshot())]
    assert [j.id for j in line.ordered] == order
    assert [line.get(job_id) for job_id in order] == [1, 2, 3, 4, 5]

    assert line.join(jobs[5]) == 1  # the earliest deadline goes first
    assert line.get(order[0]) == 2
    line.leave(jobs[5].id)
    line.leave(order[0])
    assert [line.get(job_id) for job_id in order[1:]] == [1, 2, 3, 4]
    assert line.get(order[0]) is None and len(line) == 4

    # A job that would join: its place and the line with it, the line itself unchanged.
    middle = Pending("m", 1, submitted_at=9, max_runtime=60, estimate=60, deadline=5000 - 250)
    assert line.place_of(middle) == 2  # behind the deadline of 4700, ahead of 4800, 4900, 5000
    assert [j.id for j in line.ordered_with(middle)] == [order[1], "m", *order[2:]]
    assert len(line) == 4 and line.get("m") is None


def test_queued_jobs_show_when_they_are_expected_to_start(client, gated):
    """Nothing has finished on this server, so run times are what the jobs declared."""
    blocker = gated.submit(client, "blocker", gpus=2, max_runtime="4h", expected_runtime="2h")
    blocker = wait_state(client, blocker["id"], "running")
    first = gated.submit(client, "first", gpus=2, max_runtime="1h")
    second = gated.submit(client, "second", gpus=1, max_runtime="30m")
    expected = lambda job: client.job(job["id"])["expected_start"]  # noqa: E731
    wait_for(lambda: expected(second) is not None, timeout=10, what="the line with both jobs in it")
    started = ts(blocker["started_at"])
    assert ts(expected(first)) == pytest.approx(started + 7200, abs=0.01)  # when the blocker expects to end
    assert ts(expected(second)) == pytest.approx(started + 7200 + 3600, abs=0.01)  # then after the first
    assert client.job(blocker["id"])["expected_start"] is None  # running: no start to forecast
    assert ts(client.job(blocker["id"])["expected_end"]) == pytest.approx(started + 7200, abs=0.01)  # but an end
    assert ts(client.job(first["id"])["expected_end"]) == pytest.approx(started + 7200 + 3600, abs=0.01)
    # A deadline that falls before the blocker's expected end: it goes first in line, and it is
    # expected to expire rather than start.
    late = gated.submit(client, "late", gpus=1, max_runtime="30m", deadline="+1h")
    wait_for(lambda: client.job(late["id"])["expected_to_expire"], timeout=10, what="the late job expected to expire")
    assert client.job(late["id"])["queue_position"] == 1 and client.job(late["id"])["expected_start"] is None
    assert not client.job(first["id"])["expected_to_expire"] and expected(first) is not None
    client.cancel(late["id"])
    gated.open("blocker")
    wait_state(client, first["id"], "running")
    assert expected(first) is None


def test_a_job_waiting_for_another_is_expected_to_start_when_that_one_is_expected_to_end(client, gated, tmp_path):
    first = wait_state(client, gated.submit(client, "first", gpus=1, expected_runtime="1h")["id"], "running")
    end = ts(first["started_at"]) + 3600
    body = {"path": str(write_notebook(tmp_path / "then.ipynb", "x = 1")), "gpus": 1, "max_runtime": "30m"}
    check = client.check(**body, after=first["id"])  # a GPU is free, but it waits for the first job
    assert check["waiting_for"] == [first["id"]] and check["queue_position"] is None
    assert ts(check["expected_start"]) == pytest.approx(end, abs=0.01)
    then = client.submit(**body, after=first["id"], name="then")
    last = client.submit(**body, after=then["id"], name="last")  # a chain: after the one after
    wait_for(lambda: client.job(last["id"])["expected_start"] is not None, timeout=10, what="the chain's forecast")
    then, last = client.job(then["id"]), client.job(last["id"])
    assert then["queue_position"] is None and ts(then["expected_start"]) == pytest.approx(end, abs=0.01)
    assert ts(then["expected_end"]) == pytest.approx(end + 1800, abs=0.01)
    assert ts(last["expected_start"]) == pytest.approx(end + 1800, abs=0.01)
    for job in (last, then):
        client.cancel(job["id"])
    gated.open("first")


def test_no_start_is_guessed_for_a_job_that_waits_on_one_that_declared_nothing(client, gated):
    """The undeclared job's limit is the server's default; nothing like it has finished here."""
    undeclared = wait_state(client, gated.submit(client, "undeclared", gpus=1)["id"], "running")
    declared = wait_state(client, gated.submit(client, "declared", gpus=1, expected_runtime="1h")["id"], "running")
    both = gated.submit(client, "both", gpus=2, max_runtime="1h")
    one = gated.submit(client, "one", gpus=1, max_runtime="30m")
    expected = lambda job: client.job(job["id"])["expected_start"]  # noqa: E731
    wait_for(lambda: expected(one) is not None, timeout=10, what="a forecast with both jobs in line")
    assert ts(expected(one)) == pytest.approx(ts(declared["started_at"]) + 3600, abs=0.01)
    assert expected(both) is None  # needs the GPU of the job nobody can say the end of
    assert client.job(undeclared["id"])["request"]["max_runtime_s"] == 86400  # the default
    for name in ("undeclared", "declared", "both", "one"):
        gated.open(name)


def test_a_line_follows_the_queue_and_keeps_the_keys_it_was_made_with():
    """Between re-sorts (Policy.refresh_s) a line takes the queue as it is now: jobs that left
    leave, new ones join, a job whose request changed (another Pending) takes its new place, and
    the others keep the place their keys gave them, as the simulator's queue does."""
    jobs = [Pending(f"j{i}", 1, submitted_at=i, max_runtime=60, estimate=60) for i in range(4)]
    latest_first = [True]  # the policy's priorities, which move below

    def priority(job: Pending, snap: Snapshot) -> tuple:
        return (-job.submitted_at if latest_first[0] else job.submitted_at, job.id)

    line = Line(priority, _snapshot(), jobs[:3])
    assert [j.id for j in line.ordered] == ["j2", "j1", "j0"]

    latest_first[0] = False  # moved: new and changed jobs get the new keys, the others keep theirs
    changed = replace(jobs[0], submitted_at=1.5)
    line.follow([changed, jobs[2], jobs[3]])  # j1 left, j3 joined, j0's request changed
    assert [j.id for j in line.ordered] == ["j2", "j0", "j3"]  # made afresh, it would be j0, j2, j3
    assert line.job("j0") is changed and line.get("j1") is None and len(line) == 3
    assert [line.get(job_id) for job_id in ("j2", "j0", "j3")] == [1, 2, 3]

    line.follow([changed, jobs[2], jobs[3]])  # nothing changed: nothing moves
    assert [j.id for j in line.ordered] == ["j2", "j0", "j3"]
