"""A job's kernel saved at a cell boundary, so that a job stopped (lost, suspended, out of time)
resumes from its last finished cell instead of from the top.

It runs inside the job's kernel and knows nothing of the server. A checkpoint is a folder of values
as ``values.py`` writes them, so its values travel as ``%%e31`` captures do: modules by name, the
notebook's functions and classes by value (cloudpickle), large arrays out of band, straight from
memory to their own files. On top of that:

- Only what changed is written. Each value's digest (``digest.py``) is kept with the checkpoint; a
  value whose digest is the one it had at the previous checkpoint is not written again: its files
  are hard links to the previous checkpoint's. A file is never written again once made (each save
  writes into a fresh folder), so the generations that share it cannot spoil each other.
- A save is atomic. It is written into a fresh ``.partial-*`` folder beside the others, renamed to
  ``gen-NNNNNN`` when whole, and made current by replacing the pointer file ``CURRENT`` (one
  ``os.replace``). A crash at any moment leaves the previous checkpoint current and whole; the
  older generations, and what a crashed save left, are removed once the new one is current. That
  holds for a process that dies; ``durable=True`` also survives the machine's crash (every file
  and folder is synced before the switch), at the cost of waiting for the disk.
- What cannot be saved (an open file, a lock, a socket, a generator, a live connection) is named,
  with why, in the result and in the checkpoint's record; the rest is saved.

Layout::

    FOLDER/CURRENT                      "gen-000007": the checkpoint to load
    FOLDER/gen-000007/values.json       the values' index, as values.save writes it
    FOLDER/gen-000007/checkpoint.json   after which cell, the digests, what could not be saved
    FOLDER/gen-000007/NAME.pkl, NAME.N.buf

One kernel saves into a folder at a time (a job's own folder). ``load`` reads what ``CURRENT``
names, with the checks of ``values.load``: nothing another user could have written is unpickled.

Values are pickled one by one (so that each can be kept or rewritten alone): two names for one
object come back as two equal objects, and a function pickles the globals it reads with it.

``CheckpointPolicy`` says when a checkpoint is worth taking: arithmetic on numbers the caller
measures (``estimate_bytes``, ``SaveResult``).
"""

from __future__ import annotations

import importlib
import io
import itertools
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from e31_jupyter.core.errors import E31Error
from e31_jupyter.execution.jobdir import CHECKPOINT_CURRENT
from e31_jupyter.notebook import values
from e31_jupyter.notebook.digest import digest
from e31_jupyter.notebook.pickling import ValuesPickler

CURRENT = CHECKPOINT_CURRENT
RECORD = "checkpoint.json"
FORMAT = 1
NO_LIMIT = 1 << 62
PARTIAL_PREFIX = ".partial-"
_GENERATION = re.compile(r"gen-(\d{6,})")

# IPython's own names (magics.HIDDEN's, which this layer may not import, and the rest of what a
# shell's user_ns_hidden holds), and its numbered history: _, __, _i, _ii, _i7, _7; and dunders.
IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit", "_ih", "_oh", "_dh", "_exit_code"})
_IPYTHON_PATTERN = re.compile(r"_+|_i+|_i?\d+|__\w+__")


@dataclass(frozen=True)
class SaveResult:
    """What one ``save`` did. ``total_bytes`` counts every value the checkpoint holds, written
    or reused: what ``CheckpointPolicy.record`` learns from."""

    generation: int
    after_cell: int
    saved: list[str]  # written anew
    reused: list[str]  # unchanged since the previous checkpoint: its files linked, not written
    cannot_save: dict[str, str]  # name -> why, in one line
    bytes_written: int
    total_bytes: int
    seconds: float


@dataclass(frozen=True)
class CheckpointInfo:
    """The current checkpoint of a folder, as its record says (nothing unpickled)."""

    path: Path
    generation: int
    after_cell: int
    saved_at: float  # time.time() when it was made current
    names: list[str]
    cannot_save: dict[str, str]
    total_bytes: int


def user_names(namespace: dict, leave_out: Collection[str] = ()) -> list[str]:
    """The names a checkpoint saves: the user's, in the namespace's order. IPython's own (In, Out,
    _, _i3, _5, get_ipython, ...), dunder names and ``leave_out`` (a shell's ``user_ns_hidden``,
    say) are not: a resumed kernel has its own. Unlike the inputs ``%%e31`` captures, a user's
    name with one leading underscore (``_cache``) is kept: the rest of the notebook may read it."""
    return [
        name
        for name in namespace
        if name not in IPYTHON_NAMES and name not in leave_out and not _IPYTHON_PATTERN.fullmatch(name)
    ]


