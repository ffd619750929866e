"""Expected start times: the policy run forward on hand-made cases."""

from __future__ import annotations

import pytest

from e31_jupyter.core.forecast import FORECAST_JOBS, expected_starts, run_forward
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policies import POLICIES
from e31_jupyter.core.policy import Pending, Running, Snapshot
from e31_jupyter.core.runtimes import RuntimeModel, UrgentDemand

NOW = 100_000.0
E31 = POLICIES["e31"]


def _snapshot(gpus: int, running: list[Running], runtimes: RuntimeModel | None = None) -> Snapshot:
    free = gpus - sum(r.gpus for r in running)
    return Snapshot(NOW, Cluster.one_machine(gpus, free), running, {}, runtimes or RuntimeModel())


def _forecast(queued: list[Pending], snap: Snapshot) -> dict[str, float]:
    return expected_starts(E31.walk, E31.order(queued, snap), snap)


def test_jobs_start_as_the_ones_ahead_are_expected_to_end():
    snap = _snapshot(2, [Running("r", 2, NOW - 600, 3600.0, (0,), 3600.0)])  # expected to end at NOW + 3000
    queued = [
        Pending("a", 2, NOW - 60, 1800.0, 1800.0, NOW + 86400),
        Pending("b", 1, NOW - 50, 600.0, 600.0, NOW + 2 * 86400),
        Pending("c", 1, NOW - 40, 600.0, 600.0, NOW + 2 * 86400),
    ]
    assert _forecast(queued, snap) == {"a": NOW + 3000, "b": NOW + 4800, "c": NOW + 4800}
    assert snap.cluster.free_gpus == 0 and [r.id for r in snap.running] == ["r"]  # untouched


def test_run_times_learned_from_finished_jobs_shorten_the_wait():
    runtimes = RuntimeModel()
    for _ in range(50):
        runtimes.observe("t", 3600.0, 1800.0)  # jobs take half of what they declare
    snap = _snapshot(1, [Running("r", 1, NOW, 3600.0, (0,), 3600.0, "t")], runtimes)
    assert _forecast([Pending("a", 1, NOW, 600.0, 600.0, None, "t")], snap) == {"a": NOW + 1800}


def test_a_running_job_that_has_outrun_most_finished_ones_is_expected_to_be_a_long_one():
    runtimes = RuntimeModel()
    for ratio in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9) * 5:  # actual / declared of 40 finished jobs
        runtimes.observe("t", 1000.0, 1000.0 * ratio)
    queued = [Pending("a", 1, NOW, 600.0, 600.0, None, "t")]
    # Has run 75% of what it declared: among the ratios above that (0.8, 0.9), the median is 0.9.
    ran_long = _snapshot(1, [Running("r", 1, NOW - 7500, 10_000.0, (0,), 10_000.0, "t")], runtimes)
    assert _forecast(queued, ran_long) == {"a": pytest.approx(NOW - 7500 + 9000)}
    # Just started: the median of all of them (0.6).
    just_started = _snapshot(1, [Running("r", 1, NOW - 100, 10_000.0, (0,), 10_000.0, "t")], runtimes)
    assert _forecast(queued, just_started) == {"a": pytest.approx(NOW - 100 + 6000)}
    # Outran every ratio seen: it may run to its limit.
    outran = _snapshot(1, [Running("r", 1, NOW - 9500, 10_000.0, (0,), 10_000.0, "t")], runtimes)
    assert _forecast(queued, outran) == {"a": pytest.approx(NOW + 500)}


def test_a_running_job_is_expected_to_take_what_it_said_it_would_by_its_teams_record():
    queued = [Pending("a", 1, NOW, 600.0, 600.0, None)]
    # Expected 10 minutes under a 10-hour limit, nothing learned: its own expectation.
    said = _snapshot(1, [Running("r", 1, NOW - 60, 36_000.0, (0,), 600.0, "t")])
    assert _forecast(queued, said) == {"a": NOW + 540}
    # Past it: it may run to its limit.
    past = _snapshot(1, [Running("r", 1, NOW - 900, 36_000.0, (0,), 600.0, "t")])
    assert _forecast(queued, past) == {"a": NOW - 900 + 36_000}
    # Its team's jobs take twice what they say (others half): 20 minutes.
    runtimes = RuntimeModel()
    for _ in range(30):
        runtimes.observe("t", 600.0, 1200.0)
        runtimes.observe("u", 600.0, 300.0)
    learned = _snapshot(1, [Running("r", 1, NOW - 60, 36_000.0, (0,), 600.0, "t")], runtimes)
    assert _forecast(queued, learned) == {"a": NOW - 60 + 1200}


