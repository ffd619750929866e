"""Whether a change to a policy moved its misses by more than the runs' own spread: two
``runs.py --json`` outputs of the same runs, the policy before and after, paired run by run.

    python benchmarks/compare.py before.json after.json                      # e31-preempt in both
    python benchmarks/compare.py before.json after.json --policy e31
    python benchmarks/compare.py runs.json runs.json --policy edf --after-policy e31-preempt
    python benchmarks/compare.py before.json after.json held-before.json held-after.json  # as one

One run moves by tens of percent with an unrelated change to the order of the line (HISTORY.md,
"How much rides on one burst"), so a total of jobs missed that falls by 2% says little on its
own. This prints, for the policy in the first file against the policy in the second:

- **Jobs missed**, before and after, in all and by deadline model and by kind of run (``runs.py``'s
  tuned, unseen, many-large and held-out).
- **The runs with fewer and with more misses**, and a sign test's two-sided p: how often a
  coin would split the runs at least as unevenly.
- **The geometric mean of each run's misses after over before**, each window weighted alike,
  with its 95% interval by Student's t over the windows. A window's runs (its deadline models
  and seeds) replay the same jobs and move together, so the windows are the independent draws,
  and a window is what a rule may be tuned to. An interval that spans 1 says the change is
  within what the choice of windows gives either way: other windows could as well show the
  opposite.
- **The targets**: the runs meeting each before and after, and how many gained and lost it.

Runs where either side missed nothing have no ratio and are left out of the mean (counted).
Each pair of files must hold the same runs; they may have been replayed with other arguments
(say, ``--extra '--resumable 1'``), which the report names. Pairs of files given together
(the judged runs and the held-out ones) are compared as one set of runs: more windows, a
narrower interval.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import scipy.stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runs import MODELS, RUNS, TARGETS, as_replayed, met  # noqa: E402

_SEED = re.compile(r", seed \d+$")
_KIND = {name: kind for kind, runs in RUNS.items() for name in runs}


@dataclass(frozen=True)
class Pair:
    """One run's figures under the policy before and after the change."""

    run: str
    before: dict
    after: dict

    @property
    def missed(self) -> tuple[int, int]:
        return _missed(self.before), _missed(self.after)

    @property
    def ratio(self) -> float | None:
        before, after = self.missed
        return after / before if before and after else None

    @property
    def window(self) -> str:
        """The run's jobs and cluster: its name without the deadline model and the seed."""
        name = _SEED.sub("", self.run)
        for model in MODELS:
            name = name.removesuffix(f", {model}")
        return name

    @property
    def model(self) -> str:
        name = _SEED.sub("", self.run)
        return next((m for m in MODELS if name.endswith(f", {m}")), "")

    @property
    def kind(self) -> str:
        return _KIND.get(_SEED.sub("", self.run), "own")


def _missed(figures: dict) -> int:
    return round(figures["miss_rate"] * figures["jobs"])


def pairs(before: dict, after: dict, policy: str, after_policy: str) -> list[Pair]:
    """The runs of two ``runs.py --json`` reports, paired by name; a ValueError says what does
    not pair. Runs of other pairs of files are other runs (``Pair.window`` tells them apart by
    name: the judged and the held-out runs have no name in common)."""
    runs_before, runs_after = before["runs"], after["runs"]
    if set(runs_before) != set(runs_after):
        only = sorted(set(runs_before) ^ set(runs_after))
        raise ValueError(
            f"the two files hold other runs ({len(only)} in one only, e.g. {only[0]!r}): "
            "replay both with the same --seed and --only (or --run)"
        )
    for name, report, runs in ((policy, "first", runs_before), (after_policy, "second", runs_after)):
        lacking = [run for run, figures in runs.items() if name not in figures]
        if lacking:
            has = ", ".join(runs[lacking[0]]) or "no policy"
            raise ValueError(
                f"the {report} file has no {name!r} in {lacking[0]!r} (it has {has}): name another with --policy / --after-policy"
            )
    return [Pair(run, runs_before[run][policy], runs_after[run][after_policy]) for run in runs_before]