# --- saving ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Previous:
    """The current checkpoint, as a save reuses it: its folder, index and digests."""

    path: Path
    index: dict
    digests: dict


@dataclass
class _Written:
    """What a save has put in its partial folder so far."""

    index: dict = field(default_factory=dict)
    saved: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    cannot_save: dict[str, str] = field(default_factory=dict)
    bytes_written: int = 0


def save(
    folder: str | os.PathLike,
    namespace: dict,
    after_cell: int,
    *,
    leave_out: Collection[str] = (),
    limit_bytes: int = NO_LIMIT,
    durable: bool = False,
) -> SaveResult:
    """Checkpoint the user's values of ``namespace`` (``user_names``), taken after the notebook's
    cell ``after_cell``, into ``folder``, and make it the current checkpoint. A value unchanged
    since the previous checkpoint is linked, not written; one that cannot be saved, or that would
    take the bytes written past ``limit_bytes``, is named in ``cannot_save``. If the save fails
    (or the process dies) half way, the previous checkpoint stays current and whole."""
    started = time.perf_counter()
    root = Path(folder)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    previous = _previous(root)
    chosen = {name: namespace[name] for name in user_names(namespace, leave_out)}
    partial = Path(tempfile.mkdtemp(prefix=PARTIAL_PREFIX, dir=root))
    try:
        written, digests = _write(partial, chosen, previous, limit_bytes)
        generation = _next_generation(root)
        record = _record(after_cell, written, digests)
        values.write_private(partial / values.INDEX, json.dumps(written.index, indent=1).encode())
        values.write_private(partial / RECORD, json.dumps(record, indent=1).encode())
        current = _make_current(root, partial, _generation_name(generation), durable)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    _remove_all_but(root, current)
    return SaveResult(
        generation=generation,
        after_cell=after_cell,
        saved=written.saved,
        reused=written.reused,
        cannot_save=written.cannot_save,
        bytes_written=written.bytes_written,
        total_bytes=record["total_bytes"],
        seconds=time.perf_counter() - started,
    )


def _write(partial: Path, chosen: dict, previous: _Previous | None, limit_bytes: int) -> tuple[_Written, dict]:
    """Each value written into ``partial``, or linked from ``previous`` when its digest is the
    same. Digests are made on a thread of their own, a value or more ahead of the writing: a value
    the previous checkpoint lacks is written without waiting for its digest, so a first save hashes
    and writes at once (hashlib and file writes let go of the GIL)."""
    written = _Written()
    digester = ThreadPoolExecutor(max_workers=1, thread_name_prefix="e31-checkpoint-digest")
    try:
        pending = {name: digester.submit(_digest_of, value) for name, value in chosen.items()}
        for name, value in chosen.items():
            _write_one(partial, name, value, pending[name], previous, limit_bytes, written)
        digests = {name: pending[name].result() for name in written.index}
    finally:
        digester.shutdown(wait=True, cancel_futures=True)
    return written, digests


def _digest_of(value) -> str | None:
    if isinstance(value, ModuleType):  # imported again by name: the name is all there is to compare
        return f"module:{value.__name__}"
    return digest(value)


def _write_one(
    partial: Path, name: str, value, digest_now: Future, previous: _Previous | None, limit_bytes: int, out: _Written
) -> None:
    if not name.isidentifier():  # its files' names could collide with another value's
        out.cannot_save[name] = "not a Python identifier (set through globals()): rename it to save it"
        return
    before = previous.digests.get(name) if previous and name in previous.index else None
    if before is not None and digest_now.result() == before:
        assert previous is not None
        if _link(previous.path, partial, previous.index[name]["files"]):
            out.index[name] = previous.index[name]
            out.reused.append(name)
            return
    room = limit_bytes - out.bytes_written
    entry = values.save({name: value}, partial, limit_bytes=room, returning=True)[name]
    if "skipped" in entry:
        out.cannot_save[name] = _why_not_saved(value, entry["skipped"])
        return
    out.index[name] = entry
    out.saved.append(name)
    out.bytes_written += entry["size"]


def _link(source: Path, target: Path, files: list[str]) -> bool:
    """Hard links in ``target`` to the ``files`` of ``source``; False (and none made) when the
    filesystem will not: the value is then written again."""
    made = []
    try:
        for file in files:
            os.link(source / file, target / file, follow_symlinks=False)
            made.append(file)
    except OSError:
        for file in made:
            (target / file).unlink(missing_ok=True)
        return False
    return True


