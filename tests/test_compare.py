"""benchmarks/compare.py: whether a policy's change moved its misses by more than the runs' spread."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from support import BENCHMARKS, benchmark_module

compare = benchmark_module("compare.py")
COMPARE = BENCHMARKS / "compare.py"

MET = {"fewest_misses": True, "half_the_best_baseline": True, "classes_that_pay": [], "goodput": True,
       "team_ontime_worst": True, "team_ontime_min": True, "classes_that_pay_against_best_baseline": [],
       "baselines_best_in_every_class": ["edf"]}  # fmt: skip


def figures(missed: int, jobs: int = 1000, **targets) -> dict:
    return {"jobs": jobs, "miss_rate": missed / jobs, "targets": {**MET, **targets}}


def report(missed: dict[str, int], policy: str = "e31-preempt", **targets) -> dict:
    return {"runs": {run: {policy: figures(m, **targets)} for run, m in missed.items()}}


WINDOWS = ["required", "560 GPUs", "352 GPUs", "December", "Oct-Nov"]


def runs_of(windows, seeds=(0, 1)):
    return [f"{w}, {model}, seed {s}" for w in windows for model in ("slack", "clock") for s in seeds]


def test_a_change_that_lowers_every_window_is_beyond_the_spread_and_says_by_how_much():
    rng = random.Random(0)
    before = {run: rng.randrange(200, 2000) for run in runs_of(WINDOWS)}
    after = {run: round(m * rng.uniform(0.85, 0.95)) for run, m in before.items()}
    result = compare.compare(compare.pairs(report(before), report(after), "e31-preempt", "e31-preempt"))
    low, high = result["interval_95"]
    assert low < result["geometric_mean"] < high < 1 and result["geometric_mean"] == pytest.approx(0.9, abs=0.02)
    assert result["verdict"].startswith("fewer misses") and result["windows"] == 5
    assert (result["fewer"], result["more"], result["same"]) == (20, 0, 0)
    assert result["sign_test_p"] == pytest.approx(2 / 2**20)
    assert result["missed"] == {**result["missed"], "before": sum(before.values()), "after": sum(after.values())}
    assert set(result["by_model"]) == {"slack", "clock"} and set(result["by_kind"]) == {"tuned", "unseen"}
    assert result["by_kind"]["tuned"]["before"] == sum(
        m for run, m in before.items() if run.startswith(("req", "560", "352"))
    )


def test_windows_that_move_opposite_ways_leave_the_change_within_the_spread_whatever_the_runs_count():
    # Four windows gain 20% on every run, one loses 25%: held to the 20 runs as if each were a draw of
    # its own, the change would be beyond their spread (0.80-0.95); held to the five windows, it is not.
    before = dict.fromkeys(runs_of(WINDOWS), 1000)
    after = {run: 1250 if run.startswith("Oct-Nov") else 800 for run in before}
    result = compare.compare(compare.pairs(report(before), report(after), "e31-preempt", "e31-preempt"))
    assert (result["fewer"], result["more"]) == (16, 4)
    low, high = result["interval_95"]
    assert low < 1 < high and result["verdict"].startswith("within")
    # the windows are the draws: the four runs of each move together
    assert result["windows"] == 5


def test_a_window_seen_once_is_too_few_to_judge_and_runs_without_misses_have_no_ratio():
    runs = runs_of(["required"])
    result = compare.compare(
        compare.pairs(report(dict.fromkeys(runs, 10)), report(dict.fromkeys(runs, 5)), "e31-preempt", "e31-preempt")
    )
    assert result["interval_95"] is None and result["verdict"].startswith("fewer than two windows")
    zero = dict.fromkeys(runs_of(WINDOWS[:2]), 10) | {"required, slack, seed 0": 0}
    result = compare.compare(compare.pairs(report(zero), report(dict.fromkeys(zero, 10)), "e31-preempt", "e31-preempt"))
    assert result["without_ratio"] == 1 and result["geometric_mean"] == pytest.approx(1.0)


def test_the_targets_gained_and_lost_are_counted_run_by_run():
    runs = runs_of(WINDOWS[:2])
    before = report(dict.fromkeys(runs, 10), goodput=False)
    after = report(dict.fromkeys(runs, 10))
    after["runs"][runs[0]]["e31-preempt"]["targets"]["classes_that_pay"] = [">8"]
    result = compare.compare(compare.pairs(before, after, "e31-preempt", "e31-preempt"))
    assert result["targets"]["goodput"] == {"before": 0, "after": 8, "gained": 8, "lost": 0, "of": 8}
    assert result["targets"]["no_class_pays"] == {"before": 8, "after": 7, "gained": 0, "lost": 1, "of": 8}


def test_files_that_do_not_pair_are_refused_saying_what_to_replay():
    runs = runs_of(WINDOWS[:2])
    with pytest.raises(ValueError, match="other runs .*same --seed and --only"):
        compare.pairs(report(dict.fromkeys(runs, 1)), report(dict.fromkeys(runs[1:], 1)), "e31-preempt", "e31-preempt")
    with pytest.raises(ValueError, match="no 'e31' in .*it has e31-preempt.*--policy"):
        compare.pairs(report(dict.fromkeys(runs, 1)), report(dict.fromkeys(runs, 1)), "e31", "e31")


def test_the_sign_test_is_the_exact_binomial_two_sided():
    assert compare.sign_test(0, 5) == pytest.approx(2 / 32)
    assert compare.sign_test(3, 3) == 1.0 and compare.sign_test(0, 0) == 1.0
    assert compare.sign_test(9, 1) == compare.sign_test(1, 9) == pytest.approx(2 * 11 / 1024)


def test_arguments_a_file_lacks_are_their_defaults_and_others_are_named():
    first = {"arguments": {"r": {"gpus": "640", "resumable": "0.5"}}}  # written before --expected existed
    second = {"arguments": {"r": {"gpus": "640", "resumable": "1.0", "expected": "None"}}}
    assert compare.other_arguments(first, second) == ["resumable: 0.5 -> 1.0"]


def _run(*args, **kwargs):
    return subprocess.run(
        [sys.executable, str(COMPARE), *map(str, args)], capture_output=True, text=True, timeout=120, **kwargs
    )


def test_the_command_compares_two_policies_of_real_replays_and_refuses_bad_files(tmp_path):
    rng = random.Random(5)
    rows = "\n".join(
        f"{i * 90},{rng.choice([60, 900, 5000])},{rng.choice([1, 2, 4])},{rng.choice('pq')}" for i in range(300)
    )
    trace = tmp_path / "trace.csv"
    trace.write_text("submit_time,duration,num_gpu,vc\n" + rows + "\n")
    replays = subprocess.run(
        [sys.executable, str(BENCHMARKS / "runs.py"), "--trace", str(trace), "--policies", "fifo,edf",
         "--run", "small=--gpus 4", "--run", "larger=--gpus 6", "--json", "--workers", "2", "--seed", "0,1"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    runs = tmp_path / "runs.json"
    runs.write_text(replays.stdout)
    missed = {
        name: sum(round(r[name]["miss_rate"] * r[name]["jobs"]) for r in json.loads(replays.stdout)["runs"].values())
        for name in ("fifo", "edf")
    }
    done = _run(runs, runs, "--policy", "fifo", "--after-policy", "edf", "--json", check=True)
    result = json.loads(done.stdout)
    assert result["runs"] == 4 and result["windows"] in (2, None)
    assert (result["missed"]["before"], result["missed"]["after"]) == (missed["fifo"], missed["edf"])
    assert set(result["by_kind"]) == {"own"} and result["replayed_otherwise"] == []
    text = _run(runs, runs, "--policy", "fifo", "--after-policy", "edf", check=True).stdout
    assert "fifo -> edf" in text and "verdict:" in text and f"{missed['fifo']:,} -> {missed['edf']:,}" in text

    odd = _run(runs)
    assert odd.returncode == 2 and "come in pairs" in odd.stderr
    again = _run(runs, runs, runs, runs, "--policy", "edf")
    assert again.returncode == 1 and "hold runs an earlier pair holds" in again.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("[1, 2]")
    refused = _run(broken, runs)
    assert refused.returncode == 1 and "not the --json output of runs.py" in refused.stderr
    missing = _run(runs, runs, "--policy", "e31")
    assert missing.returncode == 1 and "no 'e31'" in missing.stderr and "Traceback" not in missing.stderr
