"""Values between a kernel and its job, pure: digests (what makes two values the same, and a value
changed in place), and the pickling fitted to a notebook's values."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from e31_jupyter.notebook import values
from e31_jupyter.notebook.digest import digest, digests
from e31_jupyter.notebook.values import CannotTravel

PLAIN = {
    "lr": 0.1, "epochs": 3, "flag": True, "nothing": None, "z": 1 + 2j, "tag": "run-1", "raw": b"\x00\xff",
    "sizes": [64, 128], "shape": (2, 3), "config": {"opt": "adam", "betas": [0.9, 0.99]},
    "weights": np.arange(12, dtype=np.float32).reshape(3, 4), "scale": np.float64(0.5), "seen": {"a", "b"},
}  # fmt: skip


def notebook(source: str, file: str = "/tmp/ipykernel_1/cell.py") -> dict:
    """What a notebook's cell defines: its code run as a kernel runs it, in a ``__main__``."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, file, "exec"), namespace)
    return namespace


POINT = "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"


def test_plain_data_gets_a_digest_and_equal_values_the_same_one():
    assert None not in digests(PLAIN).values()
    assert digests(PLAIN) == digests({name: _copy(value) for name, value in PLAIN.items()})


def test_any_change_in_plain_data_changes_its_digest():
    changed = {
        "lr": 0.10000001, "epochs": 4, "flag": False, "nothing": 0, "z": 1 + 3j, "tag": "run-2", "raw": b"\x00",
        "sizes": [64, 256], "shape": [2, 3], "config": {"opt": "sgd", "betas": [0.9, 0.99]},
        "weights": np.arange(12, dtype=np.float64).reshape(3, 4), "scale": np.float64(0.25), "seen": {"a"},
    }  # fmt: skip
    before, after = digests(PLAIN), digests(changed)
    assert [name for name in PLAIN if before[name] == after[name]] == []
    assert digest(np.arange(12).reshape(3, 4)) != digest(np.arange(12).reshape(4, 3))
    assert len({digest(1), digest("1"), digest([1]), digest(1.0), digest(True)}) == 5


def test_a_dict_or_set_built_in_another_order_is_the_same():
    assert digest({"a": 1, "b": 2}) == digest({"b": 2, "a": 1})
    assert digest({3, 1, 2}) == digest({1, 2, 3}) != digest(frozenset({1, 2, 3}))


def test_a_view_of_an_array_is_digested_as_its_values():
    grid = np.arange(20).reshape(4, 5)
    assert digest(grid[:, 1:3]) == digest(np.ascontiguousarray(grid[:, 1:3]))


def test_objects_are_digested_by_content_so_a_change_in_place_shows():
    pd = pytest.importorskip("pandas")
    linear_model = pytest.importorskip("sklearn.linear_model")
    frame = pd.DataFrame({"v": range(100), "name": ["x"] * 100})
    before = digest(frame)
    assert digest(frame.copy()) == before
    frame.loc[3, "v"] = 7
    assert digest(frame) != before
    clf = linear_model.LogisticRegression()
    unfitted = digest(clf)
    clf.fit(np.arange(20.0).reshape(10, 2), [0, 1] * 5)
    assert digest(clf) != unfitted
    history: list = []
    empty = digest(history)
    history.append(0.5)
    assert digest(history) != empty


def test_a_function_or_class_defined_again_elsewhere_is_the_same_and_its_globals_count():
    source = "offset = 3\ndef scale(x):\n    return 2 * x + offset\n" + POINT
    one, two = notebook(source, "/tmp/ipykernel_1/a.py"), notebook("\n\n" + source, "/tmp/ipykernel_2/b.py")
    assert digest(one["scale"]) == digest(two["scale"])
    assert digest(one["Point"](1, 2)) == digest(two["Point"](1, 2)) != digest(two["Point"](1, 3))
    two["offset"] = 4
    assert digest(one["scale"]) != digest(two["scale"])
    changed = notebook(source.replace("2 * x", "3 * x"))
    assert digest(changed["scale"]) != digest(one["scale"])