def test_behind_a_job_that_declared_nothing_and_nothing_like_it_finished_the_start_is_not_guessed():
    # Declared neither an expected run time nor a limit: its limit (1 day) is the server's
    # default, not a forecast. The job that needs its GPU gets none; one that fits beside it does.
    snap = _snapshot(2, [Running("r", 1, NOW - 60, 86_400.0, (0,), 0.0, "t")])
    queued = [
        Pending("behind", 2, NOW, 600.0, 600.0, None, "t"),
        Pending("beside", 1, NOW + 1, 600.0, 600.0, None, "t"),
    ]
    assert _forecast(queued, snap) == {"beside": NOW}


def test_jobs_that_declared_nothing_go_by_how_long_such_jobs_took():
    runtimes = RuntimeModel()
    for minutes in (10, 20, 30, 40, 50, 60) * 4:  # finished jobs that declared nothing
        runtimes.observe("t", 0.0, minutes * 60.0)
    # Has run 35 minutes: among the run times above that (40, 50, 60 minutes), the median is 50.
    snap = _snapshot(1, [Running("r", 1, NOW - 35 * 60, 86_400.0, (0,), 0.0, "t")], runtimes)
    undeclared = Pending("u", 1, NOW, 86_400.0, 0.0, None, "t")
    declared = Pending("d", 1, NOW + 1, 600.0, 600.0, None, "t")
    # "u" starts when "r" is expected to end and holds the GPU for the median of all (40 minutes).
    assert _forecast([undeclared, declared], snap) == {"u": NOW + 15 * 60, "d": NOW + 55 * 60}
    # Outran every one of them: not known.
    outran = _snapshot(1, [Running("r", 1, NOW - 90 * 60, 86_400.0, (0,), 0.0, "t")], runtimes)
    assert _forecast([declared], outran) == {}


def test_a_job_whose_deadline_passes_before_its_turn_gets_no_start():
    snap = _snapshot(1, [Running("r", 1, NOW, 7200.0, (0,), 7200.0)])
    queued = [Pending("late", 1, NOW, 600.0, 600.0, NOW + 3600), Pending("fine", 1, NOW, 600.0, 600.0, None)]
    assert _forecast(queued, snap) == {"fine": NOW + 7200}
    # Run forward, it is the one given up on; the ends of the running job and of the one that
    # starts after it are known from their run times.
    seen = run_forward(E31.walk, E31.order(queued, snap), snap)
    assert seen.expired == {"late"} and seen.ends == {"r": NOW + 7200, "fine": NOW + 7200 + 600}


