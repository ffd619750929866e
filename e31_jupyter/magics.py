"""``%%e31 submit`` turns a cell into a job; ``%e31 ...`` follows jobs and collects them.

Load with ``%load_ext e31_jupyter`` (or always: ``c.InteractiveShellApp.extensions =
["e31_jupyter"]`` in an IPython config file). The kernel finds its queue by itself: a kernel
started by a server with the extension inherits ``E31_URL`` (the token is read from the server's
runtime file, never passed in the environment); elsewhere the client looks for a running server.
"""

from __future__ import annotations

import argparse
import builtins
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import Int, Unicode, observe

from e31_jupyter import request_options, widgets
from e31_jupyter.cli import commands, listing
from e31_jupyter.cli.parser import build_parser
from e31_jupyter.client import E31Client, safe_destination
from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.core.states import ACTIVE_STATES, FINAL_STATES, JobState
from e31_jupyter.core.text import format_gpu_hours
from e31_jupyter.notebook import values
from e31_jupyter.notebook.cell_job import ASSIGNED
from e31_jupyter.notebook.checks import left_behind_warnings, module_warnings
from e31_jupyter.notebook.digest import digests
from e31_jupyter.notebook.job_notebook import (
    DEFAULT_KERNEL,
    CellNames,
    cell_names,
    cell_notebook,
    globals_set_by,
    import_line,
)

