"""Python values that travel between a kernel and a job: captured inputs, returned outputs.

Each value is one cloudpickle stream (``NAME.pkl``) with pickle protocol 5: the large buffers of
numpy arrays (and of pandas objects, which hold numpy arrays) are handed out of band and written
straight from memory to their own files (``NAME.N.buf``), so a 1 GB array is never copied into a
1 GB pickle. Loading maps the buffer files back in. A module is not pickled: its name is noted, and
it is imported again where the values are loaded. ``values.json`` lists what the folder holds.

Unpickling runs code, so nothing is loaded that another user could have written: the folder and
every file in it must belong to this process's user (or to root, the system scheduler) and be
writable by nobody else, and no file may be a link. Each is checked on the opened file itself
(fstat), so it cannot be swapped between the check and the read.
"""

from __future__ import annotations

import errno
import importlib
import io
import json
import mmap
import os
import pickle
import stat
from collections.abc import Collection
from pathlib import Path
from types import ModuleType
from typing import Any

from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.core.text import format_size
from e31_jupyter.execution import accounts
from e31_jupyter.notebook.pickling import ValuesPickler, ValuesUnpickler

INDEX = "values.json"
DEFAULT_LIMIT_BYTES = 8 << 30


class CannotTravel(InvalidRequest):
    """A value that cannot be sent to (or back from) a job; the message says which and why."""


class NotTrusted(E31Error):
    """A value file (or its folder) that another user could have written: not loaded."""


def _type_name(value) -> str:
    cls = type(value)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _refuse_known_travellers(name: str, value, returning: bool) -> None:
    """Values that would pickle, but would be wrong on the other side."""
    what = f"{name} ({_type_name(value)})"
    if isinstance(value, io.IOBase):  # cloudpickle would send a copy of a file's contents
        raise CannotTravel(
            f"{what} is an open file of the job's kernel and cannot be handed back. Write what "
            "you need to a file in the job's folder (files come back), and name the values to "
            "return with --out."
            if returning
            else f"{what} is an open file of this kernel and cannot be sent to the job. Open it "
            f"inside the cell (add the file with --data PATH), or leave it out with --in=-{name}."
        )
    device = getattr(value, "device", None)
    if getattr(device, "type", None) == "cuda" or getattr(value, "is_cuda", False) is True:
        raise CannotTravel(
            f"{what} lives on a GPU of the job and is not handed back (the kernel that collects "
            f"it may have no GPU). End the cell with a CPU copy: {name} = {name}.cpu()."
            if returning
            else f"{what} lives on a GPU of this kernel and cannot be moved into the job. Create "
            f"it inside the cell, or pass a CPU copy ({name}.cpu()) with --in."
        )


def _cannot_pickle(name: str, value, error: Exception, returning: bool) -> CannotTravel:
    what = f"{name} ({_type_name(value)})"
    if returning:
        return CannotTravel(
            f"{what} cannot be handed back from the job: {error}. Locks, open files, sockets, "
            "generators and live connections exist only in the job's kernel: return what they "
            "hold (plain data, or a file the job writes), or name the values to return with --out."
        )
    return CannotTravel(
        f"{what} cannot be sent to the job: {error}. Create it inside the cell instead (open "
        "files, locks, sockets, generators and live connections only exist in this kernel), or "
        f"leave it out with --in=-{name}."
    )


def save(
    values: dict,
    folder: Path,
    limit_bytes: int = DEFAULT_LIMIT_BYTES,
    returning: bool = False,
    reasons: dict[str, str] | None = None,
) -> dict:
    """Write each value to ``folder``; returns the index. Refuses (raises CannotTravel, naming
    the value) anything that cannot be pickled, and stops as soon as the total passes
    ``limit_bytes``. A job ``returning`` values leaves such a value out instead, and the index
    says why, in words for the way back; ``reasons`` says, by name, why each value goes back."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    index: dict[str, dict[str, Any]] = {}
    total = 0
    for name, value in values.items():
        entry: dict[str, Any] = {"type": _type_name(value), "files": [], "size": 0}
        if reasons and name in reasons:
            entry["why"] = reasons[name]
        if isinstance(value, ModuleType):
            entry["module"] = value.__name__  # nothing to write: imported again by its name
            index[name] = entry
            continue
        try:
            _refuse_known_travellers(name, value, returning)
            entry["files"], entry["size"] = _save_one(name, value, folder, limit_bytes - total, returning)
        except CannotTravel as error:
            if not returning:
                raise
            entry["skipped"] = error.message
            for stale in folder.glob(f"{name}.*"):
                stale.unlink()
        total += entry["size"]
        index[name] = entry
    with _create(folder / INDEX) as f:
        f.write(json.dumps(index, indent=1).encode())
    return index


def _create(path: Path):
    """``path`` opened for writing, readable and writable by this user only (whatever the umask),
    never through a link: what a later ``load`` accepts."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)  # a file that was there already
    return os.fdopen(fd, "wb")


