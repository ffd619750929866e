"""The EDF + EASY-backfill policy, pure: no server, no clock."""

from __future__ import annotations

import random

from e31_jupyter.core.baselines import edf_order, edf_walk
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policy import Decision, Pending, Running, Snapshot


def edf_backfill(pending: list[Pending], running: list[Running], total_gpus: int, now: float) -> Decision:
    """``edf`` on one machine of ``total_gpus`` GPUs."""
    free = total_gpus - sum(r.gpus for r in running)
    return edf_walk(edf_order(pending), Snapshot(now, Cluster.one_machine(total_gpus, free), running))


NOW = 1000.0


def pending(id, gpus=1, submitted=0.0, max_runtime=100.0, estimate=0.0, deadline=None) -> Pending:
    return Pending(id, gpus, submitted, max_runtime, estimate, deadline)


def running(id, gpus=1, ends_in=100.0, held_for=10.0) -> Running:
    """A running job that started ``held_for`` seconds ago and must end ``ends_in`` from now."""
    return Running(id, gpus, NOW - held_for, held_for + ends_in)


def expired_ids(decision) -> list[str]:
    return [job_id for job_id, _ in decision.expire]


# -- order ------------------------------------------------------------------------------------


def test_edf_order_is_deadline_first_then_no_deadline_then_submit_time():
    jobs = [
        pending("none-old", submitted=1),
        pending("late", submitted=5, deadline=NOW + 500),
        pending("none-new", submitted=9),
        pending("soon", submitted=8, deadline=NOW + 100),
        pending("late-older", submitted=2, deadline=NOW + 500),
    ]
    assert [j.id for j in edf_order(jobs)] == ["soon", "late-older", "late", "none-old", "none-new"]


def test_jobs_start_in_edf_order_while_they_fit():
    jobs = [pending("c", submitted=3), pending("a", submitted=1), pending("b", submitted=2)]
    decision = edf_backfill(jobs, [], total_gpus=2, now=NOW)
    assert decision.start == ["a", "b"]
    assert decision.expire == []


def test_running_jobs_hold_their_gpus():
    decision = edf_backfill([pending("a", gpus=2)], [running("r", gpus=1)], total_gpus=2, now=NOW)
    assert decision.start == [] and decision.expire == []


def test_the_job_with_the_earlier_deadline_gets_the_last_gpu():
    jobs = [pending("old", submitted=0), pending("urgent", submitted=50, deadline=NOW + 3600)]
    assert edf_backfill(jobs, [running("r")], total_gpus=2, now=NOW).start == ["urgent"]


# -- backfill ---------------------------------------------------------------------------------


def test_a_short_job_backfills_before_the_reservation():
    # r holds 1 of 2 GPUs until NOW+100; head needs both, so it is reserved for NOW+100.
    jobs = [pending("head", gpus=2, submitted=0), pending("short", gpus=1, submitted=1, max_runtime=60)]
    decision = edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=2, now=NOW)
    assert decision.start == ["short"]


def test_a_job_ending_exactly_at_the_reservation_backfills():
    jobs = [pending("head", gpus=2, submitted=0), pending("exact", gpus=1, submitted=1, max_runtime=100)]
    assert edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=2, now=NOW).start == ["exact"]


def test_a_long_job_on_gpus_the_reserved_job_needs_does_not_start():
    jobs = [pending("head", gpus=2, submitted=0), pending("long", gpus=1, submitted=1, max_runtime=101)]
    decision = edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=2, now=NOW)
    assert decision.start == [] and decision.expire == []
    assert decision.held_back["long"].startswith("it would still be running when head")


def test_a_job_behind_the_reservation_that_finds_no_gpus_is_not_held_back():
    jobs = [pending("head", gpus=2, submitted=0), pending("two", gpus=2, submitted=1, max_runtime=10)]
    decision = edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=2, now=NOW)
    assert decision.start == [] and decision.held_back == {}  # no GPUs for it: it simply waits


def test_a_long_job_may_use_gpus_the_reserved_job_will_not_need():
    # 4 GPUs, r holds 2 until NOW+100; head needs 3, so 1 GPU is spare beside it then.
    jobs = [
        pending("head", gpus=3, submitted=0),
        pending("long1", gpus=1, submitted=1, max_runtime=1000),
        pending("long2", gpus=1, submitted=2, max_runtime=1000),
    ]
    decision = edf_backfill(jobs, [running("r", gpus=2, ends_in=100)], total_gpus=4, now=NOW)
    assert decision.start == ["long1"]  # long2 would eat into the head's GPUs
    assert list(decision.held_back) == ["long2"]  # head does not fit: it just waits
    assert "still be running when head, first in line, is due to start" in decision.held_back["long2"]


def test_the_reservation_is_for_the_first_job_that_does_not_fit():
    # "first" waits for both GPUs (NOW+100); "second" (1 GPU, long) must not jump ahead of it,
    # even though "second" would have fitted beside the running job.
    jobs = [
        pending("first", gpus=2, deadline=NOW + 5000),
        pending("second", gpus=1, deadline=NOW + 6000, max_runtime=500),
    ]
    decision = edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=2, now=NOW)
    assert decision.start == []


def test_a_job_started_in_the_same_round_counts_toward_the_reservation():
    # "a" starts now and ends by NOW+50; "head" needs both GPUs, so it is reserved for NOW+50,
    # and "short" (ends by NOW+40) may use the other GPU until then.
    jobs = [
        pending("a", gpus=1, submitted=0, max_runtime=50),
        pending("head", gpus=2, submitted=1),
        pending("short", gpus=1, submitted=2, max_runtime=40),
    ]
    assert edf_backfill(jobs, [], total_gpus=2, now=NOW).start == ["a", "short"]


