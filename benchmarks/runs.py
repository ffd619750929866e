"""Replay the policies on every run RESULTS.md reports, in one command, and say which targets each
e31 policy meets on each.

    python benchmarks/runs.py --trace /work/shared/traces/philly.csv                  # all 24 runs
    python benchmarks/runs.py --trace ... --policies e31 --only unseen --seed 1       # a rule, quickly
    python benchmarks/runs.py --trace ... --policies e31 --seed 0,1,2,3 --json       # on four draws
    python benchmarks/runs.py --trace ... --run "mine=--gpus 64 --start 2017-10-01 --end 2017-10-08"

The runs (``RUNS``) are the eight every rule was judged on ("tuned"), eight that no rule was
tuned on ("unseen": December, mid-October to mid-November, and December with 32- and 64-GPU
jobs), and eight where much of the work is 64-GPU jobs ("many-large": a tenth to a half of the
jobs, on machines of 8 GPUs and of 4), each the arguments of one ``scheduling.py`` replay;
``--run NAME=ARGS`` replays your own instead. Runs go in parallel (``--workers``, default the
machine's cores). One run moves by tens of percent with an unrelated change to the order of the
line (one burst decides it: RESULTS.md, "How much rides on one burst"), so judge a rule by all
of them, and on several draws: ``--seed 0,1,2,3`` replays each run on each seed ("RUN, seed S"),
and the counts and ``--against`` take in every one. Two seeds were not enough to judge one rule
(RESULTS.md, stop 60).

Prints a table of each policy's misses and goodput per run, the targets met where baselines
were replayed beside it (``scheduling.targets``), how many runs meet each, and, with
``--against POLICY``, each policy's misses over that one's (their geometric mean over the runs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduling import parse, policy_names, replay  # noqa: E402

_WINDOWS = {
    "required": "--gpus 640 --start 2017-10-01 --end 2017-10-29",
    "560 GPUs": "--gpus 560 --start 2017-09-18 --end 2017-10-16",
    "352 GPUs": "--gpus 352 --start 2017-11-01 --end 2017-11-29",
    "64-GPU jobs": "--gpus 1024 --start 2017-10-01 --end 2017-10-29 --large 0.03:64",
}
_UNSEEN_WINDOWS = {
    "December": "--gpus 176 --start 2017-12-01 --end 2017-12-22",
    "Oct-Nov": "--gpus 584 --start 2017-10-16 --end 2017-11-13",
    "December, 32-GPU jobs": "--gpus 216 --start 2017-12-01 --end 2017-12-22 --large 0.03:32",
    "December, 64-GPU jobs": "--gpus 272 --start 2017-12-01 --end 2017-12-22 --large 0.03:64",
}
# Clusters unlike the trace, where 64-GPU jobs are a tenth to a half of the jobs (and most of the
# work): e31 misses more deadlines than edf on several of these (RESULTS.md, stop 58).
_MANY_LARGE_WINDOWS = {
    "December, a tenth 64-GPU jobs": "--gpus 488 --start 2017-12-01 --end 2017-12-22 --large 0.1:64",
    "November, 30% 64-GPU jobs": "--gpus 2400 --start 2017-11-01 --end 2017-11-29 --large 0.3:64",
    "November, 30% 64-GPU jobs, machines of 4": "--gpus 2400 --start 2017-11-01 --end 2017-11-29 --large 0.3:64 --machine-gpus 4",
    "November, half 64-GPU jobs": "--gpus 3600 --start 2017-11-01 --end 2017-11-29 --large 0.5:64",
}
MODELS = ("slack", "clock")
RUNS = {
    kind: {f"{name}, {model}": f"{args} --deadlines {model}" for name, args in windows.items() for model in MODELS}
    for kind, windows in (("tuned", _WINDOWS), ("unseen", _UNSEEN_WINDOWS), ("many-large", _MANY_LARGE_WINDOWS))
}
TARGETS = (
    "fewest_misses",
    "half_the_best_baseline",
    "no_class_pays",
    "no_class_pays_against_best_baseline",
    "goodput",
    "team_ontime_worst",
    "team_ontime_min",
)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    runs = dict(args.run) if args.run else {n: a for kind in args.only for n, a in RUNS[kind].items()}
    common = ["--trace", str(args.trace), "--policies", ",".join(args.policies), "--no-pass-time"]
    argvs = {
        f"{name}, seed {seed}" if len(args.seed) > 1 else name: common + ["--seed", str(seed)] + shlex.split(extra)
        for name, extra in runs.items()
        for seed in args.seed
    }
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = dict(zip(argvs, pool.map(_replay, argvs.values())))
    if args.json:
        print(json.dumps({"runs": results, "summary": summary(results, args.against)}, indent=2))
    else:
        print(_table(results, args.against))


def _replay(argv: list[str]) -> dict:
    run = parse(argv)
    run.plot = None
    return replay(run)[0]


def summary(results: dict[str, dict], against: str | None) -> dict[str, dict]:
    """Per policy: the runs meeting each target (of those where it was held to baselines), and
    with ``against``, the geometric mean over the runs of its misses over that policy's (a run
    where either missed nothing has no ratio and is left out)."""
    out: dict[str, dict] = {}
    policies = dict.fromkeys(name for figures in results.values() for name in figures)
    for policy in policies:
        held = [run[policy]["targets"] for run in results.values() if "targets" in run.get(policy, {})]
        met = {target: sum(bool(_met(t, target)) for t in held) for target in TARGETS}
        row: dict = {
            "runs_held_to_baselines": len(held),
            "runs_meeting": met,
            # how often the best miss rate of every class is one baseline's: "no class pays" asks
            # the policy to match, in each class, what no single baseline did
            "runs_a_baseline_is_best_in_every_class": sum(bool(t["baselines_best_in_every_class"]) for t in held),
        }
        if against is not None:
            ratios = [
                run[policy]["miss_rate"] / run[against]["miss_rate"]
                for run in results.values()
                if policy in run and against in run and run[against]["miss_rate"] > 0 and run[policy]["miss_rate"] > 0
            ]
            row["misses_over_" + against] = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
        out[policy] = row
    return out


# Targets met when the list of classes that pay, under this key of ``scheduling.targets``, is empty.
_PAYING = {
    "no_class_pays": "classes_that_pay",
    "no_class_pays_against_best_baseline": "classes_that_pay_against_best_baseline",
}


def _met(targets: dict, target: str) -> bool | None:
    return not targets[_PAYING[target]] if target in _PAYING else targets[target]


def _table(results: dict[str, dict], against: str | None) -> str:
    lines = [
        "| run | policy | misses | misses 1 / 2-8 / >8 | goodput | targets met |",
        "|---|---|---|---|---|---|",
    ]
    for run, figures in results.items():
        for policy, f in figures.items():
            by_class = " / ".join(f"{f['miss_rate_by_class'][c]:.3f}" for c in ("1", "2-8", ">8"))
            met = (", ".join(t for t in TARGETS if _met(f["targets"], t)) or "none") if "targets" in f else ""
            lines.append(f"| {run} | {policy} | {f['miss_rate']:.4f} | {by_class} | {f['goodput']:.3f} | {met} |")
    lines += [
        "",
        "| policy | runs held to baselines | "
        + " | ".join(TARGETS)
        + " |"
        + (f" misses over {against}'s |" if against else ""),
    ]
    lines.append("|---" * (len(TARGETS) + 2 + bool(against)) + "|")
    rows = summary(results, against)
    for policy, row in rows.items():
        ratio = row.get("misses_over_" + against) if against else None
        cells = [str(row["runs_held_to_baselines"])] + [str(row["runs_meeting"][t]) for t in TARGETS]
        if against:
            cells.append("-" if ratio is None else f"{ratio:.3f}")
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    held = next((row for row in rows.values() if row["runs_held_to_baselines"]), None)
    if held is not None:
        lines += [
            "",
            f"Runs where one baseline has the fewest misses of every size class: "
            f"{held['runs_a_baseline_is_best_in_every_class']} of {held['runs_held_to_baselines']} "
            "(no_class_pays asks for the best of each class, whichever baseline it is).",
        ]
    return "\n".join(lines)


def _seeds(text: str) -> list[int]:
    try:
        return [int(seed) for seed in text.split(",")]
    except ValueError:
        message = f"--seed takes whole numbers separated by commas (0 or 0,1,2,3), not {text!r}"
        raise argparse.ArgumentTypeError(message) from None


def _named_run(text: str) -> tuple[str, str]:
    name, sep, extra = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--run takes NAME=ARGS (scheduling.py's arguments), not {text!r}")
    return name, extra


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", required=True, type=Path)
    parser.add_argument("--policies", default="fifo,backfill,edf,sjf,e31,e31-preempt", type=policy_names)
    parser.add_argument("--seed", type=_seeds, default=[0],
                        help="the draws of deadlines and run times; 0,1,2,3 replays every run on each")  # fmt: skip
    parser.add_argument(
        "--only", default=list(RUNS), type=lambda s: s.split(","), help="tuned, unseen, many-large (default: all)"
    )
    parser.add_argument("--run", action="append", type=_named_run, metavar="NAME=ARGS",
                        help="replay this run instead of RUNS (repeat for more)")  # fmt: skip
    parser.add_argument("--against", help="a policy to hold the others' misses to, run by run")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = parser.parse_args(argv)
    unknown = [kind for kind in args.only if kind not in RUNS]
    if unknown:
        parser.error(f"--only takes {', '.join(RUNS)}, not {', '.join(unknown)}")
    if args.against is not None and args.against not in args.policies:
        parser.error(f"--against {args.against}: replay it too (--policies)")
    return args


if __name__ == "__main__":
    main()
