"""What a job hands back: collected files, the executed notebook and its reports.

Files are collected in place (in the job's working directory) and listed in the manifest;
only listed files are ever served, and only when they resolve inside the job directory.
What goes wrong here, after the notebook has run, is a ``failure`` ({"step", "reason"}) of the
job's ``after_work_failures``: it is said, and never changes the job's state.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path, PurePosixPath

from e31_jupyter.core.errors import NotFound
from e31_jupyter.execution.jobdir import JobDir


def snapshot(work: Path, unreadable: list[str] | None = None) -> dict[str, list[int]]:
    """Every regular file under ``work`` with its size and modification time; the folders that
    cannot be listed go to ``unreadable``."""
    files = {}
    for path in _regular_files(work, unreadable):
        stat = path.stat()
        files[path.relative_to(work).as_posix()] = [stat.st_size, stat.st_mtime_ns]
    return files


def failure(step: str, reason: str) -> dict:
    """One step after the notebook (``report``, ``files``, ``values``) that went wrong, and why."""
    return {"step": step, "reason": reason}


def collect_files(
    work: Path, baseline: dict, globs: list[str], quota: int, unreadable: list[str] | None = None
) -> tuple[list[dict], list[dict]]:
    """The files to hand back: those matching ``globs``, or by default every file the job
    created or changed; symbolic links never. Returns (collected, left out): files past the
    ``quota`` of bytes are left out, the smallest kept first so that as many as possible fit.
    Files and folders the job's own user cannot read are not collected; ``unreadable`` gets
    them, with why ("results/a.csv: Permission denied")."""
    unreadable = [] if unreadable is None else unreadable
    now = snapshot(work, unreadable)
    if globs:
        chosen = [p for p in now if any(fnmatch.fnmatch(p, g) for g in globs)]
    else:
        chosen = [p for p, sig in now.items() if baseline.get(p) != sig]
    chosen = [p for p in chosen if _readable(work / p, p, unreadable)]
    kept: list[dict] = []
    left_out: list[dict] = []
    total = 0
    for path in sorted(chosen, key=lambda p: (now[p][0], p)):
        size = now[path][0]
        fits = total + size <= quota
        (kept if fits else left_out).append({"path": path, "size": size})
        total += size if fits else 0
    return sorted(kept, key=lambda f: f["path"]), sorted(left_out, key=lambda f: f["path"])


def _readable(path: Path, relpath: str, unreadable: list[str]) -> bool:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK))
        return True
    except OSError as error:
        unreadable.append(f"{relpath}: {error.strerror}")
        return False


def _regular_files(root: Path, unreadable: list[str] | None = None):
    def cannot_list(error: OSError) -> None:
        if unreadable is not None:
            where = Path(error.filename).relative_to(root).as_posix() if error.filename else "?"
            unreadable.append(f"{where}/: {error.strerror}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=cannot_list):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                yield path


def write_reports(
    jobdir: JobDir, formats: list[str], image: str = "", title: str = "notebook"
) -> tuple[dict[str, str], list[dict]]:
    """Render the executed notebook into each report format, ``title`` its name (the user's
    notebook's, not the job's file's). Returns (format -> file name, failures): a report that
    cannot be rendered is a failure that says why and what to add to ``image`` (the job's
    container image; "": this Python environment)."""
    if not jobdir.executed_notebook.exists():
        return {}, []
    written, failures = {}, []
    if "html" in formats:
        try:
            import nbformat
            from nbconvert import HTMLExporter

            notebook = nbformat.read(jobdir.executed_notebook, as_version=4)
            body, _ = HTMLExporter().from_notebook_node(notebook, resources={"metadata": {"name": title}})
            jobdir.report.write_text(body, encoding="utf-8")
            written["html"] = jobdir.report.name
        except Exception as error:  # whatever nbconvert raises, the notebook's work stands
            failures.append(failure("report", f"HTML report failed: {report_problem(error, image)}"))
    return written, failures


def report_problem(error: BaseException, image: str = "") -> str:
    """Why nbconvert could not render a report, and what to add to ``image`` (or to this
    environment) so that it can."""
    where = f"in the image {image!r}" if image else f"in this Python environment ({sys.prefix})"
    text = str(error)
    if isinstance(error, ImportError):
        return f"{text} {where}: add `pip install nbconvert` to it."
    if "No template sub-directory with name 'lab'" in text:
        return (
            f"nbconvert has no template 'lab' {where}: its templates must be under "
            f"{sys.prefix}/share/jupyter/nbconvert/templates. Install nbconvert into that Python with "
            "pip (`pip install --force-reinstall nbconvert`, not `pip install --target`)."
        )
    if type(error).__name__ == "SelectorSyntaxError":
        return (
            f"nbconvert's HTML export does not work with the soupsieve {where} ({text}): add "
            "`pip install 'soupsieve<2.6' 'beautifulsoup4<4.13'` to it, or use a newer Python."
        )
    return f"{type(error).__name__}: {text} ({where})"


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