def _save_one(name: str, value, folder: Path, room: int, returning: bool) -> tuple[list[str], int]:
    files: list[str] = []
    written = 0

    def write_buffer(buffer: pickle.PickleBuffer) -> bool:
        nonlocal written
        with buffer.raw() as view:
            written += view.nbytes
            _check_room(name, value, written, room)
            file = f"{name}.{len(files)}.buf"
            with _create(folder / file) as f:
                _reserve(f, view.nbytes)
                f.write(view)
        files.append(file)
        return False  # out of band: not in the pickle stream

    stream = folder / f"{name}.pkl"
    try:
        with _create(stream) as f:
            ValuesPickler(f, protocol=5, buffer_callback=write_buffer).dump(value)
    except CannotTravel:
        raise
    except Exception as error:  # pickle raises TypeError, PicklingError, AttributeError, ...
        raise _cannot_pickle(name, value, error, returning) from None
    written += stream.stat().st_size
    _check_room(name, value, written, room)
    return [stream.name, *files], written


def _reserve(f, size: int) -> None:
    """Reserve a large file's blocks up front, as numpy.save does: a plain write makes ext4
    allocate them page by page, about 40% slower for a 1 GB array."""
    if size >= 16 << 20:
        try:
            os.posix_fallocate(f.fileno(), 0, size)
        except OSError:  # a filesystem without fallocate: just write
            pass


def _check_room(name: str, value, written: int, room: int) -> None:
    if written > room:
        raise CannotTravel(
            f"{name} ({_type_name(value)}) makes the capture larger than the limit "
            f"({format_size(written)} so far, at most {format_size(max(room, 0))} left of the limit). Load the "
            "data inside the cell from a file (--data PATH), or raise the limit "
            "(c.E31Magics.max_capture_bytes)."
        )


def load(folder: str | os.PathLike, leave_out: Collection[str] = (), functions_in: dict | None = None) -> dict:
    """The values saved in ``folder`` but those named in ``leave_out``; the first that cannot be
    loaded raises (``restore`` goes on). A folder or file another user could have written raises
    NotTrusted before anything in it is unpickled. The notebook's functions among them get
    ``functions_in`` as their globals (a job's namespace), if given."""
    with _Folder(Path(folder)) as trusted:
        index = trusted.index()
        chosen = (name for name, entry in index.items() if entry["files"] and name not in leave_out)
        return {name: _load_one(trusted, index[name]["files"], functions_in=functions_in) for name in chosen}


def restore(folder: Path, classes_from: dict | None = None) -> tuple[dict, dict, dict]:
    """Every value the folder holds, loaded here, modules imported again by name: ``({name:
    value}, {name: why not}, {class name: [attributes that differ]})``. One that cannot be loaded
    here (its class or module is missing from this kernel, or its file is not trusted) is named
    with the reason, and the others still come. A folder that is not trusted raises NotTrusted:
    nothing in it is loaded. An instance of a class the notebook defined is made an instance of
    the class of that name in ``classes_from`` (the collecting kernel's namespace), if it has one;
    the third part names what the two definitions differ in."""
    loaded, failed = {}, {}
    differences: dict[str, list[str]] = {}
    with _Folder(Path(folder)) as trusted:
        for name, entry in trusted.index().items():
            if entry.get("skipped"):
                continue
            try:
                module = entry.get("module")
                loaded[name] = (
                    importlib.import_module(module)
                    if module
                    else _load_one(trusted, entry["files"], classes_from=classes_from, differences=differences)
                )
            except NotTrusted as error:
                failed[name] = f"not loaded, to keep this kernel safe: {error.message}"
            except Exception as error:  # unpickling, and a module's own import code, may raise anything
                failed[name] = _why_not_here(entry, error)
    return loaded, failed, differences


def _why_not_here(entry: dict, error: Exception) -> str:
    what = f"{type(error).__name__}: {error}"
    if "module" in entry:
        return f"the job imported it as {entry['module']}, which this kernel cannot import ({what}); install it here"
    return (
        f"it is a {entry['type']}, and this kernel cannot load it ({what}): it lacks a package, module or "
        "class the job had. Install it here and collect again, or hand back plain data (numbers, lists, "
        "dicts, arrays)"
    )


