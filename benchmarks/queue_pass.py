"""The live queue's scheduling pass over a long queue, the store included, beside the policy's
pass alone over the same jobs.

    python benchmarks/queue_pass.py [--queued 10000] [--gpus 640] [--policies e31,edf] [--passes 9] [--json]

``scheduling.py``'s "10k pass ms" times the policy alone (sort and walk) on jobs already in
memory. A server's pass (``LocalScheduler.schedule``) also reads the queued jobs from its SQLite file,
turns them into what the policy sees, reads what ended and was submitted since the pass before,
and puts the jobs in line. This times that, in-process, on a real store in a temporary
directory: ``--queued`` jobs queued (the job mix of ``scheduling.py``'s pass: 15 teams, 1-32
GPUs, declared run times of a minute to two days), 2,000 jobs that succeeded within the last day
(what the run-time model learns from), and running jobs holding every one of ``--gpus`` GPUs,
so nothing starts and no backend is needed. Deadlines leave every job at least a day more than
its declared run time, so nothing expires either.

Four figures per policy, CPU time (``time.process_time``), the median of ``--passes``:

- *nothing new*: a pass a moment after the one before, nothing written to the store since (the
  pass a server makes every second while nothing happens);
- *after a submit*: one more queued job written to the store before each pass, as a submit
  does (so the queue grows by ``--passes`` jobs);
- *priorities due*: the pass after the policy's priorities went stale (``Policy.refresh_s``,
  five minutes for ``e31`` and ``backfill``; ``fifo``, ``edf`` and ``sjf`` never go stale), the
  clock moved past it before each;
- *policy alone*: ``Policy.decide`` (sort and walk) over the same queued jobs, on a copy of the
  same snapshot each time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling import policy_names  # noqa: E402

from e31_jupyter.core.policies import POLICIES  # noqa: E402
from e31_jupyter.service.queue import Queue  # noqa: E402
from e31_jupyter.service.settings import Settings  # noqa: E402

TEAMS = [f"t{i}" for i in range(15)]
SIZES = [1] * 14 + [2, 4, 8, 16, 32]  # GPUs a queued job asks for (at most all of them)
NOW = 1.8e9


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    results = {}
    with tempfile.TemporaryDirectory(prefix="e31-queue-pass-") as tmp:
        for name in args.policies:
            results[name] = measure(Path(tmp) / name, name, args.queued, args.gpus, args.passes)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"One pass over {args.queued:,} queued jobs, {args.gpus} GPUs all held; CPU ms, median of {args.passes}\n")
    print("| policy | nothing new | after a submit | priorities due | policy alone |\n|---|---|---|---|---|")
    for name, r in results.items():
        figures = (r[f"{kind}_ms"] for kind in ("nothing_new", "after_submit", "priorities_due", "policy_alone"))
        print(f"| {name} | " + " | ".join(f"{ms:.1f}" for ms in figures) + " |")


def measure(data_dir: Path, policy_name: str, queued: int, gpus: int, passes: int) -> dict:
    clock = [NOW]
    settings = Settings(inventory=[str(i) for i in range(gpus)], policy=policy_name)
    queue = Queue(data_dir, backend=None, settings=settings, clock=lambda: clock[0])
    fill(queue.store, queued, gpus, random.Random(1))
    scheduler = queue.scheduler
    scheduler.leadership.holds = True  # the pass only: no backend and no ticker (every GPU is held, so nothing starts)
    scheduler.schedule()  # the first pass reads the day of history once, as after a restart
    _still_queued(queue, queued)
    nothing_new = _median_ms(scheduler.schedule, passes)
    submits = iter(range(passes))

    def submit():  # not timed: the submit's write is not the pass's
        i = next(submits)
        job = _row(f"new{i}", TEAMS[i % len(TEAMS)], 1, 3600.0, clock[0], "queued", deadline=clock[0] + 86400)
        queue.store.insert_job(job, "submitted")

    after_submit = _median_ms(scheduler.schedule, passes, before=submit)
    refresh_s = scheduler.policy.refresh_s

    def after_refresh():
        if refresh_s is not None:
            clock[0] += refresh_s
        scheduler.schedule()

    due = _median_ms(after_refresh, passes)
    _still_queued(queue, queued + passes)
    snapshot = scheduler.line._seen  # each pass on a copy: a snapshot keeps what it works out
    jobs = random.Random(2).sample(
        scheduler.line.current.ordered, len(scheduler.line.current)
    )  # unsorted, as the store gives them
    alone = _median_ms(lambda: POLICIES[policy_name].decide(jobs, replace(snapshot)), passes)
    queue.store.close()
    return {
        "nothing_new_ms": nothing_new, "after_submit_ms": after_submit, "priorities_due_ms": due,
        "policy_alone_ms": alone, "queued": queued, "gpus": gpus,
    }  # fmt: skip


def fill(store, queued: int, gpus: int, rng: random.Random) -> None:
    """A day of succeeded jobs, running jobs on every GPU, and the queued jobs, written through the
    package's own store."""
    for i in range(2000):
        declared = rng.uniform(600, 36000)
        ended = NOW - rng.uniform(60, 86400)
        took = declared * rng.uniform(0.33, 1.0)
        submitted = ended - took - rng.uniform(0, 3600)
        times = {"deadline": ended + rng.uniform(0, declared), "started_at": ended - took, "finished_at": ended}
        store.insert_job(_row(f"done{i}", rng.choice(TEAMS), 1, declared, submitted, "succeeded", **times), "seeded")
    held = 0
    while held < gpus:
        g = min(rng.choice([1, 1, 1, 2, 4, 8]), gpus - held)
        holds = {"started_at": NOW - rng.uniform(0, 3e4), "granted": [str(d) for d in range(held, held + g)]}
        store.insert_job(_row(f"run{held}", rng.choice(TEAMS), g, 1e5, NOW - 3e4, "running", **holds), "seeded")
        held += g
    for i in range(queued):
        declared = rng.uniform(60, 2e5)
        deadline = None if i % 10 == 0 else NOW + 86400 + declared * rng.uniform(1.5, 4)  # time for every job
        gpus_asked = min(rng.choice(SIZES), gpus)
        job = _row(
            f"q{i}", rng.choice(TEAMS), gpus_asked, declared, NOW - rng.uniform(0, 1e5), "queued", deadline=deadline
        )
        store.insert_job(job, "seeded")


