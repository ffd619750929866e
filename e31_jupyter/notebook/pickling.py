"""cloudpickle, fitted to a notebook's values: what it gets wrong between a kernel and its job.

Writing (``ValuesPickler``):
- a function cached with ``functools.lru_cache`` (or ``cache``) in the notebook is pickled by name,
  as ``__main__.fib``, which the job's kernel does not have: it travels by value instead, and is
  cached again on arrival (its cache starts empty);
- anything else pickled by a name in the notebook's namespace is refused at submit, with the name,
  instead of failing in the job after its wait in line.

Reading (``ValuesUnpickler``):
- in a job, the functions the cell's values bring (and their classes' methods) get the job's
  namespace as their globals, as they had the kernel's: a function that sets a global
  (``global counter; counter += 1``) sets the job's, and reads what the cell reads;
- when collecting, an instance of a class the notebook defines comes back as an instance of the
  class this kernel defines under that name now (a notebook run again from the top defines its
  classes again), and where the two definitions differ, the reader says in what.
"""

from __future__ import annotations

import functools
import pickle
import types

import cloudpickle
from cloudpickle import cloudpickle as _cloudpickle_internals

MAIN = "__main__"


class ValuesPickler(cloudpickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, functools._lru_cache_wrapper) and getattr(obj, "__module__", None) == MAIN:
            return cached, (obj.__wrapped__, obj.cache_parameters())
        name = _name_in_main(obj)
        if name:
            raise pickle.PicklingError(
                f"it is pickled as the name {name!r} of the notebook's namespace, which the job's kernel will not have"
            )
        return super().reducer_override(obj)


def _name_in_main(obj) -> str | None:
    """The name in ``__main__`` that an object pickles as (a decorator's wrapper, say), if any;
    classes and functions are not: cloudpickle sends those by value."""
    if isinstance(obj, (type, types.FunctionType)) or getattr(obj, "__module__", None) != MAIN:
        return None
    if type(obj).__module__ == MAIN:  # an instance of a notebook's class: pickled by value
        return None
    try:
        reduced = obj.__reduce_ex__(5)
    except Exception:  # pickle itself will say what is wrong with it
        return None
    return reduced if isinstance(reduced, str) else None


def cached(function, parameters: dict):
    """A function cached again in the job, as ``functools.lru_cache`` cached it in the kernel."""
    return functools.lru_cache(**parameters)(function)


class ValuesUnpickler(pickle.Unpickler):
    """``functions_in``: the namespace that the notebook's functions get as globals (the job's).
    ``classes_from``: the namespace whose classes replace the notebook's classes of the same name
    (the collecting kernel's); ``differences`` then names what differs, by class."""

    def __init__(self, file, buffers, functions_in: dict | None = None, classes_from: dict | None = None):
        super().__init__(file, buffers=buffers)
        self.functions_in = functions_in
        self.classes_from = classes_from
        self.adopted: set[type] = set()
        self.differences: dict[str, list[str]] = {}

    def find_class(self, module: str, name: str):
        if module.startswith("cloudpickle"):
            if name == "_make_function" and self.functions_in is not None:
                return self._make_function
            if name == "_make_skeleton_class" and self.classes_from is not None:
                return self._make_class
            if name == "_class_setstate" and self.classes_from is not None:
                return self._class_setstate
        return super().find_class(module, name)

    def _make_function(self, code, globals_, name, argdefs, closure):
        if globals_.get("__name__") == MAIN:
            globals_ = self.functions_in
        return _cloudpickle_internals._make_function(code, globals_, name, argdefs, closure)

    def _make_class(self, type_constructor, name, bases, type_kwargs, tracker_id, extra):
        made = _cloudpickle_internals._make_skeleton_class(
            type_constructor, name, bases, type_kwargs, tracker_id, extra
        )
        assert self.classes_from is not None
        mine = self.classes_from.get(name)
        if (
            isinstance(mine, type)
            and type_kwargs.get("__module__") == MAIN
            and mine.__module__ == MAIN
            and mine.__qualname__ == name
        ):
            self.adopted.add(mine)
            return mine
        return made

    def _class_setstate(self, cls, state):
        if cls not in self.adopted:
            return _cloudpickle_internals._class_setstate(cls, state)
        differ = differing(cls, state[0])
        if differ:
            self.differences[cls.__name__] = differ
        return cls


# --- whether two definitions of a class are the same ----------------------------------------------

_NOT_COMPARED = {
    "__module__", "__qualname__", "__dict__", "__weakref__", "__firstlineno__", "__static_attributes__",
    "_abc_impl", "__annotations__", "__dataclass_fields__", "__dataclass_params__", "__match_args__",
    "__parameters__", "__orig_bases__", "__slotnames__",
}  # fmt: skip


def differing(cls: type, attributes: dict) -> list[str]:
    """The names of the attributes in which ``attributes`` (another definition's) differ from
    ``cls``'s own: methods by their code, other values by equality."""
    own = {n: v for n, v in vars(cls).items() if n not in _NOT_COMPARED}
    theirs = {n: v for n, v in attributes.items() if n not in _NOT_COMPARED}
    return sorted(n for n in own.keys() | theirs.keys() if not _same(own.get(n, _MISSING), theirs.get(n, _MISSING)))


_MISSING = object()


def _same(a, b) -> bool:
    if isinstance(a, (staticmethod, classmethod)) and type(a) is type(b):
        return _same(a.__func__, b.__func__)
    if isinstance(a, property) and isinstance(b, property):
        return all(_same(x, y) for x, y in ((a.fget, b.fget), (a.fset, b.fset), (a.fdel, b.fdel)))
    if isinstance(a, types.FunctionType) and isinstance(b, types.FunctionType):
        return _code_key(a.__code__) == _code_key(b.__code__) and _equal(a.__defaults__, b.__defaults__)
    return _equal(a, b)


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an == that raises, or whose answer has no truth (an array)
        return a is b


def _code_key(code: types.CodeType) -> tuple:
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.co_code, consts, code.co_names, code.co_varnames, code.co_argcount, code.co_kwonlyargcount
