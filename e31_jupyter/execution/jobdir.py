"""The files of one job: where the server stages a job and where its worker writes.

Shared by the queue (which creates and reads them) and the worker (which writes them),
so neither needs to know the other.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from e31_jupyter.core.errors import Conflict, E31Error
from e31_jupyter.execution import accounts

CHECKPOINT_CURRENT = "CURRENT"  # the file in a job's checkpoint folder that names its current checkpoint
_NO_LINK = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK  # O_NONBLOCK: a FIFO the job made never blocks a read


class JobDir:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    spec = property(lambda self: self.path / "spec.json")
    input_notebook = property(lambda self: self.path / "input.ipynb")
    work = property(lambda self: self.path / "work")  # data snapshot, then the job's working dir
    executed_notebook = property(lambda self: self.path / "executed.ipynb")
    report = property(lambda self: self.path / "report.html")
    log = property(lambda self: self.path / "job.log")
    released = property(lambda self: self.path / "released.json")  # the kernel has ended: the GPUs are free
    progress = property(lambda self: self.path / "progress.json")
    manifest = property(lambda self: self.path / "manifest.json")
    baseline = property(lambda self: self.path / "baseline.json")  # the work dir before the run
    inputs = property(lambda self: self.path / "inputs")  # values captured from the kernel
    values = property(lambda self: self.path / "values")  # values the job hands back
    checkpoint = property(lambda self: self.path / "checkpoint")  # the kernel saved at a cell's end (--checkpoint)
    checkpoint_current = property(lambda self: self.checkpoint / CHECKPOINT_CURRENT)  # names the one to load
    resume_from = property(lambda self: self.path / "resume-from.ipynb")  # a resume's corrected notebook
    saved_objects = property(lambda self: self.checkpoint / "objects")  # e31_jupyter.job.checkpoint's, by name
    attempt = property(lambda self: self.path / "attempt.json")  # a resumed job's run: where its log began

    def values_index(self) -> dict:
        """The index of the values the job returned (values.json, as ``values.py`` writes it),
        read without following links; {} when it returned none."""
        return self.read_json(self.values / "values.json", {})

    def read_json(self, path: Path, default=None):
        """The JSON file ``path`` of the job (opened as ``open_file`` opens it), or ``default``
        when it is missing, not JSON, or not a file the job wrote (a link: the job's records are
        read as if it had written none, so a job cannot stop its own end from being recorded)."""
        try:
            with self.open_file(path) as f:
                return json.loads(f.read())
        except (FileNotFoundError, ValueError, Conflict):
            return default

    def open_file(self, path: Path):
        """Open ``path``, a file in the job's folder, for reading (binary), following no link on
        the way: each folder below the job's and the file itself are opened with O_NOFOLLOW, so a
        link the job made (to a host file, or out of its folder) is refused with Conflict, and so
        is anything that is not a regular file. A missing file raises FileNotFoundError; one the
        server may not read, an E31Error (503) saying what to change."""
        parts = self._parts(path)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except PermissionError:
            raise unreadable(self.path) from None
        try:
            for depth, part in enumerate(parts):
                last = depth == len(parts) - 1
                flags = _NO_LINK if last else _NO_LINK | os.O_DIRECTORY
                try:
                    child = os.open(part, flags, dir_fd=fd)
                except OSError as error:
                    raise self._refused(parts[: depth + 1], error) from None
                os.close(fd)
                fd = child
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise Conflict(
                    f"{'/'.join(parts)} of job {self.path.name} is not a regular file; "
                    "e31 serves only files the job wrote in its folder."
                )
            os.set_blocking(fd, True)
            file = os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise
        return file

    def _parts(self, path: Path) -> list[str]:
        """The components of ``path`` below the job's folder; a path out of it (``..``) is refused."""
        try:
            parts = Path(path).relative_to(self.path).parts
        except ValueError:
            parts = ()
        if not parts or ".." in parts:
            raise Conflict(f"{path} is not in the folder of job {self.path.name}; e31 serves only files in it.")
        return list(parts)

    def _refused(self, parts: list[str], error: OSError) -> Exception:
        """What opening the component ``parts[-1]`` (with O_NOFOLLOW) failing with ``error`` means."""
        name = "/".join(parts)
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(self.path.joinpath(*parts)):
            return Conflict(
                f"{name} of job {self.path.name} is a link; e31 serves only files the job wrote in its folder."
            )
        if error.errno == errno.ENOTDIR:
            return FileNotFoundError(errno.ENOENT, "not a folder", str(self.path.joinpath(*parts)))
        if isinstance(error, PermissionError):
            return unreadable(self.path.joinpath(*parts))
        return error

    def never_started(self) -> bool:
        """No trace of this run's worker: it writes progress.json first thing, and whatever it
        printed before that (a crash at start, say) is in job.log, after what earlier runs of a
        resumed job printed."""
        earlier = self.read_json(self.attempt, {}).get("log_bytes", 0)
        printed = self.log.exists() and self.log.stat().st_size > earlier
        return not self.progress.exists() and not printed

    def wait_for_worker(self, timeout: float) -> float:
        """Wait until this run's worker has begun (progress.json: its signal handlers are set,
        so a SIGUSR1 no longer ends it), at most ``timeout`` seconds; the seconds waited."""
        started = time.monotonic()
        while not self.progress.exists() and time.monotonic() - started < timeout:
            time.sleep(0.05)
        return time.monotonic() - started

    def start_again(self) -> None:
        """Make ready for another run of the job (resumed): what its last run recorded of its end
        and progress goes; its notebook, log, files, checkpoint and first snapshot stay."""
        for record in (self.manifest, self.released, self.progress):
            record.unlink(missing_ok=True)
        log_bytes = self.log.stat().st_size if self.log.exists() else 0
        write_json_atomic(self.attempt, {"log_bytes": log_bytes})

    def last_printed_line(self, tail: int = 4096) -> str | None:
        """The last line the job printed ("epoch 7/12"), from the end of its log; None before any."""
        try:
            with self.open_file(self.log) as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - tail))
                lines = log.read().decode(errors="replace").splitlines()
        except (OSError, Conflict, E31Error):
            return None
        printed = [line for line in lines if line.strip() and not line.startswith(("e31 worker:", "e31: "))]
        return printed[-1][:200] if printed else None

    def add_to_log(self, line: str) -> bool:
        """Append a line of the queue's to the job's log (an idle-GPU warning), opening no link
        the job made and only a regular file; whether it was written."""
        try:
            folder = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fd = os.open(self.log.name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except OSError:
            return False
        finally:
            os.close(folder)
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, f"{line}\n".encode())
                return True
            return False
        finally:
            os.close(fd)

    def size(self) -> int:
        """Bytes the job's files take (links counted as links)."""
        return sum(
            os.lstat(os.path.join(folder, name)).st_size for folder, _, names in os.walk(self.path) for name in names
        )

    def delete(self) -> list[str]:
        """Remove the job's folder, everything in it; what could not be removed, with why."""
        left: list[str] = []

        def keep(_, path: str, error) -> None:
            if not isinstance(error[1], FileNotFoundError):  # gone already: deleted before
                left.append(f"{path}: {error[1].strerror or error[1]}")

        shutil.rmtree(self.path, onerror=keep)
        return left

    def last_sign_of_life(self) -> float | None:
        """The newest modification time among the files the worker keeps writing."""
        times = [p.stat().st_mtime for p in (self.progress, self.log) if p.exists()]
        return max(times) if times else None


def unreadable(path: Path) -> E31Error:
    """The error for a file or folder of e31's data directory this process may not read."""
    try:
        info = os.stat(path)
        whose = f" (owned by {accounts.by_uid(info.st_uid).name}, mode {stat.filemode(info.st_mode)})"
    except OSError:
        whose = ""
    return E31Error(
        f"The e31 server (running as {accounts.current().name}) may not read {path}{whose}. Make it (and the folders "
        "above it) readable by the account the server runs as (chown or chmod), or run the server "
        "as the data directory's owner.",
        status=503,
    )


def write_json_atomic(path: Path, data) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    write_text_atomic(path, json.dumps(data))


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) beside ``path``, then put it in its place: a reader, or a process
    killed mid-write, finds the old file whole or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