def _free_at(t: float, holders: list[Running], total: int) -> int:
    """GPUs free at time ``t`` if every holder releases exactly at its limit."""
    return total - sum(h.gpus for h in holders if h.ends_by > t)


def _earliest_start(gpus: int, holders: list[Running], total: int, now: float) -> float:
    """The first moment ``gpus`` are free, holders ending by their limits: the shadow time."""
    for t in sorted({now} | {max(now, h.ends_by) for h in holders}):
        if _free_at(t, holders, total) >= gpus:
            return t
    raise AssertionError("a job that fits the inventory always has a start time")


def _random_scenario(rng: random.Random):
    total = rng.randint(1, 5)
    runs, used = [], 0
    for i in range(rng.randint(0, 4)):
        gpus = rng.randint(1, total)
        if used + gpus > total:
            break
        used += gpus
        held, ends_in = rng.randint(0, 60), rng.choice([-5, 0, 20, 40, 60])  # some overrun
        runs.append(Running(f"r{i}", gpus, NOW - held, float(held + ends_in)))
    jobs = []
    for i in range(rng.randint(1, 7)):
        # run times around the running jobs' ends, so "ends just before / at / after the
        # reservation" all come up
        max_runtime = float(rng.choice([19, 20, 21, 39, 40, 41, 60, 61, 300]))
        jobs.append(
            Pending(
                f"p{i}",
                rng.randint(0, total + (1 if rng.random() < 0.1 else 0)),
                float(rng.randint(0, 20)),
                max_runtime,
                rng.choice([0.0, float(rng.randint(1, int(max_runtime)))]),
                rng.choice([None, None, NOW + rng.randint(-20, 400)]),
            )
        )
    return jobs, runs, total


def test_backfill_never_delays_the_reserved_job():
    for seed in range(2000):  # pure and fast; the rarer cases (two backfills sharing spare GPUs) need many
        _check_one_scenario(seed)


def _check_one_scenario(seed: int) -> None:
    jobs, runs, total = _random_scenario(random.Random(seed))
    decision = edf_backfill(jobs, runs, total, NOW)
    context = f"seed {seed}: {jobs=} {runs=} {total=} {decision=}"
    started, expired = set(decision.start), set(expired_ids(decision))
    by_id = {j.id: j for j in jobs}

    assert not started & expired, context
    assert len(decision.start) == len(started), context
    assert sum(by_id[i].gpus for i in started) <= total - sum(r.gpus for r in runs), context
    for job_id in expired:
        job = by_id[job_id]
        assert job.gpus > total or (job.deadline is not None and NOW + job.estimate > job.deadline), context

    order = edf_order(jobs)
    waiting = [k for k, j in enumerate(order) if j.id not in started | expired]
    if not waiting:
        return
    head = order[waiting[0]]
    # The head's reservation: the running jobs, plus those the policy started ahead of it in EDF
    # order (with none started ahead, that is the running jobs only).
    ahead = [Running(j.id, j.gpus, NOW, j.max_runtime) for j in order[: waiting[0]] if j.id in started]
    shadow = _earliest_start(head.gpus, runs + ahead, total, NOW)
    after = runs + [Running(i, by_id[i].gpus, NOW, by_id[i].max_runtime) for i in decision.start]
    assert _free_at(shadow, after, total) >= head.gpus, f"head {head.id} delayed past {shadow}; {context}"


# -- expiry -----------------------------------------------------------------------------------


def test_a_hopeless_job_that_cannot_start_expires_with_a_reason():
    jobs = [
        pending("hopeless", estimate=50, deadline=NOW + 30),
        pending("hopeful", estimate=50, deadline=NOW + 200),
        pending("no-estimate", estimate=0, deadline=NOW + 10),
    ]
    decision = edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=1, now=NOW)
    assert decision.start == []
    assert expired_ids(decision) == ["hopeless"]
    assert "deadline" in decision.expire[0][1]


def test_a_job_whose_deadline_has_passed_expires_even_without_an_estimate():
    decision = edf_backfill([pending("late", deadline=NOW - 1)], [running("r")], total_gpus=1, now=NOW)
    assert expired_ids(decision) == ["late"]
    assert "deadline" in decision.expire[0][1]


def test_a_hopeless_job_that_fits_now_starts():
    decision = edf_backfill([pending("tight", estimate=100, deadline=NOW + 50)], [], total_gpus=1, now=NOW)
    assert decision.start == ["tight"] and decision.expire == []


def test_a_hopeless_job_kept_out_by_the_reservation_expires():
    # "head" (earlier deadline) waits for both GPUs until NOW+100; "hopeless" would fit on the
    # free GPU but past that reservation, and it cannot meet its own deadline by waiting.
    jobs = [
        pending("head", gpus=2, deadline=NOW + 150),
        pending("hopeless", gpus=1, max_runtime=300, estimate=300, deadline=NOW + 200),
    ]
    decision = edf_backfill(jobs, [running("r", ends_in=100)], total_gpus=2, now=NOW)
    assert decision.start == []
    assert expired_ids(decision) == ["hopeless"]


def test_a_job_asking_more_gpus_than_exist_expires_and_does_not_block_the_queue():
    decision = edf_backfill(
        [pending("huge", gpus=3, submitted=0), pending("small", gpus=1, submitted=1, max_runtime=1e6)],
        [],
        total_gpus=2,
        now=NOW,
    )
    assert expired_ids(decision) == ["huge"]
    assert "3 GPUs" in decision.expire[0][1] and "2" in decision.expire[0][1]
    assert decision.start == ["small"]
