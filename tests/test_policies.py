"""The scheduling policies on small hand-made cases: pure functions, no server, no clock."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from e31_jupyter.core.e31_policy import E31_LONG_SHARE, E31_LONG_SURE, LongJobs, e31_lane, expected_runtime
from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policies import POLICIES
from e31_jupyter.core.policy import Pending, Policy, Running, Snapshot, expected_end, expected_end_or_limit
from e31_jupyter.core.runtimes import RuntimeModel, UrgentDemand
from e31_jupyter.core.simulator import TraceJob, simulate

NOW = 10_000.0


def pending(id, gpus=1, submitted=0.0, max_runtime=100.0, estimate=None, deadline=None, team="") -> Pending:
    return Pending(id, gpus, submitted, max_runtime, max_runtime if estimate is None else estimate, deadline, team)


def snapshot(free, running=(), machine_gpus=8, usage=None, runtimes=None, sizes=None) -> Snapshot:
    cluster = Cluster(free, machine_gpus, sizes)
    return Snapshot(NOW, cluster, list(running), usage or {}, runtimes or RuntimeModel())


def decide(name: str, jobs, snap):
    return POLICIES[name].decide(jobs, snap)


def expired(decision) -> list[str]:
    return [job_id for job_id, _ in decision.expire]


# -- the cluster -------------------------------------------------------------------------------


def test_a_small_job_goes_on_the_fullest_machine_that_fits():
    cluster = Cluster([8, 3, 1, 2], 8)
    assert cluster.place(2) == (3,)  # exactly 2 free there
    assert cluster.place(1) == (2,)
    assert cluster.place(3) == (1,)
    assert cluster.free == [8, 0, 0, 0] and cluster.free_gpus == 8


def test_a_big_job_takes_whole_machines_and_gives_them_back():
    cluster = Cluster.of(32, 8)
    cluster.place(1)  # one machine is no longer whole
    assert cluster.fits(24) and not cluster.fits(32)
    machines = cluster.place(12)  # more than one machine: two whole ones
    assert len(machines) == 2 and all(cluster.free[m] == 0 for m in machines)
    cluster.release(machines, 12)
    assert all(cluster.free[m] == 8 for m in machines)


def test_a_job_bigger_than_the_cluster_can_never_fit():
    cluster = Cluster.of(20, 8)  # 8 + 8 + 4: the small machine does not count as whole
    assert cluster.can_ever_fit(8) and cluster.can_ever_fit(16)
    assert not cluster.can_ever_fit(17) and not cluster.can_ever_fit(24)
    assert Cluster.one_machine(2, 2).can_ever_fit(2) and not Cluster.one_machine(2, 2).can_ever_fit(3)


def test_a_smaller_machine_with_every_gpu_free_is_not_whole():
    cluster = Cluster.of(20, 8)  # 8 + 8 + 4, every GPU free
    assert cluster.fits(16) and not cluster.fits(17)
    assert cluster.place(5) == (0,)  # one of the machines of 8 is no longer whole
    assert not cluster.fits(9) and cluster.place(12) is None  # the 4 free GPUs are not a whole machine
    assert cluster.place(9) is None and cluster.place(8) == (1,)


def test_every_policy_leaves_the_snapshot_untouched():
    snap = snapshot([2, 8], [Running("r", 6, NOW - 10, 100, (0,))])
    jobs = [pending("a", 4), pending("b", 16), pending("c", 1, deadline=NOW + 50)]
    for name in POLICIES:
        decide(name, jobs, snap)
        assert snap.cluster.free == [2, 8] and snap.cluster.free_gpus == 10, name


def test_every_policy_unpacks_as_order_and_decide():
    for name, policy in POLICIES.items():
        order, decide_ = policy
        snap = snapshot([8])
        assert [j.id for j in order([pending("a")], snap)] == ["a"]
        assert decide_([pending("a")], snap).start == ["a"], name


# -- backfill does not delay the reserved job (every policy that reserves) ------------------------


def _cluster_at(t: float, snap: Snapshot, started: list[Running]) -> Cluster:
    """The GPUs at time ``t`` if running and ``started`` jobs all end by their limits."""
    cluster = snap.cluster.copy()
    for r in started:
        cluster.hold(r.machines, r.gpus)
    for r in list(snap.running) + started:
        if r.ends_by <= t:
            cluster.release(r.machines, r.gpus)
    return cluster


def _random_case(rng: random.Random):
    machines, machine_gpus = rng.randint(1, 4), rng.choice([2, 4])
    cluster = Cluster.of(machines * machine_gpus, machine_gpus)
    running = []
    for i in range(rng.randint(0, 6)):
        gpus = rng.choice([1, 1, 2, machine_gpus, 2 * machine_gpus])
        where = cluster.place(gpus)
        if where is not None:
            running.append(Running(f"r{i}", gpus, NOW - 5, float(rng.choice([10, 20, 40, 60])), where))
    jobs = [
        pending(
            f"p{i}",
            rng.choice([1, 1, 2, machine_gpus, 2 * machine_gpus]),
            submitted=float(i),
            max_runtime=float(rng.choice([9, 15, 30, 55, 100, 400])),
            deadline=rng.choice([None, NOW + rng.randint(50, 2000)]),
        )
        for i in range(rng.randint(1, 8))
    ]
    return jobs, Snapshot(NOW, cluster, running)


@pytest.mark.parametrize("name", ["edf", "backfill", "e31"])
def test_backfill_never_delays_the_first_job_that_waits(name):
    policy, checked = POLICIES[name], 0
    for seed in range(400):
        jobs, snap = _random_case(random.Random(seed))
        decision = policy.decide(jobs, snap)
        order = policy.order(jobs, snap)
        left = set(decision.start) | set(expired(decision))
        waiting = [k for k, j in enumerate(order) if j.id not in left]
        if not waiting or snap.cluster.fits(order[waiting[0]].gpus):
            continue  # nothing waits for GPUs (a job held back by a rule of the policy gets no reservation)
        head = order[waiting[0]]
        started = [
            Running(j.id, j.gpus, NOW, j.max_runtime, decision.placement[j.id]) for j in order if j.id in decision.start
        ]
        ahead = [r for r in started if [j.id for j in order].index(r.id) < waiting[0]]
        # its promised start: the first moment it fits, counting only what ran or started ahead of it
        ends = sorted({NOW} | {max(NOW, r.ends_by) for r in list(snap.running) + ahead})
        shadow = next(t for t in ends if _cluster_at(t, snap, ahead).fits(head.gpus))
        assert _cluster_at(shadow, snap, started).fits(head.gpus), f"{name} seed {seed}: {decision}"
        checked += 1
    assert checked > 100


# -- one user's cap ----------------------------------------------------------------------------------


def _owned(id, owner, gpus=1, submitted=0.0, max_runtime=100.0) -> Pending:
    return Pending(id, gpus, submitted, max_runtime, max_runtime, None, owner, owner)


def _capped(free, running=(), cap=2) -> Snapshot:
    return replace(snapshot(free, running), max_gpus_per_owner=cap)


@pytest.mark.parametrize("name", list(POLICIES))
def test_a_users_jobs_hold_at_most_the_cap_and_the_rest_go_to_others(name):
    jobs = [_owned("ann1", "ann", submitted=1), _owned("ann2", "ann", submitted=2), _owned("ann3", "ann", submitted=3),
            _owned("bob1", "bob", submitted=4)]  # fmt: skip
    running = [Running("r", 1, NOW - 5, 100.0, (0,), owner="ann")]
    decision = decide(name, jobs, _capped([8], running))
    assert sorted(decision.start) == ["ann1", "bob1"]  # ann held 1: one more, counted within the pass
    why = decision.held_back["ann2"]
    assert "ann's jobs already hold 2 GPU(s)" in why and "at most 2 at once" in why
    assert "ann3" in decision.held_back and decision.expire == []


@pytest.mark.parametrize("name", list(POLICIES))
def test_without_a_cap_the_same_jobs_all_start(name):
    jobs = [_owned("ann1", "ann"), _owned("ann2", "ann"), _owned("ann3", "ann"), _owned("bob1", "bob")]
    assert len(decide(name, jobs, snapshot([8], [Running("r", 1, NOW - 5, 100.0, (0,), owner="ann")])).start) == 4


@pytest.mark.parametrize("name", ["edf", "backfill", "e31"])
def test_a_capped_job_makes_no_reservation_that_would_keep_others_waiting(name):
    # 2 GPUs free of 8; ann's 6-GPU job does not fit, and would take her past her cap anyway: it
    # must not reserve the GPUs (all the free ones, once her running job ends) and keep bob's
    # long job from them.
    running = [Running("ann-r", 4, NOW - 5, 50.0, (0,), owner="ann"), Running("x", 2, NOW - 5, 60.0, (0,), owner="x")]
    jobs = [_owned("ann-big", "ann", gpus=6, submitted=1), _owned("bob-long", "bob", 2, submitted=2, max_runtime=1e4)]
    decision = decide(name, jobs, _capped([2], running, cap=8))
    assert decision.start == ["bob-long"] and decision.expire == []
    assert "ann-big" not in decision.held_back  # no GPUs are free for it anyway: it is not said to be held back


def test_a_job_asking_for_more_than_the_cap_expires_saying_so():
    decision = decide("e31", [_owned("huge", "ann", gpus=3), _owned("ok", "ann", gpus=2)], _capped([8]))
    assert decision.start == ["ok"]
    assert decision.expire == [("huge", "asks for 3 GPUs but one user's jobs may now hold at most 2 at once")]


# -- starvation ----------------------------------------------------------------------------------


def _stream_against_a_big_job() -> list[TraceJob]:
    """Two machines of 8 GPUs; a 16-GPU job arrives while a stream of 1-GPU jobs keeps them
    busy: each lasts 100 s and a new one comes every 10 s, for two hours."""
    jobs = [TraceJob(f"s{i}", 10.0 * i, 100.0, 1, "small", 1e9, 100.0) for i in range(720)]
    jobs.append(TraceJob("big", 55.0, 500.0, 16, "big", 1e9, 500.0))
    return jobs


@pytest.mark.parametrize("name", ["edf", "backfill", "e31"])
def test_a_stream_of_small_jobs_does_not_starve_a_big_one(name):
    outcomes = {o.job.id: o for o in simulate(_stream_against_a_big_job(), POLICIES[name], gpus=16)}
    big = outcomes["big"]
    assert big.started_at is not None and big.started_at - big.job.submitted_at <= 100.0 + 10.0


def _a_burst_and_a_latecomer() -> list[TraceJob]:
    """4 GPUs. One team's burst of 16 one-GPU jobs of 1000 s at 0, all due by 4100 (four rounds
    make it, just); another team's two such jobs come at 10, due by 4500."""
    burst = [TraceJob(f"b{i}", 0.0, 1000.0, 1, "burst", 4100.0, 1000.0) for i in range(16)]
    return burst + [TraceJob(f"o{i}", 10.0, 1000.0, 1, "other", 4500.0, 1000.0) for i in range(2)]


