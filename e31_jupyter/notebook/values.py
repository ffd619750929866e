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
import hashlib
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

import cloudpickle

from e31_jupyter.core.errors import E31Error, InvalidRequest
from e31_jupyter.core.text import format_size
from e31_jupyter.execution import accounts
from e31_jupyter.execution.jobdir import JobDir

INDEX = "values.json"
DEFAULT_LIMIT_BYTES = 8 << 30


class CannotTravel(InvalidRequest):
    """A value that cannot be sent to (or back from) a job; the message says which and why."""


class NotTrusted(E31Error):
    """A value file (or its folder) that another user could have written: not loaded."""


# --- what a value is, the same in any kernel ------------------------------------------------------

DIGEST_MAX_BYTES = 256 << 20  # a larger array is not digested: hashing it would slow every submit
DIGEST_MAX_ITEMS = 50_000  # nor a value of more parts (list items, dict keys and values): ~0.1 s
_SCALARS = (int, float, complex, bool, type(None))


def digests(values: dict) -> dict[str, str]:
    """A digest of each value that is plain data (numbers, text, bytes, None, and lists, tuples,
    dicts and numpy arrays of them), equal for equal values in any kernel: how a cell run again
    tells whether what it reads changed since its earlier job. Other values (functions, objects,
    sets) get none: their pickles can differ between kernels for equal values."""
    found = {}
    for name, value in values.items():
        digest = hashlib.sha256()
        if _digest_into(digest, value, depth=0, budget=[DIGEST_MAX_ITEMS]):
            found[name] = digest.hexdigest()[:32]
    return found


def _digest_into(digest, value, depth: int, budget: list[int]) -> bool:
    """Feed ``value`` to ``digest``, each part tagged with its type; False when it is not plain
    data, or has more parts than ``budget`` (a one-item list, counted down) has left."""
    kind = type(value)
    budget[0] -= 1
    if depth > 32 or budget[0] < 0 or (kind in (list, tuple, dict) and len(value) > budget[0]):
        return False
    if kind in (str, bytes):
        raw = value.encode("utf-8", "surrogatepass") if kind is str else value
        digest.update(f"{kind.__name__}:{len(raw)}:".encode() + raw)
        return len(raw) <= DIGEST_MAX_BYTES
    if kind in _SCALARS:
        text = repr(value)
        digest.update(f"{kind.__name__}:{len(text)}:{text}".encode())
        return True
    if kind in (list, tuple):
        digest.update(f"{kind.__name__}:{len(value)}[".encode())
        return all(_digest_into(digest, item, depth + 1, budget) for item in value)
    if kind is dict:  # equal dicts built in another order are equal: items in a sorted order
        items = []
        for key, item in value.items():
            pair = hashlib.sha256()
            if not (_digest_into(pair, key, depth + 1, budget) and _digest_into(pair, item, depth + 1, budget)):
                return False
            items.append(pair.digest())
        digest.update(f"dict:{len(items)}{{".encode() + b"".join(sorted(items)))
        return True
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "dtype"):
        # a numpy scalar, np.float64(0.1): as the Python number it equals
        return _digest_into(digest, value.item(), depth + 1, budget) if not value.dtype.hasobject else False
    if _type_name(value) == "numpy.ndarray" and not value.dtype.hasobject and value.nbytes <= DIGEST_MAX_BYTES:
        digest.update(f"ndarray:{value.dtype.str}:{value.shape}:".encode())
        digest.update(value.tobytes() if not value.flags.c_contiguous else memoryview(value).cast("B"))
        return True
    return False


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


def save(values: dict, folder: Path, limit_bytes: int = DEFAULT_LIMIT_BYTES, returning: bool = False) -> dict:
    """Write each value to ``folder``; returns the index. Refuses (raises CannotTravel, naming
    the value) anything that cannot be pickled, and stops as soon as the total passes
    ``limit_bytes``. A job ``returning`` values leaves such a value out instead, and the index
    says why, in words for the way back."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    index: dict[str, dict[str, Any]] = {}
    total = 0
    for name, value in values.items():
        entry: dict[str, Any] = {"type": _type_name(value), "files": [], "size": 0}
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
            cloudpickle.dump(value, f, protocol=5, buffer_callback=write_buffer)
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


def load(folder: str | os.PathLike, leave_out: Collection[str] = ()) -> dict:
    """The values saved in ``folder`` but those named in ``leave_out``; the first that cannot be
    loaded raises (``restore`` goes on). A folder or file another user could have written raises
    NotTrusted before anything in it is unpickled."""
    with _Folder(Path(folder)) as trusted:
        index = trusted.index()
        chosen = (name for name, entry in index.items() if entry["files"] and name not in leave_out)
        return {name: _load_one(trusted, index[name]["files"]) for name in chosen}


def restore(folder: Path) -> tuple[dict, dict]:
    """Every value the folder holds, loaded here, modules imported again by name: ``({name:
    value}, {name: why not})``. One that cannot be loaded here (its class or module is missing
    from this kernel, or its file is not trusted) is named with the reason, and the others still
    come. A folder that is not trusted raises NotTrusted: nothing in it is loaded."""
    loaded, failed = {}, {}
    with _Folder(Path(folder)) as trusted:
        for name, entry in trusted.index().items():
            if entry.get("skipped"):
                continue
            try:
                module = entry.get("module")
                loaded[name] = importlib.import_module(module) if module else _load_one(trusted, entry["files"])
            except NotTrusted as error:
                failed[name] = f"not loaded, to keep this kernel safe: {error.message}"
            except Exception as error:  # unpickling, and a module's own import code, may raise anything
                failed[name] = _why_not_here(entry, error)
    return loaded, failed


def _why_not_here(entry: dict, error: Exception) -> str:
    what = f"{type(error).__name__}: {error}"
    if "module" in entry:
        return f"the job imported it as {entry['module']}, which this kernel cannot import ({what}); install it here"
    return (
        f"it is a {entry['type']}, and this kernel cannot load it ({what}): it lacks a package, module or "
        "class the job had. Install it here and collect again, or hand back plain data (numbers, lists, "
        "dicts, arrays)"
    )


def _load_one(folder: _Folder, files: list[str]):
    buffers = [_map(folder, file) for file in files[1:]]
    with os.fdopen(folder.open(files[0]), "rb") as f:
        return pickle.load(f, buffers=buffers)


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
        {"name": n, "type": v["type"], "size": v["size"], "skipped": v.get("skipped"), "module": v.get("module")}
        for n, v in index.items()
    ]


# --- inside a job: the cells that packaging.py writes around the user's cell call these ---


def _job_dir() -> JobDir:
    return JobDir(os.environ["E31_JOB_DIR"])


def load_inputs() -> dict:
    """The values captured from the submitting kernel, but for those the job's parameters set
    (``e31 resubmit JOB -p NAME VALUE``): papermill set them before this runs, and they win."""
    job = _job_dir()
    parameters = (job.read_json(job.spec) or {}).get("parameters") or {}
    return load(job.inputs, leave_out=parameters)


def save_outputs(namespace: dict, names: list[str]) -> None:
    """Hand back the cell's results (the modules it imported by name, to be imported again). A
    value that cannot travel back is left out, and the job's values list says why."""
    chosen = {n: namespace[n] for n in names if n in namespace}
    index = save(chosen, _job_dir().values, limit_bytes=1 << 62, returning=True)
    for name, entry in index.items():
        if "skipped" in entry:
            print(f"e31: {name} is not returned: {entry['skipped']}")
