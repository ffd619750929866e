"""The ``e31`` command: submit notebooks as GPU jobs, follow them, collect their output."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from fnmatch import fnmatchcase

from pathlib import Path

from . import sweep
from .client import FINAL_STATES, E31Client
from .errors import E31Error
from .text import format_age, format_outlook, format_seconds, format_until, parse_time  # noqa: F401 (parse_time: used by tests)

STATES = ("queued", "running", "succeeded", "failed", "cancelled", "expired")
JOB_HELP = "a job's id, or enough of it to be unique (its part after the dash will do), or `last`: your newest job"
LAUNCHERS = ("lab", "serve")


# -- parsing ----------------------------------------------------------------------------------


def parameter_value(text: str):
    """A ``-p NAME VALUE`` value typed as papermill's CLI types it: bool, None, int, float or str."""
    literals = {"True": True, "False": False, "None": None}
    if text in literals:
        return literals[text]
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def duration(text: str) -> int | str:
    """A run time as given: whole seconds become a number, "90m" or "6h" go to the server as is."""
    return int(text) if text.isdigit() else text


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"a whole number of 1 or more, got {text!r}")
    return int(text)


def submit_body(args: argparse.Namespace) -> dict:
    """The submit request for ``e31 submit`` arguments; local paths made absolute."""
    body = {"path": os.path.abspath(args.notebook), **request_changes(args)}
    if args.data:
        body["data"] = [os.path.abspath(path) for path in args.data]
    container = {"image": args.image, "memory": args.memory, "cpus": args.cpus}
    body.update({key: value for key, value in container.items() if value is not None})
    return body


def submit_bodies(args: argparse.Namespace) -> list[dict]:
    """``submit_body`` once per point of the ``--sweep`` grid (once without one)."""
    body = submit_body(args)
    points = sweep.points(args.sweep or [], body.get("parameters", {}), parameter_value)
    return sweep.bodies(body, points, args.name or Path(args.notebook).stem)


def request_changes(args: argparse.Namespace) -> dict:
    """What ``request_options`` were given: for a submit, or the changes of a resubmit."""
    given = {
        "gpus": args.gpus,
        "max_runtime": args.max_runtime,
        "expected_runtime": args.expected_runtime,
        "deadline": args.deadline,
        "name": args.name,
        "team": args.team,
        "outputs": args.outputs,
        "reports": args.reports,
        "after": args.after,
    }
    if args.parameters:
        given["parameters"] = {name: parameter_value(value) for name, value in args.parameters}
    return {key: value for key, value in given.items() if value is not None}


# -- formatting -------------------------------------------------------------------------------


