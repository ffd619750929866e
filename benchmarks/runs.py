"""Replay the policies on every run RESULTS.md reports, in one command, and say which targets each
e31 policy meets on each.

    python benchmarks/runs.py --trace /work/shared/traces/philly.csv                  # all 24 runs
    python benchmarks/runs.py --trace ... --policies e31 --only unseen --seed 1       # a rule, quickly
    python benchmarks/runs.py --trace ... --policies e31 --seed 0,1,2,3 --json       # on four draws
    python benchmarks/runs.py --trace ... --run "mine=--gpus 64 --start 2017-10-01 --end 2017-10-08"
    python benchmarks/runs.py --trace ... --policies fifo,backfill,edf,sjf --seed 0,1,2,3 --json > base.json
    python benchmarks/runs.py --trace ... --policies e31 --seed 0,1,2,3 --baselines base.json  # baselines kept
    python benchmarks/runs.py --trace ... --only held-out --seed 0,1 --against edf    # a kept rule, where it was never tuned
    python benchmarks/runs.py --trace ... --extra '--expected 0'    # every job declaring its run time exactly

The runs (``RUNS``) are the eight every rule was judged on ("tuned"), eight that no rule was
tuned on when they were added ("unseen": December, mid-October to mid-November, and December with 32- and 64-GPU
jobs), and eight where much of the work is 64-GPU jobs ("many-large": a tenth to a half of the
jobs, on machines of 8 GPUs and of 4), each the arguments of one ``scheduling.py`` replay;
``--run NAME=ARGS`` replays your own instead. Rules have been judged on all 24 since stop 57,
so twenty more are kept apart ("held-out": twelve of other windows and cluster sizes where 5%
to 40% of the jobs ask for 64 GPUs, one on machines of 16, and since stop 85 eight of the trace as
it is, on four other windows and sizes): they are not replayed unless ``--only``
names them, and no rule is to be judged on them, only checked, once kept, for whether its gain
holds where it was never tuned. Runs go in parallel (``--workers``, default the
machine's cores). One run moves by tens of percent with an unrelated change to the order of the
line (one burst decides it: HISTORY.md, "How much rides on one burst"), so judge a rule by all
of them, and on several draws: ``--seed 0,1,2,3`` replays each run on each seed ("RUN, seed S"),
and the counts and ``--against`` take in every one. Two seeds were not enough to judge one rule
(HISTORY.md, stop 60).

Prints a table of each policy's misses and goodput per run, the targets met where baselines
were replayed beside it (``scheduling.targets``), how many runs meet each, and, with
``--against POLICY``, each policy's misses over that one's (their geometric mean over the runs).
``--baselines FILE`` holds the policies to the baselines' figures of an earlier ``--json``
output instead of replaying them: their code does not change with e31's rules, and a rule on
four seeds is judged in the time of its own replays. The file's runs must have been replayed
with the same arguments (its ``arguments`` say which), or the command stops and says which differ.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shlex
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduling import BASELINES, parse, policy_names, replay, targets  # noqa: E402

from e31_jupyter.core.policies import POLICIES  # noqa: E402

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
# work): e31 misses more deadlines than edf on several of these (HISTORY.md, stop 58).
_MANY_LARGE_WINDOWS = {
    "December, a tenth 64-GPU jobs": "--gpus 488 --start 2017-12-01 --end 2017-12-22 --large 0.1:64",
    "November, 30% 64-GPU jobs": "--gpus 2400 --start 2017-11-01 --end 2017-11-29 --large 0.3:64",
    "November, 30% 64-GPU jobs, machines of 4": "--gpus 2400 --start 2017-11-01 --end 2017-11-29 --large 0.3:64 --machine-gpus 4",
    "November, half 64-GPU jobs": "--gpus 3600 --start 2017-11-01 --end 2017-11-29 --large 0.5:64",
}
# Never judged a rule (stop 79): windows and cluster sizes none of the runs above has, each sized
# for an offered load of about 0.95.
_HELD_OUT_WINDOWS = {
    "September, 5% 64-GPU jobs": "--gpus 696 --start 2017-09-04 --end 2017-10-02 --large 0.05:64",
    "October, 20% 64-GPU jobs": "--gpus 3160 --start 2017-10-01 --end 2017-10-29 --large 0.2:64",
    "Oct-Nov, 10% 64-GPU jobs, machines of 16": "--gpus 1824 --start 2017-10-16 --end 2017-11-13 --large 0.1:64 --machine-gpus 16",
    "December, 40% 64-GPU jobs": "--gpus 1632 --start 2017-12-01 --end 2017-12-22 --large 0.4:64",
    "November, 15% 64-GPU jobs": "--gpus 1496 --start 2017-11-01 --end 2017-11-29 --large 0.15:64",
    "Sep-Oct, 30% 64-GPU jobs": "--gpus 2984 --start 2017-09-18 --end 2017-10-16 --large 0.3:64",
    # The trace's own jobs (stop 85), like the judged windows the orders of stops 82-83 gained on,
    # sized alike for an offered load of about 0.95 over the window; September's comes in its last
    # two weeks, about 1.6 times the cluster there.
    "September, 336 GPUs": "--gpus 336 --start 2017-09-04 --end 2017-10-02",
    "Sep-Oct, 600 GPUs": "--gpus 600 --start 2017-09-25 --end 2017-10-23",
    "Oct-Nov, 512 GPUs": "--gpus 512 --start 2017-10-22 --end 2017-11-19",
    "Nov-Dec, 320 GPUs": "--gpus 320 --start 2017-11-13 --end 2017-12-11",
}
MODELS = ("slack", "clock")
RUNS = {
    kind: {f"{name}, {model}": f"{args} --deadlines {model}" for name, args in windows.items() for model in MODELS}
    for kind, windows in (
        ("tuned", _WINDOWS),
        ("unseen", _UNSEEN_WINDOWS),
        ("many-large", _MANY_LARGE_WINDOWS),
        ("held-out", _HELD_OUT_WINDOWS),
    )
}
JUDGED = ("tuned", "unseen", "many-large")  # the runs a rule is judged on, replayed by default
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
    common = ["--trace", str(args.trace.resolve()), "--policies", ",".join(args.policies), "--no-pass-time"]
    common += shlex.split(args.extra)  # before each run's own arguments, which say what makes the run
    argvs = {
        f"{name}, seed {seed}" if len(args.seed) > 1 else name: common + ["--seed", str(seed)] + shlex.split(extra)
        for name, extra in runs.items()
        for seed in args.seed
    }
    arguments = {run: replayed(argv) for run, argv in argvs.items()}
    stored = _stored_baselines(args.baselines, arguments) if args.baselines else None
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = dict(zip(argvs, pool.map(_replay, argvs.values())))
    if stored is not None:
        results = {run: held_to_baselines(figures, stored[run]) for run, figures in results.items()}
    if args.json:
        report = {"runs": results, "summary": summary(results, args.against), "arguments": arguments}
        print(json.dumps(report, indent=2))
    else:
        print(_table(results, args.against))


def _replay(argv: list[str]) -> dict:
    run = parse(argv)
    run.plot = None
    return replay(run)[0]


def replayed(argv: list[str]) -> dict:
    """What a run replays: its ``scheduling.py`` arguments but the policies and the outputs."""
    run = vars(parse(argv))
    return {key: str(value) for key, value in run.items() if key not in ("policies", "plot", "pass_ms", "json")}


def as_replayed(stored: dict) -> dict:
    """A run's arguments as an earlier ``--json`` output stored them, with the default of each
    argument that came after it: its runs were replayed as that default does."""
    return {**_defaults(), **stored}


@functools.cache
def _defaults() -> dict:
    return replayed(["--trace", ""])


def held_to_baselines(figures: dict[str, dict], baselines: dict[str, dict]) -> dict[str, dict]:
    """A run's figures with the baselines' beside them, and each other policy's targets held to
    those baselines (``scheduling.targets``), as though they were replayed in the same run."""
    held = {name: {**f, "targets": targets(f, baselines)} for name, f in figures.items()}
    return {**baselines, **held}


def _stored_baselines(path: Path, arguments: dict[str, dict]) -> dict[str, dict]:
    """The baselines' figures of each run from an earlier ``--json`` output; exits saying what is
    wrong when the file lacks a run or its baselines, or replayed it with other arguments."""
    runs, stored_arguments = _report(path)
    baselines = {}
    for run, here in arguments.items():
        if run not in runs or run not in stored_arguments:
            sys.exit(
                f"runs.py: --baselines {path} has no run {run!r}: replay the baselines with the same --seed, --only or --run"
            )
        there = as_replayed(stored_arguments[run])
        differ = [
            f"{key} {there.get(key)} there, {value} here" for key, value in here.items() if there.get(key) != value
        ]
        if differ:
            sys.exit(
                f"runs.py: --baselines {path} replayed {run!r} otherwise ({'; '.join(differ)}): replay the baselines as this run"
            )
        baselines[run] = {name: figures for name, figures in runs[run].items() if name in BASELINES}
        if not baselines[run]:
            sys.exit(f"runs.py: --baselines {path} has no baseline ({', '.join(BASELINES)}) in {run!r}")
    return baselines


def _report(path: Path) -> tuple[dict, dict]:
    """An earlier ``--json`` output's runs and their arguments; exits saying so where it is not one."""
    try:
        report = json.loads(path.read_text())
        return report["runs"], report["arguments"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(
            f"runs.py: --baselines {path}: not the --json output of runs.py with each run's arguments ({error!r}); "
            "write one with: runs.py --trace TRACE --policies fifo,backfill,edf,sjf --json > FILE"
        )


def summary(results: dict[str, dict], against: str | None) -> dict[str, dict]:
    """Per policy: the runs meeting each target (of those where it was held to baselines), and
    with ``against``, the geometric mean over the runs of its misses over that policy's (a run
    where either missed nothing has no ratio and is left out)."""
    out: dict[str, dict] = {}
    policies = dict.fromkeys(name for figures in results.values() for name in figures)
    for policy in policies:
        held = [run[policy]["targets"] for run in results.values() if "targets" in run.get(policy, {})]
        meeting = {target: sum(bool(met(t, target)) for t in held) for target in TARGETS}
        row: dict = {
            "runs_held_to_baselines": len(held),
            "runs_meeting": meeting,
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


def met(targets: dict, target: str) -> bool | None:
    return not targets[_PAYING[target]] if target in _PAYING else targets[target]


def _table(results: dict[str, dict], against: str | None) -> str:
    lines = [
        "| run | policy | misses | misses 1 / 2-8 / >8 | goodput | targets met |",
        "|---|---|---|---|---|---|",
    ]
    for run, figures in results.items():
        for policy, f in figures.items():
            by_class = " / ".join(f"{f['miss_rate_by_class'][c]:.3f}" for c in ("1", "2-8", ">8"))
            names = (", ".join(t for t in TARGETS if met(f["targets"], t)) or "none") if "targets" in f else ""
            lines.append(f"| {run} | {policy} | {f['miss_rate']:.4f} | {by_class} | {f['goodput']:.3f} | {names} |")
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
    parser.add_argument("--policies", type=policy_names,
                        help="default: every policy; with --baselines, every one but the baselines")  # fmt: skip
    parser.add_argument("--seed", type=_seeds, default=[0],
                        help="the draws of deadlines and run times; 0,1,2,3 replays every run on each")  # fmt: skip
    parser.add_argument(
        "--only",
        default=list(JUDGED),
        type=lambda s: s.split(","),
        help=f"{', '.join(RUNS)} (default: {', '.join(JUDGED)})",
    )
    parser.add_argument("--run", action="append", type=_named_run, metavar="NAME=ARGS",
                        help="replay this run instead of RUNS (repeat for more)")  # fmt: skip
    parser.add_argument("--extra", default="", metavar="ARGS",
                        help="scheduling.py arguments added to every run, e.g. --extra '--expected 0.2'")  # fmt: skip
    parser.add_argument("--against", help="a policy to hold the others' misses to, run by run")
    parser.add_argument("--baselines", type=Path, metavar="FILE",
                        help="hold the policies to the baselines of this earlier --json output instead of replaying them")  # fmt: skip
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = parser.parse_args(argv)
    unknown = [kind for kind in args.only if kind not in RUNS]
    if unknown:
        parser.error(f"--only takes {', '.join(RUNS)}, not {', '.join(unknown)}")
    if args.policies is None:
        args.policies = [name for name in POLICIES if args.baselines is None or name not in BASELINES]
    if args.baselines is not None:
        replayed_twice = [name for name in args.policies if name in BASELINES]
        if replayed_twice:
            parser.error(f"--baselines holds the baselines; leave {', '.join(replayed_twice)} out of --policies")
    compared = args.policies + (list(BASELINES) if args.baselines is not None else [])
    if args.against is not None and args.against not in compared:
        parser.error(f"--against {args.against}: replay it too (--policies)")
    return args


if __name__ == "__main__":
    main()
