"""Which deadlines two policies miss, job by job, on one replay of a trace window.

    python benchmarks/misses.py --trace /work/shared/traces/philly.csv \\
        --gpus 560 --start 2017-09-18 --end 2017-10-16 --deadlines clock --policies e31,edf \\
        --held "2017-10-01 18:00,2017-10-02 09:00"

It replays the window under each of the two policies, on the same jobs, deadlines and draws
that ``scheduling.py`` gives for the same arguments. It prints:

- **The misses by size class and run time** (the job's real run time, which no policy sees). For
  each policy: how many it missed; of those, how many expired in the queue, and how many expired
  at their submit without waiting (refused); how many only it missed; the GPU-hours of the jobs
  it missed.
- **The hours the misses that only one policy has fell due in**, most first. Where jobs come in
  bursts (many due at 09:00, say), a handful of hours decide the count.
- **With** ``--held FROM,TO``: the GPU-hours each policy's jobs held in that span, by size class
  and run time, and whether they started before it, against the cluster's GPU-hours.
- **The teams with the fewest jobs on time** under the first policy (of those with at least
  FAIRNESS_MIN_JOBS jobs, as ``team_ontime_min`` counts them), with their share under each.
  ``--team NAME`` reads one team's jobs alone: every figure above is then of its jobs.
- **The GPU-hours each policy finished on time** (what its goodput counts), and the jobs only it
  missed with the most GPU-hours, each with how it was missed: in a window's goodput, a few jobs
  of days on many GPUs can outweigh thousands of short ones.
- **With** ``--job ID`` (again for more): that job under each policy: how it ended, how often
  it was suspended, and each time it held its GPUs. The ids are those the list above prints.
- **With** ``--machines WHEN`` (again for more): each policy's machines at that moment: the GPUs
  free, the machines free whole, how many would be whole within an hour, six hours and a day (as
  the jobs on them really ended, which no policy knew), and the GPUs that jobs of over a day
  held. A job bigger than a machine needs whole ones: this says whether a policy left any.

HISTORY.md quotes it where it says why one policy misses what another meets.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling import model_arguments, parse_when, policy_names, replay_arguments, replayed_jobs  # noqa: E402

from e31_jupyter.core.machines import Cluster  # noqa: E402
from e31_jupyter.core.policies import POLICIES  # noqa: E402
from e31_jupyter.core.simulator import (  # noqa: E402
    SIZE_CLASSES,
    Outcome,
    overlap,
    simulate,
    size_class,
    team_ontime,
)

# A job's real run time, bucketed: the longest in each bucket, and its name.
RUN_TIMES = (
    (600.0, "< 10 min"),
    (3600.0, "10 min - 1 h"),
    (6 * 3600.0, "1-6 h"),
    (86400.0, "6-24 h"),
    (math.inf, "> 1 day"),
)
TOP_HOURS = 8  # deadline hours shown per policy
TOP_TEAMS = 8  # teams shown, those with the fewest jobs on time first
TOP_JOBS = 5  # jobs shown per policy, of those only it missed, the most GPU-hours first
WHOLE_WITHIN = ((3600.0, "1 h"), (6 * 3600.0, "6 h"), (86400.0, "24 h"))  # --machines: whole again within


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    jobs, _, preemption = replayed_jobs(args)
    everyone = {
        name: simulate(jobs, POLICIES[name], args.gpus, args.machine_gpus, preemption) for name in args.policies
    }
    outcomes = everyone
    if args.team is not None:
        outcomes = {name: [o for o in replayed if o.job.team == args.team] for name, replayed in everyone.items()}
        if not outcomes[args.policies[0]]:
            sys.exit(
                f"misses.py: no job of team {args.team!r} in the window; the teams with the fewest on time are listed without --team"
            )
    report = {
        "policies": args.policies,
        **({"team": args.team} if args.team is not None else {}),
        "misses": compare(outcomes),
        "only_one_missed_due": due_hours(outcomes),
        **({"held": held(outcomes, *args.held, args.gpus)} if args.held else {}),
        "teams_fewest_on_time": teams(outcomes),
        "gpu_hours": largest_misses(outcomes),
    }
    if args.job:
        report["jobs"] = [_timeline_or_exit(outcomes, job_id, args.team) for job_id in args.job]
    if args.machines:
        cluster = Cluster.of(args.gpus, args.machine_gpus)
        report["machines"] = [machines_at(everyone, when, cluster) for when in args.machines]
    print(json.dumps(report, indent=2) if args.json else _text(report))


def run_time(seconds: float) -> str:
    return next(name for longest, name in RUN_TIMES if seconds < longest)


def compare(outcomes: dict[str, Sequence[Outcome]]) -> list[dict]:
    """One row per size class and run time with any job: the jobs, and what each policy missed."""
    rows: dict[tuple[str, str], dict] = {}
    for mine in zip(*outcomes.values()):
        job = mine[0].job
        row = rows.setdefault((size_class(job.gpus), run_time(job.duration)), _row(job, outcomes))
        row["jobs"] += 1
        for name, outcome in zip(outcomes, mine):
            if not outcome.on_time:
                _count_miss(row[name], outcome, others_on_time=all(o.on_time for o in mine if o is not outcome))
    for row in rows.values():
        for name in outcomes:
            row[name]["missed_gpu_h"] = round(row[name]["missed_gpu_h"], 1)
    return sorted(rows.values(), key=lambda r: (list(SIZE_CLASSES).index(r["size"]), _run_time_index(r["run_time"])))


def _row(job, outcomes: dict) -> dict:
    empty = {"missed": 0, "expired": 0, "refused": 0, "only": 0, "missed_gpu_h": 0.0}
    return {
        "size": size_class(job.gpus),
        "run_time": run_time(job.duration),
        "jobs": 0,
        **{n: dict(empty) for n in outcomes},
    }


def _count_miss(figures: dict, outcome: Outcome, others_on_time: bool) -> None:
    figures["missed"] += 1
    figures["expired"] += outcome.expired_at is not None
    figures["refused"] += outcome.expired_at == outcome.job.submitted_at
    figures["only"] += others_on_time
    figures["missed_gpu_h"] += _gpu_h(outcome.job)


def _gpu_h(job) -> float:
    return job.gpus * job.duration / 3600


def _run_time_index(name: str) -> int:
    return [n for _, n in RUN_TIMES].index(name)


def due_hours(outcomes: dict[str, Sequence[Outcome]], top: int = TOP_HOURS) -> dict[str, list[tuple[str, int]]]:
    """For each policy, the hours (UTC) the jobs only it missed were due in, most first."""
    return {
        name: Counter(_when(o.job.deadline, "%Y-%m-%d %H:00") for o in missed).most_common(top)
        for name, missed in only_missed(outcomes).items()
    }


def only_missed(outcomes: dict[str, Sequence[Outcome]]) -> dict[str, list[Outcome]]:
    """For each policy, the jobs it missed and the other met."""
    only: dict[str, list[Outcome]] = {name: [] for name in outcomes}
    for mine in zip(*outcomes.values()):
        missed = [(name, o) for name, o in zip(outcomes, mine) if not o.on_time]
        if len(missed) == 1:
            name, outcome = missed[0]
            only[name].append(outcome)
    return only


def _when(seconds: float, form: str = "%Y-%m-%d %H:%M") -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime(form)


def largest_misses(outcomes: dict[str, Sequence[Outcome]], top: int = TOP_JOBS) -> dict[str, dict]:
    """For each policy, the GPU-hours of the jobs it finished on time and of all the jobs (its
    goodput is the one over the other), and the jobs only it missed with the most GPU-hours."""
    asked = round(sum(_gpu_h(o.job) for o in next(iter(outcomes.values()))), 1)
    return {
        name: {
            "on_time": round(sum(_gpu_h(o.job) for o in outcomes[name] if o.on_time), 1),
            "asked": asked,
            "largest_only_missed": [
                _missed_job(o) for o in sorted(missed, key=lambda o: (-_gpu_h(o.job), o.job.id))[:top]
            ],
        }
        for name, missed in only_missed(outcomes).items()
    }


def _missed_job(outcome: Outcome) -> dict:
    job = outcome.job
    return {
        "id": job.id,
        "gpus": job.gpus,
        "run_h": round(job.duration / 3600, 1),
        "gpu_h": round(_gpu_h(job), 1),
        "how": how_it_ended(outcome),
        "suspended": outcome.suspended,
    }


def how_it_ended(outcome: Outcome) -> str:
    """Refused at its submit, expired after so long in line, or finished late or on time by so much."""
    job = outcome.job
    if outcome.expired_at is not None:
        if outcome.expired_at == job.submitted_at:
            return "refused at its submit"
        return f"expired after {(outcome.expired_at - job.submitted_at) / 3600:.1f} h in line"
    assert outcome.finished_at is not None, "a replay ends only once every job that started finished"
    late_h = (outcome.finished_at - job.deadline) / 3600
    return f"late by {late_h:.1f} h" if late_h > 0 else f"on time, {-late_h:.1f} h to spare"


def timeline(outcomes: dict[str, Sequence[Outcome]], job_id: str) -> dict | None:
    """One job under each policy: what it asked, how it ended, how often it was suspended and
    how much work that lost, and each time it held its GPUs; None when the window has no such job."""
    found = {name: next((o for o in replayed if o.job.id == job_id), None) for name, replayed in outcomes.items()}
    first = next(iter(found.values()))
    if first is None:
        return None
    job = first.job
    return {
        "id": job.id,
        "gpus": job.gpus,
        "team": job.team,
        "submitted": _when(job.submitted_at),
        "due": _when(job.deadline),
        "declared_h": round(job.max_runtime / 3600, 1),
        "run_h": round(job.duration / 3600, 1),
        "by_policy": {
            name: {
                "how": how_it_ended(o),
                "suspended": o.suspended,
                "lost_h": round(o.lost_s / 3600, 1),
                "runs": [[_when(began), _when(ended)] for began, ended in o.runs],
            }
            for name, o in found.items()
            if o is not None
        },
    }


def _timeline_or_exit(outcomes: dict[str, Sequence[Outcome]], job_id: str, team: str | None) -> dict:
    found = timeline(outcomes, job_id)
    if found is None:
        among = f"of team {team!r} " if team is not None else ""
        sys.exit(
            f"misses.py: no job {job_id!r} {among}in the window; the ids are those the list of the largest misses prints (j0, j1, ... in the window's order)"
        )
    return found


def held(outcomes: dict[str, Sequence[Outcome]], start: float, end: float, gpus: int) -> dict:
    """GPU-hours each policy's jobs held in [start, end), by size class, run time and whether
    they started before it; and the cluster's GPU-hours in that span."""
    spans = {}
    for name, replayed in outcomes.items():
        counted: Counter = Counter()
        for outcome in replayed:
            for began, ended in outcome.runs:
                key = (size_class(outcome.job.gpus), run_time(outcome.job.duration), began < start)
                counted[key] += outcome.job.gpus * overlap(began, ended, start, end) / 3600
        rounded = {key: round(counted[key], 1) for key in sorted(counted, key=_span_order)}
        spans[name] = {_span_key(*key): value for key, value in rounded.items() if value > 0}
    return {"cluster_gpu_h": round(gpus * (end - start) / 3600, 1), "by_policy": spans}


