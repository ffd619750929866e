"""The scheduler's view of the past is read from the store incrementally, whoever wrote it, and
matches the meter: each ended hold counted once, decayed; running holds so far."""

from __future__ import annotations

import pytest

from e31_jupyter.core.e31_policy import expected_runtime
from e31_jupyter.core.fairshare import FAIR_SHARE_HALF_LIFE_S, decayed
from e31_jupyter.core.states import Cause, StopRequest
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.service.policy_input import HISTORY_HALF_LIVES, History, pending
from e31_jupyter.service.resumption import after_making_room
from e31_jupyter.service.store import Store

NOW = 1_800_000_000.0
GPUS = [str(i) for i in range(8)]


def _submit(
    store: Store,
    job_id: str,
    team: str,
    at: float,
    declared_s: float = 3600.0,
    deadline: float | None = None,
    given=True,
):
    store.insert_job(
        {
            "id": job_id,
            "owner": "ann",
            "name": job_id,
            "team": team,
            "state": "queued",
            "gpus_requested": 2,
            "max_runtime_s": declared_s,
            "expected_runtime_s": None,
            "max_runtime_given": int(given),
            "deadline": deadline,
            "submitted_at": at,
        },  # fmt: skip
        "submitted",
    )


def _run(store: Store, job_id: str, started: float, ended: float | None = None, state: str = "succeeded"):
    store.transition(
        job_id,
        ("queued",),
        "running",
        "started",
        started,
        cause=Cause.SCHEDULER,
        started_at=started,
        granted=["0", "1"],
    )
    if ended is not None:
        store.transition(job_id, ("running",), state, "ended", ended, cause=Cause.PROCESS_END, finished_at=ended)


@pytest.fixture
def stores(tmp_path):
    """Two connections to one file: this server's and another server's."""
    ours, theirs = Store(tmp_path / "e31.sqlite"), Store(tmp_path / "e31.sqlite")
    yield ours, theirs
    ours.close()
    theirs.close()


def test_usage_counts_each_ended_hold_once_decayed_and_running_holds_so_far(stores):
    ours, theirs = stores
    history = History(ours, machine_gpus=8)
    _submit(ours, "a", "vision", NOW - 2 * FAIR_SHARE_HALF_LIFE_S)
    _run(ours, "a", NOW - 2 * FAIR_SHARE_HALF_LIFE_S, NOW - FAIR_SHARE_HALF_LIFE_S)  # 2 GPUs x 7 days, a half-life ago
    first = history.snapshot(NOW, GPUS, [])
    assert first.usage["vision"] == pytest.approx(decayed(2 * FAIR_SHARE_HALF_LIFE_S, FAIR_SHARE_HALF_LIFE_S))

    _submit(theirs, "b", "audio", NOW - 600)  # written by another server
    _run(theirs, "b", NOW - 500, NOW - 100)
    _submit(theirs, "c", "audio", NOW - 400)
    _run(theirs, "c", NOW - 300)  # still running
    running = ours.jobs(("running",), brief=True)
    later = history.snapshot(NOW, GPUS, running)
    assert later.usage["vision"] == pytest.approx(first.usage["vision"])  # not counted twice
    assert later.usage["audio"] == pytest.approx(decayed(2 * 400, 100) + 2 * 300)
    assert later.cluster.free_gpus == 6
    assert [r.id for r in later.running] == ["c"]


def test_run_times_are_learned_from_jobs_that_succeeded_only(stores):
    ours, _ = stores
    history = History(ours, machine_gpus=8)
    for i in range(25):
        _submit(ours, f"ok{i}", "vision", NOW - 5000, declared_s=3600.0, deadline=NOW)
        _run(ours, f"ok{i}", NOW - 4000, NOW - 4000 + 1800)  # took half of what it declared
    _submit(ours, "bad", "vision", NOW - 5000, declared_s=3600.0)
    _run(ours, "bad", NOW - 4000, NOW - 4000 + 3600 * 0.99, state="failed")
    history.snapshot(NOW, GPUS, [])
    assert history.runtimes.ratio("vision", 0.99) == pytest.approx(0.5)


def test_a_job_that_declared_nothing_is_expected_to_take_what_such_jobs_took(stores):
    ours, _ = stores
    history = History(ours, machine_gpus=8)
    for i in range(21):  # limits left at the server's default: nothing declared
        _submit(ours, f"u{i}", "vision", NOW - 9000, declared_s=86400.0, given=False)
        _run(ours, f"u{i}", NOW - 8000, NOW - 8000 + 600 * (1 + i % 3))  # 10, 20 or 30 minutes
    _submit(ours, "next", "vision", NOW - 10, declared_s=86400.0, given=False)
    snap = history.snapshot(NOW, GPUS, [])
    (waiting,) = [pending(job) for job in ours.jobs(("queued",), brief=True)]
    assert waiting.estimate == 0 and expected_runtime(waiting, snap) == 1200.0


