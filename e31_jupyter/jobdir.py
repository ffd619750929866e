"""The files of one job: where the server stages a job and where its worker writes.

Shared by the queue (which creates and reads them) and the worker (which writes them),
so neither needs to know the other.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path


class JobDir:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    spec = property(lambda self: self.path / "spec.json")
    input_notebook = property(lambda self: self.path / "input.ipynb")
    work = property(lambda self: self.path / "work")  # data snapshot, then the job's working dir
    executed_notebook = property(lambda self: self.path / "executed.ipynb")
    report = property(lambda self: self.path / "report.html")
    log = property(lambda self: self.path / "job.log")
    progress = property(lambda self: self.path / "progress.json")
    manifest = property(lambda self: self.path / "manifest.json")
    baseline = property(lambda self: self.path / "baseline.json")  # the work dir before the run
    inputs = property(lambda self: self.path / "inputs")  # values captured from the kernel
    values = property(lambda self: self.path / "values")  # values the job hands back

    def read_json(self, path: Path, default=None):
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return default

    def never_started(self) -> bool:
        """No trace of a worker: it writes baseline.json before anything else, and whatever it
        printed before that (a crash at start, say) is in job.log."""
        printed = self.log.exists() and self.log.stat().st_size > 0
        return not self.baseline.exists() and not printed

    def size(self) -> int:
        """Bytes the job's files take (links counted as links)."""
        return sum(
            os.lstat(os.path.join(folder, name)).st_size
            for folder, _, names in os.walk(self.path)
            for name in names
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