def test_only_the_head_of_a_long_line_is_forecast():
    snap = _snapshot(4, [])
    queued = [Pending(f"j{i}", 1, NOW + i, 600.0, 600.0, None) for i in range(FORECAST_JOBS + 50)]
    starts = _forecast(queued, snap)
    assert set(starts) == {f"j{i}" for i in range(FORECAST_JOBS)}
    assert starts["j0"] == NOW and starts[f"j{FORECAST_JOBS - 1}"] == pytest.approx(
        NOW + 600 * (FORECAST_JOBS // 4 - 1)
    )


def _run(queued: list[Pending], snap: Snapshot, held: list[tuple[Pending, list[str]]]):
    return run_forward(E31.walk, E31.order(queued, snap), snap, held)


def test_a_job_waiting_for_others_is_expected_to_start_once_the_last_of_them_ends():
    # r ends at NOW + 3000 and frees both GPUs; a (30 min) runs then. "then" waits for r and a;
    # "last" waits for "then": a chain, each link once the one before is expected to end.
    snap = _snapshot(2, [Running("r", 2, NOW - 600, 3600.0, (0,), 3600.0)])
    queued = [Pending("a", 1, NOW - 60, 1800.0, 1800.0, None)]
    then = Pending("then", 2, NOW - 30, 600.0, 600.0, None)
    last = Pending("last", 1, NOW - 20, 600.0, 600.0, None)
    seen = _run(queued, snap, [(last, ["then"]), (then, ["r", "a"])])
    assert seen.starts == {"a": NOW + 3000, "then": NOW + 4800, "last": NOW + 5400}
    assert seen.ends["then"] == NOW + 5400


def test_a_job_waiting_for_one_whose_end_nobody_knows_gets_no_start():
    snap = _snapshot(2, [Running("r", 1, NOW - 600, 86400.0, (0,), 0.0)])  # declared nothing
    then = Pending("then", 1, NOW, 600.0, 600.0, None)
    assert _run([], snap, [(then, ["r"])]).starts == {}


def test_a_job_whose_deadline_passes_while_it_waits_is_expected_to_expire():
    snap = _snapshot(1, [Running("r", 1, NOW - 600, 7200.0, (0,), 7200.0)])  # ends at NOW + 6600
    late = Pending("late", 1, NOW, 600.0, 600.0, NOW + 3600)
    seen = _run([], snap, [(late, ["r"])])
    assert seen.starts == {} and seen.expired == {"late"}


def test_a_job_that_stops_waiting_takes_its_place_in_line_by_priority():
    # One GPU, free at NOW + 3000. "urgent" waits for r; its deadline puts it ahead of "a" once it
    # joins: it starts first and makes its deadline. At the end of the line it would expire.
    snap = _snapshot(1, [Running("r", 1, NOW - 600, 3600.0, (0,), 3600.0)])
    a = Pending("a", 1, NOW - 60, 1800.0, 1800.0, None)
    urgent = Pending("urgent", 1, NOW - 30, 600.0, 600.0, NOW + 4000)
    by_priority = run_forward(E31.walk, [a], snap, [(urgent, ["r"])], key=lambda job: E31.priority(job, snap))
    assert by_priority.starts == {"urgent": NOW + 3000, "a": NOW + 3600}
    at_the_end = _run([a], snap, [(urgent, ["r"])])
    assert at_the_end.starts == {"a": NOW + 3000} and at_the_end.expired == {"urgent"}


def test_a_job_held_back_now_says_why_and_is_expected_once_the_long_job_ahead_ends():
    # 10 GPUs (share for long jobs: 6): one job of 2 days holds 6; another of 2 days fits on the
    # 4 free ones, but may start only when the first ends (it has no deadline: it can wait).
    day = 86400.0
    snap = _snapshot(10, [Running("r", 6, NOW, 2 * day, (0,), 2 * day)])
    queued = [Pending("long", 2, NOW, 2 * day, 2 * day), Pending("short", 1, NOW, 600.0, 600.0)]
    seen = run_forward(E31.walk, E31.order(queued, snap), snap)
    assert seen.starts == {"short": NOW, "long": NOW + 2 * day}
    assert list(seen.held_back) == ["long"] and "already hold 6 GPUs" in seen.held_back["long"]


def test_a_long_job_held_back_for_short_ones_is_expected_as_if_they_keep_coming():
    day = 86400.0
    queued = [Pending("long", 2, NOW, 2 * day, 2 * day)]
    ending = [Running("r", 6, NOW, 2 * day, (0,), 2 * day), Running("s", 1, NOW, 1.5 * day, (0,), 1.5 * day)]
    snap = _snapshot(10, ending)
    snap.demand = UrgentDemand()
    snap.demand.submitted(NOW - 7200, 1, 600.0, NOW - 6000)  # a short job that could not wait came two hours ago
    seen = run_forward(E31.walk, E31.order(queued, snap), snap)
    assert seen.starts == {"long": NOW + 2 * day}  # when r ends: not when s does, over a day after that short job
    assert "a day after the last short job came" in seen.held_back["long"]  # the rule, said as it is
    none_came = _snapshot(10, [Running("r", 6, NOW, 2 * day, (0,), 2 * day)])
    none_came.demand = UrgentDemand()
    assert _forecast(queued, none_came) == {"long": NOW}