def format_table(headers: list[str], rows: list[list]) -> str:
    """Left-aligned columns, two spaces apart; None shows as '-'."""
    cells = [headers] + [["-" if cell is None else str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def describe(job: dict) -> str:
    """The job's state in a few words: 'queued (position 2)', 'running on GPU 0 (3/10 cells)'."""
    state, reason = job["state"], job.get("reason")
    if state == "queued":
        details = [f"position {job['queue_position']}"] if job.get("queue_position") else []
        details += format_outlook(job)
        return f"queued ({', '.join(details)})" if details else "queued"
    if state == "running" and reason and reason.startswith("cancelling"):
        return reason
    if state == "running":
        text = "running on GPU " + ",".join(job["gpus"]) if job.get("gpus") else "running"
        progress = job.get("progress") or {}
        details = [f"{progress['cells_done']}/{progress['cells_total']} cells"] if progress.get("cells_total") else []
        details += format_outlook(job)
        return f"{text} ({', '.join(details)})" if details else text
    return f"{state}: {reason}" if reason and state != "succeeded" else state


def gpu_hours(job: dict) -> str:
    return f"{(job.get('meter') or {}).get('gpu_hours') or 0:.2f}"


def format_jobs(jobs: list[dict], now: datetime | None = None) -> str:
    rows = [
        [
            job["id"],
            _shorten(job.get("name") or "", 32),
            job["state"],
            job.get("queue_position"),
            _starts(job, now),
            (job.get("request") or {}).get("gpus", 0),
            gpu_hours(job),
            format_age(job.get("submitted_at"), now),
        ]
        for job in jobs
    ]
    return format_table(["ID", "NAME", "STATE", "POS", "STARTS", "GPUS", "GPU-H", "AGE"], rows)


def _starts(job: dict, now: datetime | None) -> str | None:
    """The STARTS column: when, or 'expires', or 'after JOB' while it waits for other jobs."""
    waiting = job.get("waiting_for") or []
    if waiting:
        return f"after {waiting[0].partition('-')[2]}" + (f" +{len(waiting) - 1}" if len(waiting) > 1 else "")
    return "expires" if job.get("expected_to_expire") else format_until(job.get("expected_start"), now)


def format_job(job: dict) -> str:
    request, meter = job.get("request") or {}, job.get("meter") or {}
    gpus = request.get("gpus", 0)
    wanted = [f"{gpus} GPU{'' if gpus == 1 else 's'}"]
    if request.get("max_runtime_s"):
        wanted.append(f"max {format_seconds(request['max_runtime_s'])}")
    if request.get("expected_runtime_s"):
        wanted.append(f"expected {format_seconds(request['expected_runtime_s'])}")
    if request.get("deadline"):
        wanted.append(f"deadline {request['deadline']}")
    owner = job.get("owner") or "-"
    work = job.get("work") or {}
    fields = [
        ("job", job["id"]),
        ("name", job.get("name")),
        ("owner", f"{owner} (team {job['team']})" if job.get("team") else owner),
        ("state", describe(job)),
        ("request", ", ".join(wanted)),
        ("meter", f"{gpu_hours(job)} GPU-h, {meter.get('cost') or 0:.2f} {meter.get('currency') or ''}"),
        ("notebook", work.get("notebook")),
        *([("params", _parameters(work["parameters"]))] if work.get("parameters") else []),
        *([("data", ", ".join(work["data"]))] if work.get("data") else []),
        ("files", job.get("files_count")),
        ("submitted", job.get("submitted_at")),
        ("started", job.get("started_at")),
        ("finished", job.get("finished_at")),
    ]
    lines = [f"{label + ':':<11}{'-' if value is None else value}" for label, value in fields]
    transitions = job.get("transitions") or []
    if transitions:
        lines.append("history:")
    for step in transitions:
        reason = f"  {step['reason']}" if step.get("reason") else ""
        lines.append(f"  {step.get('at')}  {step.get('from') or '-'} -> {step.get('to')}{reason}")
    return "\n".join(lines)


def _parameters(parameters: dict) -> str:
    """``epochs=3, opt='adam'``: as the notebook will read them."""
    return ", ".join(f"{name}={value!r}" for name, value in parameters.items())


def format_meter(meter: dict) -> str:
    currency = meter.get("currency") or ""
    lines = [
        f"{meter['since']} .. {meter['until']}: "
        f"{meter['gpu_hours']:.2f} GPU-h, {meter['cost']:.2f} {currency}".rstrip()
    ]
    for title, usage in (("USER", meter.get("by_user")), ("TEAM", meter.get("by_team"))):
        if usage:
            rows = [[who, f"{u['gpu_hours']:.2f}", f"{u['cost']:.2f}"] for who, u in sorted(usage.items())]
            lines += ["", format_table([title, "GPU-H", f"COST {currency}".rstrip()], rows)]
    return "\n".join(lines)


def format_gpus(inventory: dict) -> str:
    rows = [[gpu["id"], gpu.get("job"), gpu.get("job_name"), gpu.get("owner")] for gpu in inventory["gpus"]]
    summary = (
        f"{inventory['total']} GPUs ({inventory['source']}), {inventory['free']} free; "
        f"{inventory['running']} running, {inventory['queued']} queued"
    )
    return format_table(["GPU", "JOB", "NAME", "OWNER"], rows) + "\n" + summary


def _shorten(text: str, width: int) -> str:
    """Cut in the middle, so that both ends show: a sweep's jobs differ at the end of the name."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def as_json(value) -> str:
    return json.dumps(value, indent=2)


# -- commands ---------------------------------------------------------------------------------


def cmd_submit(client: E31Client, args) -> int:
    bodies = submit_bodies(args)
    if len(bodies) > 1:
        return check_sweep(client, bodies, args.json) if args.check else _follow_sweep(client, bodies, args)
    if args.check:
        return _print_check(client.check(**bodies[0]), args)
    return _follow_submitted(client, client.submit(**bodies[0]), args)


def check_sweep(client: E31Client, bodies: list[dict], in_json: bool = False) -> int:
    checks = [client.check(**body) for body in bodies]
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
    return 0 if not args.wait or all(job["state"] == "succeeded" for job in jobs) else 1


def submit_sweep(client: E31Client, bodies: list[dict]) -> list[dict]:
    """Submit every point of a sweep; a refusal part way says which were submitted before it."""
    jobs = []
    for body in bodies:
        try:
            jobs.append(client.submit(**body))
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
    return jobs


def print_job_lines(jobs: list[dict], file=None) -> None:
    """A line per job: id, name, state in words, and GPU-hours once it has ended."""
    for job in jobs:
        ended = f"  {gpu_hours(job)} GPU-h" if job["state"] in FINAL_STATES else ""
        print(f"{job['id']}  {job['name']}  {describe(job)}{ended}", file=file)


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
    return 0 if job["state"] == "succeeded" else 1


def _print_check(check: dict, args) -> int:
    print_warnings(check["warnings"])
    print(as_json(check) if args.json else describe_check(check))
    return 0


def print_warnings(warnings) -> None:
    for warning in warnings:
        print(f"e31: warning: {warning}", file=sys.stderr)


def describe_check(check: dict) -> str:
    """A checked submit in a line: 'train: would be queued (position 3, expected to start in
    12m, to end in 1h12m); nothing was submitted'."""
    return f"{check['name']}: would be {describe({**check, 'state': 'queued'})}; nothing was submitted"


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
    print(as_json(job) if args.json else format_job(job))
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
    job_ids = _resolve_all(client, args.job)
    ended = []
    for job_id in job_ids:
        ended.append(client.wait(job_id))
        print_job_lines(ended[-1:])
    return 0 if all(job["state"] == "succeeded" for job in ended) else 1


def cmd_cancel(client: E31Client, args) -> int:
    """Cancel each job named (all named first: a name that fits no job cancels nothing); one
    that cannot be cancelled does not stop the others."""

    def cancel(job_id: str) -> None:
        job = client.cancel(job_id)
        print(f"{job['id']}  {describe(job)}")

    return _each(client, args.job, cancel)


def _resolve_all(client: E31Client, refs: list[str]) -> list[str]:
    """The ids of the jobs named, each once: all of them before anything is done to one."""
    return list(dict.fromkeys(client.resolve(ref) for ref in refs))


def _each(client: E31Client, refs: list[str], action) -> int:
    """``action`` on each job named, all named first. With one job its error is the command's;
    with several, one refused (its message names it) does not stop the others: exit 2 after."""
    job_ids = _resolve_all(client, refs)
    if len(job_ids) == 1:
        action(job_ids[0])
        return 0
    refused = 0
    for job_id in job_ids:
        try:
            action(job_id)
        except E31Error as error:
            print(f"e31: {error.message}", file=sys.stderr)
            refused += 1
    return 2 if refused else 0


def cmd_collect(client: E31Client, args) -> int:
    """Collect each job named into a folder of its own: ``--to DIR`` itself for one job,
    ``DIR/e31-JOB`` for several. One not finished yet does not stop the others."""
    several = len(args.job) > 1

    def collect(job_id: str) -> None:
        to = Path(args.to or ".") / f"e31-{job_id}" if several else args.to or f"e31-{job_id}"
        print(f"Collected job {job_id} into {client.collect(job_id, to)}")

    return _each(client, args.job, collect)


def cmd_meter(client: E31Client, args) -> int:
    meter = client.meter(args.since, args.until)
    print(as_json(meter) if args.json else format_meter(meter))
    return 0


def cmd_gpus(client: E31Client, args) -> int:
    inventory = client.gpus()
    print(as_json(inventory) if args.json else format_gpus(inventory))
    return 0


# -- launchers --------------------------------------------------------------------------------


def launcher_argv(command: str, extra: list[str], as_root: bool | None = None) -> list[str]:
    """The command line that ``e31 lab`` or ``e31 serve`` runs; ``extra`` passes through last."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    root_flag = ["--allow-root"] if as_root else []
    if command == "lab":
        return [sys.executable, "-m", "jupyterlab", *root_flag, *extra]
    extensions = {name: False for name in _enabled_server_extensions()} | {"e31_jupyter": True}
    return [
        sys.executable,
        "-m",
        "jupyter_server",
        f"--ServerApp.jpserver_extensions={extensions!r}",
        "--ServerApp.open_browser=False",
        "--ServerApp.reraise_server_extension_failures=True",  # a server without its queue is no use
        *root_flag,
        *extra,
    ]


def _enabled_server_extensions() -> list[str]:
    """The server extensions enabled in Jupyter's config; ``e31 serve`` turns them all off.

    Naming e31_jupyter alone is not enough: ServerApp adds every extension enabled in the
    config paths that the command line does not mention.
    """
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    enabled = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    return sorted(name for name, on in enabled.items() if on and name != "e31_jupyter")


def launch(command: str, extra: list[str]) -> int:
    """Replace this process with Jupyter, so Ctrl-C and exit codes are Jupyter's own."""
    argv = launcher_argv(command, extra)
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached


# -- the command line -------------------------------------------------------------------------


def request_options(parser: argparse.ArgumentParser, defaults: str = "") -> None:
    """-p, --gpus, run times, --deadline, --name, --team, --output, --report; ``defaults`` says
    where what is not given comes from, when not from the usual defaults."""

    def default(usual: str = "") -> str:
        return f"; default: {defaults or usual}" if defaults or usual else ""

    parser.add_argument(
        "-p", "--parameters", nargs=2, action="append", metavar=("NAME", "VALUE"),
        help="a papermill parameter; VALUE typed as papermill does (int, float, True/False/None, str)",
    )
    parser.add_argument("--gpus", type=int, help=f"GPUs to hold{default('0')}")
    parser.add_argument(
        "--max-runtime", type=duration, metavar="DUR", help=f"stop it after this: 90m, 6h, 1d or seconds{default()}"
    )
    parser.add_argument("--expected-runtime", type=duration, metavar="DUR", help=f"how long it should take{default()}")
    parser.add_argument("--deadline", metavar="WHEN", help="finish by: ISO 8601, +6h or 08:00")
    parser.add_argument(
        "--after", action="append", metavar="JOB",
        help="start only once this job has succeeded (repeatable: all of them); `last` is your newest job",
    )
    parser.add_argument("--name", help=f"a name for the job{default()}")
    parser.add_argument("--team", help=f"the team to charge{default()}")
    parser.add_argument(
        "--output", dest="outputs", action="append", metavar="GLOB",
        help=f"files to collect (repeatable{default('all it wrote')})",
    )
    parser.add_argument(
        "--report", dest="reports", action="append", metavar="FORMAT",
        help=f"report format (repeatable{default('html')})",
    )


def wait_or_check(parser: argparse.ArgumentParser) -> None:
    after = parser.add_mutually_exclusive_group()
    after.add_argument("--wait", action="store_true", help="wait for the end; exit 0 only if it succeeded")
    after.add_argument(
        "--check", action="store_true",
        help="submit nothing: say what the submit would refuse or warn of, and where the job would wait",
    )


def container_options(parser: argparse.ArgumentParser) -> None:
    """--image, --memory, --cpus: for queues that run jobs in containers (c.E31.backend = 'docker')."""
    parser.add_argument("--image", help="the container image to run in (default: the queue's)")
    parser.add_argument("--memory", metavar="SIZE", help="the container's memory limit, e.g. 16g")
    parser.add_argument("--cpus", type=float, help="the container's CPU limit, e.g. 8 or 0.5")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="e31",
        description="Queue notebooks as GPU jobs on an e31 Jupyter server.",
        epilog="The server is --url/--token, else $E31_URL/$E31_TOKEN, else a running Jupyter "
        "server with e31 on this machine.",
        allow_abbrev=False,
    )
    parser.add_argument("--url", help="server URL, e.g. http://localhost:8888/")
    parser.add_argument("--token", help="the server's token")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run, help: str, **kwargs) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, allow_abbrev=False, **kwargs)
        sub.set_defaults(run=run)
        return sub

    def json_flag(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--json", action="store_true", help="print the server's JSON")

    submit = command("submit", cmd_submit, "submit a notebook as a job")
    submit.add_argument("notebook", metavar="NOTEBOOK", help="path of the notebook")
    request_options(submit)
    submit.add_argument(
        "--sweep", nargs="+", action="append", metavar=("NAME", "VALUE"),
        help="submit one job per value of parameter NAME (repeatable: one job per combination)",
    )
    submit.add_argument(
        "--data", action="append", metavar="PATH", help="a file or folder to copy into the job (repeatable)"
    )
    container_options(submit)
    wait_or_check(submit)
    json_flag(submit)

    resubmit = command(
        "resubmit", cmd_resubmit,
        "run a job's notebook again, with its data and values, as a new job; options change its request "
        "(parameters are merged; the deadline is not carried over)",
    )  # fmt: skip
    resubmit.add_argument("job", metavar="JOB", help=JOB_HELP)
    request_options(resubmit, defaults="the earlier job's")
    wait_or_check(resubmit)
    json_flag(resubmit)

    jobs = command("jobs", cmd_jobs, "list jobs, newest first")
    jobs.add_argument("--state", choices=STATES)
    jobs.add_argument("-n", "--limit", type=positive_int, metavar="N", help="only the newest N jobs")
    jobs.add_argument(
        "--name", metavar="GLOB", help="only jobs whose name matches, e.g. 'train[*' for a sweep of train"
    )
    shown = jobs.add_mutually_exclusive_group()
    shown.add_argument("-q", "--quiet", action="store_true", help="only their ids, one a line (for e31 cancel ...)")
    json_flag(shown)

    status = command("status", cmd_status, "show one job")
    status.add_argument("job", metavar="JOB", help=JOB_HELP)
    json_flag(status)

    logs = command("logs", cmd_logs, "print a job's log")
    logs.add_argument("job", metavar="JOB", help=JOB_HELP)
    follow = logs.add_mutually_exclusive_group()
    follow.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    follow.add_argument("--tail", type=int, metavar="N", help="only the last N lines")

    wait = command("wait", cmd_wait, "wait until jobs have ended; exit 0 only if all succeeded")
    wait.add_argument("job", metavar="JOB", nargs="+", help=JOB_HELP + " (several: all of them)")

    cancel = command("cancel", cmd_cancel, "cancel jobs")
    cancel.add_argument("job", metavar="JOB", nargs="+", help=JOB_HELP + " (several: each of them)")

    collect = command("collect", cmd_collect, "download a finished job's notebook, report and files")
    collect.add_argument("job", metavar="JOB", nargs="+", help=JOB_HELP + " (several: each of them)")
    collect.add_argument("--to", metavar="DIR", help="where to write (default ./e31-JOB; for several jobs, DIR/e31-JOB)")

    meter = command("meter", cmd_meter, "GPU-hours and cost by user and team (default: last 7 days)")
    meter.add_argument("--since", metavar="ISO")
    meter.add_argument("--until", metavar="ISO")
    json_flag(meter)

    json_flag(command("gpus", cmd_gpus, "which job holds which GPU"))

    for name, help in (
        ("lab", "run JupyterLab (arguments pass through to jupyter lab)"),
        ("serve", "run a headless Jupyter server with only e31 (arguments pass through)"),
    ):
        command(name, None, help, add_help=False, usage=f"e31 {name} [ARGS...]")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command in LAUNCHERS:
        return launch(args.command, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.run(E31Client(args.url, args.token), args)
    except E31Error as error:
        print(f"e31: {error.message}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. collect cannot write where it was told to
        print(f"e31: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
