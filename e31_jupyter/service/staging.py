"""A job's files between the submit request and its record.

What a job brings (data copied in, values a ``%%e31`` cell captured) is checked and copied into a
staging folder of the server that takes the submit; the queue records the job and then moves the
folder into place, so a job exists whole or not at all. ``Staging.finish_interrupted`` finishes what a server
killed in between left behind. ``body_again`` is the submit request that makes a stored job again.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import psutil

from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.core.job import JobSpec, server_path, string_list
from e31_jupyter.core.text import format_size
from e31_jupyter.execution import accounts
from e31_jupyter.execution.jobdir import JobDir, write_json_atomic
from e31_jupyter.notebook.values import INDEX as VALUES_INDEX

STAGING_PREFIX = ".staging-"
INBOX_AGE_S = 86400.0  # a capture this old in the inbox was never submitted


class Staging:
    """Staging folders in ``jobs_root``; captured values a kernel on this machine left in ``inbox``."""

    def __init__(self, jobs_root: Path, inbox: Path, per_user: bool = False):
        self.jobs_root = jobs_root
        self.inbox = inbox
        self.per_user = per_user  # a system scheduler's: each user hands over in a folder of their own

    def inbox_of(self, account: accounts.Account) -> Path:
        """Where ``account``'s kernels and server leave what they hand over: the inbox of a
        single-user server; under a system scheduler, a folder of that user's alone."""
        if not self.per_user:
            return self.inbox
        folder = self.inbox / str(account.uid)
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (0, account.uid):
            raise E31Error(f"The inbox {folder} is not {account.name}'s folder; ask the admin to remove it.", 503)
        os.chown(folder, account.uid, account.gid, follow_symlinks=False)
        return folder

    def check_handed_over(self, body: dict, account: accounts.Account) -> None:
        """A system scheduler reads no file for a caller: the notebook comes inline, and the data
        and captured values from the caller's own inbox folder, where only they could put them."""
        if "path" in body or "folder" in body:
            raise InvalidRequest(
                "This is the machine's system scheduler, which reads no file for you: send the notebook's "
                "content (notebook, notebook_name) instead of path and folder. Your Jupyter server and the "
                "e31 command do that for you."
            )
        inbox = self.inbox_of(account).resolve()
        data: list = body["data"] if isinstance(body.get("data"), list) else []
        for item in [*data, body.get("inputs") or None]:
            if isinstance(item, str) and not _inside(Path(item), inbox, account.uid):
                raise InvalidRequest(
                    f"{item!r} is not in your inbox ({inbox}). The system scheduler reads no file for you: "
                    "data and captured values are handed over there (your Jupyter server and the e31 command "
                    "do it for you)."
                )

    def folder(self, job_id: str) -> Path:
        """Where this server stages a job until it is recorded; the pid tells a later start
        whether the server that staged it is still alive."""
        return self.jobs_root / f"{STAGING_PREFIX}{os.getpid()}-{job_id}"

    def stage(self, job_id: str, spec: JobSpec, notebook, data: list[Path], inputs: Path | None) -> None:
        """Write the job's notebook and spec and copy in its data and captured values; on any
        failure leave nothing behind."""
        import nbformat

        staging = JobDir(self.folder(job_id))
        staging.path.mkdir(mode=0o700)  # the job's folder: its owner's alone
        staging.work.mkdir()
        try:
            nbformat.write(notebook, staging.input_notebook)
            for source in data:
                self._take(source, staging.work / source.name)
            if inputs is not None:
                self._take_inputs(inputs, staging.inputs)
            write_json_atomic(staging.spec, spec.to_dict())
        except OSError as error:
            shutil.rmtree(staging.path, ignore_errors=True)
            raise E31Error(
                f"Could not stage the job's files in {self.jobs_root}: {error.strerror or error}. "
                "Nothing was queued; free some space or fix the data directory and submit again.",
                status=507 if getattr(error, "errno", None) == 28 else 400,
            ) from None

    def _take_inputs(self, inputs: Path, target: Path) -> None:
        """Captured values become the job's (``_take``)."""
        self._take(inputs, target)

    def _take(self, source: Path, target: Path) -> None:
        """What was handed over becomes the job's: moved when a kernel or a user's server left it
        in the inbox (no copy of a large array), copied from anywhere else."""
        if Path(os.path.abspath(source)).is_relative_to(self.inbox.resolve()) and not source.is_symlink():
            os.rename(source, target)
        else:
            copy_in(source, target)

    def finish_interrupted(self, recorded: set[str], jobdir_of) -> None:
        """Finish what a server killed mid-submit left: a staged job that was recorded (its id
        in ``recorded``) moves into place (``jobdir_of(job_id)``); one that was not (nobody was
        told of it) is removed. Staging folders of servers still alive are theirs to finish."""
        for path in self.jobs_root.glob(f"{STAGING_PREFIX}*"):
            pid, _, job_id = path.name.removeprefix(STAGING_PREFIX).partition("-")
            if pid.isdigit() and int(pid) != os.getpid() and psutil.pid_exists(int(pid)):
                continue
            if job_id in recorded and not jobdir_of(job_id).path.exists():
                os.rename(path, jobdir_of(job_id).path)
            else:
                shutil.rmtree(path, ignore_errors=True)
        folders = [p for p in self.inbox.iterdir() if p.is_dir()] if self.per_user else [self.inbox]
        for path in (entry for folder in folders for entry in folder.iterdir()):  # never submitted
            if path.lstat().st_mtime >= time.time() - INBOX_AGE_S:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


def _inside(path: Path, folder: Path, uid: int) -> bool:
    """Whether ``path`` lies in ``folder`` (no link on the way) and belongs to ``uid``."""
    try:
        return (
            Path(os.path.abspath(path)).is_relative_to(folder)
            and path.resolve().is_relative_to(folder)
            and (os.lstat(path).st_uid == uid)
        )
    except OSError:
        return False


