"""What a value is, by content: a digest equal for equal values, in this kernel or in another.

It serves twice. A ``%%e31`` cell run again attaches to its earlier job only when every value it
reads has the digest it had then (a DataFrame changed in another cell makes a new job). And in the
job, a captured value whose digest changed while the cell ran was changed in place
(``clf.fit(X, y)``, ``history.append(loss)``), so it goes back with what the cell assigned.

Plain data (numbers, text, bytes, None, and lists, tuples, dicts, sets and numpy arrays of them) is
digested part by part, so that a dict built in another order, or a set in a kernel with another
hash seed, is the same. Anything else is digested as its pickle, written into the hash instead of
a file: large buffers (numpy arrays, the columns of pandas objects, tensors) are hashed straight
from memory, on every core. What a pickle carries that differs between kernels for the same
definition (a code object's file name and line numbers, cloudpickle's id for a class) is left out.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import types
from concurrent.futures import ThreadPoolExecutor

from e31_jupyter.notebook.pickling import ValuesPickler

PLAIN_MAX_ITEMS = 50_000  # plain data of more parts is digested as its pickle (C speed, but order-sensitive)
CHUNK_BYTES = 32 << 20  # a larger buffer is hashed in chunks of this size, on several cores
_SCALARS = (int, float, complex, bool, type(None))


def digests(values: dict) -> dict[str, str | None]:
    """Each value's digest (``digest``); None for one that cannot be digested (it does not pickle)."""
    return {name: digest(value) for name, value in values.items()}


def digest(value) -> str | None:
    """32 hex digits, equal for equal values in any kernel; None when ``value`` does not pickle."""
    found = hashlib.sha256()
    if _plain_into(found, value, depth=0, budget=[PLAIN_MAX_ITEMS]):
        return "p" + found.hexdigest()[:31]
    found = hashlib.sha256()
    try:
        _DigestPickler(_HashWriter(found), protocol=5, buffer_callback=_BufferHasher(found)).dump(value)
    except Exception:  # pickling raises many kinds: what does not pickle cannot be compared
        return None
    return "o" + found.hexdigest()[:31]


def _plain_into(found, value, depth: int, budget: list[int]) -> bool:
    """Feed ``value`` to ``found``, each part tagged with its type; False when it is not plain
    data, or has more parts than ``budget`` (a one-item list, counted down) has left."""
    kind = type(value)
    budget[0] -= 1
    if depth > 32 or budget[0] < 0 or (kind in (list, tuple, dict, set, frozenset) and len(value) > budget[0]):
        return False
    if kind in (str, bytes):
        raw = value.encode("utf-8", "surrogatepass") if kind is str else value
        found.update(f"{kind.__name__}:{len(raw)}:".encode())
        found.update(_hash_buffer(memoryview(raw)))
        return True
    if kind in _SCALARS:
        text = repr(value)
        found.update(f"{kind.__name__}:{len(text)}:{text}".encode())
        return True
    if kind in (list, tuple):
        found.update(f"{kind.__name__}:{len(value)}[".encode())
        return all(_plain_into(found, item, depth + 1, budget) for item in value)
    if kind is dict:  # in a sorted order of its items: equal dicts built in another order are equal
        return _unordered_into(found, "dict", (pair for pair in value.items()), depth, budget)
    if kind in (set, frozenset):
        return _unordered_into(found, kind.__name__, ((item,) for item in value), depth, budget)
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "dtype"):
        # a numpy scalar, np.float64(0.1): as the Python number it equals
        return _plain_into(found, value.item(), depth + 1, budget) if not value.dtype.hasobject else False
    if kind.__module__ == "numpy" and kind.__name__ == "ndarray" and not value.dtype.hasobject:
        found.update(f"ndarray:{value.dtype.str}:{value.shape}:".encode())
        contiguous = value if value.flags.c_contiguous else value.copy(order="C")
        found.update(_hash_buffer(memoryview(contiguous).cast("B")))
        return True
    return False


def _unordered_into(found, kind: str, entries, depth: int, budget: list[int]) -> bool:
    digested = []
    for entry in entries:
        part = hashlib.sha256()
        if not all(_plain_into(part, item, depth + 1, budget) for item in entry):
            return False
        digested.append(part.digest())
    found.update(f"{kind}:{len(digested)}{{".encode() + b"".join(sorted(digested)))
    return True


def _hash_buffer(view: memoryview) -> bytes:
    """The buffer's digest; a large one hashed in chunks on every core (hashlib lets go of the
    GIL), and the chunks' digests hashed together."""
    if view.nbytes < 2 * CHUNK_BYTES:
        return hashlib.sha256(view).digest()
    chunks = [view[start : start + CHUNK_BYTES] for start in range(0, view.nbytes, CHUNK_BYTES)]
    with ThreadPoolExecutor(max_workers=min(len(chunks), os.cpu_count() or 1)) as pool:
        return hashlib.sha256(b"".join(pool.map(lambda chunk: hashlib.sha256(chunk).digest(), chunks))).digest()


class _HashWriter:
    """A file for pickle to write into: the bytes go to the hash."""

    def __init__(self, found):
        self.write = found.update


class _BufferHasher:
    """pickle's buffer_callback: a buffer handed out of band is hashed in place, not copied."""

    def __init__(self, found):
        self.found = found

    def __call__(self, buffer: pickle.PickleBuffer) -> bool:
        try:
            view = buffer.raw()
        except BufferError:  # not contiguous: pickle writes it in band, into the hash
            return True
        with view:
            self.found.update(f"buffer:{view.nbytes}:".encode() + _hash_buffer(view))
        return False


class _DigestPickler(ValuesPickler):
    """The pickler values travel with, less what differs between kernels for one definition."""

    def reducer_override(self, obj):
        if isinstance(obj, types.CodeType):  # not its file (a kernel's cell file) nor its lines
            return _code, _code_parts(obj)
        reduced = super().reducer_override(obj)
        if isinstance(obj, type) and isinstance(reduced, tuple):  # a class pickled by value: not its id
            maker, args = reduced[0], reduced[1]
            tracker_at = {"_make_skeleton_class": 4, "_make_skeleton_enum": 5}.get(getattr(maker, "__name__", ""))
            if tracker_at is not None and len(args) > tracker_at:
                reduced = (maker, (*args[:tracker_at], None, *args[tracker_at + 1 :]), *reduced[2:])
        return reduced


def _code_parts(code: types.CodeType) -> tuple:
    """What a code object does, without where its text was (file, first line, line table)."""
    return (
        code.co_name, code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
        code.co_code, code.co_consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
        getattr(code, "co_exceptiontable", b""),
    )  # fmt: skip


def _code(*parts):
    """Only named in digests' pickles, never called: they are hashed, not loaded."""
    raise TypeError("a digest's pickle is not loaded")