def _why_not_saved(value, skipped: str) -> str:
    """One line: why ``value`` is not in the checkpoint (``skipped`` is values.save's message)."""
    kind = type(value).__name__
    if isinstance(value, io.IOBase):
        return f"an open file ({kind}): it cannot be saved; open it again after resuming"
    error = _pickling_error(value)
    if error is not None:
        return f"a {kind}, which does not pickle ({error}): make it again after resuming"
    return " ".join(skipped.split(". ")[0].split())


def _pickling_error(value) -> str | None:
    """Why ``value`` does not pickle as values travel, in one line; None when it does."""
    with open(os.devnull, "wb") as sink:
        try:
            ValuesPickler(sink, protocol=5, buffer_callback=lambda _: False).dump(value)
        except Exception as error:  # pickling raises TypeError, PicklingError, AttributeError, ...
            return " ".join(str(error).split()) or type(error).__name__
    return None


def _record(after_cell: int, written: _Written, digests: dict) -> dict:
    return {
        "format": FORMAT,
        "after_cell": after_cell,
        "saved_at": time.time(),
        "names": list(written.index),
        "digests": digests,
        "cannot_save": written.cannot_save,
        "bytes_written": written.bytes_written,
        "total_bytes": sum(entry["size"] for entry in written.index.values()),
    }


def _make_current(root: Path, partial: Path, name: str, durable: bool) -> str:
    """``partial`` renamed to ``name``, then ``CURRENT`` pointed at it: the one step that switches."""
    if durable:
        _sync_all(partial)
    os.rename(partial, root / name)
    pointer = root / f"{CURRENT}.new"
    values.write_private(pointer, f"{name}\n".encode())
    if durable:
        _sync(pointer)
        _sync(root)
    os.replace(pointer, root / CURRENT)
    if durable:
        _sync(root)
    return name


def _sync_all(folder: Path) -> None:
    for file in folder.iterdir():
        _sync(file)
    _sync(folder)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _next_generation(root: Path) -> int:
    """One more than any generation in the folder, current or left by a crash after its rename."""
    numbers = [int(m.group(1)) for m in map(_GENERATION.fullmatch, os.listdir(root)) if m]
    return max(numbers, default=0) + 1


def _generation_name(number: int) -> str:
    return f"gen-{number:06d}"


def _remove_all_but(root: Path, current: str) -> None:
    """The generations before ``current``, and what crashed saves left: no longer needed."""
    for entry in os.listdir(root):
        if (_GENERATION.fullmatch(entry) and entry != current) or entry.startswith(PARTIAL_PREFIX):
            shutil.rmtree(root / entry, ignore_errors=True)


def _previous(root: Path) -> _Previous | None:
    """The current checkpoint, for its unchanged values to be reused; None when there is none or
    it cannot be trusted or read (then every value is written again, and it is removed after)."""
    try:
        current = _current(root)
        if current is None:
            return None
        path, _, record = current
        return _Previous(path, values.read_index(path), record["digests"])
    except (E31Error, OSError, ValueError, KeyError):
        return None


# --- loading ---------------------------------------------------------------------------------------


def read_info(folder: str | os.PathLike) -> CheckpointInfo | None:
    """The folder's current checkpoint, as its record says; None when the folder has none (no
    folder, or nothing made current yet). Raises E31Error for a folder that is not one e31 wrote,
    and NotTrusted for what another user could have written."""
    current = _current(Path(folder))
    if current is None:
        return None
    path, generation, record = current
    return CheckpointInfo(
        path=path,
        generation=generation,
        after_cell=record["after_cell"],
        saved_at=record["saved_at"],
        names=record["names"],
        cannot_save=record["cannot_save"],
        total_bytes=record["total_bytes"],
    )


def _current(root: Path) -> tuple[Path, int, dict] | None:
    """The current generation's folder, number and record; None when there is none."""
    try:
        name = values.read_trusted(root, CURRENT).decode(errors="replace").strip()
    except FileNotFoundError:
        return None
    found = _GENERATION.fullmatch(name)
    if not found:
        raise E31Error(f"{root / CURRENT} names {name!r}, not a checkpoint: this folder was not written by e31.")
    return root / name, int(found.group(1)), _read_record(root / name)


def _read_record(path: Path) -> dict:
    try:
        record = json.loads(values.read_trusted(path, RECORD))
    except FileNotFoundError:
        raise E31Error(f"The current checkpoint {path} is missing or incomplete: it cannot be loaded.") from None
    if record.get("format") != FORMAT:
        raise E31Error(f"The checkpoint {path} has format {record.get('format')!r}: this e31 reads format {FORMAT}.")
    return record


