"""What a job hands back: collected files, the executed notebook and its reports.

Files are collected in place (in the job's working directory) and listed in the manifest;
only listed files are ever served, and only when they resolve inside the job directory.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path, PurePosixPath

from .errors import NotFound
from .jobdir import JobDir


def snapshot(work: Path) -> dict[str, list[int]]:
    """Every regular file under ``work`` with its size and modification time."""
    files = {}
    for path in _regular_files(work):
        stat = path.stat()
        files[path.relative_to(work).as_posix()] = [stat.st_size, stat.st_mtime_ns]
    return files


def collect_files(work: Path, baseline: dict, globs: list[str], quota: int) -> tuple[list[dict], list[dict]]:
    """The files to hand back: those matching ``globs``, or by default every file the job
    created or changed; symbolic links never. Returns (collected, left out): files past the
    ``quota`` of bytes are left out, the smallest kept first so that as many as possible fit."""
    now = snapshot(work)
    if globs:
        chosen = [p for p in now if any(fnmatch.fnmatch(p, g) for g in globs)]
    else:
        chosen = [p for p, sig in now.items() if baseline.get(p) != sig]
    kept, left_out, total = [], [], 0
    for path in sorted(chosen, key=lambda p: (now[p][0], p)):
        entry = {"path": path, "size": now[path][0]}
        fits = total + entry["size"] <= quota
        (kept if fits else left_out).append(entry)
        total += entry["size"] if fits else 0
    return sorted(kept, key=lambda f: f["path"]), sorted(left_out, key=lambda f: f["path"])


def _regular_files(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                yield path


def write_reports(jobdir: JobDir, formats: list[str]) -> dict[str, str]:
    """Render the executed notebook into each report format; returns format -> file name."""
    if not jobdir.executed_notebook.exists():
        return {}
    written = {}
    if "html" in formats:
        from nbconvert import HTMLExporter

        body, _ = HTMLExporter().from_filename(str(jobdir.executed_notebook))
        jobdir.report.write_text(body, encoding="utf-8")
        written["html"] = jobdir.report.name
    return written


def collected_file(jobdir: JobDir, manifest: dict | None, relpath: str) -> Path:
    """The path of a collected file, refusing anything that is not listed in the manifest or
    that names a place outside the job's working directory (``..``, absolute paths). Open it
    with ``JobDir.open_file``, which follows no link (a listed file the job swapped for one)."""
    listed = {f["path"] for f in (manifest or {}).get("files", [])}
    if relpath not in listed:
        raise NotFound(f"No collected file {relpath!r} in this job. List them with GET .../files.")
    parts = PurePosixPath(relpath).parts
    if not parts or parts[0] == "/" or ".." in parts:
        raise NotFound(f"No collected file {relpath!r} in this job.")
    return jobdir.work.joinpath(*parts)
