"""How close a queued job's expected start is to when it really starts.

    python benchmarks/forecast.py --trace /work/shared/traces/philly.csv \\
        --gpus 640 --start 2017-10-01 --end 2017-10-29

Replays the trace window through a policy (``--policy``, default e31) in the simulator, exactly as
``scheduling.py`` does, and every ``--every`` hours of simulated time, after a pass, forecasts the
queue as the live queue does (``e31_jupyter.core.forecast.expected_starts``: the first 200 jobs in line,
the policy run forward, nothing new arriving). Each forecast is then checked against what the
replay did. Two forecasts side by side, from the same moments:

- *learned*: what e31 shows, run times scaled by what finished jobs actually took;
- *declared*: the same walk on declared time limits, nothing learned, the kind of estimate
  Slurm's ``squeue --start`` gives.

Error = real start - expected start (positive: the job started later than forecast). Jobs that
arrive after a forecast can overtake the ones it covered (an earlier deadline, an urgent job),
so some lateness is expected; a forecast cannot know them. The second table (``while_arriving``
in ``--json``) keeps the forecasts made up to the last submit: after it, nothing new arrives, as
the forecast assumes, so forecasts from the replay's tail are easier than a live queue's.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling import replay_arguments, window_jobs  # noqa: E402

from e31_jupyter.core.forecast import FORECAST_JOBS, expected_starts  # noqa: E402
from e31_jupyter.core.policies import POLICIES  # noqa: E402
from e31_jupyter.core.policy import Snapshot  # noqa: E402
from e31_jupyter.core.runtimes import RuntimeModel, quantile  # noqa: E402
from e31_jupyter.core.simulator import Simulation  # noqa: E402

KINDS = ("learned", "declared")
HORIZONS = ((0, 3600, "< 1 h"), (3600, 6 * 3600, "1-6 h"), (6 * 3600, float("inf"), "> 6 h"))


class ForecastingReplay(Simulation):
    """A replay that, every ``every_s`` of simulated time, forecasts the queue after the pass."""

    def __init__(self, jobs, policy, gpus: int, machine_gpus: int, every_s: float):
        super().__init__(jobs, policy, gpus, machine_gpus)
        self.every_s = every_s
        self.next_forecast = 0.0
        self.forecasts: list[tuple[str, float, str, float | None]] = []  # kind, made at, job, expected
        self.cpu_ms: list[float] = []

    def _pass(self, snap: Snapshot) -> bool:
        progress = super()._pass(snap)
        if self.waiting and snap.now >= self.next_forecast:
            self.next_forecast = snap.now + self.every_s
            self._forecast(snap)
        return progress

    def _forecast(self, snap: Snapshot) -> None:
        ordered = self.policy.order(list(self.waiting.values()), snap)[:FORECAST_JOBS]
        for kind, seen in (("learned", snap), ("declared", replace(snap, runtimes=RuntimeModel()))):
            began = time.process_time()
            starts = expected_starts(self.policy.walk, ordered, seen)
            if kind == "learned":
                self.cpu_ms.append((time.process_time() - began) * 1000)
            self.forecasts += [(kind, snap.now, job.id, starts.get(job.id)) for job in ordered]


def score(replay: ForecastingReplay, made_by: float = math.inf) -> dict:
    """Per kind of forecast made by ``made_by``: how often it gave a time, and how far off that
    time was."""
    outcomes = replay.outcomes
    result = {}
    for kind in KINDS:
        made = [(at, job_id, expected) for k, at, job_id, expected in replay.forecasts if k == kind and at <= made_by]
        timed = [(at, outcomes[job_id], expected) for at, job_id, expected in made if expected is not None]
        started = [(at, o.started_at, expected) for at, o, expected in timed if o.started_at is not None]
        untimed = [outcomes[job_id] for _, job_id, expected in made if expected is None]
        result[kind] = {
            "forecasts": len(made),
            "with_a_time": len(timed),
            "then_expired": sum(o.expired_at is not None for _, o, _ in timed),
            "without_a_time_then_expired": sum(o.expired_at is not None for o in untimed),
            "without_a_time": len(untimed),
            "horizons": {label: _errors([s for s in started if lo <= s[2] - s[0] < hi]) for lo, hi, label in HORIZONS},
            "all": _errors(started),
        }
    return result


def _errors(started: list[tuple[float, float, float]]) -> dict:
    """Errors of forecasts for jobs that started: (made at, real start, expected start)."""
    if not started:
        return {"n": 0}
    errors = sorted(real - expected for _, real, expected in started)
    absolute = sorted(abs(e) for e in errors)
    close = sum(abs(real - expected) <= max(900.0, 0.25 * (real - at)) for at, real, expected in started)
    return {
        "n": len(errors),
        "median_error_h": quantile(errors, 0.5) / 3600,
        "median_abs_error_h": quantile(absolute, 0.5) / 3600,
        "p90_abs_error_h": quantile(absolute, 0.9) / 3600,
        "within_15min_or_25pct": close / len(errors),
        "started_later": sum(e > 60 for e in errors) / len(errors),
    }


def _table(result: dict) -> str:
    lines = [
        "| forecast | horizon | checked | median error h | median abs error h | p90 abs error h | within 15 min or 25% | started later |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        rows = [("all", result[kind]["all"])] + list(result[kind]["horizons"].items())
        for label, e in rows:
            if not e["n"]:
                lines.append(f"| {kind} | {label} | 0 | | | | | |")
                continue
            lines.append(
                f"| {kind} | {label} | {e['n']} | {e['median_error_h']:+.2f} | {e['median_abs_error_h']:.2f} | "
                f"{e['p90_abs_error_h']:.2f} | {e['within_15min_or_25pct']:.2f} | {e['started_later']:.2f} |"
            )
    lines.append("")
    for kind in KINDS:
        k = result[kind]
        lines.append(
            f"{kind}: {k['forecasts']} forecasts, {k['with_a_time']} with a time ({k['then_expired']} of those jobs "
            f"expired); {k['without_a_time']} without ({k['without_a_time_then_expired']} of those expired)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = replay_arguments(__doc__)
    parser.add_argument("--policy", default="e31", choices=sorted(POLICIES))
    parser.add_argument("--every", type=float, default=2.0, help="hours of simulated time between forecasts")
    args = parser.parse_args(argv)
    if args.every <= 0:
        parser.error("--every must be a positive number of hours")
    jobs, _ = window_jobs(args.trace, args.start, args.end, args.seed, model=args.deadlines)
    replay = ForecastingReplay(jobs, POLICIES[args.policy], args.gpus, args.machine_gpus, args.every * 3600)
    began = time.perf_counter()
    replay.run()
    result = score(replay)
    result["while_arriving"] = score(replay, made_by=max(job.submitted_at for job in jobs))
    cpu = sorted(replay.cpu_ms)
    result["forecast_ms"] = {"median": quantile(cpu, 0.5), "max": cpu[-1]} if cpu else None
    print(f"replay with forecasts: {time.perf_counter() - began:.1f}s", file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{len(jobs)} jobs, {args.gpus} GPUs, policy {args.policy}, a forecast every {args.every:g} h, seed {args.seed}\n"
    )
    print(_table(result))
    print("\nForecasts made while jobs still arrived (after the last, nothing new arrives, as the forecast assumes):\n")
    print(_table(result["while_arriving"]))
    if cpu:
        print(f"\none forecast (learned), CPU: median {result['forecast_ms']['median']:.1f} ms, max {cpu[-1]:.1f} ms")


if __name__ == "__main__":
    main()