def load(folder: str | os.PathLike, namespace: dict | None = None) -> tuple[dict, int, CheckpointInfo] | None:
    """The current checkpoint of ``folder``: ``(namespace, after_cell, info)``, or None when it has
    none (a job that has not saved one starts from the top). The values are put into
    ``namespace`` (a kernel's ``user_ns``; a new dict if not given), which the notebook's
    functions among them get as their globals, as they had the saving kernel's; modules are
    imported again by name. Checked as ``values.load`` checks: NotTrusted, with nothing
    unpickled, for a folder or file another user could have written; and as there, the first value
    that cannot be loaded here (a package missing) raises. Not while a save into the same folder
    is going on: it removes the generation this reads."""
    info = read_info(folder)
    if info is None:
        return None
    namespace = {} if namespace is None else namespace
    loaded = values.load(info.path, functions_in=namespace)
    for name, entry in values.read_index(info.path).items():
        if entry.get("module"):
            loaded[name] = importlib.import_module(entry["module"])
    namespace.update((name, loaded[name]) for name in info.names if name in loaded)
    return namespace, info.after_cell, info


# --- when to save ----------------------------------------------------------------------------------

LEARN_THROUGHPUT_FROM_BYTES = 16 << 20  # a smaller save measures its fixed cost, not the throughput


@dataclass(frozen=True)
class Decision:
    save: bool
    expected_seconds: float
    why: str


@dataclass
class CheckpointPolicy:
    """When a checkpoint is worth its cost, at a cell boundary: arithmetic only, no clock, no I/O.

    A checkpoint is taken when its expected cost is at most ``max_share`` of the run time since
    the last one (or at most ``always_within_seconds``: a small namespace is saved after every
    cell, however short), and the namespace is at most ``max_bytes``. The expected cost is
    ``overhead_seconds + bytes / bytes_per_second``, both learnt from the saves ``record``ed (each
    new measure weighs ``learning_rate``). So a small namespace is saved after every cell, and a
    large one once the cells since the last save have run long enough to pay for it: past the
    small saves, no more than 5% of the run goes to checkpoints.

    The first checkpoint goes by the same rule, with the run time since the job started and the
    assumed ``bytes_per_second`` (200 MB/s: a few times slower than a checkpoint to a local disk on
    2 cores, so that a slow or network disk is not underestimated by much). The first measure
    then replaces the assumption outright.
    """

    max_share: float = 0.05
    max_bytes: int = 64 << 30
    bytes_per_second: float = 200e6
    overhead_seconds: float = 0.01
    always_within_seconds: float = 0.02  # a save expected to take less is taken after any cell
    learning_rate: float = 0.5
    throughput_measures: int = 0
    overhead_measures: int = 0

    def expected_seconds(self, namespace_bytes: int) -> float:
        return self.overhead_seconds + namespace_bytes / self.bytes_per_second

    def decide(self, namespace_bytes: int, seconds_since_save: float) -> Decision:
        """Whether to checkpoint now, a namespace of about ``namespace_bytes`` (``estimate_bytes``),
        ``seconds_since_save`` after the last checkpoint (after the job started, for the first)."""
        expected = self.expected_seconds(namespace_bytes)
        budget = max(self.max_share * seconds_since_save, self.always_within_seconds)
        if namespace_bytes > self.max_bytes:
            return Decision(False, expected, f"{namespace_bytes} bytes is over the cap of {self.max_bytes}")
        if expected > budget:
            return Decision(
                False, expected, f"expected {expected:.3g} s is over {self.max_share:.0%} of {seconds_since_save:.3g} s"
            )
        return Decision(
            True, expected, f"expected {expected:.3g} s is within {self.max_share:.0%} of {seconds_since_save:.3g} s"
        )

    def record(self, namespace_bytes: int, seconds: float) -> None:
        """Learn from a save of ``namespace_bytes`` (``SaveResult.total_bytes``) that took ``seconds``."""
        if namespace_bytes >= LEARN_THROUGHPUT_FROM_BYTES:
            measured = namespace_bytes / max(seconds - self.overhead_seconds, 1e-6)
            self.bytes_per_second = self._learnt(self.bytes_per_second, measured, self.throughput_measures)
            self.throughput_measures += 1
        else:
            self.overhead_seconds = self._learnt(self.overhead_seconds, seconds, self.overhead_measures)
            self.overhead_measures += 1

    def _learnt(self, old: float, measured: float, measures_before: int) -> float:
        return measured if measures_before == 0 else old + self.learning_rate * (measured - old)