def machines_at(outcomes: dict[str, Sequence[Outcome]], when: float, cluster: Cluster) -> dict:
    """Each policy's machines at ``when``, an empty ``cluster`` of the replay's shape to count
    on: the GPUs free, the machines of full size free whole, how many would be whole within each
    of WHOLE_WITHIN (by when the runs on them really ended), and the GPUs jobs of over a day
    (their real run time) held. Give it every job of the window: with ``--team`` too, the
    machines are everyone's."""
    whole = [m for m, size in enumerate(cluster.sizes) if size == cluster.machine_gpus]
    by_policy = {}
    for name, replayed in outcomes.items():
        free = list(cluster.sizes)
        busy_until = [when] * len(free)  # when the last run on each machine ended
        long_gpus = 0
        for outcome in replayed:
            for (began, ended), machines in zip(outcome.runs, outcome.machines):
                if not began <= when < ended:
                    continue
                for m in machines:
                    free[m] -= cluster.taken(outcome.job.gpus)
                    busy_until[m] = max(busy_until[m], ended)
                long_gpus += outcome.job.gpus if outcome.job.duration > 86400 else 0
        by_policy[name] = {
            "free_gpus": sum(free),
            "whole": sum(busy_until[m] <= when for m in whole),
            "whole_within": {label: sum(busy_until[m] <= when + s for m in whole) for s, label in WHOLE_WITHIN},
            "gpus_in_jobs_over_a_day": long_gpus,
        }
    return {
        "at": _when(when),
        "machines": len(cluster.sizes),
        "machine_gpus": cluster.machine_gpus,
        "by_policy": by_policy,
    }