def _on_time_by_team(name: str) -> dict[str, int]:
    on_time = {"burst": 0, "other": 0}
    for o in simulate(_a_burst_and_a_latecomer(), POLICIES[name], gpus=4):
        on_time[o.job.team] += o.on_time
    return on_time


def test_one_teams_burst_does_not_take_every_deadline_from_another_team():
    assert _on_time_by_team("edf") == {"burst": 16, "other": 0}  # deadline order alone: the burst takes all
    assert _on_time_by_team("e31") == {"burst": 14, "other": 2}  # the team under its share goes first


def test_sjf_starves_the_big_job_while_small_ones_keep_coming():
    outcomes = {o.job.id: o for o in simulate(_stream_against_a_big_job(), POLICIES["sjf"], gpus=16)}
    assert outcomes["big"].started_at >= 7200.0  # only once the stream has dried up


# -- strict, greedy, reserved ------------------------------------------------------------------------


def test_fifo_stops_at_the_first_job_that_does_not_fit():
    jobs = [pending("first", 4, submitted=0), pending("small", 1, submitted=1, max_runtime=1)]
    decision = decide("fifo", jobs, snapshot([2]))
    assert decision.start == [] and decision.expire == []


def test_sjf_starts_the_smallest_declared_gpu_time_first_and_anything_that_fits():
    jobs = [
        pending("long", 1, max_runtime=1000),
        pending("wide", 2, max_runtime=100),
        pending("short", 1, max_runtime=50),
    ]
    assert decide("sjf", jobs, snapshot([2])).start == ["short", "long"]


# -- deadlines -----------------------------------------------------------------------------------


def test_backfill_drops_a_job_whose_time_limit_overshoots_its_deadline_even_with_free_gpus():
    jobs = [pending("over", max_runtime=300, deadline=NOW + 200), pending("fine", max_runtime=100, deadline=NOW + 200)]
    decision = decide("backfill", jobs, snapshot([8]))
    assert decision.start == ["fine"] and expired(decision) == ["over"]
    assert "time limit" in decision.expire[0][1]


def test_edf_starts_a_job_that_fits_even_when_its_estimate_overshoots():
    decision = decide("edf", [pending("over", max_runtime=300, deadline=NOW + 200)], snapshot([8]))
    assert decision.start == ["over"]


def _learned(ratio: float, team: str = "t", n: int = 50) -> RuntimeModel:
    runtimes = RuntimeModel()
    for _ in range(n):
        runtimes.observe(team, 100.0, 100.0 * ratio)
    return runtimes


def test_e31_keeps_a_job_its_learned_run_time_says_can_still_make_it():
    # Declared 300 s, 250 s left: edf and backfill would drop it while it waits; jobs like it
    # took half their declared time, so e31 keeps it.
    job = pending("waits", max_runtime=300, deadline=NOW + 250, team="t")
    busy = [Running("r", 8, NOW - 10, 1000, (0,))]
    assert expired(decide("edf", [job], snapshot([0], busy))) == ["waits"]
    decision = decide("e31", [job], snapshot([0], busy, runtimes=_learned(0.5)))
    assert decision.start == [] and decision.expire == []


def test_e31_expires_a_waiting_job_more_likely_than_not_to_miss():
    job = pending("late", max_runtime=300, deadline=NOW + 100, team="t")
    busy = [Running("r", 8, NOW - 10, 1000, (0,))]
    decision = decide("e31", [job], snapshot([0], busy, runtimes=_learned(0.5)))
    assert expired(decision) == ["late"] and "deadline" in decision.expire[0][1]


class AskedRuntimes(RuntimeModel):
    """The real model, noting which teams' jobs it was asked to estimate."""

    def __init__(self):
        super().__init__()
        self.asked: list[str] = []

    def runtime(self, team, declared_s, deadline_window_s, q):
        self.asked.append(team)
        return super().runtime(team, declared_s, deadline_window_s, q)


def test_e31_learns_no_run_time_to_keep_a_waiting_job_whose_limit_ends_in_time():
    # A server walks its kept line every second: a job whose time limit ends before its deadline
    # can never be judged late, so it costs no estimate; one whose limit overshoots does.
    runtimes = AskedRuntimes()
    for _ in range(50):
        runtimes.observe("t", 100.0, 50.0)
    in_time = pending("in-time", max_runtime=300, deadline=NOW + 301, team="t")
    overshoots = pending("overshoots", max_runtime=300, deadline=NOW + 250, team="u")
    busy = [Running("r", 8, NOW - 10, 1000, (0,))]
    decision = POLICIES["e31"].walk([in_time, overshoots], snapshot([0], busy, runtimes=runtimes))
    assert decision.start == [] and decision.expire == []
    assert runtimes.asked == ["u"]


def test_a_job_without_a_declared_run_time_waits_until_its_deadline_passes():
    job = pending("unknown", max_runtime=86400, estimate=0, deadline=NOW + 10)
    busy = [Running("r", 8, NOW - 10, 1000, (0,))]
    for name in ("edf", "e31"):
        assert decide(name, [job], snapshot([0], busy)).expire == [], name
    passed = pending("unknown", max_runtime=86400, estimate=0, deadline=NOW - 1)
    assert expired(decide("e31", [passed], snapshot([0], busy))) == ["unknown"]


def _undeclared_took(seconds: float, jobs: int = 20) -> RuntimeModel:
    """What finished jobs that declared no run time took, here: ``seconds`` each."""
    runtimes = RuntimeModel()
    for _ in range(jobs):
        runtimes.observe("t", 0.0, seconds)
    return runtimes


def test_e31_judges_an_undeclared_job_by_what_undeclared_jobs_took():
    busy = [Running("r", 8, NOW - 10, 1000, (0,))]
    job = pending("unknown", max_runtime=86400, estimate=0, deadline=NOW + 600, team="t")
    waits = decide("e31", [job], snapshot([0], busy, runtimes=_undeclared_took(300)))
    assert waits.start == [] and waits.expire == []
    late = decide("e31", [job], snapshot([0], busy, runtimes=_undeclared_took(3600)))
    assert expired(late) == ["unknown"]
    assert "declared no run time" in late.expire[0][1] and "--expected-runtime" in late.expire[0][1]
    # what it took is never more than the job's own limit
    capped = pending("capped", max_runtime=500, estimate=0, deadline=NOW + 600, team="t")
    assert decide("e31", [capped], snapshot([0], busy, runtimes=_undeclared_took(3600))).expire == []


# -- e31: the lane, fair share, large jobs by deadline ----------------------------------------------


def _lane_case():
    """40 GPUs in 5 machines; 36 busy, so 4 are free: within the lane, which is 4 GPUs (in the
    last day, one hour saw 4 one-hour jobs that could not wait)."""
    busy = [Running(f"r{m}", 8, NOW - 10, 10_000, (m,)) for m in range(4)] + [Running("r4", 4, NOW - 10, 10_000, (4,))]
    snap = snapshot([0, 0, 0, 0, 4], busy)
    snap.demand = _urgent_bursts(1, 4)
    return snap