HIDDEN = {"In", "Out", "get_ipython", "exit", "quit"}  # IPython's own names, never captured
VALUES_FOLDER = "e31-values"  # in a job's outputs folder: the files its collected values are mapped from
LINE_COMMANDS = (
    "submit-notebook", "resubmit", "suspend", "resume", "update", "jobs", "status", "logs", "cancel", "wait", "collect",
    "delete",
)  # fmt: skip
USAGE = (
    "Usage: %%e31 submit [options] on a cell, or %e31 COMMAND with COMMAND one of "
    + ", ".join(LINE_COMMANDS)
    + ". Add --help to any of them."
)


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting the kernel."""

    def error(self, message):
        raise InvalidRequest(f"{message}. {self.format_usage().strip()}")

    def exit(self, status=0, message=None):
        if message:
            print(message, file=sys.stderr)
        raise _Done()


class _Done(Exception):
    """--help was printed: nothing else to do."""


class JobFailed(Exception):
    """A job waited for or collected did not succeed: the cell fails, so a "Run All" stops there,
    with one line that says which job and where (its traceback is in the job's widget and log)."""

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of the traceback
        return [f"e31: {self}"]


def _fail_unless_succeeded(jobs: list[dict]) -> None:
    ended_otherwise = [job for job in jobs if job["state"] != JobState.SUCCEEDED]
    if ended_otherwise:
        raise JobFailed(
            "; ".join(f"job {job['id']} ({job['name']}) {listing.describe(job)}" for job in ended_otherwise)
        )


class Interrupted(KeyboardInterrupt):
    """Interrupt pressed during a command (most often a wait): the cell stops, as on any
    interrupt, so a "Run All" stops too, but with a word on the jobs instead of a traceback."""

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of the traceback
        return [
            "e31: interrupted. Jobs already submitted go on without this kernel: %e31 jobs lists them, "
            "%e31 collect JOB brings one back once it has finished, %e31 cancel JOB stops it."
        ]


def _cell_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%%e31 submit", description="Run this cell as an unattended job.")
    options = request_options.CELL_OPTIONS
    files_first = options.index("--output")  # its help lists --in and --out before the options on files
    request_options.add(parser, options[:files_first], request_options.CELL)
    parser.add_argument(
        "--in", dest="inputs", metavar="NAMES",
        help="comma-separated names to capture besides those found; -NAME leaves one out",
    )  # fmt: skip
    parser.add_argument("--out", dest="returns", metavar="NAMES", help="names to return (default: all assigned)")
    request_options.add(parser, options[files_first:], request_options.CELL)
    after = parser.add_mutually_exclusive_group()
    after.add_argument("--wait", action="store_true", help="block until it ends, then collect")
    after.add_argument(
        "--check", action="store_true",
        help="submit nothing: say what a submit would refuse or warn of, and where it would wait",
    )  # fmt: skip
    parser.add_argument("--new", action="store_true", help="submit again even if this cell already ran")
    return parser


@magics_class
class E31Magics(Magics):
    max_capture_bytes = Int(8 << 30, help="The most a %%e31 submit may capture from the kernel, in bytes.").tag(
        config=True
    )
    outputs_dir = Unicode("e31-outputs", help="Where collect puts a job's files, beside the notebook.").tag(config=True)
    max_cell_output_bytes = Int(
        widgets.DEFAULT_OUTPUT_LIMIT,
        help="The most of a job's outputs (text, images, every display by its size) a collect or "
        "a job widget shows in the notebook, in bytes. Past it they are cut, with a notice that "
        "says where all of them are (e31 logs JOB, e31 collect JOB); errors are always shown.",
    ).tag(config=True)

    @observe("max_cell_output_bytes")
    def _limit_widgets_too(self, change: dict) -> None:
        widgets.output_limit = change["new"]  # job widgets show a job's outputs too

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self._client: E31Client | None = None

    @property
    def client(self) -> E31Client:
        if self._client is None:
            self._client = E31Client()
        return self._client

    @property
    def _shell(self) -> Any:
        """The kernel's IPython shell (Magics types it as optional)."""
        assert self.shell is not None, "magics run only once registered with a shell (load_ipython_extension)"
        return self.shell

    @line_cell_magic
    def e31(self, line: str, cell: str | None = None):
        """Nothing is returned: what there is to see is shown (a dict would echo as Out[n])."""
        try:
            argv = shlex.split(line)
            if cell is not None:
                if not argv or argv[0] != "submit":
                    raise InvalidRequest("A %%e31 cell magic must start with submit. " + USAGE)
                self.submit_cell(argv[1:], cell)
            else:
                self.run_command(argv)
        except _Done:
            pass
        except KeyboardInterrupt:
            raise Interrupted() from None
        except E31Error as error:
            print(f"e31: {error.message}", file=sys.stderr)
        except ValueError as error:  # shlex: unbalanced quotes
            print(f"e31: cannot read the command line: {error}", file=sys.stderr)

    # --- %%e31 submit ---------------------------------------------------------------------

    def submit_cell(self, argv: list[str], source: str) -> dict:
        args = _cell_parser().parse_args(request_options.read_argv(argv))
        names = self._names(source)
        imports, captured, set_by_functions = self._inputs(names, args.inputs)
        outputs = _names(args.returns) if args.returns else [n for n in names.assigns if not _ipython_history(n)]
        request = _request(args)
        notebook = cell_notebook(
            source, imports, list(captured), outputs, _kernel_name(), set_by_functions, changed=not args.returns
        )
        body = {
            **request,
            "name": args.name or _cell_job_name(source),
            "notebook": notebook,
            "notebook_name": "cell.ipynb",
        }
        body = {k: v for k, v in body.items() if v is not None}
        data = [Path(path) for path in body.get("data") or []]
        warnings = self._undefined(names) + left_behind_warnings([source], Path.cwd(), {}, data)
        warnings += module_warnings([source, *imports], Path.cwd(), data, _defined_in(captured))
        if args.check:  # the values are not captured: a check copies nothing
            return self.show_check(self.client.check(**body), warnings)
        chosen = {"name": args.name, "in": args.inputs, "out": args.returns}  # they change the job too
        options = {**request, **{k: v for k, v in chosen.items() if v}}
        inputs = digests(captured)
        fingerprint = _fingerprint(_notebook_path(), source, options, inputs)
        # Only a job of this cell, these options and inputs of the same content is shown again.
        if not args.new and None not in inputs.values():
            existing = self._existing(fingerprint)
            if existing is not None:
                return self._attach(existing, args.wait)
        staging = self._capture(captured)
        if staging:
            body["inputs"] = str(staging)
        try:
            job = self.client.submit(**body, fingerprint=fingerprint)
        except BaseException:
            if staging:
                shutil.rmtree(staging, ignore_errors=True)
            raise
        self.show(job, job.get("warnings", []) + warnings)
        return self._wait_and_collect(job) if args.wait else job

    def _names(self, source: str) -> CellNames:
        """What the cell reads and assigns, as IPython will run it; refused when it is not Python."""
        try:
            return cell_names(self._shell.transform_cell(source))
        except (SyntaxError, ValueError) as error:
            lineno = getattr(error, "lineno", None)  # a SyntaxError's; a ValueError has none
            where = f" (line {lineno})" if lineno else ""
            raise InvalidRequest(
                f"The cell is not valid Python{where}: {getattr(error, 'msg', error)}. Fix it and run "
                "it again; nothing was submitted."
            ) from None

    def _inputs(self, names: CellNames, option: str | None) -> tuple[list[str], dict, list[str]]:
        """Import lines for the modules the cell uses, the other values it reads (and those its
        functions set: ``global counter``), and the globals its functions set."""
        set_by_functions = names.set_globals
        imports, captured = self._chosen_inputs([*names.reads, *set_by_functions], option)
        more = [n for n in globals_set_by(captured.values()) if n not in set_by_functions]
        if more:  # a function of the kernel's sets these: they may change too
            set_by_functions = [*set_by_functions, *more]
            imports, captured = self._chosen_inputs([*names.reads, *set_by_functions], option)
        return imports, captured, set_by_functions

    def _chosen_inputs(self, reads: list[str], option: str | None) -> tuple[list[str], dict]:
        namespace = self._shell.user_ns
        reads = list(dict.fromkeys(reads))
        chosen = [n for n in reads if n in namespace and n not in HIDDEN and not n.startswith("_")]
        for name in _names(option) if option else []:
            if name.startswith("-"):
                chosen = [n for n in chosen if n != name[1:]]
            elif name not in namespace:
                raise InvalidRequest(f"--in {name}: there is no {name} in this kernel.")
            elif name not in chosen:
                chosen.append(name)
        imports = [import_line(n, namespace[n]) for n in chosen if isinstance(namespace[n], ModuleType)]
        captured = {n: namespace[n] for n in chosen if not isinstance(namespace[n], ModuleType)}
        return imports, captured

    def _undefined(self, names: CellNames) -> list[str]:
        """A warning naming what the cell reads but nothing defines: the job would stop at a
        NameError, after its wait in line."""
        if names.star_import:
            return []
        namespace = self._shell.user_ns
        missing = [
            n
            for n in names.reads
            if n not in namespace and not hasattr(builtins, n) and (n not in names.assigns or n in names.read_first)
        ]
        if not missing:
            return []
        them = "it" if len(missing) == 1 else "them"
        if any(n in names.assigns for n in missing):  # x = x + 1
            where = f"this kernel does not define and the cell does not assign before reading {them}"
        else:
            where = "neither this kernel nor the cell defines"
        return [
            f"The cell reads {', '.join(missing)}, which {where}: the job will stop with a NameError "
            f"unless it gets {them} some other way. Run the cells that define {them} first, then submit again."
        ]

    def _capture(self, captured: dict) -> Path | None:
        """Write the captured values where the server can take them (its inbox when it is on
        this machine, so they are moved, not copied). Refuses before anything is submitted."""
        if not captured:
            return None
        inbox = Path(self.client.info()["inbox"])
        parent = inbox if os.access(inbox, os.W_OK) else None
        staging = Path(tempfile.mkdtemp(prefix="capture-", dir=parent))
        try:
            values.save(captured, staging, self.max_capture_bytes)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    def _existing(self, fingerprint: str) -> dict | None:
        for job in self.client.jobs(fingerprint=fingerprint):  # newest first
            if job["state"] in (*ACTIVE_STATES, JobState.SUCCEEDED) and not job.get("files_deleted"):
                return job
        return None

    def _attach(self, job: dict, wait: bool) -> dict:
        print(
            f"e31: this cell already ran as job {job['id']}, with the same code, options and inputs; "
            "showing it (add --new to submit again)"
        )
        if job["state"] == JobState.SUCCEEDED:
            return self.collect(job["id"])
        self.show(job)
        return self._wait_and_collect(job) if wait else job

    def _wait_and_collect(self, job: dict) -> dict:
        """Wait for a job whose widget the cell shows above; then collect it. Its outputs are
        shown once, by collect, below; a traceback once, in that widget."""
        widgets.leave_outputs_to_collect(self.client, job["id"])
        ended = self.client.wait(job["id"])
        _fail_unless_succeeded([ended])
        return self.collect(job["id"])

    # --- %e31 COMMAND -----------------------------------------------------------------------

    def run_command(self, argv: list[str]):
        if not argv or argv[0] not in LINE_COMMANDS:
            raise InvalidRequest(USAGE)
        command, rest = argv[0], argv[1:]
        if command == "collect":
            return self._collect_command(rest)
        if command == "wait" and len(rest) == 1 and not rest[0].startswith("-"):
            job = self.client.wait(self.client.resolve(rest[0]))  # one job: shown (several: the CLI's lines)
            self.show(job)
            _fail_unless_succeeded([job])
            return job
        if command == "submit-notebook":
            return self.submit_notebook(rest)
        if command == "resubmit":
            return self.resubmit(rest)
        if command == "resume":
            args = _cli_args(["resume", *rest])
            return self._follow(
                self.client.resume(self.client.resolve(args.job), **request_options.resume_changes(args)), False
            )
        if command == "jobs" and not rest:
            return widgets.show_jobs(self.client)
        if command == "status" and len(rest) == 1:
            return self.show(self.client.job(self.client.resolve(rest[0])))
        args = _cli_args([command, *rest])
        code = args.run(self.client, args)
        if command == "wait" and code == 1:  # as `e31 wait` exits: one of them did not succeed
            raise JobFailed("not every job waited for succeeded; the lines above say which.")

    def _collect_command(self, argv: list[str]) -> dict | None:
        """``%e31 collect JOB... [--to DIR]``: one job's files into DIR; several jobs' each into
        DIR/NAME (default: the outputs folder). Values of later jobs replace same-named earlier ones."""
        parser = _Parser(prog="%e31 collect")
        parser.add_argument("job", metavar="JOB", nargs="+", help=request_options.JOB_HELP + " (several: each of them)")
        parser.add_argument(
            "--to", metavar="DIR",
            help=f"where files go (default {self.outputs_dir}/NAME; for several jobs, DIR/NAME)",
        )  # fmt: skip
        args = parser.parse_args(argv)
        job_ids = self.client.resolve_all(args.job)
        if len(job_ids) == 1:
            return self.collect(job_ids[0], args.to)
        failures = []
        for job_id in job_ids:  # a failed job does not stop the others' collection
            try:
                self.collect(job_id, under=args.to)
            except JobFailed as failure:
                failures.append(str(failure))
        if failures:
            raise JobFailed("; ".join(failures))
        return None

    def submit_notebook(self, argv: list[str]) -> dict | list[dict] | None:
        args = _cli_args(["submit", *argv])
        bodies = request_options.submit_bodies(args)
        if len(bodies) > 1:
            return self._sweep(bodies, args)
        if args.check:
            return self.show_check(request_options.as_typed_here(self.client.check(**bodies[0]), bodies[0]["path"]))
        submitted = self.client.submit(**bodies[0])
        return self._follow(request_options.as_typed_here(submitted, bodies[0]["path"]), args.wait)

    def _sweep(self, bodies: list[dict], args) -> list[dict] | None:
        """A line per job of the sweep, and the jobs widget to follow them."""
        if args.check:
            commands.check_sweep(self.client, bodies)
            return None
        jobs = commands.submit_sweep(self.client, bodies)
        listing.print_job_lines(jobs)
        widgets.show_jobs(self.client)
        if args.wait:
            jobs = [self.client.wait(job["id"]) for job in jobs]
            listing.print_job_lines(jobs)
        return jobs

    def resubmit(self, argv: list[str]) -> dict:
        """An earlier job's notebook again, as ``e31 resubmit`` takes it."""
        args = _cli_args(["resubmit", *argv])
        job_id, changes = self.client.resolve(args.job), request_options.request_changes(args)
        if args.check:
            return self.show_check(self.client.check_resubmit(job_id, **changes))
        return self._follow(self.client.resubmit(job_id, **changes), args.wait)

    def _follow(self, job: dict, wait: bool) -> dict:
        """Show a submitted job; with ``wait``, a line once it has ended (its widget, above, shows
        the end and the outputs: a second widget would show them twice)."""
        self.show(job, job.get("warnings", []))
        if wait:
            job = self.client.wait(job["id"])
            print(f"e31: job {job['id']} ({job['name']}): {listing.describe(job)}")
        return job

    # --- showing and collecting -----------------------------------------------------------

    def show(self, job: dict, warnings: Sequence[str] = ()) -> None:
        """A line for the record (and for terminals), and the live job widget. The line says how
        an ended job ended; of an active one only which job it is: its state would go stale above
        the widget that follows it."""
        listing.print_warnings(warnings)
        now = f": {listing.describe(job)}" if job["state"] in FINAL_STATES else "; its widget below follows it"
        print(f"e31: job {job['id']} ({job['name']}){now}")
        widgets.show_job(self.client, job, on_collect=self.collect)

    def show_check(self, check: dict, warnings: Sequence[str] = ()) -> dict:
        listing.print_warnings([*check["warnings"], *warnings])
        print(f"e31: {listing.describe_check(check)}")
        return check

    def collect(self, job_id: str, to: str | None = None, under: str | None = None, show_outputs: bool = True) -> dict:
        """Bring a finished job back: its returned values into the namespace, its files beside
        the notebook (into ``to``, or a folder named after the job in ``under``, by default the
        outputs folder), and what its cell displayed, shown again here (unless ``show_outputs``
        is False: its widget's Collect button, below the outputs that widget shows)."""
        job = self.client.job(job_id)
        if job["state"] not in FINAL_STATES:
            self.show(job)
            print(f"e31: collect it once it has finished (%e31 wait {job_id} blocks until then).")
            return job
        if job["state"] != JobState.SUCCEEDED:
            self.show(job)  # its widget shows the failing cell's traceback, once
            _fail_unless_succeeded([job])
        notebook = self._executed_notebook(job_id) if show_outputs else None
        loaded = self._load_values(job, to, under)
        folder = self._save_files(job, to, under)
        if notebook is not None:
            widgets.replay_outputs(notebook, job_id, self.max_cell_output_bytes)
        summary = [f"job {job['id']} ({job['name']}) succeeded"]
        if loaded:
            summary.append("loaded " + ", ".join(loaded))
        if folder:
            summary.append(f"{job['files_count']} file(s) in {folder}")
        summary.append(f"{format_gpu_hours(job['meter']['gpu_hours'])} GPU-hours")
        print("e31: " + "; ".join(summary))
        return job

    def _executed_notebook(self, job_id: str) -> dict | None:
        try:
            return self.client.notebook(job_id)
        except E31Error:  # never ran (cancelled or expired while queued)
            return None

    def _load_values(self, job: dict, to: str | None, under: str | None) -> list[str]:
        """The job's returned values, into this kernel's namespace, each named with why it came
        back. Their files are kept in the job's outputs folder (``VALUES_FOLDER``), where the
        loaded arrays are mapped from: a collect again replaces the folder, never the files under
        values still mapped."""
        listing = self.client.values(job["id"])
        for entry in listing["values"]:
            if entry.get("skipped"):
                print(f"e31: {entry['name']} was not returned: {entry['skipped']}", file=sys.stderr)
        if not listing["files"]:
            return []
        folder = self._job_folder(job, to, under) / VALUES_FOLDER
        staging = Path(tempfile.mkdtemp(prefix=".e31-values-", dir=folder.parent))
        try:
            self.client.save_values(job["id"], staging, listing)
            shutil.rmtree(folder, ignore_errors=True)  # mapped files stay readable until unmapped
            staging.rename(folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        loaded, not_loaded, differences = values.restore(folder, classes_from=self._shell.user_ns)
        for name, why in not_loaded.items():
            print(f"e31: {name} was not loaded: {why}", file=sys.stderr)
        for name, attributes in differences.items():
            print(
                f"e31: the job's {name} is not the class {name} this kernel defines now (they differ in "
                f"{', '.join(attributes)}); its instances came back as this kernel's {name}, and behave as "
                "it is defined here.",
                file=sys.stderr,
            )
        self._shell.user_ns.update(loaded)
        why = {entry["name"]: entry.get("why") for entry in listing["values"]}
        return [f"{name} ({why[name]})" if why.get(name) not in (None, ASSIGNED) else name for name in loaded]

    def _save_files(self, job: dict, to: str | None, under: str | None) -> Path | None:
        files = self.client.files(job["id"])
        if not files:
            return None
        folder = self._job_folder(job, to, under)
        targets = [(f["path"], safe_destination(folder, f["path"])) for f in files]
        for path, destination in targets:
            self.client.save_file(job["id"], path, destination)
        return folder

    def _job_folder(self, job: dict, to: str | None, under: str | None) -> Path:
        """Where a collect puts the job's files and values: ``to``, or a folder of its own in
        ``under`` (by default the outputs folder); made, and marked as the job's."""
        folder = Path(to) if to else self._outputs_folder(job, under or self.outputs_dir)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".e31-job").write_text(job["id"])
        return folder

    def _outputs_folder(self, job: dict, root: str) -> Path:
        """``<root>/<job name>/``, unless that holds another job's (or the user's) files."""
        base = Path(root) / _safe_name(job["name"])
        marker = base / ".e31-job"
        if not base.exists() or (marker.exists() and marker.read_text() == job["id"]):
            return base
        return base.with_name(f"{base.name}-{job['id']}")


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if not name.lstrip("-").isidentifier():
            raise InvalidRequest(f"{name!r} is not a Python name; give names separated by commas.")
    return names


def _defined_in(captured: dict) -> list[str]:
    """The top-level modules that the captured functions, classes and objects come from: one
    from a module next to the notebook travels by reference, so the job needs that module."""
    return [
        str(value.__module__ if isinstance(value, (type, FunctionType)) else type(value).__module__).split(".")[0]
        for value in captured.values()
    ]


def _request(args: argparse.Namespace) -> dict:
    """The cell's request options as given, but its name (chosen apart: the cell's first line if
    not given)."""
    return request_options.request_body(args, [flag for flag in request_options.CELL_OPTIONS if flag != "--name"])


def _fingerprint(notebook_path: str, source: str, request: dict, inputs: dict[str, str | None]) -> str:
    """Same notebook, same source, same options, and values of the same content (``inputs``, their
    digests): the same job. A value that changed (the learning rate set in another cell, a
    DataFrame changed in place) makes another job; a new kernel that defines the same values
    again (a notebook run from the top the next morning) finds the job it ran overnight."""
    parts = [notebook_path, source.strip(), request, inputs]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _ipython_history(name: str) -> bool:
    """IPython's own names for earlier results and inputs (``_``, ``__``, ``_7``, ``_i7``): a
    cell that assigns one (``for _ in range(3)``) does not hand it back over the kernel's."""
    return re.fullmatch(r"_{1,3}|_\d+|_i{1,3}\d*", name) is not None


def _notebook_path() -> str:
    """The notebook this kernel serves, as jupyter_server tells its kernels (empty elsewhere)."""
    return os.environ.get("JPY_SESSION_NAME", "")


def _kernel_name() -> str:
    """The kernel of this notebook, so the job runs on the same one."""
    path = _notebook_path()
    try:
        with open(path) as f:
            return json.load(f)["metadata"]["kernelspec"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_KERNEL


def _cell_job_name(source: str) -> str:
    first = next((line.strip() for line in source.splitlines() if line.strip()), "empty cell")
    first = "".join(c if c.isprintable() else " " for c in first)  # a name is one line of plain text
    stem = Path(_notebook_path()).stem
    name = f"{stem}: {first}" if stem else first
    return name[:80]


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "job"


def _cli_args(argv: list[str]) -> argparse.Namespace:
    """Parse with the e31 CLI's own parser, so the line magics take the CLI's options."""
    try:
        args, extra = build_parser().parse_known_args(request_options.read_argv(argv))
    except SystemExit:  # argparse printed the usage or the help
        raise _Done() from None
    if extra:
        raise InvalidRequest(f"unrecognized arguments: {' '.join(extra)}")
    return args


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(E31Magics)