def teams(outcomes: dict[str, Sequence[Outcome]], top: int = TOP_TEAMS) -> list[dict] | None:
    """The teams with the fewest jobs on time under the first policy, and their share under each;
    None when the trace has no teams."""
    shares = {name: team_ontime(replayed) for name, replayed in outcomes.items()}
    first = next(iter(shares.values()))
    if first is None:
        return None
    jobs = Counter(o.job.team for o in next(iter(outcomes.values())))
    worst = sorted(first, key=first.__getitem__)[:top]
    return [
        {"team": team, "jobs": jobs[team], **{n: round(s[team], 3) for n, s in shares.items() if s}} for team in worst
    ]


def _span_key(size: str, runs: str, before: bool) -> str:
    return f"{size} GPU{'' if size == '1' else 's'}, {runs}, started {'before' if before else 'within'}"


def _span_order(key: tuple[str, str, bool]) -> tuple[int, int, bool]:
    size, runs, before = key
    return list(SIZE_CLASSES).index(size), _run_time_index(runs), not before


def _text(report: dict) -> str:
    rows, names = report["misses"], report["policies"]
    lines = [
        "| size | run time | jobs | "
        + " | ".join(f"{n}: missed (expired, refused), only {n}, GPU-h missed" for n in names)
        + " |"
    ]
    lines.append("|---|---|---|" + "---|" * len(names))
    for r in rows:
        cells = [
            f"{r[n]['missed']} ({r[n]['expired']}, {r[n]['refused']}), {r[n]['only']}, {r[n]['missed_gpu_h']:.0f}"
            for n in names
        ]
        lines.append(f"| {r['size']} | {r['run_time']} | {r['jobs']} | " + " | ".join(cells) + " |")
    for name, hours in report["only_one_missed_due"].items():
        lines.append(
            f"\nDue hours of the jobs only {name} missed: " + (", ".join(f"{h} ({n})" for h, n in hours) or "none")
        )
    if report["teams_fewest_on_time"]:
        lines.append(f"\nTeams with the fewest jobs on time under {names[0]} (share on time):")
        lines.extend(
            f"- {t['team']} ({t['jobs']} jobs): " + ", ".join(f"{n} {t[n]:.3f}" for n in names)
            for t in report["teams_fewest_on_time"]
        )
    for name, hours in report["gpu_hours"].items():
        lines.append(
            f"\nGPU-hours {name} finished on time: {hours['on_time']:,.1f} of {hours['asked']:,.1f}"
            f" ({hours['on_time'] / hours['asked']:.3f}). The largest jobs only it missed:"
            + ("" if hours["largest_only_missed"] else " none")
            if hours["asked"]
            else f"\nNo GPU-hours were asked of {name}."
        )
        lines.extend(
            f"- {j['id']}: {_gpus(j['gpus'])} x {j['run_h']} h = {j['gpu_h']:,.1f} GPU-h, {j['how']}"
            + (f", suspended {_times(j['suspended'])}" if j["suspended"] else "")
            for j in hours["largest_only_missed"]
        )
    for job in report.get("jobs", []):
        lines.append(
            f"\nJob {job['id']}: {_gpus(job['gpus'])}, team {job['team'] or '(none)'}, submitted {job['submitted']},"
            f" due {job['due']}, declared {job['declared_h']} h, ran {job['run_h']} h"
        )
        for name, seen in job["by_policy"].items():
            runs = "; ".join(f"{began} to {ended}" for began, ended in seen["runs"]) or "never started"
            suspended = (
                f", suspended {_times(seen['suspended'])} ({seen['lost_h']} h of work lost)"
                if seen["suspended"]
                else ""
            )
            lines.append(f"- {name}: {seen['how']}{suspended}. Held its GPUs: {runs}")
    for moment in report.get("machines", []):
        lines.append(
            f"\nMachines at {moment['at']} ({_machines(moment['machines'])} of {_gpus(moment['machine_gpus'])};"
            " whole within: as the jobs on them really ended):"
        )
        for name, seen in moment["by_policy"].items():
            within = ", ".join(f"{label} {n}" for label, n in seen["whole_within"].items())
            lines.append(
                f"- {name}: {_gpus(seen['free_gpus'])} free, {_machines(seen['whole'])} whole; whole within {within};"
                f" jobs of over a day hold {_gpus(seen['gpus_in_jobs_over_a_day'])}"
            )
    if "held" in report:
        lines.append(f"\nGPU-hours held in the span (the cluster has {report['held']['cluster_gpu_h']}):")
        for name, spans in report["held"]["by_policy"].items():
            lines.append(f"- {name}: {sum(spans.values()):.0f} in all")
            lines.extend(f"  - {key}: {value:.0f}" for key, value in spans.items())
    return "\n".join(lines)


