"""benchmarks/misses.py: which deadlines two policies miss, job by job, on hand-made traces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import BENCHMARKS, benchmark_module

from e31_jupyter.core.machines import Cluster
from e31_jupyter.core.policies import POLICIES
from e31_jupyter.core.simulator import Preemption, TraceJob, simulate

MISSES = BENCHMARKS / "misses.py"
DAY = 86400.0


misses = benchmark_module("misses.py")


def job(id, submit, duration, deadline, max_runtime=None, team="t") -> TraceJob:
    return TraceJob(id, float(submit), float(duration), 1, team, float(deadline), float(max_runtime or duration))


# One GPU. fifo runs the two-day job first, and the half-hour one due at 2000 s ends late;
# edf runs the half-hour one first, and both are on time.
TWO = [job("a-long", 0, 2 * DAY, 10 * DAY), job("b-short", 0, 1800, 2000)]


def replayed(names, trace=TWO):
    return {name: simulate(trace, POLICIES[name], gpus=1, machine_gpus=1) for name in names}


def test_a_miss_only_one_policy_has_is_counted_in_its_size_class_and_run_time():
    rows = misses.compare(replayed(["fifo", "edf"]))
    by_run_time = {r["run_time"]: r for r in rows}
    assert set(by_run_time) == {"10 min - 1 h", "> 1 day"}
    short = by_run_time["10 min - 1 h"]
    assert (short["size"], short["jobs"]) == ("1", 1)
    assert short["fifo"] == {"missed": 1, "expired": 0, "refused": 0, "only": 1, "missed_gpu_h": 0.5}
    assert short["edf"]["missed"] == 0
    assert by_run_time["> 1 day"]["fifo"]["missed"] == by_run_time["> 1 day"]["edf"]["missed"] == 0


def test_a_job_dropped_at_its_submit_is_counted_as_refused_and_one_both_miss_as_nobody_s_only():
    # its time limit (50 s) cannot end by its deadline (20 s): Slurm's --deadline drops it at once;
    # edf starts it on the free GPU, and it ends late
    hopeless = [job("c", 0, 50, 20)]
    (row,) = misses.compare(replayed(["backfill", "edf"], hopeless))
    assert row["backfill"] == {"missed": 1, "expired": 1, "refused": 1, "only": 0, "missed_gpu_h": 0.0}
    assert (row["edf"]["missed"], row["edf"]["expired"], row["edf"]["only"]) == (1, 0, 0)


def test_the_due_hours_are_those_of_the_jobs_only_one_policy_missed():
    hours = misses.due_hours(replayed(["fifo", "edf"]))
    assert hours == {"fifo": [("1970-01-01 00:00", 1)], "edf": []}


def test_held_counts_gpu_hours_in_the_span_by_whether_the_job_started_before_it():
    held = misses.held(replayed(["fifo", "edf"]), 900, 3600, gpus=1)
    assert held["cluster_gpu_h"] == 0.8  # 2,700 s of one GPU
    assert held["by_policy"]["fifo"] == {"1 GPU, > 1 day, started before": 0.8}
    # edf: the half-hour job from 0 to 1800, the long one from 1800
    assert held["by_policy"]["edf"] == {
        "1 GPU, 10 min - 1 h, started before": 0.2,
        "1 GPU, > 1 day, started within": 0.5,
    }


def test_the_teams_with_the_fewest_jobs_on_time_come_first_with_their_share_under_each_policy():
    # one GPU: 20 jobs of 100 s all due at 150 s (only the first can make it), and 20 jobs due
    # far off, submitted once those are done
    late = [job(f"late{i}", 0, 100, 150, team="late") for i in range(20)]
    fine = [job(f"fine{i}", 5000 + i, 10, 10 * DAY, team="fine") for i in range(20)]
    assert misses.teams(replayed(["fifo", "edf"], late + fine)) == [
        {"team": "late", "jobs": 20, "fifo": 0.05, "edf": 0.05},
        {"team": "fine", "jobs": 20, "fifo": 1.0, "edf": 1.0},
    ]
    assert misses.teams(replayed(["fifo", "edf"], [job("x", 0, 10, 100, team="")])) is None  # no teams


def test_the_gpu_hours_on_time_and_the_largest_jobs_only_one_policy_missed_say_how_each_was_missed():
    hours = misses.largest_misses(replayed(["fifo", "edf"]))
    # fifo: the two-day job on time, the half-hour one starts after it, 47.9 h past its deadline
    assert hours["fifo"] == {
        "on_time": 48.0,
        "asked": 48.5,
        "largest_only_missed": [
            {"id": "b-short", "gpus": 1, "run_h": 0.5, "gpu_h": 0.5, "how": "late by 47.9 h", "suspended": 0}
        ],
    }
    assert hours["edf"] == {"on_time": 48.5, "asked": 48.5, "largest_only_missed": []}


def test_how_a_job_ended_tells_refused_expired_late_and_on_time_apart():
    (refused,) = replayed(["backfill"], [job("c", 0, 50, 20)])["backfill"]
    assert misses.how_it_ended(refused) == "refused at its submit"
    # one GPU held for two days: the job due in an hour waits in edf's line until it cannot make it
    (_, waited) = replayed(["edf"], [job("a", 0, 2 * DAY, 10 * DAY), job("w", 100, 600, 3600)])["edf"]
    assert waited.expired_at is not None and waited.expired_at > 100
    assert misses.how_it_ended(waited) == f"expired after {(waited.expired_at - 100) / 3600:.1f} h in line"
    by_name = {name: outcomes[1] for name, outcomes in replayed(["fifo", "edf"]).items()}
    assert misses.how_it_ended(by_name["fifo"]) == "late by 47.9 h"
    assert misses.how_it_ended(by_name["edf"]) == "on time, 0.1 h to spare"  # ends at 1,800 s, due at 2,000


def test_a_job_s_timeline_gives_each_time_it_held_its_gpus_under_each_policy():
    seen = misses.timeline(replayed(["fifo", "edf"]), "b-short")
    assert seen is not None
    assert (seen["gpus"], seen["team"], seen["submitted"], seen["due"]) == (
        1,
        "t",
        "1970-01-01 00:00",
        "1970-01-01 00:33",
    )
    assert (seen["declared_h"], seen["run_h"]) == (0.5, 0.5)
    assert seen["by_policy"]["fifo"] == {
        "how": "late by 47.9 h",
        "suspended": 0,
        "lost_h": 0.0,
        "runs": [["1970-01-03 00:00", "1970-01-03 00:30"]],
    }
    assert seen["by_policy"]["edf"]["runs"] == [["1970-01-01 00:00", "1970-01-01 00:30"]]
    assert misses.timeline(replayed(["fifo", "edf"]), "nope") is None


def test_a_job_s_timeline_gives_its_suspends_the_work_they_lost_and_its_runs_around_them():
    # One machine of 8 GPUs: a 10,000 s job that keeps checkpoints holds it from 0; at 4,000 s
    # comes a 1,000 s job of 8 GPUs due by 5,100 s. e31-preempt suspends the long job for it
    # (400 s of work since its last checkpoint lost, and a 60 s restore); e31 never suspends.
    long = TraceJob("long", 0.0, 10_000.0, 8, "a", 1e6, 10_000.0, resumable=True)
    urgent = TraceJob("urgent", 4000.0, 1000.0, 8, "b", 5100.0, 1000.0)
    preemption = Preemption(checkpoint_every_s=1800.0, restore_s=60.0)
    outcomes = {name: simulate([long, urgent], POLICIES[name], 8, 8, preemption) for name in ("e31-preempt", "e31")}
    seen = misses.timeline(outcomes, "long")
    assert seen is not None
    assert seen["by_policy"]["e31-preempt"] == {
        "how": "on time, 274.6 h to spare",
        "suspended": 1,
        "lost_h": 0.1,
        "runs": [["1970-01-01 00:00", "1970-01-01 01:06"], ["1970-01-01 01:23", "1970-01-01 03:11"]],
    }
    assert seen["by_policy"]["e31"]["suspended"] == 0 and len(seen["by_policy"]["e31"]["runs"]) == 1
    text = misses._text({"policies": ["e31-preempt", "e31"], "misses": [], "only_one_missed_due": {},
                         "teams_fewest_on_time": None, "gpu_hours": misses.largest_misses(outcomes), "jobs": [seen]})  # fmt: skip
    assert "- e31-preempt: on time, 274.6 h to spare, suspended once (0.1 h of work lost). Held its GPUs:" in text
    assert "- urgent: 8 GPUs x 0.3 h = 2.2 GPU-h, expired after 0.1 h in line" in text  # e31 alone misses it


def test_the_machines_at_a_moment_say_which_are_whole_and_how_soon_the_others_would_be():
    # Three machines of 8 GPUs: a 16-GPU job of an hour takes two whole ones, a one-GPU job of
    # two days the third; at 1,800 s the two are whole again within the hour, the third in two days.
    trace = [TraceJob("big", 0.0, 3600.0, 16, "t", DAY, 3600.0), job("one", 0, 2 * DAY, 10 * DAY)]
    outcomes = {name: simulate(trace, POLICIES[name], 24, 8) for name in ("fifo", "edf")}
    seen = misses.machines_at(outcomes, 1800.0, Cluster.of(24, 8))
    assert (seen["at"], seen["machines"], seen["machine_gpus"]) == ("1970-01-01 00:30", 3, 8)
    assert seen["by_policy"]["fifo"] == {
        "free_gpus": 7,
        "whole": 0,
        "whole_within": {"1 h": 2, "6 h": 2, "24 h": 2},
        "gpus_in_jobs_over_a_day": 1,
    }
    assert misses.machines_at(outcomes, 7200.0, Cluster.of(24, 8))["by_policy"]["edf"]["whole"] == 2


def test_the_machines_of_a_suspended_job_are_free_while_it_waits_again():
    # the suspend of the timeline test above: at 4,500 s e31-preempt runs the urgent job on the
    # machine until 5,000 s; e31 still runs the long one, until 10,000 s
    long = TraceJob("long", 0.0, 10_000.0, 8, "a", 1e6, 10_000.0, resumable=True)
    urgent = TraceJob("urgent", 4000.0, 1000.0, 8, "b", 5100.0, 1000.0)
    preemption = Preemption(checkpoint_every_s=1800.0, restore_s=60.0)
    outcomes = {name: simulate([long, urgent], POLICIES[name], 8, 8, preemption) for name in ("e31-preempt", "e31")}
    seen = misses.machines_at(outcomes, 4500.0, Cluster.of(8, 8))["by_policy"]
    assert seen["e31-preempt"]["whole_within"] == {"1 h": 1, "6 h": 1, "24 h": 1}
    assert seen["e31"]["whole_within"] == {"1 h": 0, "6 h": 1, "24 h": 1}
    assert seen["e31-preempt"]["free_gpus"] == seen["e31"]["free_gpus"] == 0


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    rows = [f"{j.submitted_at},{j.duration},1,{j.deadline},{j.max_runtime},t" for j in TWO]
    path.write_text("timestamp,duration,num_gpus,deadline,max_runtime,vc\n" + "\n".join(rows) + "\n")
    return path


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MISSES), *args], capture_output=True, text=True, timeout=120)


def test_the_command_replays_a_trace_file_and_prints_json(tmp_path):
    done = _run("--trace", str(_trace(tmp_path)), "--gpus", "1", "--machine-gpus", "1",
                "--policies", "fifo,edf", "--held", "900,3600", "--machines", "900", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["policies"] == ["fifo", "edf"]
    # fifo runs the two-day job then, edf the half-hour one: the one machine is whole again within 1 h under edf alone
    assert report["machines"][0]["by_policy"]["fifo"]["whole_within"] == {"1 h": 0, "6 h": 0, "24 h": 0}
    assert report["machines"][0]["by_policy"]["edf"]["whole_within"] == {"1 h": 1, "6 h": 1, "24 h": 1}
    assert sum(r["fifo"]["only"] for r in report["misses"]) == 1
    assert report["only_one_missed_due"]["fifo"] == [["1970-01-01 00:00", 1]]
    assert report["held"]["by_policy"]["fifo"] == {"1 GPU, > 1 day, started before": 0.8}


def test_the_command_reads_one_team_alone_and_says_when_the_window_has_none_of_its_jobs(tmp_path):
    args = ("--trace", str(_trace(tmp_path)), "--gpus", "1", "--machine-gpus", "1", "--policies", "fifo,edf", "--json")
    done = _run(*args, "--team", "t")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["team"] == "t" and sum(r["jobs"] for r in report["misses"]) == 2
    assert report["teams_fewest_on_time"] == []  # no team has the 20 jobs a team's share is counted over
    absent = _run(*args, "--team", "nope")
    assert absent.returncode == 1
    assert "no job of team 'nope' in the window" in absent.stderr


def test_the_command_prints_a_table_without_json(tmp_path):
    done = _run("--trace", str(_trace(tmp_path)), "--gpus", "1", "--machine-gpus", "1", "--policies", "fifo,edf",
                "--job", "j1", "--machines", "1970-01-01 00:15")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| 1 | 10 min - 1 h | 1 | 1 (0, 0), 1, 0 | 0 (0, 0), 0, 0 |" in done.stdout
    assert "Due hours of the jobs only fifo missed: 1970-01-01 00:00 (1)" in done.stdout
    assert "GPU-hours fifo finished on time: 48.0 of 48.5 (0.990). The largest jobs only it missed:" in done.stdout
    assert "- j1: 1 GPU x 0.5 h = 0.5 GPU-h, late by 47.9 h" in done.stdout
    assert (
        "Job j1: 1 GPU, team t, submitted 1970-01-01 00:00, due 1970-01-01 00:33, declared 0.5 h, ran 0.5 h"
        in done.stdout
    )
    assert "- fifo: late by 47.9 h. Held its GPUs: 1970-01-03 00:00 to 1970-01-03 00:30" in done.stdout
    assert "GPU-hours edf finished on time: 48.5 of 48.5 (1.000). The largest jobs only it missed: none" in done.stdout
    assert (
        "Machines at 1970-01-01 00:15 (1 machine of 1 GPU; whole within: as the jobs on them really ended):"
        in done.stdout
    )
    assert (
        "- fifo: 0 GPUs free, 0 machines whole; whole within 1 h 0, 6 h 0, 24 h 0; jobs of over a day hold 1 GPU"
        in done.stdout
    )


def test_the_command_gives_the_jobs_asked_for_and_says_when_one_is_not_in_the_window(tmp_path):
    args = ("--trace", str(_trace(tmp_path)), "--gpus", "1", "--machine-gpus", "1", "--policies", "fifo,edf", "--json")
    done = _run(*args, "--job", "j0", "--job", "j1")
    assert done.returncode == 0, done.stderr
    jobs = json.loads(done.stdout)["jobs"]
    assert [j["id"] for j in jobs] == ["j0", "j1"]
    assert jobs[1]["by_policy"]["edf"]["how"] == "on time, 0.1 h to spare"
    absent = _run(*args, "--job", "j7")
    assert absent.returncode == 1
    assert "no job 'j7' in the window" in absent.stderr
    elsewhere = _run(*args, "--team", "t", "--job", "j7")
    assert elsewhere.returncode == 1
    assert "no job 'j7' of team 't' in the window" in elsewhere.stderr


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--policies", "e31", "two different policies"),
        ("--policies", "edf,edf", "two different policies"),
        ("--policies", "e31,nope", "unknown policies"),
        ("--held", "3600,900", "TO must come after FROM"),
        ("--held", "yesterday,today", "FROM,TO (date-times or seconds)"),
        ("--machines", "yesterday", "--machines takes a date-time or seconds"),
    ],
)
def test_bad_arguments_are_refused_with_what_to_give(tmp_path, flag, value, says):
    args = {"--policies": "fifo,edf", flag: value}
    done = _run("--trace", str(_trace(tmp_path)), *[part for pair in args.items() for part in pair])
    assert done.returncode == 2
    assert says in done.stderr