def test_e31_keeps_the_lane_from_a_long_job_that_can_wait():
    assert e31_lane(_lane_case()) == 4
    job = pending("long", max_runtime=8 * 3600, deadline=NOW + 24 * 3600)
    decision = decide("e31", [job], _lane_case())
    assert decision.start == [] and decision.expire == []
    assert (
        "the last 4 GPUs are kept for short and urgent jobs, and it is expected to run 8.0 h"
        in decision.held_back["long"]
    )


def test_e31_lets_short_and_urgent_jobs_into_the_lane():
    short = pending("short", max_runtime=1800, deadline=NOW + 24 * 3600)
    urgent = pending("urgent", max_runtime=8 * 3600, deadline=NOW + 8 * 3600 + 600)
    assert sorted(decide("e31", [short, urgent], _lane_case()).start) == ["short", "urgent"]


def test_e31_keeps_the_lane_from_a_large_job_that_can_wait_unless_it_is_too_big_to_leave_it():
    """Two machines of 8 free (16 GPUs) and a lane of 4: a 16-GPU job would take it."""

    def case(free_machines: int, urgent_gpus: int) -> Snapshot:
        busy = [Running(f"r{m}", 8, NOW - 10, 10_000, (m,)) for m in range(free_machines, 5)]
        snap = snapshot([8] * free_machines + [0] * (5 - free_machines), busy)
        snap.demand = _urgent_bursts(1, urgent_gpus)
        return snap

    large = pending("large", 16, max_runtime=8 * 3600, deadline=NOW + 24 * 3600)
    decision = decide("e31", [large], case(2, 4))
    assert decision.start == [] and decision.expire == []
    assert "the last 4 GPUs are kept for short and urgent jobs" in decision.held_back["large"]
    assert decide("e31-preempt", [large], case(2, 4)).start == []
    urgent = replace(large, deadline=NOW + 8 * 3600 + 600)  # it must start within 15 minutes
    assert decide("e31", [urgent], case(2, 4)).start == ["large"]
    short = pending("large", 16, max_runtime=1800, deadline=NOW + 24 * 3600)
    assert decide("e31", [short], case(2, 4)).start == ["large"]
    assert decide("e31", [large], case(3, 4)).start == ["large"]  # 24 free: room beside the lane
    # a lane of 12 (30% of 40 GPUs): a 32-GPU job could never leave it free, so it may take it
    whole = pending("whole", 32, max_runtime=8 * 3600, deadline=NOW + 24 * 3600)
    assert e31_lane(case(4, 40)) == 12 and decide("e31", [whole], case(4, 40)).start == ["whole"]


def test_e31_keeps_the_lane_from_an_undeclared_job_once_undeclared_jobs_ran_long():
    job = pending("unknown", max_runtime=86400, estimate=0, team="t")
    assert decide("e31", [job], _lane_case()).start == ["unknown"]  # nothing says it is long
    snap = _lane_case()
    snap.runtimes = _undeclared_took(8 * 3600)
    assert decide("e31", [job], snap).start == []
    snap = _lane_case()  # a snapshot is one moment's: what it works out, it keeps
    snap.runtimes = _undeclared_took(600)
    assert decide("e31", [job], snap).start == ["unknown"]


def _urgent_bursts(hours: int, gpus_per_hour: int, busiest: int = 0, slack: float = 600.0) -> UrgentDemand:
    """Hour after hour of short one-GPU jobs, declared at one hour each, ending just before NOW,
    each with ``slack`` seconds beyond its hour before its deadline; the last hour ``busiest``
    GPUs' worth instead when given."""
    demand = UrgentDemand()
    for hour in range(hours):
        came = NOW - (hours - hour) * 3600
        for _ in range(busiest if busiest and hour == hours - 1 else gpus_per_hour):
            demand.submitted(came, 1, 3600.0, came + 3600.0 + slack)
    return demand


def test_urgent_demand_counts_short_jobs_of_one_machine_that_could_not_wait_and_forgets_after_a_day():
    demand = UrgentDemand()
    demand.submitted(NOW - 1800, 2, 3600.0, NOW + 1800)  # its deadline leaves it nothing to spare
    demand.submitted(NOW - 1800, 1, 3600.0, NOW + 5 * 3600)  # 4 h to spare: it can wait
    demand.submitted(NOW - 1800, 1, 3600.0, None)  # no deadline: it can wait
    demand.submitted(NOW - 1800, 1, 5 * 3600.0, NOW + 3 * 3600)  # not short
    demand.submitted(NOW - 1800, 16, 600.0, NOW)  # bigger than a machine
    assert demand.lately(NOW) == 2.0 and demand.lately(NOW + 3600) == 2.0  # this hour or the last
    assert demand.lately(NOW + 3 * 3600) == 0.0
    came_in = NOW - 1800 - (NOW - 1800) % 3600
    assert demand.quiet_from() == came_in + 86400 and UrgentDemand().quiet_from() is None
    assert demand.came_lately(came_in + 86399) and not demand.came_lately(came_in + 86400)
    undeclared = UrgentDemand()
    undeclared.submitted(NOW, 1, 0.0, NOW)  # declared no run time: not known to be short
    assert undeclared.quiet_from() is None and not undeclared.came_lately(NOW)


def test_the_lane_is_what_jobs_that_could_not_wait_held_in_this_hour_or_the_last():
    def lane(demand):
        snap = _lane_case()
        snap.demand = demand
        return e31_lane(snap)

    assert lane(None) == 0
    assert lane(_urgent_bursts(6, 4, busiest=10)) == 10  # the last hour
    assert lane(_urgent_bursts(6, 10, busiest=4)) == 4  # not the hours before it
    old = _urgent_bursts(1, 20)
    snap = _lane_case()
    snap.demand, snap.now = old, NOW + 3 * 3600  # that burst was hours ago: nothing kept for it
    assert e31_lane(snap) == 0
    assert lane(_urgent_bursts(6, 40)) == 12  # at most E31_LANE_MAX (30% of 40)
    assert lane(_urgent_bursts(6, 40, slack=4 * 3600)) == 0  # they could all wait: nothing kept free


def test_without_jobs_that_could_not_wait_a_long_job_takes_the_last_gpus():
    job = pending("long", max_runtime=8 * 3600, deadline=NOW + 24 * 3600)
    snap = _lane_case()
    snap.demand = _urgent_bursts(6, 4, slack=4 * 3600)  # results wanted hours later: no lane
    assert decide("e31", [job], snap).start == ["long"]


DAY = 86400.0


