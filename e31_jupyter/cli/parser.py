"""The ``e31`` command line: its commands and their options."""

from __future__ import annotations

import argparse

from e31_jupyter import request_options
from e31_jupyter.cli.arguments import positive_int, wait_or_check
from e31_jupyter.cli.commands import (
    cmd_cancel,
    cmd_collect,
    cmd_delete,
    cmd_gpus,
    cmd_jobs,
    cmd_logs,
    cmd_meter,
    cmd_resubmit,
    cmd_resume,
    cmd_status,
    cmd_submit,
    cmd_suspend,
    cmd_update,
    cmd_wait,
)
from e31_jupyter.core.states import JobState
from e31_jupyter.request_options import JOB_HELP

STATES = tuple(state.value for state in JobState)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="e31",
        description="Queue notebooks as GPU jobs on an e31 Jupyter server.",
        epilog="The server is --url, else $E31_URL (its token: --token-file, $E31_TOKEN, "
        "$E31_TOKEN_FILE, else the server's runtime file), else $E31_SOCKET, else a running Jupyter "
        "server of yours with e31 on this machine, else the system scheduler at /run/e31/e31.sock.",
        allow_abbrev=False,
    )
    parser.add_argument("--url", help="server URL, e.g. http://localhost:8888/")
    parser.add_argument(
        "--token",
        help="the server's token; visible to every user of this machine (ps): prefer E31_TOKEN or --token-file",
    )
    parser.add_argument("--token-file", metavar="PATH", help="a file holding the server's token (as E31_TOKEN_FILE)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run, help: str, **kwargs) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, allow_abbrev=False, **kwargs)
        sub.set_defaults(run=run)
        return sub

    def json_flag(sub: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup) -> None:
        sub.add_argument("--json", action="store_true", help="print the server's JSON")

    submit = command("submit", cmd_submit, "submit a notebook as a job")
    submit.add_argument("notebook", metavar="NOTEBOOK", help="path of the notebook")
    request_options.add(submit, request_options.SUBMIT_OPTIONS, request_options.SUBMIT)
    wait_or_check(submit)
    json_flag(submit)

    resubmit = command(
        "resubmit", cmd_resubmit,
        "run a job's notebook again, with its data and values, as a new job; options change its request "
        "(parameters are merged; the deadline is not carried over)",
    )  # fmt: skip
    resubmit.add_argument("job", metavar="JOB", help=JOB_HELP)
    request_options.add(resubmit, request_options.RESUBMIT_OPTIONS, request_options.RESUBMIT)
    wait_or_check(resubmit)
    json_flag(resubmit)

    update = command(
        "update", cmd_update,
        "change queued jobs' request (GPUs, run times, deadline), name, team or the jobs they run after; "
        "each keeps its id and the jobs that wait for it, and takes its place in line anew",
    )  # fmt: skip
    update.add_argument("job", metavar="JOB", nargs="+", help=JOB_HELP + " (several: each of them)")
    request_options.add(update, request_options.UPDATE_OPTIONS, request_options.UPDATE)
    json_flag(update)

    suspend = command(
        "suspend", cmd_suspend,
        "stop running jobs at the end of their running cell (within c.E31.suspend_grace), with a checkpoint, and "
        "give their GPUs back; each waits, suspended, until `e31 resume` (jobs submitted with --checkpoint)",
    )  # fmt: skip
    suspend.add_argument("job", metavar="JOB", nargs="+", help=JOB_HELP + " (several: each of them)")

    resume = command(
        "resume", cmd_resume,
        "put a job that failed (out of time, lost, a cell raised) back in line to continue from its last "
        "checkpoint (--checkpoint): same id, files and meter; options change its request",
    )  # fmt: skip
    resume.add_argument("job", metavar="JOB", help=JOB_HELP)
    request_options.add(resume, request_options.RESUME_OPTIONS, request_options.RESUME)
    resume.add_argument(
        "--notebook", metavar="PATH",
        help="go on with this corrected notebook: the cells the checkpoint covers must be unchanged, the later ones "
        "run as they are here (a failed cell fixed)",
    )  # fmt: skip
    json_flag(resume)

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
    collect.add_argument(
        "--to", metavar="DIR", help="where to write (default ./e31-JOB; for several jobs, DIR/e31-JOB)"
    )

    delete = command(
        "delete", cmd_delete,
        "delete ended jobs' files (notebook, data, values, outputs, log) to free space; the record and GPU-hours stay",
    )  # fmt: skip
    delete.add_argument("job", metavar="JOB", nargs="+", help=JOB_HELP + " (several: each of them)")

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