def other_arguments(before: dict, after: dict) -> list[str]:
    """The arguments the two files replayed their runs with that differ, as 'name: A -> B'."""
    differ = set()
    for run, stored in before.get("arguments", {}).items():
        here, there = as_replayed(stored), as_replayed(after.get("arguments", {}).get(run, {}))
        differ |= {f"{key}: {here[key]} -> {there[key]}" for key in here if here[key] != there[key]}
    return sorted(differ)


def window_interval(paired: Sequence[Pair], level: float = 0.95) -> tuple[float, float, float, int] | None:
    """The geometric mean of the runs' ratios, each window weighted alike (the mean of its runs'
    log ratios), with its ``level`` interval by Student's t over the windows, and their count:
    a window's runs (deadline models, seeds) replay the same jobs, so the windows, not the runs,
    are the independent draws. None with fewer than two windows."""
    by_window: dict[str, list[float]] = {}
    for pair in paired:
        if pair.ratio is not None:
            by_window.setdefault(pair.window, []).append(math.log(pair.ratio))
    means = [statistics.fmean(logs) for logs in by_window.values()]
    if len(means) < 2:
        return None
    mean, spread = statistics.fmean(means), statistics.stdev(means) / math.sqrt(len(means))
    half = scipy.stats.t.ppf((1 + level) / 2, len(means) - 1) * spread
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(means)


def sign_test(fewer: int, more: int) -> float:
    """Two-sided exact binomial p of a split at least as uneven as ``fewer`` / ``more`` by a fair coin."""
    return float(scipy.stats.binomtest(fewer, fewer + more).pvalue) if fewer + more else 1.0


def compare(paired: Sequence[Pair]) -> dict:
    """The report's figures (module docstring)."""
    fewer = sum(after < before for before, after in (p.missed for p in paired))
    more = sum(after > before for before, after in (p.missed for p in paired))
    totals = _totals(paired)
    report: dict = {
        "runs": len(paired),
        "missed": totals,
        "by_model": {m: _totals([p for p in paired if p.model == m]) for m in sorted({p.model for p in paired})},
        "by_kind": {k: _totals([p for p in paired if p.kind == k]) for k in dict.fromkeys(p.kind for p in paired)},
        "fewer": fewer,
        "more": more,
        "same": len(paired) - fewer - more,
        "sign_test_p": sign_test(fewer, more),
        "without_ratio": sum(p.ratio is None for p in paired),
        "windows": totals["windows"],
        "geometric_mean": totals["geometric_mean"],
        "interval_95": totals["interval_95"],
        "targets": _targets(paired),
    }
    report["verdict"] = _verdict(report)
    return report


def _totals(paired: Sequence[Pair]) -> dict:
    """Jobs missed before and after over some of the runs, and their geometric mean with its
    interval where they span two windows or more."""
    before = sum(p.missed[0] for p in paired)
    after = sum(p.missed[1] for p in paired)
    interval = window_interval(paired)
    return {
        "before": before,
        "after": after,
        "change": after / before - 1 if before else None,
        "geometric_mean": None if interval is None else interval[0],
        "interval_95": None if interval is None else interval[1:3],
        "windows": None if interval is None else interval[3],
    }


def _targets(paired: Sequence[Pair]) -> dict:
    """Per target: the runs meeting it before and after, and those that gained and lost it (runs
    where the policy was held to baselines on both sides)."""
    held = [p for p in paired if "targets" in p.before and "targets" in p.after]
    out = {}
    for target in TARGETS:
        was = [bool(met(p.before["targets"], target)) for p in held]
        now = [bool(met(p.after["targets"], target)) for p in held]
        out[target] = {
            "before": sum(was),
            "after": sum(now),
            "gained": sum(n and not w for w, n in zip(was, now)),
            "lost": sum(w and not n for w, n in zip(was, now)),
            "of": len(held),
        }
    return out


