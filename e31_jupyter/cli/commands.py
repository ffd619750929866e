"""What each ``e31`` command does, given a client and its parsed arguments."""

from __future__ import annotations

import sys
import time
from fnmatch import fnmatchcase
from pathlib import Path

from e31_jupyter.cli.listing import (
    as_json,
    describe,
    describe_check,
    format_gpus,
    format_job,
    format_jobs,
    format_meter,
    format_values,
    gpu_hours,
    print_job_lines,
    print_warnings,
)
from e31_jupyter.client import E31Client
from e31_jupyter.core.errors import E31Error
from e31_jupyter.core.states import FINAL_STATES, JobState
from e31_jupyter.core.text import format_size
from e31_jupyter.notebook import values
from e31_jupyter.request_options import as_typed_here, request_changes, resume_changes, submit_bodies, update_changes


def cmd_submit(client: E31Client, args) -> int:
    bodies = submit_bodies(args)
    if len(bodies) > 1:
        return check_sweep(client, bodies, args.json) if args.check else _follow_sweep(client, bodies, args)
    if args.check:
        return _print_check(as_typed_here(client.check(**bodies[0]), bodies[0]["path"]), args)
    return _follow_submitted(client, as_typed_here(client.submit(**bodies[0]), bodies[0]["path"]), args)


def check_sweep(client: E31Client, bodies: list[dict], in_json: bool = False) -> int:
    checks = [as_typed_here(client.check(**body), body["path"]) for body in bodies]
    print_warnings(dict.fromkeys(w for check in checks for w in check["warnings"]))  # each once
    if in_json:
        print(as_json(checks))
        return 0
    for check in checks:
        print(describe_check(check))
    print(f"{len(checks)} jobs, each checked as if submitted alone; nothing was submitted")
    return 0


def _follow_sweep(client: E31Client, bodies: list[dict], args) -> int:
    """Submit every point; with --wait, follow them all to their end (exit 0 only if every one
    succeeded)."""
    jobs = submit_sweep(client, bodies)
    if args.wait:
        if not args.json:
            print_job_lines(jobs, file=sys.stderr)
        jobs = [client.wait(job["id"]) for job in jobs]
    if args.json:
        print(as_json(jobs))
    else:
        print_job_lines(jobs)
    return 0 if not args.wait or all(job["state"] == JobState.SUCCEEDED for job in jobs) else 1


def submit_sweep(client: E31Client, bodies: list[dict]) -> list[dict]:
    """Submit every point of a sweep; a refusal part way says which were submitted before it."""
    jobs = []
    for body in bodies:
        try:
            jobs.append(as_typed_here(client.submit(**body), body["path"]))
        except E31Error as error:
            if not jobs:
                raise
            submitted = ", ".join(job["id"] for job in jobs)
            raise E31Error(
                f"{error.message} {len(jobs)} of the sweep's {len(bodies)} jobs were submitted before that "
                f"({submitted}); {bodies[len(jobs)]['name']} and the rest were not.",
                error.status,
            ) from None
    print_warnings(dict.fromkeys(w for job in jobs for w in job.get("warnings") or []))
    return _as_they_stand(client, jobs)


def _as_they_stand(client: E31Client, jobs: list[dict]) -> list[dict]:
    """The jobs read again once all are in line: the places and expected starts each submit
    answered were of a line the later points had not joined yet (and the earlier may have left)."""
    now = {job["id"]: job for job in client.jobs(ids=[job["id"] for job in jobs])}
    return [{**job, **now.get(job["id"], {})} for job in jobs]


def cmd_resubmit(client: E31Client, args) -> int:
    job_id = client.resolve(args.job)
    if args.check:
        return _print_check(client.check_resubmit(job_id, **request_changes(args)), args)
    return _follow_submitted(client, client.resubmit(job_id, **request_changes(args)), args)


def _follow_submitted(client: E31Client, job: dict, args) -> int:
    """Say what was submitted; with --wait, follow it to its end (exit 0 only if it succeeded)."""
    print_warnings(job.get("warnings") or [])
    if not args.wait:
        print(as_json(job) if args.json else f"{job['id']}  {describe(job)}")
        return 0
    if not args.json:
        print(f"{job['id']}  {describe(job)}", file=sys.stderr)
    job = client.wait(job["id"], on_update=None if args.json else _progress_printer(job))
    print(as_json(job) if args.json else f"{job['id']}  {describe(job)}  {gpu_hours(job)} GPU-h")
    return 0 if job["state"] == JobState.SUCCEEDED else 1


def _print_check(check: dict, args) -> int:
    print_warnings(check["warnings"])
    print(as_json(check) if args.json else describe_check(check))
    return 0


def _progress_printer(job: dict):
    """An on_update callback that prints the job's state to stderr whenever it changes."""
    last = describe(job)

    def on_update(job: dict) -> None:
        nonlocal last
        text = describe(job)
        if text != last and job["state"] not in FINAL_STATES:
            print(f"{job['id']}  {text}", file=sys.stderr)
        last = text

    return on_update


def cmd_jobs(client: E31Client, args) -> int:
    if args.name:
        jobs = [job for job in client.jobs(args.state) if fnmatchcase(job["name"], args.name)][: args.limit]
    else:
        jobs = client.jobs(args.state, limit=args.limit)
    if args.json:
        print(as_json({"jobs": jobs}))
    elif args.quiet:
        for job in jobs:
            print(job["id"])
    else:
        print(format_jobs(jobs) if jobs else f"No {args.state + ' ' if args.state else ''}jobs{_named(args.name)}.")
    return 0