def data_paths(value, root_dir: Path, caller: str) -> list[Path]:
    """The data to copy into the job: files or folders that the server, and the ``caller`` (a
    user name) too, can read."""
    paths, names = [], set()
    account = _account_of(caller)
    for item in string_list(value, "data"):
        path = server_path(item, root_dir, "data")
        if not path.exists():
            raise InvalidRequest(f"data: nothing at {str(path)!r}.")
        _check_caller_may_read(path, caller, account, root_dir)
        if path.name in names:
            raise InvalidRequest(
                f"data: two inputs are named {path.name!r}; they would overwrite each other in "
                "the job's directory. Rename one, or put them in a folder."
            )
        names.add(path.name)
        paths.append(path)
    return paths


def _account_of(name: str) -> accounts.Account | None:
    """The Unix account called ``name`` (this server's own when it is its name), or None."""
    me = accounts.current()
    return me if name == me.name else accounts.by_name(name)


def _check_caller_may_read(path: Path, caller: str, account: accounts.Account | None, root_dir: Path) -> None:
    """Refuse data the caller could not read themselves (a link: its target too). A caller with no
    Unix account here may name only what lies under the server's root folder."""
    if account is None:
        if not path.resolve().is_relative_to(root_dir.resolve()):
            raise InvalidRequest(
                f"data: {str(path)!r} is outside the server's root folder ({root_dir}). {caller} has no "
                "Unix account on this machine, so e31 takes only paths under the server's root folder."
            )
        return
    hidden = next(_unreadable_by(account, path), None)
    if hidden is not None:
        where = "" if hidden == path else f" (in or behind {str(path)!r})"
        raise InvalidRequest(
            f"data: {caller} may not read {str(hidden)!r}{where}, and a job brings in only data its "
            f"submitter could read. Make it readable by {caller}, or name other data."
        )


def _unreadable_by(account: accounts.Account, path: Path):
    """What of ``path`` (and of its target, for a link) ``account`` could not read: for another
    account than the server's, every file and folder in a folder too, as the copy would take them."""
    target = path.resolve()
    for candidate in (target, path):
        if not accounts.can_read(account, candidate):
            yield candidate
    if account.uid == os.geteuid() or account.is_root or not target.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(target):
        for name in dirnames + filenames:
            inside = Path(dirpath, name)
            seen = inside.resolve() if inside.is_symlink() else inside  # a link: what the job would read
            if seen.exists() and not accounts.can_read(account, seen):
                yield inside


def inputs_path(value) -> Path | None:
    """The folder of captured values a ``%%e31`` cell hands the job, if any."""
    if value in (None, ""):
        return None
    path = Path(value) if isinstance(value, str) else None
    if path is None or not path.is_absolute() or not (path / VALUES_INDEX).is_file():
        raise InvalidRequest(
            "inputs must be the absolute path of a folder of captured values (with values.json), "
            f"as the %%e31 magic writes it; got {value!r}."
        )
    return path


def check_size(paths: list[Path], limit: int) -> None:
    """Refuse data that would copy more than ``limit`` bytes into the job."""
    size = 0
    for path in paths:
        size += _size_of(path, limit - size)
    if size > limit:
        raise E31Error(
            f"The job's data is {format_size(size)}, more than a job may bring in "
            f"({format_size(limit)}, c.E31.max_input_bytes). Read large "
            "data inside the job from where it lives instead of copying it in.",
            status=413,
        )


def body_again(jobdir: JobDir, spec: dict) -> dict:
    """The submit request that makes the job of ``spec`` again (without its deadline)."""
    request = spec["request"]
    body = {
        "notebook": _read_notebook(jobdir),
        "notebook_name": spec["notebook_name"],
        "parameters": spec.get("parameters") or {},
        "data": spec.get("data") or [],
        "gpus": request["gpus"],
        "name": spec["name"],
        "team": spec.get("team") or None,
        "outputs": spec.get("outputs") or [],
        "kernel": spec["kernel"],  # what it ran on, named with --kernel or by its notebook
        "checkpoint": spec.get("checkpoint", False),
        "on_timeout": spec.get("on_timeout", "fail"),
    }  # fmt: skip
    if spec.get("reports") is not None:
        body["reports"] = spec["reports"]
    if request.get("max_runtime_given"):
        body["max_runtime"] = request["max_runtime_s"]
    if request.get("expected_runtime_s") is not None:
        body["expected_runtime"] = request["expected_runtime_s"]
    if (jobdir.inputs / VALUES_INDEX).is_file():
        body["inputs"] = str(jobdir.inputs)  # a %%e31 cell's captured values, copied
    return body


def _read_notebook(jobdir: JobDir) -> dict:
    """The job's input notebook, read without following a link the job may have put there."""
    with jobdir.open_file(jobdir.input_notebook) as f:
        return json.loads(f.read().decode("utf-8"))


def _size_of(path: Path, limit: int) -> int:
    """Bytes that copying ``path`` would write (symlinks are copied as links), counted only
    until ``limit`` is passed; an unreadable folder is the user's to fix."""
    if not path.is_dir():
        return path.lstat().st_size
    total = 0
    for dirpath, _, filenames in os.walk(path, onerror=_unreadable):
        for name in filenames:
            total += os.lstat(os.path.join(dirpath, name)).st_size
            if total > limit:
                return total
    return total


def _unreadable(error: OSError) -> None:
    raise InvalidRequest(f"data: cannot read {error.filename!r} ({error.strerror}).")


def copy_in(source: Path, target: Path) -> None:
    """Copy a file, or a folder with its links as links, to ``target``."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target)