def _row(job_id: str, team: str, gpus: int, declared_s: float, submitted_at: float, state: str, **fields) -> dict:
    return {
        "id": job_id, "owner": team, "name": job_id, "team": team, "state": state, "gpus_requested": gpus,
        "max_runtime_s": declared_s, "expected_runtime_s": None, "max_runtime_given": 1, "deadline": None,
        "submitted_at": submitted_at, **fields,
    }  # fmt: skip


def _still_queued(queue: Queue, expected: int) -> None:
    left = queue.store.count(("queued",))
    if left != expected:
        raise SystemExit(f"{expected - left} jobs started or expired in the timed passes, so they were not alike; "
                         "every GPU must be held and every deadline far")  # fmt: skip


def _median_ms(work, passes: int, before=None) -> float:
    times = []
    for _ in range(passes):
        if before is not None:
            before()
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return statistics.median(times) * 1000


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queued", type=int, default=10_000, help="jobs in the queue (default 10000)")
    parser.add_argument("--gpus", type=int, default=640, help="GPUs, all held by running jobs (default 640)")
    parser.add_argument("--policies", type=policy_names, default=["e31", "edf"],
                        help="comma-separated, of " + ", ".join(POLICIES))  # fmt: skip
    parser.add_argument("--passes", type=int, default=9, help="passes timed per figure (default 9)")
    parser.add_argument("--json", action="store_true", help="print one JSON object keyed by policy")
    return parser.parse_args(argv)


if __name__ == "__main__":
    main()