def _load_one(folder: _Folder, files: list[str], differences: dict | None = None, **namespaces):
    buffers = [_map(folder, file) for file in files[1:]]
    with os.fdopen(folder.open(files[0]), "rb") as f:
        reader = ValuesUnpickler(f, buffers, **namespaces)
        value = reader.load()
    if differences is not None:
        differences.update(reader.differences)
    return value


def _map(folder: _Folder, file: str):
    """A buffer file mapped copy-on-write: no read into memory, and the loaded array is writable."""
    fd = folder.open(file)
    try:
        size = os.fstat(fd).st_size
        return mmap.mmap(fd, size, access=mmap.ACCESS_COPY) if size else bytearray()
    finally:
        os.close(fd)


def read_index(folder: Path) -> dict:
    """What ``folder`` holds (its values.json), {} when it holds nothing; refuses (NotTrusted) a
    folder or index another user could have written."""
    try:
        with _Folder(Path(folder)) as trusted:
            return trusted.index()
    except FileNotFoundError:
        return {}


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` as ``save`` writes a value's files (this user's only, never
    through a link), so that ``read_trusted`` accepts it: for files kept beside values, such as
    a checkpoint's (``checkpoint.py``)."""
    with _create(path) as f:
        f.write(data)


def read_trusted(folder: str | os.PathLike, name: str) -> bytes:
    """The file ``name`` of ``folder``, read with ``load``'s checks (NotTrusted when the folder or
    the file is another user's, writable by others, or a link): what decides which values to
    unpickle must be as safe as the values."""
    with _Folder(Path(folder)) as trusted, os.fdopen(trusted.open(name), "rb") as f:
        return f.read()


class _Folder:
    """A folder of values, open and checked (its owner and mode, on the open folder itself), whose
    files are opened relative to it and checked the same way, following no link."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            _check_trusted(os.fstat(self.fd), path, "the folder")
        except BaseException:
            os.close(self.fd)
            raise

    def __enter__(self) -> _Folder:
        return self

    def __exit__(self, *_) -> None:
        os.close(self.fd)

    def index(self) -> dict:
        try:
            with os.fdopen(self.open(INDEX), "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return {}

    def open(self, name: str) -> int:
        """The file ``name`` of the folder, opened for reading: a link, a path out of the folder or a
        file another user could have written is refused."""
        path = self.path / name
        if name in ("", ".", "..") or os.sep in name:
            raise NotTrusted(
                f"e31 will not load {path}: a value's files are named by the folder's index, never a path out of it."
            )
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self.fd)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise NotTrusted(
                    f"e31 will not load {path}: it is a link, and e31 loads only files written in the "
                    "folder itself. Collect the job again into a new folder."
                ) from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise NotTrusted(f"e31 will not load {path}: it is not a regular file.")
            _check_trusted(info, path, "the file")
        except BaseException:
            os.close(fd)
            raise
        os.set_blocking(fd, True)
        return fd


def _check_trusted(info: os.stat_result, path: Path, what: str) -> None:
    """Refuse (NotTrusted) what someone other than this user or root owns, or may write."""
    me = accounts.current()
    if info.st_uid not in (me.uid, 0):
        raise NotTrusted(
            f"e31 will not load {path}: {what} belongs to {accounts.by_uid(info.st_uid).name}, not to you "
            f"({me.name}) or the e31 scheduler (root), and unpickling what another user wrote runs their "
            "code here. Collect the job again into a folder of your own (%e31 collect, or e31 collect), "
            "or load only what you have checked yourself."
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = {stat.S_IWGRP: "its group", stat.S_IWOTH: "others"}.get(
            info.st_mode & (stat.S_IWGRP | stat.S_IWOTH), "its group and others"
        )
        raise NotTrusted(
            f"e31 will not load {path}: {what} is writable by {who} ({stat.filemode(info.st_mode)}), so "
            "another user could have put their own values there, and unpickling them runs their code "
            f"here. Collect the job again into a folder of your own, or, if only you could have "
            f"written it, make it private: chmod go-w {path}."
        )


def files(index: dict) -> list[str]:
    """Every file a copy of the folder needs: the index and what the values are made of."""
    return [INDEX, *(file for entry in index.values() for file in entry["files"])] if index else []


def describe(index: dict) -> list[dict]:
    """The index as the API shows it: name, type and size of each value; for a module, its name."""
    return [
        {
            "name": n, "type": v["type"], "size": v["size"], "skipped": v.get("skipped"), "module": v.get("module"),
            "why": v.get("why"),
        }
        for n, v in index.items()
    ]  # fmt: skip