def _long_jobs_hold(gpus: int) -> Snapshot:
    """40 GPUs in 5 machines: ``gpus`` of them held by jobs expected to run two days (limit four),
    8 by a job ending within the hour; the rest free."""
    days = [Running(f"days{m}", min(8, gpus - 8 * m), NOW - 10, 4 * DAY, (m,), 2 * DAY) for m in range((gpus + 7) // 8)]
    hour = Running("hour", 8, NOW - 10, 3600, (4,), 3600)
    free = [8 - r.gpus for r in days] + [8] * (4 - len(days)) + [0]
    return snapshot(free, days + [hour])


def test_long_jobs_that_can_wait_hold_at_most_their_share_of_the_gpus():
    assert E31_LONG_SHARE * 40 == 24
    long_job = pending("long", 4, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)  # 3 days of slack
    few_hours = pending("few_hours", 4, max_runtime=6 * 3600, deadline=NOW + 5 * DAY)
    assert sorted(decide("e31", [long_job, few_hours], _long_jobs_hold(16)).start) == [
        "few_hours",
        "long",
    ]  # 16 + 4 <= 24
    decision = decide("e31", [long_job, few_hours], _long_jobs_hold(24))  # 24 + 4 > 24: it waits
    assert decision.start == ["few_hours"] and decision.expire == []
    assert list(decision.held_back) == ["long"]
    assert (
        "over 24 h already hold 24 GPUs, and such jobs may hold at most 60% of the GPUs (24)"
        in decision.held_back["long"]
    )
    assert decision.held_back["long"].endswith("starts when one of them ends, or as its deadline draws near")
    more = _long_jobs_hold(24)
    more.long_share = 0.8  # the queue's long_jobs_share: 32 GPUs, and 4 of the 5 machines
    assert decide("e31", [long_job], more).start == ["long"]
    assert decide("e31", [long_job], _long_jobs_hold(24)).start == []


def test_on_machines_of_4_gpus_long_jobs_of_8_count_in_the_share_and_are_held_by_it():
    """An 8-GPU job takes two whole machines of 4: long ones hold the share (24 of 40 GPUs
    here), and one more that can wait is held back while a shorter one starts."""
    days = [Running(f"days{i}", 8, NOW - 10, 4 * DAY, (2 * i, 2 * i + 1), 2 * DAY) for i in range(3)]
    snap = snapshot([0] * 6 + [4] * 4, days, machine_gpus=4)
    long_job = pending("long", 8, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)
    few_hours = pending("few_hours", 8, max_runtime=6 * 3600, deadline=NOW + 5 * DAY)
    decision = decide("e31", [long_job, few_hours], snap)
    assert decision.start == ["few_hours"] and decision.placement["few_hours"] in {(6, 7), (8, 9)}
    assert (
        "over 24 h already hold 24 GPUs, and such jobs may hold at most 60% of the GPUs (24)"
        in decision.held_back["long"]
    )


def test_the_share_holds_long_jobs_back_only_while_short_jobs_came_in_the_last_day():
    long_job = pending("long", 4, max_runtime=2 * DAY)  # no deadline: it could wait for ever
    quiet = _long_jobs_hold(24)
    quiet.demand = UrgentDemand()  # the queue saw no short job in the last day
    assert decide("e31", [long_job], quiet).start == ["long"]
    busy = _long_jobs_hold(24)
    busy.demand = _urgent_bursts(1, 1)  # one short job an hour ago, in the hour that began at 3600
    decision = decide("e31", [long_job], busy)
    assert decision.start == [] and list(decision.held_back) == ["long"]
    assert "while they can wait and short jobs keep coming" in decision.held_back["long"]
    assert decision.held_back["long"].endswith(
        "starts when one of them ends, or a day after the last short job came (in 22.2 h if no other comes)"
    )
    a_day_later = replace(_long_jobs_hold(24), now=NOW + DAY + 3600, demand=_urgent_bursts(1, 1))
    assert decide("e31", [long_job], a_day_later).start == ["long"]


def test_the_share_is_said_in_whole_gpus():
    """60% of 6 GPUs is 3.6: long jobs may hold 3 of them, and the reason says 3."""
    running = [Running("days", 3, NOW - 10, 4 * DAY, (0,), 4 * DAY)]
    held = decide("e31", [pending("long", 1, max_runtime=2 * DAY)], snapshot([3], running, machine_gpus=6))
    assert held.start == [] and "may hold at most 60% of the GPUs (3)" in held.held_back["long"]


def test_a_long_job_let_in_keeps_its_part_of_the_share_while_it_waits_for_the_reservation():
    """48 GPUs in 6 machines, long jobs may hold half (24 GPUs, 3 machines): 16 held, on two
    machines. "first" (6) is let in (22), but the only machine with room for it is the one kept for
    "big", first in line; it does not start, and "second" (4), behind it in line, may not take
    the share before it: 22 + 4 > 24."""
    running = [
        Running("days", 16, NOW - 10, 4 * DAY, (0, 1), 2 * DAY),  # long: holds 16 of the share
        Running("hour", 2, NOW - 10, 3600, (2,), 3600),  # ends first: "big" gets machine 2
        *(Running(f"hours{m}", 8, NOW - 10, 10 * 3600, (m,), 10 * 3600) for m in (3, 4, 5)),
    ]
    snap = snapshot([0, 0, 6, 0, 0, 0], running)
    snap.long_share = 0.5
    big = pending("big", 8, max_runtime=3600, deadline=NOW + 7200)
    first = pending("first", 6, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)
    second = pending("second", 4, max_runtime=2 * DAY, deadline=NOW + 6 * DAY)
    decision = decide("e31", [big, first, second], snap)
    assert decision.start == [] and decision.expire == []
    assert "when big, first in line, is due to start" in decision.held_back["first"]
    said = decision.held_back["second"]
    assert "already hold 16 GPUs and 6 more are kept for such jobs ahead of it in line, and such jobs" in said
    assert "may hold at most 50% of the GPUs (24)" in said
    alone = decide("e31", [big, second], snap)  # 16 + 4 <= 24: only the reservation holds it back
    assert "when big, first in line, is due to start" in alone.held_back["second"]


def test_long_jobs_go_beside_each_other_and_leave_the_other_machines_to_turn_whole():
    """40 GPUs in 5 machines; long jobs may run on 60% of them (3). A long job goes beside the
    long jobs already running, not on the fullest machine; a short one on the fullest. When
    the machines long jobs run on have no room, one more waits while it can, though long jobs
    hold 3 of the 24 GPUs of their share: the two machines left turn whole for jobs that need
    them. A job bigger than a machine takes whole ones and counts them all."""
    beside = [
        Running("days", 2, NOW - 10, 4 * DAY, (0,), 2 * DAY),  # long, on machine 0 (6 free)
        Running("hour", 5, NOW - 10, 3600, (1,), 3600),  # short, on machine 1 (3 free): fuller
    ]
    long_job = pending("long", 2, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)
    short = pending("short", 2, max_runtime=3600, deadline=NOW + 5 * DAY)
    decision = decide("e31", [long_job, short], snapshot([6, 3, 8, 8, 8], beside))
    assert decision.placement == {"long": (0,), "short": (1,)}

    full = [Running(f"days{m}", 1, NOW - 10, 4 * DAY, (m,), 2 * DAY) for m in range(3)]
    full += [Running(f"hours{m}", 7, NOW - 10, 10 * 3600, (m,), 10 * 3600) for m in range(3)]
    snap = snapshot([0, 0, 0, 8, 8], full)
    decision = decide("e31", [long_job, short], snap)
    assert decision.start == ["short"] and list(decision.held_back) == ["long"]
    said = decision.held_back["long"]
    assert "already run on 3 machines, none with room for it beside them" in said
    assert "and such jobs may run on at most 60% of the machines (3)" in said
    assert said.endswith("starts when one of them ends, or as its deadline draws near")
    soon = pending("soon", 2, max_runtime=2 * DAY, deadline=NOW + 2 * DAY + 3600)  # cannot afford to wait
    assert decide("e31", [soon], snap).start == ["soon"]

    # Walked in this order: "long" finds no room beside the long jobs and waits; "soon" cannot,
    # and takes a fourth machine; "later" then fits beside it, so it starts there.
    later = replace(long_job, id="later")
    decision = POLICIES["e31"].walk([long_job, soon, later], snap)
    assert decision.start == ["soon", "later"] and list(decision.held_back) == ["long"]
    assert decision.placement["later"] == decision.placement["soon"]

    two_machines = pending("two", 16, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)  # 2 + 2 machines > 3
    on_two = snapshot([0, 0, 8, 8, 8], full[:2] + full[3:5])
    assert decide("e31", [two_machines], on_two).start == []
    assert decide("e31", [replace(two_machines, gpus=8)], on_two).start == ["two"]  # 2 + 1 <= 3


def test_a_large_long_job_waits_for_its_turn_in_the_share_whatever_its_deadline_and_counts_in_it_once_running():
    """16 GPUs of long jobs + 16 > 24. A job of two machines waits for the first of them to end
    (two days), even when it would then miss its deadline: past the share it would hold whole
    machines for days, the GPUs large jobs that come later need free together. A job of one
    machine in its place starts now (``test_a_long_job_that_cannot_afford...``); while no long
    job runs, the large one starts (``test_the_first_long_job_starts...``). e31-preempt holds it
    as e31 does, unless it keeps checkpoints: then a suspend can take the GPUs back from it, and
    it starts beyond the share when it cannot afford to wait."""
    can_wait = pending("large", 16, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)
    cannot_wait = replace(can_wait, deadline=NOW + 3 * DAY)  # 2 days' wait + 2 days' run > 3 days
    checkpoints = replace(cannot_wait, checkpoints=True)
    held_by = (("e31", can_wait), ("e31", cannot_wait), ("e31", checkpoints), ("e31-preempt", can_wait),
               ("e31-preempt", cannot_wait), ("e31-preempt", replace(can_wait, checkpoints=True)))  # fmt: skip
    for policy, job in held_by:
        decision = decide(policy, [job], _long_jobs_hold(16))
        assert decision.start == [] and decision.expire == []
        assert "such jobs may hold at most 60% of the GPUs (24)" in decision.held_back["large"]
    for policy in ("e31", "e31-preempt"):
        held = decide(policy, [cannot_wait], _long_jobs_hold(16)).held_back["large"]
        assert held.endswith("whatever its deadline, as it would take whole machines for days")
    assert decide("e31-preempt", [checkpoints], _long_jobs_hold(16)).start == ["large"]
    one_machine = replace(cannot_wait, gpus=8)
    assert decide("e31", [one_machine], _long_jobs_hold(16)).start == ["large"]
    assert decide("e31", [cannot_wait], _long_jobs_hold(0)).start == ["large"]  # no long job runs
    running_large = Running("large_days", 16, NOW - 10, 4 * DAY, (0, 1), 2 * DAY)  # 16 + 8 of the share held
    days = Running("days", 8, NOW - 10, 4 * DAY, (2,), 2 * DAY)
    snap = snapshot([0, 0, 0, 8, 8], [running_large, days])
    small = pending("small", 4, max_runtime=2 * DAY, deadline=NOW + 5 * DAY)
    assert decide("e31", [small], snap).start == []


def test_the_share_counts_long_jobs_started_in_the_same_pass():
    first, second = (pending(name, 4, max_runtime=2 * DAY, deadline=NOW + 5 * DAY) for name in ("first", "second"))
    assert decide("e31", [first, second], _long_jobs_hold(20)).start == ["first"]  # 20 + 4, then 24 + 4 > 24


def test_a_long_job_that_cannot_afford_to_wait_for_room_in_the_share_starts_beyond_it():
    """The long jobs running are expected to end in two days: one that would then miss its
    deadline starts now; one that would not, or has no deadline, waits."""
    tight = pending("tight", 4, max_runtime=2 * DAY, deadline=NOW + 3.9 * DAY)  # 2 days' wait + 2 > 3.9
    patient = pending("patient", 4, max_runtime=2 * DAY, deadline=NOW + 4.1 * DAY)
    no_deadline = pending("no_deadline", 4, max_runtime=2 * DAY)  # can always wait
    decision = decide("e31", [tight, patient, no_deadline], _long_jobs_hold(24))
    assert decision.start == ["tight"] and sorted(decision.held_back) == ["no_deadline", "patient"]


def test_a_long_job_waits_for_its_turn_in_the_share_behind_those_ahead_in_line():
    """Room for one 8-GPU long job comes in a day, for a second in three: the first in line
    waits for the first, the second cannot wait three days and starts now."""
    ends = (1.5 * DAY, 3 * DAY, 4 * DAY)
    running = [Running(f"days{m}", 8, NOW, 5 * DAY, (m,), end) for m, end in enumerate(ends)]
    first = pending("first", 8, max_runtime=2 * DAY, deadline=NOW + 3.6 * DAY)  # 1.5 + 2 <= 3.6
    second = pending("second", 8, max_runtime=2 * DAY, deadline=NOW + 4 * DAY)  # 3 + 2 > 4
    decision = decide("e31", [first, second], snapshot([0, 0, 0, 8, 8], running))
    assert decision.start == ["second"] and list(decision.held_back) == ["first"]


def test_a_long_job_waits_for_the_share_only_while_it_would_make_its_deadline_taking_longer_than_usual():
    """It is judged by E31_LONG_SURE of its team's run times, not the median: its team's jobs take
    their declared two days, or now and then twice that; with four days to its deadline after a
    day's wait for room, it starts now rather than wait and likely be late."""
    running = [Running(f"days{m}", 8, NOW, 5 * DAY, (m,), 1.1 * DAY) for m in range(3)]
    job = pending("job", 8, max_runtime=5 * DAY, estimate=2 * DAY, deadline=NOW + 1.1 * DAY + 3.5 * DAY, team="t")
    steady, uneven = RuntimeModel(), RuntimeModel()
    for i in range(20):
        steady.observe("t", 2 * DAY, 2 * DAY)
        uneven.observe("t", 2 * DAY, 4 * DAY if i % 4 == 0 else 2 * DAY)  # one in four take twice as long
    assert decide("e31", [job], snapshot([0, 0, 0, 8, 8], running, runtimes=steady)).start == []
    assert decide("e31", [job], snapshot([0, 0, 0, 8, 8], running, runtimes=uneven)).start == ["job"]


def test_a_long_job_waits_for_room_by_the_expected_ends_where_the_limits_settle_it_too():
    """Whether a long job may wait for room in the share is first asked of the running long jobs'
    limits, the longest wait there can be, and only then of their expected ends. The answer is
    always that of the expected ends: on 300 drawn cases, some settled by the limits, some not."""
    rng = random.Random(5)
    runtimes = RuntimeModel(window=50, min_samples=5)
    for _ in range(30):
        runtimes.observe("t", 2 * DAY, rng.uniform(0.6, 1.0) * 2 * DAY)
    settled = not_settled = 0  # cases the limits settle, and cases only the expected ends do
    for case in range(300):
        running = [
            Running(f"r{m}", 8, NOW - rng.uniform(0, DAY), rng.uniform(2, 5) * DAY, (m,), 2 * DAY, "t")
            for m in range(rng.randint(1, 4))
        ]
        snap = snapshot([0] * len(running) + [8] * (5 - len(running)), running, runtimes=runtimes)
        job = pending("job", 8, max_runtime=2 * DAY, deadline=NOW + rng.uniform(2, 7) * DAY, team="t")
        need = sum(r.gpus for r in running) + job.gpus - E31_LONG_SHARE * 40
        slack = job.deadline - expected_runtime(job, snap, E31_LONG_SURE) - NOW
        by_limits = _room_comes_in_time([max(NOW, r.ends_by) for r in running], need, slack)
        by_expected = _room_comes_in_time([expected_end_or_limit(r, snap) for r in running], need, slack)
        assert LongJobs(snap).waits_for_room(job) == by_expected, case
        assert by_expected or not by_limits, case  # the limits never say it may wait when it may not
        settled += by_limits
        not_settled += by_expected and not by_limits
    assert settled > 20 and not_settled > 20


def _room_comes_in_time(ends: list[float], need: float, slack: float) -> bool:
    """Whether jobs of 8 GPUs ending at ``ends`` free ``need`` GPUs within ``slack`` from now."""
    freed = 0
    for end in sorted(ends):
        freed += 8
        if freed >= need:
            return slack > end - NOW
    return False


def test_the_first_long_job_starts_however_much_of_a_small_cluster_it_takes():
    job = pending("whole", 8, max_runtime=2 * DAY)
    assert decide("e31", [job], snapshot([8])).start == ["whole"]  # 8 > 60% of 8, but nothing long runs
    running = [Running("long", 8, NOW - 10, 2 * DAY, (0,), 2 * DAY)]
    assert decide("e31", [job], snapshot([0, 8], running)).start == []


def test_the_share_goes_by_learned_run_times_not_declared_ones():
    declared_long = pending("declared_long", 4, max_runtime=2 * DAY, deadline=NOW + 5 * DAY, team="t")
    snap = _long_jobs_hold(24)
    snap.runtimes = _learned(0.25)  # the team's jobs take a quarter of what they declare: 12 hours
    assert decide("e31", [declared_long], snap).start == ["declared_long"]


def test_the_share_counts_a_running_job_by_what_it_was_expected_to_take_and_never_past_its_limit():
    long_job = pending("long", 4, max_runtime=2 * DAY)  # no deadline: it can always wait
    free = [0, 0, 0, 8, 8]  # 40 GPUs, 24 of them held by the running jobs below

    # Jobs that declared no run time count by what such jobs took here.
    undeclared = [Running(f"u{m}", 8, NOW - 10, 4 * DAY, (m,), 0.0) for m in range(3)]
    took_days, took_an_hour = RuntimeModel(), RuntimeModel()
    for _ in range(20):
        took_days.observe("", 0.0, 3 * DAY)
        took_an_hour.observe("", 0.0, 3600.0)
    assert decide("e31", [long_job], snapshot(free, undeclared, runtimes=took_days)).start == []
    assert decide("e31", [long_job], snapshot(free, undeclared, runtimes=took_an_hour)).start == ["long"]

    # Jobs that declared 20 h, where jobs take twice what they declare: 40 h, but not past a limit of 22 h.
    twice = RuntimeModel()
    for _ in range(20):
        twice.observe("", 100.0, 200.0)
    limited = [Running(f"l{m}", 8, NOW - 10, 22 * 3600, (m,), 20 * 3600) for m in range(3)]
    unlimited = [replace(r, max_runtime=4 * DAY) for r in limited]
    assert decide("e31", [long_job], snapshot(free, limited, runtimes=twice)).start == ["long"]
    assert decide("e31", [long_job], snapshot(free, unlimited, runtimes=twice)).start == []


def test_e31_serves_a_team_under_its_share_before_one_over_it():
    jobs = [pending("heavy", deadline=NOW + 1000, team="heavy"), pending("light", deadline=NOW + 1000, team="light")]
    snap = snapshot([8], usage={"heavy": 9e6, "light": 1e6})
    assert [j.id for j in POLICIES["e31"].order(jobs, snap)] == ["light", "heavy"]
    # the nudge is bounded: a much earlier deadline still comes first
    jobs[0] = pending("heavy", deadline=NOW + 100, team="heavy")
    assert [j.id for j in POLICIES["e31"].order(jobs, snap)] == ["heavy", "light"]


def test_e31_serves_a_large_job_by_its_deadline_like_any_other():
    urgent = pending("urgent", 1, deadline=NOW + 60)
    large = pending("large", 12, submitted=5, deadline=NOW + 10**6)
    eight = pending("eight", 8, submitted=5, deadline=NOW + 10**5)
    snap = snapshot([8] * 4)
    assert [j.id for j in POLICIES["e31"].order([large, urgent, eight], snap)] == ["urgent", "eight", "large"]


def test_e31_serves_jobs_due_in_the_same_hour_fewest_gpu_hours_first():
    hour = (NOW // 3600 + 2) * 3600  # an hour boundary, two ahead
    long_wide = pending("long-wide", 8, submitted=1, max_runtime=3000, deadline=hour + 600)
    short = pending("short", 1, submitted=2, max_runtime=600, deadline=hour + 3000)
    wide = pending("wide", 8, submitted=3, max_runtime=600, deadline=hour + 1200)
    earlier = pending("earlier", 8, submitted=4, max_runtime=3000, deadline=hour - 60)  # due the hour before
    snap = snapshot([8] * 4)
    order = POLICIES["e31"].order([long_wide, short, wide, earlier], snap)
    assert [j.id for j in order] == ["earlier", "short", "wide", "long-wide"]
    # due more than a day ahead: by deadline and submit time, so small jobs cannot keep a big one waiting
    far = hour + 2 * 86400
    big = pending("big", 16, submitted=1, max_runtime=3000, deadline=far + 600)
    small = pending("small", 1, submitted=2, max_runtime=60, deadline=far + 900)
    assert [j.id for j in POLICIES["e31"].order([small, big], snap)] == ["big", "small"]


def test_e31_preempt_serves_jobs_due_at_the_same_minute_fewest_gpu_hours_first_and_others_by_deadline():
    hour = (NOW // 3600 + 2) * 3600  # an hour boundary, two ahead
    wide_sooner = pending("wide-sooner", 8, submitted=1, max_runtime=3000, deadline=hour + 600)
    narrow_later = pending("narrow-later", 1, submitted=2, max_runtime=600, deadline=hour + 1200)  # 10 min later
    wide = pending("wide", 8, submitted=3, max_runtime=3000, deadline=hour + 1800)
    narrow = pending("narrow", 1, submitted=4, max_runtime=600, deadline=hour + 1830)  # the same minute as wide
    jobs, snap = [wide, narrow, narrow_later, wide_sooner], snapshot([8] * 4)
    order = [j.id for j in POLICIES["e31-preempt"].order(jobs, snap)]
    assert order == ["wide-sooner", "narrow-later", "narrow", "wide"]
    # e31 groups the whole hour: there the narrow ones go first
    assert [j.id for j in POLICIES["e31"].order(jobs, snap)] == ["narrow-later", "narrow", "wide-sooner", "wide"]
    # a job without a deadline goes last
    assert POLICIES["e31-preempt"].order([pending("none"), narrow], snap)[0] is narrow


def test_e31_preempt_orders_by_fair_share_only_jobs_due_at_the_same_minute():
    minute = (NOW // 60 + 60) * 60  # a minute boundary, an hour ahead
    snap = snapshot([8], usage={"heavy": 6e6, "light": 1e6})  # shares used 1.7 and 0.3
    heavy = pending("heavy", submitted=1, max_runtime=1000, deadline=minute, team="heavy")
    light = pending("light", submitted=2, max_runtime=1000, deadline=minute + 30, team="light")
    order = POLICIES["e31-preempt"].order
    # due at the same minute and as long: the team under its share first, though submitted later
    assert [j.id for j in order([heavy, light], snap)] == ["light", "heavy"]
    # due a minute apart: deadline order, whatever the teams' shares
    later = replace(light, id="later", deadline=minute + 120)
    assert [j.id for j in order([later, heavy], snap)] == ["heavy", "later"]
    # among jobs due at the same minute, the fewest GPU-hours go first, whatever the team
    wide_light = replace(light, id="wide-light", gpus=8)
    assert [j.id for j in order([wide_light, heavy], snap)] == ["heavy", "wide-light"]


# -- Slurm's multifactor priority ------------------------------------------------------------------


def test_backfill_priority_favours_light_teams_old_jobs_and_small_jobs():
    order = POLICIES["backfill"].order
    snap = snapshot([8, 8], usage={"heavy": 9e6, "light": 1e6})
    jobs = [pending("heavy", team="heavy", submitted=NOW - 10), pending("light", team="light", submitted=NOW - 10)]
    assert [j.id for j in order(jobs, snap)] == ["light", "heavy"]
    jobs = [pending("new", submitted=NOW), pending("old", submitted=NOW - 7 * 86400)]
    assert [j.id for j in order(jobs, snap)] == ["old", "new"]
    jobs = [pending("wide", 16, submitted=NOW), pending("narrow", 1, submitted=NOW)]
    assert [j.id for j in order(jobs, snap)] == ["narrow", "wide"]


# -- what finished jobs teach ---------------------------------------------------------------------


def test_the_runtime_model_learns_per_team_and_borrows_when_a_team_is_new():
    runtimes = RuntimeModel(window=100, min_samples=20)
    assert runtimes.ratio("t", 0.5) == 1.0  # nothing learned: the declared time stands
    for i in range(100):
        runtimes.observe("fast", 100.0, 20.0 + i % 10)
    assert 0.2 <= runtimes.ratio("fast", 0.5) <= 0.3
    assert runtimes.ratio("new", 0.5) == runtimes.ratio("fast", 0.5)  # borrows everyone's
    for _ in range(100):
        runtimes.observe("slow", 100.0, 90.0)
    assert runtimes.ratio("slow", 0.5) == 0.9 and runtimes.ratio("fast", 0.5) < 0.3
    runtimes.observe("x", 0.0, 10.0)  # nothing declared: nothing to learn
    assert runtimes.ratio("x", 0.5) == runtimes.ratio(None, 0.5)


def test_the_runtime_model_answers_as_if_it_had_just_learned_everything():
    """It keeps what it works out between finished jobs: after each one, its answers for every
    team (one with its own samples, one that borrows everyone's, one about to have enough of its
    own, one never seen) are those of a model that saw the same jobs and was never asked before.
    So are the answers for running jobs that keep a memo from ask to ask as they run on."""
    rng = random.Random(3)
    seen: list[tuple] = []
    memos: dict[tuple, list] = {}
    kept = RuntimeModel(window=30, min_samples=5)
    asked = [(team, declared, window) for team in ("big", "small", "growing", "never") for declared, window in
             ((100.0, 150.0), (100.0, None), (300.0, 240.0), (0.0, None), (0.0, 150.0))]  # fmt: skip
    for i in range(120):
        team = "big" if i % 3 else rng.choice(["small", "growing"] if i < 60 else ["growing"])
        declared = rng.choice([0.0, 50.0, 100.0, 200.0])
        finished = (team, declared, rng.uniform(10, 150), rng.choice([None, rng.uniform(60, 400)]))
        kept.observe(*finished)
        seen.append(finished)
        fresh = RuntimeModel(window=30, min_samples=5)
        for job in seen:
            fresh.observe(*job)
        for team, declared, window in asked:
            for q in (0.25, 0.5):
                assert kept.runtime(team, declared, window, q) == fresh.runtime(team, declared, window, q), (i, team)
            for ran in (i * 1.5, i * 0.5 + (i % 7) * 20):  # one that runs on steadily, one that jumps about
                memo = memos.setdefault((team, declared, window, ran == i * 1.5), [])
                so_far = kept.runtime_so_far(team, declared, ran, 0.5, memo)
                assert so_far == fresh.runtime_so_far(team, declared, ran, 0.5), (i, team, declared, ran)
        assert [kept.ratio(t, 0.5) for t in ("small", None)] == [fresh.ratio(t, 0.5) for t in ("small", None)]


def test_a_running_job_keeps_its_expected_end_only_while_it_holds():
    """A running job keeps its expected end from pass to pass (``Running.end_memo``); it is always
    the one a new copy of it would be given: as it runs on past the run times its expected end
    came from, after a job of its team or anyone's ends, for jobs that declared a run time or none,
    that resumed with work kept, and that outran everything learned."""
    rng = random.Random(11)
    model = RuntimeModel(window=30, min_samples=5)
    jobs = [
        Running(f"r{i}", 1, NOW - rng.uniform(0, 400), rng.uniform(200, 900), (0,), estimate, team, done_s=done)
        for i, (estimate, team, done) in enumerate(
            [
                (300.0, "a", 0.0),
                (300.0, "b", 0.0),
                (0.0, "a", 0.0),
                (500.0, "a", 120.0),
                (50.0, "b", 0.0),
                (0.0, "c", 30.0),
            ]
        )
    ]
    asked = hits = 0
    for step in range(200):
        if step % 9 == 0:
            model.observe(rng.choice("abc"), rng.choice([0.0, 100.0, 300.0]), rng.uniform(20, 700))
        snap = replace(snapshot([8], jobs, runtimes=model), now=NOW + step * rng.uniform(0, 12))
        for job in jobs:
            kept_before = list(job.end_memo)
            fresh = replace(job)  # no memos
            assert expected_end_or_limit(job, snap) == expected_end_or_limit(fresh, snap), (step, job.id)
            asked += 1
            hits += kept_before == job.end_memo and bool(kept_before)
    assert hits > asked // 2  # most asks are answered from the memo


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_decision_leaves_the_gpus_its_starts_do_not_hold(name):
    """``Decision.cluster_after``, what e31-preempt goes on deciding from, is the snapshot's GPUs
    with each job the walk started holding its own, jobs bigger than a machine too; the
    snapshot's cluster is left as it was."""
    snap = snapshot([8, 5, 8, 8, 2])
    jobs = [pending("a", 1), pending("b", 3), pending("c", 16), pending("d", 8), pending("e", 2), pending("f", 8)]
    decision = decide(name, jobs, snap)
    assert 0 < len(decision.start) < len(jobs)  # some start, and the last finds no machine left
    held = snap.cluster.copy()
    for job in jobs:
        if job.id in decision.start:
            held.hold(decision.placement[job.id], job.gpus)
    after = decision.cluster_after
    assert after is not None and (after.free, after.free_gpus) == (held.free, held.free_gpus)
    assert snap.cluster.free == [8, 5, 8, 8, 2]


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_decision_names_the_jobs_left_waiting_in_line_order(name):
    """``Decision.waiting``, the jobs e31-preempt goes on to weigh, is the line without the jobs
    that started or expired, in line order; fifo's walk stops at the first that does not fit."""
    snap = snapshot([4, 2])
    jobs = [pending("a", 2, submitted=1), pending("b", 8, submitted=2), pending("gone", 8, submitted=3, deadline=NOW - 1),
            pending("c", 8, submitted=4, deadline=NOW + 9000), pending("d", 1, submitted=5), pending("e", 4, submitted=6)]  # fmt: skip
    decision = decide(name, jobs, snap)
    assert decision.start and (decision.expire or name in ("fifo", "sjf"))  # those two expire none
    gone = set(decision.start) | set(expired(decision))
    line = [job.id for job in POLICIES[name].order(jobs, snap) if job.id not in gone]
    waiting = [job.id for job in decision.waiting]
    assert waiting == (line[: line.index("b") + 1] if name == "fifo" else line) and waiting


def test_e31_preempt_leaves_a_job_it_made_room_for_out_of_those_waiting():
    decision = decide("e31-preempt", [URGENT, pending("later", 1)], _held(checkpointed_at=NOW - 400))
    assert decision.start == ["urgent"] and [job.id for job in decision.waiting] == ["later"]


def test_a_queued_job_keeps_its_expected_run_times_only_while_its_team_learns_nothing():
    """A queued job keeps its expected run times from pass to pass; they are always those a new
    copy of it would be given: after a job of its team ends, after anyone's ends where its team
    borrows everyone's samples, not after another team's own, and under another model."""
    runtimes = RuntimeModel(window=50, min_samples=5)
    for _ in range(10):
        runtimes.observe("own", 100.0, 50.0)
    kept = {team: pending(team, max_runtime=1000.0, estimate=100.0, deadline=NOW + 5000, team=team)
            for team in ("own", "borrows")}  # fmt: skip
    asked = [0]

    def same_as_a_new_copy(snap: Snapshot) -> list[float]:
        answers = []
        for job in kept.values():
            for q in (0.5, 0.9):
                answer = expected_runtime(job, snap, q)
                assert answer == expected_runtime(replace(job), snap, q), (asked[0], job.team, q)
                answers.append(answer)
        asked[0] += 1
        return answers

    first = same_as_a_new_copy(snapshot([8], runtimes=runtimes))
    assert first == same_as_a_new_copy(snapshot([8], runtimes=runtimes))  # nothing learned: the same
    for _ in range(12):
        runtimes.observe("other", 100.0, 90.0)  # another team's: the borrower's answers move, not "own"'s
    moved = same_as_a_new_copy(snapshot([8], runtimes=runtimes))
    assert moved[:2] == first[:2] and moved[2:] != first[2:]
    for _ in range(5):
        runtimes.observe("own", 100.0, 100.0)  # its own team's: its answers move
    assert same_as_a_new_copy(snapshot([8], runtimes=runtimes))[:2] != first[:2]
    same_as_a_new_copy(snapshot([8], runtimes=_learned_with_windows()))  # another model altogether


def _learned_with_windows(spread_of_windows: float = 1.0, windows: bool = True) -> RuntimeModel:
    """100 finished jobs that took 0.34-1.0 of their declared 100 s and, independently of that,
    0.34-0.83 of their deadline window (x ``spread_of_windows`` at the wide end)."""
    runtimes = RuntimeModel(window=100, min_samples=20)
    for i in range(100):
        actual = 100.0 * (0.34 + 0.66 * i / 99)
        of_window = 0.34 + (0.83 * spread_of_windows - 0.34) * ((i * 37) % 100) / 99
        runtimes.observe("t", 100.0, actual, deadline_window_s=actual / of_window if windows else None)
    return runtimes


def test_the_deadline_window_narrows_the_run_time_estimate():
    runtimes = _learned_with_windows()
    declared_only = 300 * runtimes.ratio("t", 0.5)
    estimate = runtimes.runtime("t", 300.0, 240.0, 0.5)
    # run time is at least 0.34 x 300 (declared) and at most 0.83 x 240 (window): the middle of that
    assert 0.34 * 300 <= estimate <= 0.83 * 240 < declared_only
    assert runtimes.runtime("t", 300.0, None, 0.5) == declared_only  # no deadline: declared only


def test_deadline_windows_that_say_nothing_leave_the_estimate_alone():
    wide = _learned_with_windows(spread_of_windows=1000.0)
    assert wide.runtime("t", 300.0, 240.0, 0.5) == 300 * wide.ratio("t", 0.5)
    unknown = _learned_with_windows(windows=False)  # observe as the live queue calls it today
    assert unknown.runtime("t", 300.0, 240.0, 0.5) == 300 * unknown.ratio("t", 0.5)


def test_too_few_consistent_jobs_fall_back_to_the_declared_estimate():
    runtimes = _learned_with_windows()
    # consistent run times would be 0.34-0.42 of the declared: about 12 finished jobs, under 20
    assert runtimes.runtime("t", 300.0, 150.0, 0.5) == 300 * runtimes.ratio("t", 0.5)


def test_e31_keeps_a_job_its_deadline_window_says_is_shorter_than_declared():
    # Declared 300 s, 180 s of its 240 s window left: jobs like it took 0.67 of their declared
    # time (201 s, too long), but the ones whose run time fits such a window took about 150 s.
    job = pending("waits", max_runtime=300, submitted=NOW - 60, deadline=NOW + 180, team="t")
    busy = [Running("r", 8, NOW - 10, 1000, (0,))]
    assert expired(decide("e31", [job], snapshot([0], busy, runtimes=_learned_with_windows(windows=False)))) == [
        "waits"
    ]
    decision = decide("e31", [job], snapshot([0], busy, runtimes=_learned_with_windows()))
    assert decision.start == [] and decision.expire == []


def test_a_custom_policy_is_just_a_priority_and_a_walk():
    from e31_jupyter.core.policy import walk

    newest_first = Policy("newest", lambda job, snap: -job.submitted_at, lambda ordered, snap: walk(ordered, snap))
    jobs = [pending("old", submitted=1), pending("new", submitted=2)]
    assert newest_first.decide(jobs, snapshot([1], machine_gpus=1)).start == ["new"]


# -- e31-preempt: a suspend only where it is worth what it costs -------------------------------------


def _held(checkpointed_at: float | None, deadline: float | None = None, runtimes=None) -> Snapshot:
    """One machine of 8 GPUs, held since NOW - 4000 by a job of team "a" (limit 20000 s) that
    keeps checkpoints, its last at ``checkpointed_at``."""
    holder = Running("held", 8, NOW - 4000, 20_000.0, (0,), 20_000.0, "a", "", deadline, checkpointed_at)
    return snapshot([0], [holder], runtimes=runtimes)


URGENT = pending("urgent", 8, max_runtime=1000, deadline=NOW + 1100)  # it must start within 100 s


def test_e31_preempt_suspends_a_job_that_can_afford_it_for_one_that_cannot_wait():
    decision = decide("e31-preempt", [URGENT], _held(checkpointed_at=NOW - 400))
    assert decision.suspend == [("held", "urgent")]
    assert decision.start == ["urgent"] and decision.placement["urgent"] == (0,)
    assert "urgent" not in decision.held_back
    # its own deadline allows it: after the urgent job, all of its limit left but what it kept
    assert decide("e31-preempt", [URGENT], _held(NOW - 400, deadline=NOW + 18_000)).suspend == [("held", "urgent")]
    assert decide("e31", [URGENT], _held(NOW - 400)).suspend == []  # e31 never suspends


def test_a_job_the_queue_suspended_is_never_expired():
    # 1000 s of work left, due in 900: a job that never ran expires; one the queue suspended runs late
    late = pending("late", 8, max_runtime=1000, deadline=NOW + 900)
    for name in ("e31", "e31-preempt"):
        assert expired(decide(name, [late], snapshot([0]))) == ["late"]
        assert expired(decide(name, [replace(late, suspended_by_queue=True)], snapshot([0]))) == []
        assert decide(name, [replace(late, suspended_by_queue=True)], snapshot([8])).start == ["late"]


def test_e31_preempt_judges_whether_a_job_can_afford_a_suspend_by_what_its_team_took():
    # 16460 s of its limit left after the suspend, due in 16800 s: on its limit it cannot afford
    # to wait for the urgent job (500 s, as half of what jobs declared)
    halves, uneven = RuntimeModel(), RuntimeModel()
    for i in range(40):
        halves.observe("a", 100.0, 50.0)
        uneven.observe("a", 100.0, 100.0 if i % 4 == 0 else 50.0)  # one in four ran to its limit
    on_time = NOW + 16_800
    # its team's jobs took half of what they declared, 9 in 10 of them at most: it can
    assert decide("e31-preempt", [URGENT], _held(NOW - 400, on_time, halves)).suspend == [("held", "urgent")]
    # where one in four of them ran to its limit, it cannot
    assert decide("e31-preempt", [URGENT], _held(NOW - 400, on_time, uneven)).suspend == []


def test_e31_preempt_may_suspend_a_job_only_likely_to_be_on_time_while_it_stays_likely():
    # one in four of its team's jobs ran to its limit (20000 s), the rest half of it: 9 in 10 of
    # them took 20000 s, half of them 10000 s. Started NOW - 4000 and checkpointed at NOW - 400,
    # after the suspend it has 16460 s left by the first, 6460 s by the second; the urgent job
    # is expected to be done by NOW + 500
    uneven = RuntimeModel()
    for i in range(40):
        uneven.observe("a", 100.0, 100.0 if i % 4 == 0 else 50.0)

    def suspended(deadline: float) -> bool:
        return decide("e31-preempt", [URGENT], _held(NOW - 400, deadline, uneven)).suspend == [("held", "urgent")]

    # left alone it ends by NOW + 16000 as 9 in 10 did: it is held to that, and cannot afford it
    assert not suspended(NOW + 16_800)
    # due at NOW + 12000, it misses as 9 in 10 did even if left alone, and makes it as half of
    # them did (by NOW + 6000): it still does after the suspend (500 + 6460 s), so it may be suspended
    assert suspended(NOW + 12_000)
    # due at NOW + 6500, the suspend would make it likely to miss (500 + 6460 s)
    assert not suspended(NOW + 6_500)


def test_a_resumed_job_is_not_expired_for_work_it_has_done():
    # 10000 s declared, 8000 s of it done in earlier runs: 2000 s left, due in 3000 s; no GPU free
    back = Pending("back", 8, 0.0, 10_000.0, 10_000.0, NOW + 3000, "a", done_s=8_000.0)
    assert expired(decide("e31", [back], snapshot([0]))) == []
    assert expired(decide("e31", [replace(back, done_s=0.0)], snapshot([0]))) == ["back"]


def test_a_resumed_job_is_not_suspended_before_it_saves_a_checkpoint_again():
    # started again at NOW - 400, its last checkpoint is from before: it has saved nothing since
    resumed = Running("held", 8, NOW - 400, 20_000.0, (0,), 20_000.0, "a", "", None, NOW - 400, resumed=True)
    assert decide("e31-preempt", [URGENT], snapshot([0], [resumed])).suspend == []
    saved = replace(resumed, checkpointed_at=NOW - 100)  # it has saved one since
    assert decide("e31-preempt", [URGENT], snapshot([0], [saved])).suspend == [("held", "urgent")]
    # a job in its first run may be suspended before its first checkpoint: it has no restore to waste
    assert decide("e31-preempt", [URGENT], snapshot([0], [replace(resumed, resumed=False)])).suspend == [
        ("held", "urgent")
    ]


def test_a_resumed_job_is_judged_on_all_it_has_run():
    # one in four of team a's jobs ran to its limit (20000 s), the rest half of it. The holder ran
    # 11000 s before a suspend and again since NOW - 400: having run 11400 s, more than half, it
    # is one of the long ones, with 9000 s still to go at 9 in 10 and at the median alike
    uneven = RuntimeModel()
    for i in range(40):
        uneven.observe("a", 100.0, 100.0 if i % 4 == 0 else 50.0)
    resumed = Running("held", 8, NOW - 400, 9_060.0, (0,), 20_000.0, "a", "", NOW + 8_000, NOW - 400, done_s=11_000.0)
    snap = snapshot([0], [resumed], runtimes=uneven)
    assert expected_end(resumed, snap) == NOW + 8_600
    # due at NOW + 8000, it is late even left alone, at the median too: it is not suspended
    assert decide("e31-preempt", [URGENT], snap).suspend == []
    # seen from this run alone, as a job of 9060 s that ran 400, half of such jobs take 4530 s:
    # it would be judged likely to make it after the suspend, and suspended
    fresh = replace(resumed, estimate=9_060.0, done_s=0.0)
    assert decide("e31-preempt", [URGENT], snapshot([0], [fresh], runtimes=uneven)).suspend == [("held", "urgent")]
    # due at NOW + 10000, it makes it at 9 in 10 after the suspend (again by NOW + 940; the urgent job is done by NOW + 500)
    on_time = replace(resumed, deadline=NOW + 10_000)
    assert decide("e31-preempt", [URGENT], snapshot([0], [on_time], runtimes=uneven)).suspend == [("held", "urgent")]
    # back in line, what it is expected to take is what is left of a long one
    waiting = Pending("w", 8, 0.0, 9_060.0, 20_000.0, NOW + 20_000, "a", suspended_by_queue=True, done_s=11_000.0)
    assert expected_runtime(waiting, snap) == 9_000
    assert expected_runtime(replace(waiting, id="fresh", done_s=0.0, max_runtime=20_000.0), snap) == 10_000


# 2000 s of work due in 3500 s: it must start within 1500 s, sooner than its own run time
SOON = pending("soon", 8, max_runtime=2000, deadline=NOW + 3500)


def test_e31_preempt_makes_room_early_for_a_job_the_running_jobs_will_not_leave_room_for():
    # the holder is expected to run until NOW + 16000, past the latest SOON may start
    assert decide("e31-preempt", [SOON], _held(NOW - 400)).suspend == [("held", "soon")]
    assert decide("e31", [SOON], _held(NOW - 400)).suspend == []


def test_e31_preempt_makes_no_room_early_where_gpus_free_in_time():
    # the holder reaches its limit (all it declared) at NOW + 1000, before SOON must start: it waits
    ending = Running("held", 8, NOW - 19_000, 20_000.0, (0,), 20_000.0, "a", "", None, NOW - 400)
    decision = decide("e31-preempt", [SOON], snapshot([0], [ending]))
    assert decision.suspend == [] and decision.start == [] and decision.expire == []
    # but a job ahead of it in line takes the GPUs that free in time: SOON is given room elsewhere
    first = pending("first", 8, max_runtime=2000, deadline=NOW + 3400)
    ending_unsaved = replace(ending, id="ending", checkpointed_at=None)  # it keeps no checkpoints
    long = Running("long", 8, NOW - 4000, 20_000.0, (1,), 20_000.0, "a", "", None, NOW - 400)
    decision = decide("e31-preempt", [first, SOON], snapshot([0, 0], [ending_unsaved, long]))
    assert decision.suspend == [("long", "soon")] and decision.placement["soon"] == (1,)
    # a large job is given room only once it is urgent: room for it is whole machines
    large = pending("large", 16, max_runtime=2000, deadline=NOW + 3500)
    holders = [Running(f"h{m}", 8, NOW - 4000, 20_000.0, (m,), 20_000.0, "a", "", None, NOW - 400) for m in (0, 1)]
    assert decide("e31-preempt", [large], snapshot([0, 0], holders)).suspend == []


def test_e31_preempt_makes_no_suspend_that_is_not_worth_it():
    # 3000 s of work since its checkpoint, and the restore, cost more GPU time than the 1000 s it saves
    assert decide("e31-preempt", [URGENT], _held(NOW - 3000)).suspend == []
    # 1000 s for the urgent job, 60 s of restore and 16400 s of its limit: past its own deadline
    assert decide("e31-preempt", [URGENT], _held(NOW - 400, deadline=NOW + 17_000)).suspend == []
    assert decide("e31-preempt", [URGENT], _held(None)).suspend == []  # it keeps no checkpoints
    patient = pending("patient", 8, max_runtime=1000, deadline=NOW + 5000)  # it can wait an hour for GPUs
    assert decide("e31-preempt", [patient], _held(NOW - 400)).suspend == []
    hopeless = pending("hopeless", 8, max_runtime=1000, deadline=NOW + 900)  # misses even if it starts now
    decision = decide("e31-preempt", [hopeless], _held(NOW - 400))
    assert decision.suspend == [] and [job_id for job_id, _ in decision.expire] == ["hopeless"]


def test_e31_preempt_loses_more_work_than_a_short_job_saves_only_while_the_cluster_barely_feels_it():
    def held(checkpointed_at: float) -> Snapshot:
        """Two machines of 8 GPUs: one held by a job that keeps checkpoints, the other by one that does not."""
        holder = Running("held", 8, NOW - 4000, 20_000.0, (0,), 20_000.0, "a", "", None, checkpointed_at)
        return snapshot([0, 0], [holder, Running("other", 8, NOW - 4000, 20_000.0, (1,), 20_000.0, "a")])

    short = pending("short", 1, max_runtime=600, deadline=NOW + 700)  # 600 GPU-s of work; it must start within 100 s
    # 8 x (1200 + 60) GPU-s lost, 17 times what the job does; spread over the 16 GPUs, 630 s: under 15 minutes
    assert decide("e31-preempt", [short], held(NOW - 1200)).suspend == [("held", "short")]
    # 8 x (2000 + 60) GPU-s lost: 1030 s over the 16 GPUs, over 15 minutes, and more than the job does
    assert decide("e31-preempt", [short], held(NOW - 2000)).suspend == []