def estimate_bytes(namespace: dict, leave_out: Collection[str] = ()) -> int:
    """About how many bytes a checkpoint of ``namespace`` handles, cheaply (nothing pickled):
    arrays, tensors and pandas objects by their buffers, text and bytes by their length,
    containers by their items (sampled), anything else by ``sys.getsizeof``."""
    return sum(_size_of(namespace[name], depth=0) for name in user_names(namespace, leave_out))


_SAMPLED_ITEMS = 1000


def _size_of(value, depth: int) -> int:
    if isinstance(value, ModuleType):
        return 0
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (list, tuple, set, frozenset, dict)) and depth < 3 and value:
        sample = list(itertools.islice(value.values() if isinstance(value, dict) else value, _SAMPLED_ITEMS))
        return sys.getsizeof(value) + sum(_size_of(item, depth + 1) for item in sample) * len(value) // len(sample)
    try:
        if type(value).__module__.partition(".")[0] == "pandas" and hasattr(value, "memory_usage"):
            used = value.memory_usage(index=True)
            return int(used.sum() if hasattr(used, "sum") else used)
        nbytes = getattr(value, "nbytes", None)  # numpy arrays, torch tensors
    except Exception:  # an object's own attributes may raise anything
        nbytes = None
    return nbytes if isinstance(nbytes, int) else sys.getsizeof(value)


# --- in the job's kernel, asked by its worker between cells (execution/engine.py) -------------------


@dataclass
class _InKernel:
    """What the kernel keeps between the worker's calls: the policy's learning, when the last
    checkpoint was taken (in the worker's run time), and what the last call did."""

    policy: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    saved_at_run_seconds: float = 0.0
    last: dict = field(default_factory=dict)


_kernel = _InKernel()


def at_cell_end(
    namespace: dict, folder: str, after_cell: int, run_seconds: float, share: float = 0.05, force: bool = False
) -> None:
    """After cell ``after_cell`` finished, ``run_seconds`` into the run: checkpoint the
    notebook's variables if the policy says it is worth its cost (at most ``share`` of the run
    since the last one), or whatever it costs when ``force``d (the job is being suspended).
    ``summary`` says what was done."""
    _kernel.policy.max_share = share
    try:
        size = estimate_bytes(namespace)
        decision = _kernel.policy.decide(size, run_seconds - _kernel.saved_at_run_seconds)
        if not decision.save and not force:
            _kernel.last = {"saved": False, "why": decision.why}
            return
        result = save(folder, namespace, after_cell)
        _kernel.policy.record(result.total_bytes, result.seconds)
        _kernel.saved_at_run_seconds = run_seconds + result.seconds
        _kernel.last = {"saved": True, "checkpoint": _described(result), "words": _words(result)}
    except Exception as error:  # a checkpoint that fails leaves the previous one; the job goes on
        _kernel.last = {"error": f"{type(error).__name__}: {error}"}


def resume_from(namespace: dict, folder: str) -> None:
    """Load the checkpoint into the notebook's namespace, before the cell after the one it
    follows runs. ``summary`` says which cell that was, or why nothing was loaded."""
    try:
        loaded = load(folder, namespace)
    except Exception as error:
        _kernel.last = {"loaded": False, "error": f"{type(error).__name__}: {error}"}
        return
    if loaded is None:
        _kernel.last = {"loaded": False, "error": f"there is no checkpoint in {folder}"}
        return
    _, after_cell, info = loaded
    names = ", ".join(info.names[:8]) + (", ..." if len(info.names) > 8 else "")
    _kernel.last = {
        "loaded": True,
        "after_cell": after_cell,
        "checkpoint": {"after_cell": after_cell, "saved_at": info.saved_at, "bytes": info.total_bytes,
                       "cannot_save": info.cannot_save},
        "words": f"{len(info.names)} variable(s) loaded ({names})",
    }  # fmt: skip


def summary() -> str:
    """What the last call did, as JSON text, for the worker (an IPython user expression)."""
    return json.dumps(_kernel.last)


def _described(result: SaveResult) -> dict:
    return {
        "after_cell": result.after_cell,
        "saved_at": time.time(),
        "bytes": result.total_bytes,
        "cannot_save": result.cannot_save,
    }


def _words(result: SaveResult) -> str:
    from e31_jupyter.core.text import format_size

    words = (
        f"{format_size(result.total_bytes)} in {result.seconds:.2f} s "
        f"({len(result.saved)} written, {len(result.reused)} unchanged)"
    )
    if result.cannot_save:
        words += "; not saved: " + "; ".join(f"{name} ({why})" for name, why in result.cannot_save.items())
    return words