def _named(pattern: str | None) -> str:
    return f" named {pattern}" if pattern else ""


def cmd_status(client: E31Client, args) -> int:
    job = client.job(client.resolve(args.job))
    if args.json:
        print(as_json(job))
        return 0
    print(format_job(job))
    finished_with_files = job["state"] == JobState.SUCCEEDED and not job.get("files_deleted")
    returned = client.values(job["id"])["values"] if finished_with_files else []
    if returned:  # a %%e31 cell's job
        print(format_values(returned))
    return 0


def cmd_logs(client: E31Client, args) -> int:
    job_id = client.resolve(args.job)
    if args.tail is not None:
        text = client.log_tail(job_id, args.tail)
        if text:
            print(text.rstrip("\n"))
        return 0
    offset = 0
    while True:
        chunk = client.log(job_id, offset)
        sys.stdout.write(chunk["text"])
        sys.stdout.flush()
        offset = chunk["offset"]
        if chunk["final"] or (not chunk["text"] and not args.follow):
            return 0
        if not chunk["text"]:
            time.sleep(1.0)


def cmd_wait(client: E31Client, args) -> int:
    """Block until every job named has ended; a line for each as it ends. Exit 0 only if all
    of them succeeded."""
    job_ids = client.resolve_all(args.job)
    ended = []
    for job_id in job_ids:
        ended.append(client.wait(job_id))
        print_job_lines(ended[-1:])
    return 0 if all(job["state"] == JobState.SUCCEEDED for job in ended) else 1


def cmd_update(client: E31Client, args) -> int:
    """Change each queued job named (all named first); one that cannot change does not stop
    the others."""
    changes = update_changes(args)

    def update(job_id: str) -> None:
        job = client.update(job_id, **changes)
        print_warnings(job["warnings"])
        if args.json:
            print(as_json(job))
            return
        changed = "changed " + "; ".join(job["changed"]) if job["changed"] else "nothing to change"
        print(f"{job['id']}  {changed}; now {describe(job)}")

    return _each(client, args.job, update)


def cmd_suspend(client: E31Client, args) -> int:
    """Suspend each running job named (all named first); one that cannot be does not stop the others."""

    def suspend(job_id: str) -> None:
        job = client.suspend(job_id)
        print(f"{job['id']}  {describe(job)}")

    return _each(client, args.job, suspend)


def cmd_resume(client: E31Client, args) -> int:
    """Put a failed job back in line from its last checkpoint."""
    job = client.resume(client.resolve(args.job), **resume_changes(args))  # a corrected notebook: read here
    print_warnings(job["warnings"])
    if args.json:
        print(as_json(job))
        return 0
    changed = f"; changed {'; '.join(job['changed'])}" if job["changed"] else ""
    print(f"{job['id']}  {job['reason']}{changed}; now {describe(job)}")
    return 0


def cmd_cancel(client: E31Client, args) -> int:
    """Cancel each job named (all named first: a name that fits no job cancels nothing); one
    that cannot be cancelled does not stop the others."""

    def cancel(job_id: str) -> None:
        job = client.cancel(job_id)
        print(f"{job['id']}  {describe(job)}")

    return _each(client, args.job, cancel)


def cmd_delete(client: E31Client, args) -> int:
    """Delete the files of each ended job named (all named first); one still queued or running
    does not stop the others. The record and its GPU-hours stay."""

    def delete(job_id: str) -> None:
        job = client.delete_files(job_id)
        print_warnings(job["warnings"])
        print(f"{job['id']}  files deleted ({format_size(job['files_deleted']['bytes'])} freed); the record stays")

    return _each(client, args.job, delete)


def _each(client: E31Client, refs: list[str], action) -> int:
    """``action`` on each job named, all named first. With one job its error is the command's;
    with several, one refused (named in its message) does not stop the others: exit 2 after."""
    job_ids = client.resolve_all(refs)
    if len(job_ids) == 1:
        action(job_ids[0])
        return 0
    refused = 0
    for job_id in job_ids:
        try:
            action(job_id)
        except E31Error as error:
            named = error.message if job_id in error.message else f"{job_id}: {error.message}"
            print(f"e31: {named}", file=sys.stderr)
            refused += 1
    return 2 if refused else 0


def cmd_collect(client: E31Client, args) -> int:
    """Collect each job named into a folder of its own: ``--to DIR`` itself for one job,
    ``DIR/e31-JOB`` for several. One not finished yet does not stop the others."""
    several = len(args.job) > 1

    def collect(job_id: str) -> None:
        to = Path(args.to or ".") / f"e31-{job_id}" if several else args.to or f"e31-{job_id}"
        folder = client.collect(job_id, to)
        print(f"Collected job {job_id} into {folder}")
        returned = list(values.read_index(folder / "values"))
        if returned:
            print(f"  values {', '.join(returned)} in {folder / 'values'}; in Python: "
                  f"e31_jupyter.values.load({str(folder / 'values')!r})")  # fmt: skip

    return _each(client, args.job, collect)


def cmd_meter(client: E31Client, args) -> int:
    meter = client.meter(args.since, args.until)
    print(as_json(meter) if args.json else format_meter(meter))
    return 0


def cmd_gpus(client: E31Client, args) -> int:
    inventory = client.gpus()
    print(as_json(inventory) if args.json else format_gpus(inventory))
    return 0