def _verdict(report: dict) -> str:
    interval = report["interval_95"]
    if interval is None:
        return "fewer than two windows have misses on both sides: too few to tell"
    low, high = interval
    if high < 1:
        return "fewer misses, beyond what the choice of windows gives"
    if low > 1:
        return "more misses, beyond what the choice of windows gives"
    return "within what the choice of windows gives either way"


def _change(totals: dict) -> str:
    change, mean = totals["change"], totals["geometric_mean"]
    line = f"{totals['before']:,} -> {totals['after']:,}" + ("" if change is None else f" ({change:+.1%})")
    if mean is not None:
        low, high = totals["interval_95"]
        line += f"; geometric mean {mean:.3f} ({low:.3f}-{high:.3f})"
    return line


def text(report: dict, title: str, differ: Sequence[str]) -> str:
    lines = [f"{title}; {report['runs']} runs"]
    if differ:
        lines.append("replayed otherwise: " + "; ".join(differ))
    lines.append(f"jobs missed: {_change(report['missed'])}")
    lines += [f"  {model or 'own runs'}: {_change(t)}" for model, t in report["by_model"].items()]
    lines += [f"  {kind}: {_change(t)}" for kind, t in report["by_kind"].items()]
    lines.append(
        f"runs with fewer / more / the same misses: {report['fewer']} / {report['more']} / {report['same']}"
        f" (sign test, two-sided p = {report['sign_test_p']:.2g})"
    )
    if report["geometric_mean"] is not None:
        low, high = report["interval_95"]
        lines.append(
            f"misses after over before, geometric mean, each window alike: {report['geometric_mean']:.3f} "
            f"(95% interval over {report['windows']} windows: {low:.3f}-{high:.3f}); "
            f"{report['without_ratio']} runs without a ratio (no misses on one side)"
        )
    lines.append(f"verdict: {report['verdict']}")
    held = next(iter(report["targets"].values()))["of"]
    if held:
        lines += [
            "",
            f"| target ({held} runs held to baselines) | before | after | gained | lost |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {t} | {c['before']} | {c['after']} | {c['gained']} | {c['lost']} |"
            for t, c in report["targets"].items()
        ]
    return "\n".join(lines)


def _load(path: Path) -> dict:
    try:
        report = json.loads(path.read_text())
        report["runs"].items()
        return report
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        sys.exit(
            f"compare.py: {path}: not the --json output of runs.py ({error!r}); write one with runs.py ... --json > FILE"
        )


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    after_policy = args.after_policy or args.policy
    paired, differ = [], set()
    for before_path, after_path in zip(args.files[::2], args.files[1::2]):
        before, after = _load(before_path), _load(after_path)
        try:
            these = pairs(before, after, args.policy, after_policy)
        except ValueError as error:
            sys.exit(f"compare.py: {before_path} and {after_path}: {error}")
        again = {p.run for p in paired} & {p.run for p in these}
        if again:
            sys.exit(
                f"compare.py: {before_path} and {after_path} hold runs an earlier pair holds (e.g. {min(again)!r}): "
                "each pair of files must hold other runs"
            )
        paired += these
        differ.update(other_arguments(before, after))
    report = compare(paired)
    if args.json:
        print(json.dumps({**report, "replayed_otherwise": sorted(differ)}, indent=2))
    else:
        files = ", ".join(f"{b} -> {a}" for b, a in zip(args.files[::2], args.files[1::2]))
        print(text(report, f"{args.policy} -> {after_policy}: {files}", sorted(differ)))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="BEFORE AFTER",
        help="runs.py --json outputs, the policy before the change and after it on the same runs; "
        "more pairs (the judged runs and the held-out ones, say) are compared as one",
    )
    parser.add_argument("--policy", default="e31-preempt", help="the policy compared (default e31-preempt)")
    parser.add_argument("--after-policy", help="the policy in the AFTER files, where it is another")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    if len(args.files) % 2:
        parser.error(f"the files come in pairs, BEFORE AFTER; {len(args.files)} were given")
    return args


if __name__ == "__main__":
    main()
