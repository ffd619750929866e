"""Replay a public GPU job trace through e31's scheduling policies and compare them.

    python benchmarks/scheduling.py --trace /work/shared/traces/philly.csv \\
        --gpus 640 --start 2017-10-01 --end 2017-10-29

Reads submit time as ``timestamp``, ``submit_time`` or ``submission_time`` (a date-time, or
seconds), ``duration`` (seconds), ``num_gpus`` or ``num_gpu``, and the team as ``cluster``,
``vc`` or ``user`` when there is one, and when the trace has them ``deadline`` (a date-time, or
seconds on the submit times' clock) and the declared run time as ``max_runtime``, ``time_limit`` or
``declared_runtime`` (seconds). What the trace lacks (a missing column, or a blank cell) is drawn
from ``--seed`` (``e31_jupyter.core.simulator.synthesise``): declared max run time = duration x a
factor uniform in [1, 3]; the deadline by ``--deadlines``:

- ``slack`` (the default): submit + k x duration, k uniform in [1.2, 3];
- ``clock``: users who want results by a time of day: the next 09:00 or 18:00 (UTC, the trace's
  clock) at least the declared max run time after the submit.

Policies see GPUs, submit time, deadline and declared run time, never the duration.

A share of the jobs keep checkpoints (``--resumable``, seeded); ``e31-preempt`` may suspend them.
A suspended job loses its work since its last checkpoint (every ``--checkpoint-every`` minutes of
its work), and pays ``--restore-s`` when it starts again. ``--large SHARE:GPUS`` makes a share of
the jobs large, for a cluster unlike the trace (a policy tuned to the trace should not win there).

Jobs submitted in [--start, --end) are replayed on an empty cluster of --gpus GPUs in machines of
--machine-gpus, to the end of the last job. Prints a markdown table (or, with --json, one JSON
object keyed by policy) and draws a PNG comparing the policies (--plot). Besides the overall miss
rate, the figures count misses per size class (every job not done by its deadline: expired, refused
or late) and the worst team's share of jobs done on time over the best's (null without teams).
When baselines are replayed, each other policy is held to them (``targets``: a table under the
figures, a ``targets`` key in the JSON).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import datetime as dt
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from e31_jupyter.core.machines import Cluster  # noqa: E402
from e31_jupyter.core.policies import POLICIES  # noqa: E402
from e31_jupyter.core.policy import Pending, Running, Snapshot  # noqa: E402
from e31_jupyter.core.runtimes import RuntimeModel, UrgentDemand  # noqa: E402
from e31_jupyter.core.simulator import (  # noqa: E402
    DEADLINE_MODELS,
    SIZE_CLASSES,
    Preemption,
    TraceJob,
    declare_expected,
    expected_error,
    mark_resumable,
    simulate,
    summarise,
    synthesise,
)

SUBMIT = ("timestamp", "submit_time", "submission_time")
GPUS = ("num_gpus", "num_gpu")
TEAM = ("cluster", "vc", "user")
DEADLINE = ("deadline",)
MAX_RUNTIME = ("max_runtime", "time_limit", "declared_runtime")
BASELINES = ("fifo", "backfill", "edf", "sjf")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    results, jobs, offered = replay(args)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(_table(results, args, jobs, offered))
    if args.plot:
        plot(results, args.plot)


def replay(args: argparse.Namespace) -> tuple[dict, int, float]:
    """The policies' figures on the window ``args`` names (each policy held to the baselines
    replayed beside it, ``targets``), the number of jobs, and the offered load."""
    jobs, (start, end), preemption = replayed_jobs(args)
    results = {}
    for name in args.policies:
        began = time.perf_counter()
        outcomes = simulate(jobs, POLICIES[name], args.gpus, args.machine_gpus, preemption)
        seconds = time.perf_counter() - began
        results[name] = {**summarise(outcomes, args.gpus, (start, end)), "jobs_per_s": len(jobs) / max(seconds, 1e-9)}
        print(f"{name}: {seconds:.1f}s", file=sys.stderr)
    if args.pass_ms:
        passes = pass_times_ms({name: POLICIES[name] for name in args.policies}, args.gpus, args.machine_gpus)
        for name, ms in passes.items():
            results[name]["pass_10k_ms"] = ms
    offered = sum(j.gpus * j.duration for j in jobs) / (args.gpus * (end - start))
    baselines = {name: figures for name, figures in results.items() if name in BASELINES}
    if baselines:
        for name, figures in results.items():
            if name not in BASELINES:
                figures["targets"] = targets(figures, baselines)
    return results, len(jobs), offered


def replayed_jobs(args: argparse.Namespace) -> tuple[list[TraceJob], tuple[float, float], Preemption]:
    """The jobs a replay of ``args`` sees (the window's, made large, keeping checkpoints and
    declaring expected run times as ``model_arguments`` say), the window in seconds, and how
    suspends cost them."""
    jobs, window = window_jobs(args.trace, args.start, args.end, args.seed, model=args.deadlines)
    if args.large:
        jobs = made_large(jobs, *args.large, seed=args.seed)
    jobs = mark_resumable(jobs, args.resumable, args.seed)
    if args.expected is not None:
        jobs = declare_expected(jobs, args.expected, args.seed)
    return jobs, window, Preemption(checkpoint_every_s=args.checkpoint_every * 60, restore_s=args.restore_s)


def replay_arguments(doc: str) -> argparse.ArgumentParser:
    """What every replay of a trace window takes: the trace, the cluster, the window, the seed and
    how deadlines the trace lacks are drawn."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--trace", required=True, type=Path)
    parser.add_argument("--gpus", type=int, default=640)
    parser.add_argument("--machine-gpus", type=int, default=8)
    parser.add_argument("--start", help="first submit day (YYYY-MM-DD[ HH:MM:SS], or seconds)")
    parser.add_argument("--end", help="submits before this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deadlines", choices=DEADLINE_MODELS, default="slack",
                        help="how deadlines the trace lacks are drawn: submit + k x duration (slack), "
                        "or the next 09:00 or 18:00 UTC the declared run time allows (clock)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    return parser


def policy_names(text: str) -> list[str]:
    """``--policies``: names of ``POLICIES``, comma-separated."""
    names = text.split(",")
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    return names


def parse(argv: list[str] | None) -> argparse.Namespace:
    """This benchmark's arguments (``main``'s, and each run of ``runs.py``)."""
    parser = model_arguments(replay_arguments(__doc__))
    parser.add_argument("--policies", default=",".join(POLICIES), type=policy_names)
    parser.add_argument("--plot", type=Path, default=Path(__file__).with_name("scheduling.png"),
                        help="where to draw the PNG (default: benchmarks/scheduling.png)")  # fmt: skip
    parser.add_argument("--no-pass-time", dest="pass_ms", action="store_false",
                        help="skip timing one pass over 10,000 queued jobs")  # fmt: skip
    return parser.parse_args(argv)


def model_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """What a replay models beyond the trace (``replayed_jobs``): the jobs that keep checkpoints,
    what a suspend costs them, large jobs for a cluster unlike the trace, and expected run times
    declared beside the limits."""
    parser.add_argument("--resumable", type=float, default=0.5,
                        help="share of jobs that keep checkpoints, which a policy that preempts may suspend (seeded)")  # fmt: skip
    parser.add_argument("--checkpoint-every", type=float, default=30.0,
                        help="minutes of a job's work between its checkpoints: a suspend loses what it did since")  # fmt: skip
    parser.add_argument("--restore-s", type=float, default=60.0,
                        help="seconds a suspended job spends loading its checkpoint when it starts again")  # fmt: skip
    parser.add_argument("--large", type=_share_and_gpus, metavar="SHARE:GPUS",
                        help="make a seeded SHARE of the jobs ask for GPUS GPUs each, their run times and deadlines "
                        "as they were (e.g. 0.03:64): a cluster with many large jobs, unlike the trace")  # fmt: skip
    parser.add_argument("--expected", type=_expected_error, metavar="ERROR",
                        help="every job also declares an expected run time (as --expected-runtime), its true run "
                        "time x a seeded factor within 1 +- ERROR (0: exact), which the queue is told instead of "
                        "its limit (default: none, only limits)")  # fmt: skip
    return parser


def _expected_error(text: str) -> float:
    try:
        return expected_error(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--expected takes a share from 0 up to 1 (0.2: within 20%), not {text!r}"
        ) from None


def _share_and_gpus(text: str) -> tuple[float, int]:
    share, _, gpus = text.partition(":")
    try:
        return float(share), int(gpus)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--large takes SHARE:GPUS, e.g. 0.03:64, not {text!r}") from None


# --- the trace ---------------------------------------------------------------------------------


def made_large(jobs: list[TraceJob], share: float, gpus: int, seed: int) -> list[TraceJob]:
    """``jobs`` with a seeded ``share`` of them asking for ``gpus`` GPUs (``--large``)."""
    rng = random.Random(seed + 1)
    return [dataclasses.replace(job, gpus=gpus) if rng.random() < share else job for job in jobs]


def window_jobs(
    path: Path, start: str | None, end: str | None, seed: int, model: str = "slack"
) -> tuple[list, tuple[float, float]]:
    """The trace's jobs submitted in [start, end) (the whole trace by default), with what the trace
    lacks drawn from ``seed``, deadlines by ``model`` (``synthesise``); and the window in seconds."""
    submits, durations, gpus, teams, deadlines, max_runtimes = read_trace(path)
    first = parse_when(start) if start else min(submits)
    last = parse_when(end) if end else max(submits) + 1
    keep = [i for i, s in enumerate(submits) if first <= s < last]
    submits, durations, gpus, teams, deadlines, max_runtimes = (
        [column[i] for i in keep] for column in (submits, durations, gpus, teams, deadlines, max_runtimes)
    )
    jobs = synthesise(
        submits, durations, gpus, teams, seed, deadlines=deadlines, max_runtimes=max_runtimes, model=model
    )
    return jobs, (first, last)


def read_trace(
    path: Path,
) -> tuple[list[float], list[float], list[int], list[str], list[float | None], list[float | None]]:
    """Submit times (seconds), durations, GPUs, teams, deadlines (seconds) and declared run times
    of every job in a CSV trace; a deadline or run time is None where the trace has none."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        columns = reader.fieldnames or []
        submit, gpus = _column(columns, SUBMIT, path), _column(columns, GPUS, path)
        team, deadline, max_runtime = (_optional_column(columns, names) for names in (TEAM, DEADLINE, MAX_RUNTIME))
        rows = list(reader)
    return (
        [parse_when(r[submit]) for r in rows],
        [float(r["duration"]) for r in rows],
        [int(float(r[gpus])) for r in rows],
        [r[team] if team else "" for r in rows],
        [_cell(r, deadline, parse_when) for r in rows],
        [_cell(r, max_runtime, float) for r in rows],
    )


def _optional_column(columns: list[str], names: tuple[str, ...]) -> str | None:
    return next((c for c in names if c in columns), None)


def _cell(row: dict[str, str], column: str | None, parse: Callable[[str], float]) -> float | None:
    """A row's value in an optional column; None where there is no such column or the cell is blank."""
    text = (row.get(column) or "").strip() if column else ""
    return parse(text) if text else None


def _column(columns: list[str], names: tuple[str, ...], path: Path) -> str:
    found = _optional_column(columns, names)
    if found is None:
        sys.exit(f"{path}: no column {' or '.join(names)} (columns: {', '.join(columns)})")
    return found


def parse_when(value: str) -> float:
    """Seconds: a number as it is, a date-time (UTC when it has no zone) as a timestamp."""
    try:
        return float(value)
    except ValueError:
        when = dt.datetime.fromisoformat(value.strip())
        return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()


# --- one pass over a long queue ------------------------------------------------------------------


def pass_times_ms(
    policies: dict, gpus: int, machine_gpus: int, queued: int = 10_000, rounds: int = 7
) -> dict[str, float]:
    """Each policy's median CPU time of one scheduling pass (sort included) over ``queued``
    waiting jobs on a busy cluster, with a learned run-time model, fair-share usage for 15 teams
    and a day of bursts of short jobs that could not wait (so e31 keeps a lane). A job ends before each
    pass, as before most passes of a live queue, so what the model keeps for that team is worked
    out again. The policies take turns, pass by pass, each round in a new order, so that every
    policy meets the machine as it was: its speed swings from one second to the next."""
    rng = random.Random(1)
    now = 1e6
    teams = [f"t{i}" for i in range(15)]
    cluster, running = _busy_cluster(gpus, machine_gpus, now, rng)
    runtimes = RuntimeModel()
    for _ in range(2000):
        runtimes.observe(rng.choice(teams), 100.0, rng.uniform(33, 100), deadline_window_s=rng.uniform(40, 300))
    pending = []
    for i in range(queued):
        runtime = rng.uniform(60, 2e5)
        g = rng.choice([1] * 14 + [2, 4, 8, 16, 32])
        pending.append(
            Pending(
                f"p{i}", g, now - rng.uniform(0, 1e5), runtime, runtime, now + rng.uniform(-1e4, 1e5), rng.choice(teams)
            )
        )
    demand = UrgentDemand(machine_gpus=machine_gpus)
    for hour in range(24):
        came = now - 86400 + hour * 3600
        for _ in range(gpus // 2):
            demand.submitted(came, 1, 3600.0, came + 4000.0)  # could not wait
    usage = {t: rng.uniform(0, 1e8) for t in teams}
    names = list(policies)
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(rounds):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            runtimes.observe(rng.choice(teams), 100.0, rng.uniform(33, 100), deadline_window_s=rng.uniform(40, 300))
            snap = Snapshot(now, cluster, running, usage, runtimes, demand)  # each pass sees a new one
            began = time.process_time()  # CPU time: what the pass costs, not what other processes took
            policies[name].decide(pending, snap)
            times[name].append(time.process_time() - began)
    return {name: sorted(t)[rounds // 2] * 1000 for name, t in times.items()}


def _busy_cluster(gpus: int, machine_gpus: int, now: float, rng: random.Random) -> tuple[Cluster, list[Running]]:
    """A cluster filled with running jobs, a few GPUs left free here and there; half of them
    keep checkpoints."""
    cluster = Cluster.of(gpus, machine_gpus)
    running = []
    while True:
        g = rng.choice([1, 1, 1, 2, 4, 8])
        machines = cluster.place(g)
        if machines is None or cluster.free_gpus < gpus * 0.02:
            break
        started, limit = now - rng.uniform(0, 3e4), rng.uniform(1e3, 1e5)
        # half keep checkpoints, so e31-preempt's pass weighs suspending them
        checkpointed = max(started, now - rng.uniform(0, 1800)) if rng.random() < 0.5 else None
        deadline = started + limit * rng.uniform(1.2, 3)
        running.append(Running(f"r{len(running)}", g, started, limit, machines, limit, "", "", deadline, checkpointed))
    return cluster, running


def targets(figures: dict, baselines: dict[str, dict]) -> dict:
    """Which of the scheduling targets a policy's figures meet, held to the baselines replayed
    beside them in the same run: fewer misses than every baseline; at most half the best
    baseline's (e31-preempt's); in each size class at most the best baseline's miss rate there
    (no class pays for the others); goodput at least the best baseline's; the team on-time
    figures at least every baseline's, the ratio (``team_ontime_worst``, the issue's) and the
    worst team's share (``team_ontime_min``, proposed instead: refusing work never raises it).
    The team ones are None for a trace without teams.

    Size classes are also held to the one baseline with the fewest misses
    (``classes_that_pay_against_best_baseline``): the best per class is often no one policy's
    (``baselines_best_in_every_class`` names those that are): a baseline that meets more of
    one class's deadlines often does so by giving up another's."""
    best = min(b["miss_rate"] for b in baselines.values())
    class_best = {c: min(b["miss_rate_by_class"][c] for b in baselines.values()) for c in SIZE_CLASSES}
    leader = min(baselines.values(), key=lambda b: b["miss_rate"])

    def paying(rates: dict) -> list[str]:
        return [c for c in SIZE_CLASSES if figures["miss_rate_by_class"][c] > rates[c]]

    def at_least_every_baseline(key: str) -> bool | None:
        if figures[key] is None:
            return None
        return all(figures[key] >= b[key] for b in baselines.values())

    return {
        "misses_over_best_baseline": figures["miss_rate"] / best if best else None,
        "fewest_misses": all(figures["miss_rate"] < b["miss_rate"] for b in baselines.values()),
        "half_the_best_baseline": figures["miss_rate"] <= 0.5 * best,
        "classes_that_pay": paying(class_best),
        "classes_that_pay_against_best_baseline": paying(leader["miss_rate_by_class"]),
        "baselines_best_in_every_class": [
            name
            for name, b in baselines.items()
            if all(b["miss_rate_by_class"][c] <= class_best[c] for c in SIZE_CLASSES)
        ],
        "goodput": figures["goodput"] >= max(b["goodput"] for b in baselines.values()),
        "team_ontime_worst": at_least_every_baseline("team_ontime_worst"),
        "team_ontime_min": at_least_every_baseline("team_ontime_min"),
    }


# --- showing it --------------------------------------------------------------------------------


def _table(results: dict, args, jobs: int, offered: float) -> str:
    head = (
        "| policy | miss rate | miss rate "
        + " / ".join(SIZE_CLASSES)
        + " | goodput | util. | mean JCT h | "
        + " | ".join(f"wait {c} mean/p99 h" for c in SIZE_CLASSES)
        + " | fairness worst | Jain | team on-time worst / min | suspended | lost GPU-h | makespan h | jobs/s |"
    )
    if args.pass_ms:
        head += " 10k pass ms |"
    lines = [
        f"{jobs} jobs, {args.gpus} GPUs in machines of {args.machine_gpus}, offered load {offered:.2f}, "
        f"seed {args.seed}, {args.deadlines} deadlines where the trace has none",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    for name, r in results.items():
        misses = " / ".join(f"{r['miss_rate_by_class'][c]:.3f}" for c in SIZE_CLASSES)
        waits = " | ".join(f"{r['wait_mean_h'][c]:.2f} / {r['wait_p99_h'][c]:.2f}" for c in SIZE_CLASSES)
        team_ontime = (
            "-" if r["team_ontime_worst"] is None else f"{r['team_ontime_worst']:.3f} / {r['team_ontime_min']:.3f}"
        )
        line = (
            f"| {name} | {r['miss_rate']:.3f} | {misses} | {r['goodput']:.3f} | {r['utilization']:.3f} | "
            f"{r['mean_jct_h']:.1f} | {waits} | {r['fairness_worst']:.3f} | {r['jain']:.3f} | {team_ontime} | "
            f"{r['suspended']:.3f} | {r['lost_gpu_h']:.0f} | {r['makespan_h']:.0f} | {r['jobs_per_s']:.0f} |"
        )
        if args.pass_ms:
            line += f" {r['pass_10k_ms']:.1f} |"
        lines.append(line)
    return "\n".join(lines + _targets_table(results))


def _targets_table(results: dict) -> list[str]:
    """The targets each policy meets (``targets``), under the figures; none without a baseline."""
    rows = [(name, r["targets"]) for name, r in results.items() if "targets" in r]
    if not rows:
        return []
    lines = [
        "",
        "Targets, held to the baselines above:",
        "",
        "| policy | misses / best baseline's | fewest misses | at most half | no class pays (against the best baseline) "
        "| goodput | team on-time worst / min |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in rows:
        ratio = "-" if t["misses_over_best_baseline"] is None else f"{t['misses_over_best_baseline']:.2f}x"
        paying = f"{_paying(t['classes_that_pay'])} ({_paying(t['classes_that_pay_against_best_baseline'])})"
        team = f"{_yes(t['team_ontime_worst'])} / {_yes(t['team_ontime_min'])}"
        lines.append(
            f"| {name} | {ratio} | {_yes(t['fewest_misses'])} | {_yes(t['half_the_best_baseline'])} | {paying} | "
            f"{_yes(t['goodput'])} | {team} |"
        )
    return lines


def _paying(classes: list[str]) -> str:
    return "yes" if not classes else "no: " + ", ".join(classes)


def _yes(met: bool | None) -> str:
    return "-" if met is None else ("yes" if met else "no")


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, axes = plt.subplots(1, 1 + len(SIZE_CLASSES), figsize=(4 * (1 + len(SIZE_CLASSES)), 3.6))
    axes[0].bar(names, [results[n]["miss_rate"] for n in names], color="tab:red")
    axes[0].set_title("deadline miss rate")
    for ax, c in zip(axes[1:], SIZE_CLASSES):
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], [results[n]["wait_mean_h"][c] for n in names], 0.4, label="mean")
        ax.bar([i + 0.2 for i in x], [results[n]["wait_p99_h"][c] for n in names], 0.4, label="p99")
        ax.set_xticks(list(x), names)
        ax.set_title(f"queueing delay, {c} GPU jobs (h)")
        ax.legend()
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
