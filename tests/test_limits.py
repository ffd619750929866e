"""benchmarks/limits.py: the no-wait goodput bound and the e31 variants that show what the
targets e31 misses would take, on small hand-made traces."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from support import BENCHMARKS, benchmark_module

from e31_jupyter.core.policies import POLICIES
from e31_jupyter.core.simulator import TraceJob, simulate

LIMITS = BENCHMARKS / "limits.py"


limits = benchmark_module("limits.py")


def job(id, submit, duration, gpus=1, deadline=1e12) -> TraceJob:
    return TraceJob(id, float(submit), float(duration), gpus, "t", float(deadline), float(duration))


def test_the_no_wait_bound_caps_what_runs_at_once_at_the_cluster():
    # one GPU: a [0, 100) and b [50, 150) overlap for 50 s, when only one of them can run
    trace = [job("a", 0, 100), job("b", 50, 100)]
    assert limits.zero_wait_goodput(trace, gpus=1) == pytest.approx(150 / 200)
    assert limits.zero_wait_goodput(trace, gpus=2) == 1.0
    # GPUs count: a 4-GPU job beside a 1-GPU one on 4 GPUs
    assert limits.zero_wait_goodput([job("w", 0, 10, gpus=4), job("n", 0, 10)], gpus=4) == pytest.approx(40 / 50)


def test_the_no_wait_bound_is_above_what_a_policy_that_never_waits_reaches():
    rng = random.Random(4)
    trace = [job(f"j{i}", rng.uniform(0, 5000), rng.choice([60, 600, 3000]), rng.choice([1, 2, 4])) for i in range(200)]
    outcomes = simulate(trace, limits.waits_bounded(0), gpus=8, machine_gpus=8)
    ran = [o for o in outcomes if o.started_at is not None]
    assert all(o.started_at == o.job.submitted_at for o in ran)  # nothing that ran waited
    assert len(ran) < len(trace)  # and some were refused: the cluster was short
    goodput = sum(o.job.gpus * o.job.duration for o in ran) / sum(j.gpus * j.duration for j in trace)
    assert goodput <= limits.zero_wait_goodput(trace, gpus=8) + 1e-9


def test_waits_bounded_expires_a_job_once_it_has_waited_its_bound():
    trace = [job("busy", 0, 1000), job("next", 1, 100)]
    never = {o.job.id: o for o in simulate(trace, limits.waits_bounded(0), gpus=1, machine_gpus=1)}
    assert never["next"].expired_at == 1 and never["next"].started_at is None
    patient = {o.job.id: o for o in simulate(trace, limits.waits_bounded(20), gpus=1, machine_gpus=1)}
    assert patient["next"].started_at == 1000  # waited 999 s, within 20 x its 100 s
    e31 = {o.job.id: o for o in simulate(trace, POLICIES["e31"], gpus=1, machine_gpus=1)}
    assert e31["next"].started_at == 1000


def test_large_jobs_never_wait_refuses_a_large_job_that_cannot_start_at_once():
    trace = [job("small", 0, 1000), job("large", 5, 100, gpus=16), job("later", 2000, 100, gpus=16)]
    out = {o.job.id: o for o in simulate(trace, limits.large_jobs_never_wait(), gpus=16, machine_gpus=8)}
    assert out["large"].expired_at == 5 and out["large"].started_at is None
    assert out["later"].started_at == 2000  # one that finds the GPUs free runs
    e31 = {o.job.id: o for o in simulate(trace, POLICIES["e31"], gpus=16, machine_gpus=8)}
    assert e31["large"].started_at == 1000  # e31 itself lets it wait for the GPUs


def test_targets_are_held_to_the_baselines_beside_them():
    def row(miss, p99, goodput, fairness):
        return {"miss_rate": miss, "wait_p99_h": {">8": p99}, "goodput": goodput, "fairness_worst": fairness}

    baselines = {"backfill": row(0.4, 0.0, 0.5, 0.99), "sjf": row(0.2, 5.0, 0.9, 0.1)}
    assert limits.targets_met(row(0.1, 0.0, 0.9, 0.995), baselines) == ["misses", "p99 >8", "goodput", "fairness"]
    assert limits.targets_met(row(0.11, 0.1, 0.89, 0.99), baselines) == []


@pytest.mark.slow
def test_the_benchmark_prints_every_row_with_the_targets_it_meets(tmp_path):
    rng = random.Random(5)
    rows = [(i * 30, rng.choice([60, 600, 6000]), rng.choice([1, 2, 8, 16]), rng.choice("pq")) for i in range(300)]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(["timestamp,duration,num_gpus,user"] + [",".join(map(str, r)) for r in rows]) + "\n")
    run = subprocess.run(
        [sys.executable, str(LIMITS), "--trace", str(trace), "--gpus", "16", "--waits", "0,1", "--json"],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    results = json.loads(run.stdout)
    assert 0 < results["zero_wait_goodput_bound"] <= 1
    names = list(results["rows"])
    assert names == ["fifo", "backfill", "edf", "sjf", "e31", "e31, waits <= 0 x run time",
                     "e31, waits <= 1 x run time", "e31, large jobs never wait"]  # fmt: skip
    never = results["rows"]["e31, waits <= 0 x run time"]
    assert never["wait_p99_h"] == {"1": 0.0, "2-8": 0.0, ">8": 0.0}
    assert never["goodput"] <= results["zero_wait_goodput_bound"] + 1e-9
    assert results["rows"]["e31, large jobs never wait"]["wait_p99_h"][">8"] == 0.0
    assert all(isinstance(r["targets_met"], list) for r in results["rows"].values())

    table = subprocess.run(
        [sys.executable, str(LIMITS), "--trace", str(trace), "--gpus", "16", "--waits", "0", "--policies", "backfill,e31"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    assert "No job waits: goodput at most" in table and "| e31, large jobs never wait |" in table
    assert "| e31 |" in table and "no baseline replayed" not in table

    alone = subprocess.run(
        [sys.executable, str(LIMITS), "--trace", str(trace), "--gpus", "16", "--waits", "0", "--policies", "e31"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    assert "no baseline replayed" in alone and "the goodput target" not in alone  # nothing to hold the rows to