def test_a_restarted_scheduler_reads_only_the_recent_past_then_only_what_is_new(stores):
    ours, _ = stores
    long_ago = NOW - (HISTORY_HALF_LIVES + 1) * FAIR_SHARE_HALF_LIFE_S
    _submit(ours, "old", "vision", long_ago)
    _run(ours, "old", long_ago, long_ago + 3600)
    _submit(ours, "recent", "audio", NOW - 7200)
    _run(ours, "recent", NOW - 7200, NOW - 3600)
    history = History(ours, machine_gpus=8)
    assert set(history.snapshot(NOW, GPUS, []).usage) == {"audio"}

    _submit(ours, "new", "vision", NOW - 60)
    _run(ours, "new", NOW - 50, NOW - 10)
    assert history.snapshot(NOW, GPUS, []).usage["vision"] == pytest.approx(decayed(2 * 40, 10))


def test_short_jobs_of_the_last_day_that_could_not_wait_feed_the_demand_once(stores):
    ours, theirs = stores
    history = History(ours, machine_gpus=8)
    hour = NOW // 3600 * 3600
    _submit(ours, "short", "vision", hour + 60, declared_s=1800.0, deadline=hour + 2000)
    _submit(theirs, "long", "vision", hour + 120, declared_s=10 * 3600.0, deadline=hour + 40000)  # not short
    _submit(theirs, "patient", "vision", hour + 150, declared_s=900.0, deadline=hour + 86400)  # it can wait
    assert history.snapshot(hour + 1800, GPUS, []).demand.lately(hour + 1800) == 2 * 1800.0 / 3600.0
    _submit(theirs, "more", "vision", hour + 180, declared_s=900.0, deadline=hour + 1200)
    assert history.snapshot(hour + 1800, GPUS, []).demand.lately(hour + 1800) == 2 * 2700.0 / 3600.0


def test_a_team_idle_for_weeks_no_longer_counts_toward_the_equal_shares(stores):
    ours, _ = stores
    history = History(ours, machine_gpus=8)
    _submit(ours, "a", "vision", NOW - 3600)
    _run(ours, "a", NOW - 3600, NOW - 1800)
    _submit(ours, "b", "audio", NOW - 3600)
    _run(ours, "b", NOW - 3600, NOW - 1800)
    assert set(history.snapshot(NOW, GPUS, []).usage) == {"vision", "audio"}
    later = NOW + HISTORY_HALF_LIVES * FAIR_SHARE_HALF_LIFE_S
    _submit(ours, "c", "vision", later - 3600)
    _run(ours, "c", later - 3600, later - 1800)
    assert set(history.snapshot(later, GPUS, []).usage) == {"vision"}


def _suspended_for_urgent(store: Store, tmp_path) -> None:
    """Job "steady" (team vision, 2 GPUs) ran from NOW - 800 until the queue suspended it at NOW
    to make room for "urgent"; back in line."""
    _submit(store, "steady", "vision", NOW - 900, deadline=NOW + 6000)
    _run(store, "steady", NOW - 800)
    store.update("steady", stop_requested=StopRequest.MAKE_ROOM, stop_by="urgent")
    store.transition("steady", ("running",), "suspended", "suspended", NOW, cause=Cause.PROCESS_END, finished_at=NOW)
    jobdir = JobDir(tmp_path / "steady")
    jobdir.path.mkdir()
    assert after_making_room(store, jobdir, store.job("steady"), NOW)


def test_a_job_the_queue_suspended_goes_back_in_line_marked_so_the_policy_never_expires_it(stores, tmp_path):
    ours, _ = stores
    _suspended_for_urgent(ours, tmp_path)
    (row,) = ours.queued_requests()
    assert pending(row).suspended_by_queue and ours.job("steady").suspended_for == "urgent"
    assert pending(row).done_s == 800  # its first run's time: what is left of it is judged from there
    _submit(ours, "fresh", "vision", NOW)
    assert not pending(ours.job("fresh")).suspended_by_queue


def test_a_resumed_job_is_seen_running_resumed_with_the_time_of_its_earlier_runs(stores, tmp_path):
    ours, _ = stores
    _suspended_for_urgent(ours, tmp_path)
    _run(ours, "steady", NOW + 100)
    (seen,) = History(ours, machine_gpus=8).snapshot(NOW + 400, GPUS, ours.holding()).running
    # its whole run time is judged from the 800 s its first run ran and the 300 s of this one
    assert seen.started_at == NOW + 100 and seen.done_s == 800 and seen.resumed
    _submit(ours, "fresh", "vision", NOW)
    _run(ours, "fresh", NOW + 100)
    running = History(ours, machine_gpus=8).snapshot(NOW + 400, GPUS, ours.holding()).running
    assert {r.id: (r.done_s, r.resumed) for r in running} == {"steady": (800, True), "fresh": (0, False)}