def test_a_large_array_is_digested_whole_and_what_does_not_pickle_gets_none():
    big = np.zeros(80 << 20, dtype=np.uint8)  # over two chunks: hashed on every core
    before = digest(big)
    big[-1] = 1
    assert before is not None and digest(big) != before
    assert digest(threading.Lock()) is None


@pytest.mark.slow
def test_the_digests_are_the_same_in_another_process():
    """Equal values in another kernel (another hash seed, other cell files) have equal digests."""
    code = (
        "import numpy as np; from e31_jupyter.notebook.digest import digests\n"
        "ns = {'__name__': '__main__'}\n"
        f"exec(compile({POINT!r} + 'def f(v):\\n    return v + 1\\n', __import__('sys').argv[1], 'exec'), ns)\n"
        "print(digests({'c': {'b': [1, 2.5, 'x'], 'a': None}, 'w': np.arange(6.0), 's': {'x', 'y', 'z'},"
        " 'p': ns['Point'](1, [2]), 'f': ns['f']}))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code, f"/tmp/ipykernel_{seed}/cell.py"], capture_output=True, text=True,
            check=True, env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }  # fmt: skip
    assert len(seen) == 1 and "'p'" in (only := seen.pop()) and "None" not in only


# --- the pickling a notebook's values travel with ---------------------------------------------------


def test_a_cached_function_travels_by_value_and_is_cached_again(tmp_path):
    fib = notebook(
        "from functools import lru_cache\n@lru_cache(maxsize=None)\ndef fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    )["fib"]
    values.save({"fib": fib}, tmp_path / "v")
    job = {"__name__": "__main__"}  # a job's namespace: no fib in it
    loaded = values.load(tmp_path / "v", functions_in=job)["fib"]
    assert loaded(80) == 23416728348467685 and loaded.cache_info().currsize > 0


def test_what_pickles_as_a_name_the_job_lacks_is_refused_naming_it(tmp_path):
    named = notebook(
        "class Named:\n    def __reduce__(self):\n        return 'named'\n"
        "named = Named()\nNamed.__module__ = 'builtins'\nnamed.__module__ = '__main__'"
    )["named"]
    with pytest.raises(CannotTravel, match="named .* the name 'named' of the notebook's namespace"):
        values.save({"named": named}, tmp_path / "v")


def test_the_notebooks_functions_get_the_jobs_namespace_as_globals(tmp_path):
    kernel = notebook("counter = 0\ndef bump():\n    global counter\n    counter += 1\n    return counter\n")
    values.save({"bump": kernel["bump"], "counter": 0}, tmp_path / "v")
    job = {"__name__": "__main__"}
    job.update(values.load(tmp_path / "v", functions_in=job))
    job["bump"]()
    job["bump"]()
    assert job["counter"] == 2 and job["bump"].__globals__ is job


def test_an_instance_comes_back_as_the_collecting_kernels_class_and_a_difference_is_named(tmp_path):
    job = notebook(POINT + "p = Point(1, 2)\n")
    values.save({"p": job["p"]}, tmp_path / "v")
    kernel = notebook(POINT)
    loaded, failed, differences = values.restore(tmp_path / "v", classes_from=kernel)
    assert type(loaded["p"]) is kernel["Point"] and (loaded["p"].x, loaded["p"].y) == (1, 2)
    assert failed == {} and differences == {}
    kernel = notebook(POINT + "    def norm(self):\n        return abs(self.x) + abs(self.y)\n")
    loaded, _, differences = values.restore(tmp_path / "v", classes_from=kernel)
    assert loaded["p"].norm() == 3 and differences == {"Point": ["norm"]}
    assert not hasattr(job["Point"], "norm")  # the kernel's class was not changed by the job's


def test_a_reason_is_kept_with_each_value_and_listed(tmp_path):
    values.save({"clf": [1], "score": 0.5}, tmp_path / "v", reasons={"clf": "changed in place"})
    listed = {entry["name"]: entry["why"] for entry in values.describe(values.read_index(tmp_path / "v"))}
    assert listed == {"clf": "changed in place", "score": None}


def _copy(value):
    return value.copy() if hasattr(value, "copy") else type(value)(value) if isinstance(value, (list, dict)) else value
