"""What makes two captured values the same for a cell run again: ``values.digests``, pure."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from e31_jupyter.notebook.values import DIGEST_MAX_BYTES, DIGEST_MAX_ITEMS, digests

PLAIN = {
    "lr": 0.1, "epochs": 3, "flag": True, "nothing": None, "z": 1 + 2j, "tag": "run-1", "raw": b"\x00\xff",
    "sizes": [64, 128], "shape": (2, 3), "config": {"opt": "adam", "betas": [0.9, 0.99]},
    "weights": np.arange(12, dtype=np.float32).reshape(3, 4), "scale": np.float64(0.5),
}  # fmt: skip


def test_plain_data_gets_a_digest_and_equal_values_the_same_one():
    assert set(digests(PLAIN)) == set(PLAIN)
    assert digests(PLAIN) == digests({name: _copy(value) for name, value in PLAIN.items()})


def test_any_change_in_plain_data_changes_its_digest():
    changed = {
        "lr": 0.10000001, "epochs": 4, "flag": False, "nothing": 0, "z": 1 + 3j, "tag": "run-2", "raw": b"\x00",
        "sizes": [64, 256], "shape": [2, 3], "config": {"opt": "sgd", "betas": [0.9, 0.99]},
        "weights": np.arange(12, dtype=np.float64).reshape(3, 4), "scale": np.float64(0.25),
    }  # fmt: skip
    before, after = digests(PLAIN), digests(changed)
    assert [name for name in PLAIN if before[name] == after[name]] == []
    assert digests({"a": np.arange(12).reshape(3, 4)}) != digests({"a": np.arange(12).reshape(4, 3)})
    assert digests({"a": 1}) != digests({"a": "1"}) != digests({"a": [1]})


def test_a_dict_built_in_another_order_is_the_same():
    assert digests({"d": {"a": 1, "b": 2}}) == digests({"d": {"b": 2, "a": 1}})


def test_a_view_of_an_array_is_digested_as_its_values():
    grid = np.arange(20).reshape(4, 5)
    assert digests({"v": grid[:, 1:3]}) == digests({"v": np.ascontiguousarray(grid[:, 1:3])})


@pytest.mark.slow
@pytest.mark.parametrize(
    "value",
    [lambda x: x, {1, 2}, frozenset({1}), object(), [1, lambda: 0], {"f": print}, np.array([1, "a"], dtype=object),
     np.zeros(DIGEST_MAX_BYTES // 8 + 1), list(range(DIGEST_MAX_ITEMS)), [[0] * 1000] * (DIGEST_MAX_ITEMS // 1000),
     "x" * (DIGEST_MAX_BYTES + 1)],
    ids=["function", "set", "frozenset", "object", "list-with-function", "dict-with-builtin", "object-array", "huge-array",
         "long-list", "many-nested-items", "huge-text"],
)  # fmt: skip
def test_what_may_pickle_differently_in_another_kernel_gets_none(value):
    assert digests({"x": value}) == {}


@pytest.mark.slow
def test_the_digests_are_the_same_in_another_process():
    """Equal values in another kernel (another hash seed) have equal digests."""
    code = (
        "import numpy as np; from e31_jupyter.notebook.values import digests; "
        "print(digests({'c': {'b': [1, 2.5, 'x'], 'a': None}, 'w': np.arange(6.0)}))"
    )
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}  # fmt: skip
    assert len(seen) == 1 and "'c'" in seen.pop()


def _copy(value):
    return value.copy() if hasattr(value, "copy") else value