def _gpus(count: int) -> str:
    return f"{count} GPU{'' if count == 1 else 's'}"


def _machines(count: int) -> str:
    return f"{count} machine{'' if count == 1 else 's'}"


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def _two_policies(text: str) -> list[str]:
    names = policy_names(text)
    if len(names) != 2 or names[0] == names[1]:
        raise argparse.ArgumentTypeError(f"--policies takes two different policies, e.g. e31,edf, not {text!r}")
    return names


def _span(text: str) -> tuple[float, float]:
    start, _, end = text.partition(",")
    try:
        span = parse_when(start), parse_when(end)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--held takes FROM,TO (date-times or seconds), not {text!r}") from None
    if span[1] <= span[0]:
        raise argparse.ArgumentTypeError(f"--held: TO must come after FROM, not {text!r}")
    return span


def _moment(text: str) -> float:
    try:
        return parse_when(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--machines takes a date-time or seconds, not {text!r}") from None


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = model_arguments(replay_arguments(__doc__))
    parser.add_argument("--policies", required=True, type=_two_policies, help="the two policies, e.g. e31,edf")
    parser.add_argument("--held", type=_span, metavar="FROM,TO", help="also the GPU-hours held in this span")
    parser.add_argument("--team", help="read this team's jobs alone")
    parser.add_argument("--job", action="append", metavar="ID", help="also this job under each policy (again for more)")
    parser.add_argument(
        "--machines",
        action="append",
        type=_moment,
        metavar="WHEN",
        help="also each policy's machines then (again for more)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
