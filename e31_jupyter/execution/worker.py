"""Runs inside the job: ``python -m e31_jupyter.execution.worker JOBDIR``, or ``--standby`` to be
started ahead and handed its job later (``standby.py``).

Executes the job's notebook with papermill in the job's working directory, records progress
(cells done of total) and a heartbeat, saves the partly executed notebook as it goes, and at the
end collects outputs and writes the result manifest. Knows nothing of the server: it reads and
writes only the job directory. Its exit status is 0 only when the notebook succeeded.

After the notebook, rendering reports, collecting files and saving values are each guarded: a
step that fails is listed in the manifest's ``after_work_failures`` and printed to the log, and
the job's state stays its notebook's.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from e31_jupyter.core.cell_words import died_in, raised, without_error_notes
from e31_jupyter.core.job import RESULTS_TAG
from e31_jupyter.core.states import JobState
from e31_jupyter.core.text import format_size
from e31_jupyter.execution.engine import CheckpointFailed, Checkpoints, Suspended, job_engine
from e31_jupyter.execution.jobdir import JobDir, write_json_atomic, write_text_atomic
from e31_jupyter.execution.outputs import collect_files, failure, snapshot, write_reports
from e31_jupyter.execution.quick_imports import skip_iri_parsers
from e31_jupyter.execution.standby import STANDBY_FLAG, wait_for_job

HEARTBEAT_S = 2.0
ANSI_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colours in a kernel's tracebacks
SOCKETS_PREFIX = "e31-kernel-"  # + the worker's pid: a folder of kernel sockets in the temp dir
# Run by the job's kernel as it starts: tqdm.auto draws text bars, which the job's log records.
KERNEL_STARTUP = Path(__file__).with_name("kernel_startup.py")


class Stopped(BaseException):
    """The job was asked to stop (SIGTERM): cancel or timeout, decided by the server."""


class Progress:
    """progress.json: cells done of total, the current cell, and a heartbeat time."""

    def __init__(self, jobdir: JobDir, cells_total: int | None):
        self.jobdir = jobdir
        self.state: dict[str, Any] = {"cells_done": 0, "cells_total": cells_total, "current_cell": None}
        self.last_started: int | None = None  # the cell a dead kernel was running (papermill completes it)
        # The notebook's cells as papermill runs them (its injected parameters included): what its
        # cell indexes count, and what a failure's reason names a cell by (cell_words).
        self.cells: list[dict] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def write(self, **changes) -> None:
        with self._lock:
            self.state.update(changes, updated_at=time.time())
            write_json_atomic(self.jobdir.progress, self.state)

    def beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self.write()

    def __enter__(self):
        self.write()
        threading.Thread(target=self.beat, daemon=True).start()
        return self

    def __exit__(self, *_):
        self._stop.set()


def save_notebooks_whole(folder: Path) -> None:
    """Papermill saves the executed notebook after every cell by rewriting it in place: a worker
    killed during a save (a SIGKILL, the machine going down) would leave half a notebook, and the
    cells that ran would be lost with it. Under ``folder`` its saves replace the file instead.
    (Papermill picks an I/O handler by the path's prefix.)"""
    from papermill.iorw import LocalHandler, papermill_io

    class WholeSaves(LocalHandler):
        def write(self, buf: str, path: str) -> None:
            write_text_atomic(Path(path), buf)

    papermill_io.register(str(folder), WholeSaves())


def _job_kernels(folder: str, exits: list[int]):
    """A kernel manager whose kernel talks over unix sockets in ``folder``, and which puts the
    kernel's exit status in ``exits`` when it dies (nbclient says only "Kernel died").
    Over TCP, the client picks free ports and the kernel binds them a moment later: two jobs
    starting at once can take each other's port, and the loser fails with "Kernel didn't
    respond". Sockets named in a folder of the job's own cannot collide (and ``folder`` is
    short: socket paths are limited)."""
    from jupyter_client.manager import AsyncKernelManager  # nbclient's default
    from traitlets import CaselessStrEnum, default

    class JobKernelManager(AsyncKernelManager):
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc")

        @default("ip")
        def _socket_path(self):
            return os.path.join(folder, "kernel")

        # AsyncKernelManager's is_alive is a coroutine function at run time, but jupyter_client types
        # it as KernelManager's synchronous one.
        async def is_alive(self) -> bool:  # type: ignore[override]
            alive = await super().is_alive()
            process = getattr(self.provisioner, "process", None)
            if not alive and process is not None and process.returncode is not None and not exits:
                exits.append(process.returncode)
            return alive

    return JobKernelManager


def start_kernel(name: str, cwd: Path, manager_class):
    """The job's kernel, started now, not yet ready: nbclient waits for it once papermill runs
    the notebook. Its options are those nbclient would give it (no IPython history file)."""
    from jupyter_core.utils import run_sync

    kernel = manager_class(kernel_name=name)
    run_sync(kernel.start_kernel)(extra_arguments=["--HistoryManager.hist_file=:memory:"], cwd=str(cwd))
    return kernel


def _kernel_process(kernel):
    """The kernel's local process (None: not started, or a provisioner without one)."""
    return getattr(getattr(kernel, "provisioner", None), "process", None)


def _exit_status(kernel) -> list[int]:
    """The kernel process's exit status, once it has ended: [] while it runs (or never started)."""
    process = _kernel_process(kernel)
    status = process.poll() if process is not None else None
    return [] if status is None else [status]


def shut_down(kernel) -> None:
    """Shut the job's kernel down, as nbclient does the kernels it starts itself (it leaves one it
    was given alone)."""
    if kernel is None or not kernel.has_kernel:
        return
    from jupyter_core.utils import run_sync

    try:
        run_sync(kernel.shutdown_kernel)(now=False)
    except Exception as error:  # it died meanwhile, or will not answer: the process goes anyway
        print(f"e31: the kernel did not shut down cleanly ({type(error).__name__}: {error})", flush=True)


def remove_orphaned_sockets(folder: str | None = None) -> None:
    """Remove the socket folders of workers that died before removing their own (a SIGKILL)."""
    folder = folder or tempfile.gettempdir()
    for entry in os.scandir(folder):
        pid = entry.name.removeprefix(SOCKETS_PREFIX).partition("-")[0]
        if entry.name.startswith(SOCKETS_PREFIX) and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry.path, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists. Without psutil: a job's container may not have it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's
    return True


def _on_sigterm(signum, frame):
    raise Stopped()


# Set on SIGUSR1 (``e31 suspend``): the engine stops at the running cell's end, saving a checkpoint.
SUSPEND_ASKED = threading.Event()
# Set on SIGUSR1, and on SIGUSR2 (its time limit is near): the kernel is told, so that code in a
# long cell can see it (e31_jupyter.job.stopping(), kernel_startup.py) and end the cell early.
STOPPING = threading.Event()
KERNEL_PIDS: list[int] = []  # the job's kernel, once it listens


def _on_sigusr1(signum, frame):
    SUSPEND_ASKED.set()
    _on_sigusr2(signum, frame)


def _on_sigusr2(signum, frame):
    STOPPING.set()
    for pid in KERNEL_PIDS:
        _tell_kernel(pid)


def _tell_kernel(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGUSR1)
    except OSError:
        pass  # it has ended


def _pass_stops_on(kernel):
    """What the engine calls once the kernel answers: from then on a suspend, or the warning
    that its time limit is near, is passed on to it, and one asked already is passed on now.
    Not before: until its startup file has run, SIGUSR1 would end the kernel. Only an IPython
    kernel runs that file (others are not told)."""

    def kernel_ready() -> None:
        process = _kernel_process(kernel)
        language = getattr(getattr(kernel, "kernel_spec", None), "language", "")
        if process is None or not process.pid or str(language).lower() != "python":
            return
        KERNEL_PIDS.append(process.pid)
        if STOPPING.is_set():
            _tell_kernel(process.pid)

    return kernel_ready


def run(jobdir: JobDir) -> dict:
    """Execute the job; returns the result manifest (also written to manifest.json)."""
    spec = jobdir.read_json(jobdir.spec)
    # Absolute: papermill runs the notebook in the work folder, and its saves are told apart by
    # the job folder's path (save_notebooks_whole).
    jobdir = JobDir(jobdir.path.resolve())
    os.environ["E31_JOB_DIR"] = str(jobdir.path)  # the kernel finds its inputs here
    os.environ["PYTHONSTARTUP"] = str(KERNEL_STARTUP)  # an IPython kernel runs it as it starts
    started_at = time.time()
    if not jobdir.baseline.exists():  # a resumed job's files are those since its first run
        write_json_atomic(jobdir.baseline, snapshot(jobdir.work))
    status: JobState | str = JobState.FAILED  # or "stopped", or (at a cell's end, as asked) "suspended"
    reason = ""
    with Progress(jobdir, cells_total=None) as progress:  # a heartbeat from the first moment
        remove_orphaned_sockets()
        sockets = tempfile.mkdtemp(prefix=f"{SOCKETS_PREFIX}{os.getpid()}-")
        kernel_exits: list[int] = []
        kernel = None
        try:
            # The kernel boots (about a second) while papermill's world is imported here.
            kernel = start_kernel(spec["kernel"], jobdir.work, _job_kernels(sockets, kernel_exits))
            import nbformat
            import papermill
            from papermill.engines import papermill_engines

            checkpoints = _checkpoints(jobdir, spec)
            notebook = _resume_input(jobdir) if checkpoints.resume else jobdir.input_notebook
            cells = len(nbformat.read(notebook, as_version=4).cells)
            injected = 0 if checkpoints.resume else (1 if spec["parameters"] else 0)
            progress.write(cells_total=cells + injected)
            papermill_engines.register("e31", job_engine(progress, checkpoints, _pass_stops_on(kernel)))
            save_notebooks_whole(jobdir.path)
            papermill.execute_notebook(
                str(notebook),
                str(jobdir.executed_notebook),
                parameters=spec["parameters"],
                kernel_name=spec["kernel"],
                engine_name="e31",
                cwd=str(jobdir.work),
                progress_bar=False,
                log_output=True,
                request_save_on_cell_execute=True,
                km=kernel,
            )
            status = JobState.SUCCEEDED
        except Stopped:
            status, reason = "stopped", "stopped on request"
        except Suspended as done:
            status, reason = JobState.SUSPENDED, str(done)
        except CheckpointFailed as error:
            reason = f"could not resume: the checkpoint did not load in the job's kernel ({error})"
        except Exception as error:  # the process decides the state; the reason says what happened
            kernel_exits.extend([] if kernel_exits else _exit_status(kernel))
            reason = _describe(error, progress, kernel_exits)
        finally:
            shut_down(kernel)
            shutil.rmtree(sockets, ignore_errors=True)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the notebook is done; let the results land
    finished_at = time.time()
    # The kernel is gone: the job's GPUs can go back now, and the meter stop, before the reports.
    # (Rendering them while the kernel shuts down was tried: it competes for the same two cores
    # and delays the release, so the meter would charge part of the report.)
    write_json_atomic(jobdir.released, {"at": finished_at})
    failures: list[dict] = []
    if status == JobState.FAILED and _results_cell_failed(jobdir):  # the user's cells all ran
        status, reason = JobState.SUCCEEDED, ""
        failures.append(failure("values", f"the values were not saved: {_cell_error(jobdir)}"))
    reports = _reports(jobdir, spec, failures)
    manifest = {
        "status": str(status),  # as the manifest's JSON has it: "succeeded", "failed", "stopped" or "suspended"
        "reason": reason,
        "started_at": started_at,
        "finished_at": finished_at,
        "reports": reports,
        **_after_work(jobdir, spec, failures),
    }
    for item in manifest["after_work_failures"]:
        print(f"e31: after the notebook, {item['step']}: {item['reason']}", flush=True)
    write_json_atomic(jobdir.manifest, manifest)
    return manifest


def _checkpoints(jobdir: JobDir, spec: dict) -> Checkpoints:
    """Whether the job takes checkpoints, and whether it resumes from one (a checkpoint there
    means it ran before: it continues after the cell the checkpoint follows)."""
    resume = jobdir.checkpoint_current.exists()
    earlier = _resumed_notebook(jobdir) if resume else None
    return Checkpoints(
        jobdir.checkpoint, spec.get("checkpoint", False), resume, earlier.cells if earlier else [],
        share=spec.get("checkpoint_share", 0.05), suspend_asked=SUSPEND_ASKED,
    )  # fmt: skip


def _resume_input(jobdir: JobDir) -> Path:
    """The notebook a resumed job runs: the one its last run wrote, as it ran, or the one the
    resume corrected (``resume_from``, written by the server and read once)."""
    import nbformat

    path = jobdir.path / "resume.ipynb"
    write_text_atomic(path, nbformat.writes(_resumed_notebook(jobdir)))
    jobdir.resume_from.unlink(missing_ok=True)
    return path


def _resumed_notebook(jobdir: JobDir):
    """What the resumed run goes on with (the notes papermill adds about a failure taken out, so
    cells are where the checkpoint counted them)."""
    import nbformat

    source = jobdir.resume_from if jobdir.resume_from.exists() else jobdir.executed_notebook
    notebook = nbformat.read(source, as_version=4)
    notebook.cells = without_error_notes(notebook.cells)
    return notebook


def _reports(jobdir: JobDir, spec: dict, failures: list[dict]) -> dict[str, str]:
    """Render the reports (a failure adds to ``failures``): format -> file name."""
    try:
        title = Path(spec.get("notebook_name") or "notebook").stem
        reports, report_failures = write_reports(jobdir, spec["reports"], spec.get("image") or "", title)
        failures.extend(report_failures)
        return reports
    except Exception as error:
        failures.append(failure("report", f"reports failed: {type(error).__name__}: {error}"))
        return {}


def _after_work(jobdir: JobDir, spec: dict, failures: list[dict]) -> dict:
    """Collect files and list the values that were not saved, each step on its own: one that
    fails adds to ``failures`` and the others go on."""
    files: list[dict] = []
    left_out: list[dict] = []
    try:
        files, left_out = _collect(jobdir, spec, failures)
    except Exception as error:
        failures.append(failure("files", f"the job's files could not be collected: {type(error).__name__}: {error}"))
    try:
        failures.extend(_values_not_saved(jobdir))
    except Exception as error:
        failures.append(failure("values", f"the values' index cannot be read: {type(error).__name__}: {error}"))
    return {"files": files, "left_out": left_out, "after_work_failures": failures}


def _collect(jobdir: JobDir, spec: dict, failures: list[dict]) -> tuple[list[dict], list[dict]]:
    baseline = jobdir.read_json(jobdir.baseline, {})
    quota = spec.get("max_output_bytes", 50 << 30)
    unreadable: list[str] = []
    files, left_out = collect_files(jobdir.work, baseline, spec["outputs"], quota, unreadable)
    if left_out:
        print(
            f"e31: {len(left_out)} file(s), {format_size(sum(f['size'] for f in left_out))}, were not "
            f"collected: they do not fit in the output quota of {format_size(quota)} "
            "(c.E31.max_output_bytes). They stay in the job's directory.",
            flush=True,
        )
    if unreadable:
        failures.append(failure(
            "files",
            f"{len(unreadable)} file(s) or folder(s) the job's user cannot read were not collected "
            f"({'; '.join(unreadable[:5])}{'; ...' if len(unreadable) > 5 else ''}): make what the "
            "notebook writes readable by its own user.",
        ))  # fmt: skip
    return files, left_out


def _values_not_saved(jobdir: JobDir) -> list[dict]:
    """A failure for each value a cell job could not hand back (values.json says why)."""
    index = jobdir.values_index()
    return [failure("values", entry["skipped"]) for entry in index.values() if "skipped" in entry]


def _results_cell(jobdir: JobDir) -> dict | None:
    """The executed notebook's cell that hands a cell job's values back (None: not a cell job)."""
    import nbformat

    try:
        cells = nbformat.read(jobdir.executed_notebook, as_version=4).cells
    except (OSError, ValueError):
        return None
    return next((c for c in cells if RESULTS_TAG in c.get("metadata", {}).get("tags", [])), None)


def _results_cell_failed(jobdir: JobDir) -> bool:
    cell = _results_cell(jobdir)
    return cell is not None and any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def _cell_error(jobdir: JobDir) -> str:
    cell = _results_cell(jobdir)
    assert cell is not None, "called only once _results_cell_failed found the cell"
    error = next(o for o in cell["outputs"] if o.get("output_type") == "error")
    return f"{error.get('ename')}: {error.get('evalue')}"


def _plain_traceback(lines: list[str]) -> str:
    """A cell's traceback as the kernel sent it, without its terminal colours."""
    return ANSI_CODES.sub("", "\n".join(lines or []))


def _describe(error: Exception, progress: Progress, kernel_exits: list[int]) -> str:
    """The reason a job failed, in the user's words; a cell's traceback goes to the log."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(error, PapermillExecutionError):
        print(_plain_traceback(error.traceback), flush=True)  # e31 logs shows where it failed
        return raised(progress.cells, error.cell_index, error.ename, error.evalue)
    name = type(error).__name__
    if name == "DeadKernelError":
        return _kernel_died(progress, kernel_exits[0] if kernel_exits else None)
    if name == "NoSuchKernel":
        return f"unknown kernel: {error}"
    return f"{name}: {error}"


def _kernel_died(progress: Progress, status: int | None) -> str:
    """Where the kernel died and how: "kernel died in cell 2 of 3 ('x = f()'): killed by SIGKILL,
    ...", "kernel died in the cell: ..." (a ``%%e31`` cell's job)."""
    cell = progress.last_started
    where = f" {died_in(progress.cells, cell)}" if cell is not None else ""
    if status is None:
        return f"kernel died{where}"
    if status >= 0:
        return f"kernel died{where}: it exited with status {status}"
    try:
        killed = signal.Signals(-status).name
    except ValueError:
        killed = f"signal {-status}"
    if killed == "SIGKILL":
        killed += ", most often by the out-of-memory killer: the job needed more memory than it had"
    return f"kernel died{where}: killed by {killed}"


# papermill's and jupyter_client's own lines: which notebook, which cell starts and ends, a
# context it could not close. Progress and the executed notebook say all of it better.
LOG_BOILERPLATE = (
    "Input Notebook:", "Output Notebook:", "Working directory:", "Executing notebook with kernel:",
    "Executing Cell ", "Ending Cell ", "Could not destroy zmq context",
)  # fmt: skip


class _Printed(logging.Formatter):
    """A printed line as it was printed: papermill logs a stream's text, newline included, and
    the handler would add a second one (a blank line after every printed line)."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        return text[:-1] if text.endswith("\n") else text


def log_what_cells_print() -> None:
    """The job's log: what its cells print, which papermill logs at INFO, and nothing of papermill's own."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Printed())
    handler.addFilter(lambda record: not record.getMessage().startswith(LOG_BOILERPLATE))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # First: a job is running from the moment it is handed over, and may be asked to suspend
    # while a standby worker still imports (SIGUSR1's default would end the process).
    signal.signal(signal.SIGUSR1, _on_sigusr1)
    signal.signal(signal.SIGUSR2, _on_sigusr2)
    if argv == [STANDBY_FLAG]:
        argv = [wait_for_job()]
    if len(argv) != 1:
        print(f"usage: python -m e31_jupyter.execution.worker JOBDIR|{STANDBY_FLAG}", file=sys.stderr)
        return 2
    skip_iri_parsers()  # before papermill imports jsonschema: ~2 s less per job
    signal.signal(signal.SIGTERM, _on_sigterm)
    log_what_cells_print()
    manifest = run(JobDir(argv[0]))
    print(f"e31 worker: {manifest['status']} {manifest['reason']}".rstrip(), flush=True)
    return 0 if manifest["status"] == JobState.SUCCEEDED else 1


if __name__ == "__main__":
    exit_code = main()
    # Papermill loads ~1000 modules; collecting them at exit takes ~0.4 s, and the job's GPUs
    # are only released once this process is gone. Freezing them lets the interpreter skip it.
    gc.freeze()
    sys.exit(exit_code)
