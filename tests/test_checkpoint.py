"""Checkpoints of a job's kernel (notebook/checkpoint.py): real files, real arrays and frames, the
notebook's own functions and classes, what cannot be saved, reuse of what did not change, crashes
half way, and the policy that says when to save."""

from __future__ import annotations

import os
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from e31_jupyter.core.errors import E31Error
from e31_jupyter.notebook import checkpoint
from e31_jupyter.notebook.checkpoint import (
    CheckpointInfo,
    CheckpointPolicy,
    estimate_bytes,
    load,
    read_info,
    save,
    user_names,
)
from e31_jupyter.notebook.values import NotTrusted

NOTEBOOK = """
import math
import os.path as osp
import numpy as np

scale = 3
weights = np.arange(200_000, dtype=np.float64)

def scaled(x):
    return math.sqrt(x) * scale

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm(self):
        return math.hypot(self.x, self.y)

origin = Point(3, 4)
"""


def notebook(source: str = NOTEBOOK) -> dict:
    """A kernel's namespace: the cells' code run in a ``__main__``, as IPython runs it, plus
    IPython's own names."""
    namespace: dict = {"__name__": "__main__", "In": ["", "x = 1"], "Out": {}, "_": None, "_i1": "x = 1", "_3": 3}
    exec(compile(source, "/tmp/ipykernel_1/cell.py", "exec"), namespace)
    return namespace


def frame() -> pd.DataFrame:
    rows = 50_000
    table = pd.DataFrame(np.random.default_rng(0).random((rows, 3)), columns=["a", "b", "c"])
    table["label"] = pd.Categorical.from_codes(np.arange(rows) % 7, [f"l{i}" for i in range(7)])
    return table


def loaded(folder: Path, namespace: dict | None = None) -> tuple[dict[str, Any], int, CheckpointInfo]:
    """The folder's checkpoint, which the test has saved."""
    found = load(folder, namespace)
    assert found is not None, f"no checkpoint in {folder}"
    return found


def current(folder: Path) -> CheckpointInfo:
    info = read_info(folder)
    assert info is not None, f"no checkpoint in {folder}"
    return info


def inode(folder: Path, file: str) -> int:
    return os.stat(current(folder).path / file).st_ino


# --- what a checkpoint holds -----------------------------------------------------------------------


def test_a_namespace_comes_back_whole_functions_reading_the_loaded_globals(tmp_path):
    kernel = notebook()
    kernel["table"] = frame()
    result = save(tmp_path, kernel, after_cell=4)
    assert result.cannot_save == {} and result.reused == []
    assert set(result.saved) == {"math", "osp", "np", "scale", "weights", "scaled", "Point", "origin", "table"}

    namespace, after_cell, info = loaded(tmp_path)
    assert after_cell == 4 and info.generation == 1 and info.names == result.saved
    assert namespace["np"] is np and namespace["osp"] is os.path
    assert np.array_equal(namespace["weights"], kernel["weights"]) and namespace["weights"].flags.writeable
    pd.testing.assert_frame_equal(namespace["table"], kernel["table"])
    assert namespace["origin"].norm() == 5.0 and isinstance(namespace["origin"], namespace["Point"])
    assert namespace["scaled"](4) == 6.0
    namespace["scale"] = 10  # the function reads the loaded namespace, not a copy of its globals
    assert namespace["scaled"](4) == 20.0
    assert namespace["scaled"].__globals__ is namespace


def test_loading_into_a_kernels_namespace_gives_its_functions_that_namespace(tmp_path):
    save(tmp_path, notebook(), after_cell=0)
    user_ns: dict[str, Any] = {"__name__": "__main__", "In": [], "mine": 1}
    namespace, _, _ = loaded(tmp_path, user_ns)
    assert namespace is user_ns and user_ns["mine"] == 1
    assert user_ns["scaled"].__globals__ is user_ns and user_ns["scaled"](9) == 9.0


def test_ipython_names_are_left_out_and_the_users_own_kept():
    namespace = dict.fromkeys(
        ["In", "Out", "_", "__", "___", "_i", "_ii", "_iii", "_i12", "_12", "_oh", "_dh", "_ih", "exit", "quit",
         "get_ipython", "__builtins__", "__name__", "__doc__", "_exit_code", "x", "_cache", "model_", "i2"]
    )  # fmt: skip
    assert user_names(namespace) == ["x", "_cache", "model_", "i2"]
    assert user_names(namespace, leave_out={"x"}) == ["_cache", "model_", "i2"]


def test_what_cannot_be_saved_is_named_with_why_and_the_rest_is_saved(tmp_path):
    kernel = notebook("x = 1\nsquares = (i * i for i in range(3))\n")
    kernel["lock"] = threading.Lock()
    kernel["log"] = open(tmp_path / "log.txt", "w")  # an open file is the point
    kernel["conn"] = sqlite3.connect(":memory:")
    kernel["sock"] = socket.socket()
    try:
        result = save(tmp_path / "ckpt", kernel, after_cell=1)
    finally:
        kernel["log"].close()
        kernel["sock"].close()
        kernel["conn"].close()
    assert result.saved == ["x"]
    assert set(result.cannot_save) == {"squares", "lock", "log", "conn", "sock"}
    assert "open file" in result.cannot_save["log"]
    assert "generator" in result.cannot_save["squares"] and "lock" in result.cannot_save["lock"]
    assert all("\n" not in why and len(why) < 200 for why in result.cannot_save.values())
    namespace, _, info = loaded(tmp_path / "ckpt")
    assert namespace == {"x": 1} and info.cannot_save == result.cannot_save


def test_a_value_past_the_limit_is_named_and_the_others_saved(tmp_path):
    kernel = {"small": 1, "big": np.zeros(1 << 20), "after": "kept"}
    result = save(tmp_path, kernel, after_cell=0, limit_bytes=1 << 20)
    assert result.saved == ["small", "after"] and "limit" in result.cannot_save["big"]


# --- only what changed is written --------------------------------------------------------------------


def test_unchanged_values_are_linked_not_written_and_a_change_in_place_is_written(tmp_path):
    kernel = notebook("import math\nscale = 3\nstep = 0\ndef scaled(x):\n    return math.sqrt(x) * scale\n")
    kernel["weights"], kernel["table"] = np.arange(200_000, dtype=np.float64), frame()
    first = save(tmp_path, kernel, after_cell=0)
    weights_file, table_files = inode(tmp_path, "weights.0.buf"), [inode(tmp_path, f"table.{n}.buf") for n in range(2)]

    kernel["step"] = 1  # set again: written again, and nothing else
    second = save(tmp_path, kernel, after_cell=1)
    assert second.saved == ["step"] and second.reused == ["math", "scale", "scaled", "weights", "table"]
    assert second.bytes_written < 100 < first.bytes_written and second.total_bytes > first.bytes_written - 100
    assert inode(tmp_path, "weights.0.buf") == weights_file
    assert [inode(tmp_path, f"table.{n}.buf") for n in range(2)] == table_files

    kernel["scale"] = 4  # a function carries the globals it reads: it is written again with them
    assert save(tmp_path, kernel, after_cell=2).saved == ["scale", "scaled"]

    kernel["weights"][7] = -1.0  # changed in place: the same object, a new digest
    third = save(tmp_path, kernel, after_cell=3)
    assert third.saved == ["weights"] and third.bytes_written >= kernel["weights"].nbytes
    assert inode(tmp_path, "weights.0.buf") != weights_file
    assert loaded(tmp_path)[0]["weights"][7] == -1.0


def test_several_generations_load_the_last_and_keep_only_it(tmp_path):
    kernel: dict[str, Any] = {"step": 0, "history": [], "weights": np.zeros(1000)}
    for cell in range(5):
        kernel["step"] = cell
        kernel["history"].append(cell * 0.5)
        kernel["weights"][cell] = cell
        result = save(tmp_path, kernel, after_cell=cell)
        assert result.generation == cell + 1
    namespace, after_cell, info = loaded(tmp_path)
    assert after_cell == 4 and namespace["step"] == 4 and namespace["history"] == [0, 0.5, 1.0, 1.5, 2.0]
    assert list(namespace["weights"][:6]) == [0, 1, 2, 3, 4, 0]
    assert sorted(os.listdir(tmp_path)) == ["CURRENT", "gen-000005"]


# --- crashes half way -----------------------------------------------------------------------------


class Interrupts:
    """A value whose pickling is stopped by the user (Ctrl-C): a save that fails half way."""

    def __reduce__(self):
        raise KeyboardInterrupt


def test_a_save_stopped_half_way_leaves_the_previous_checkpoint_current_and_whole(tmp_path):
    kernel: dict[str, Any] = {"weights": np.arange(100_000.0), "step": 1}
    save(tmp_path, kernel, after_cell=1)
    kernel["weights"] = kernel["weights"] * 2  # written first, then the save is stopped
    kernel["stop"] = Interrupts()
    with pytest.raises(KeyboardInterrupt):
        save(tmp_path, kernel, after_cell=2)
    assert sorted(os.listdir(tmp_path)) == ["CURRENT", "gen-000001"]  # the partial folder is gone
    namespace, after_cell, _ = loaded(tmp_path)
    assert after_cell == 1 and np.array_equal(namespace["weights"], np.arange(100_000.0))


def test_a_failure_between_the_rename_and_the_switch_keeps_the_previous_one(tmp_path, monkeypatch):
    kernel = {"step": 1, "weights": np.ones(10_000)}
    save(tmp_path, kernel, after_cell=1)

    def fails(*_):
        raise OSError("disk gone")

    kernel["step"] = 2
    with monkeypatch.context() as patch:
        patch.setattr(checkpoint.os, "replace", fails)
        with pytest.raises(OSError, match="disk gone"):
            save(tmp_path, kernel, after_cell=2)
    assert "gen-000002" in os.listdir(tmp_path)  # renamed, never made current
    assert loaded(tmp_path)[1] == 1 and loaded(tmp_path)[0]["step"] == 1

    kernel["step"] = 3
    result = save(tmp_path, kernel, after_cell=3)
    assert result.generation == 3 and result.reused == ["weights"]
    assert sorted(os.listdir(tmp_path)) == ["CURRENT", "gen-000003"]


CRASHES_MID_SAVE = """
import os, sys
import numpy as np
from e31_jupyter.notebook import checkpoint

class Crashes:
    def __reduce__(self):
        os._exit(3)  # the kernel dies: no exception, no clean-up

folder = sys.argv[1]
kernel = {"weights": np.arange(300_000.0), "step": 1}
checkpoint.save(folder, kernel, after_cell=1)
kernel["weights"] = kernel["weights"] + 1
kernel["crash"] = Crashes()
checkpoint.save(folder, kernel, after_cell=2)
"""


def test_a_kernel_killed_mid_save_leaves_the_previous_checkpoint_loadable(tmp_path):
    folder = tmp_path / "ckpt"
    done = subprocess.run([sys.executable, "-c", CRASHES_MID_SAVE, str(folder)], capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert any(name.startswith(checkpoint.PARTIAL_PREFIX) for name in os.listdir(folder))  # it died half way
    namespace, after_cell, _ = loaded(folder)
    assert after_cell == 1 and np.array_equal(namespace["weights"], np.arange(300_000.0))

    save(folder, {"step": 2}, after_cell=2)  # the next save clears what the crash left
    assert sorted(os.listdir(folder)) == ["CURRENT", "gen-000002"]


LOADS_IN_A_NEW_KERNEL = """
import sys
from e31_jupyter.notebook import checkpoint
namespace, after_cell, _ = checkpoint.load(sys.argv[1])
assert isinstance(namespace["origin"], namespace["Point"]), "one class for the class and its instance"
namespace["scale"] = 2
print(after_cell, namespace["origin"].norm(), namespace["scaled"](9), namespace["osp"].__name__)
"""


def test_a_new_kernel_loads_the_notebooks_functions_and_classes(tmp_path):
    save(tmp_path, notebook(), after_cell=6)
    done = subprocess.run([sys.executable, "-c", LOADS_IN_A_NEW_KERNEL, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["6", "5.0", "6.0", "posixpath"]


# --- loading safely --------------------------------------------------------------------------------


def test_a_folder_without_a_checkpoint_gives_none(tmp_path):
    assert load(tmp_path / "none") is None and read_info(tmp_path / "none") is None
    assert load(tmp_path) is None


def test_a_pointer_that_names_no_generation_is_refused(tmp_path):
    save(tmp_path, {"x": 1}, after_cell=0)
    (tmp_path / "CURRENT").write_text("../elsewhere\n")
    with pytest.raises(E31Error, match="not a checkpoint"):
        loaded(tmp_path)


def test_what_another_user_could_have_written_is_not_loaded(tmp_path):
    save(tmp_path, {"x": 1}, after_cell=0)
    generation = current(tmp_path).path
    generation.chmod(generation.stat().st_mode | stat.S_IWOTH)
    with pytest.raises(NotTrusted):
        loaded(tmp_path)
    generation.chmod(0o700)
    (tmp_path / "CURRENT").unlink()
    (tmp_path / "CURRENT").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(NotTrusted, match="link"):
        loaded(tmp_path)


def test_a_durable_save_loads_like_any_other(tmp_path):
    result = save(tmp_path, {"x": np.arange(5)}, after_cell=2, durable=True)
    assert result.saved == ["x"] and list(loaded(tmp_path)[0]["x"]) == [0, 1, 2, 3, 4]


# --- when to save ----------------------------------------------------------------------------------

MB, GB = 10**6, 10**9


def test_a_small_namespace_is_saved_after_every_cell_and_a_large_one_less_often():
    policy = CheckpointPolicy()  # 200 MB/s assumed, 10 ms a save, 5% of the run
    assert policy.decide(100_000, seconds_since_save=1.0).save  # 10.5 ms <= 50 ms
    assert not policy.decide(10 * GB, seconds_since_save=60).save  # 50 s > 3 s
    assert not policy.decide(10 * GB, seconds_since_save=999).save  # 50 s > 49.95 s
    assert policy.decide(10 * GB, seconds_since_save=1001).save  # 50 s <= 50.05 s


def test_the_first_checkpoint_goes_by_the_assumed_throughput_and_the_first_measure_replaces_it():
    policy = CheckpointPolicy(bytes_per_second=100 * MB, overhead_seconds=0.0)
    assert policy.expected_seconds(GB) == 10.0
    policy.record(GB, seconds=2.0)  # 500 MB/s measured
    assert policy.bytes_per_second == 500 * MB and policy.expected_seconds(GB) == 2.0
    policy.record(GB, seconds=1.0)  # 1 GB/s: halfway there
    assert policy.bytes_per_second == 750 * MB
    assert policy.decide(GB, seconds_since_save=30).save and not policy.decide(GB, seconds_since_save=20).save


def test_a_small_save_teaches_the_fixed_cost_not_the_throughput():
    policy = CheckpointPolicy(overhead_seconds=0.01)
    policy.record(1000, seconds=0.1)
    assert policy.overhead_seconds == 0.1 and policy.bytes_per_second == 200 * MB
    assert not policy.decide(1000, seconds_since_save=1.0).save and policy.decide(1000, seconds_since_save=3.0).save


def test_a_namespace_over_the_cap_is_not_saved_however_long_it_ran():
    policy = CheckpointPolicy(max_bytes=GB)
    decision = policy.decide(2 * GB, seconds_since_save=1e9)
    assert not decision.save and "cap" in decision.why


def test_the_size_estimate_counts_arrays_frames_text_and_containers():
    table = frame()
    namespace = {
        "np": np, "weights": np.zeros(1000), "table": table, "text": "x" * 500, "_": np.zeros(10**6),
        "batches": [np.zeros(100) for _ in range(3000)],
    }  # fmt: skip
    expected = 8000 + table.memory_usage(index=True).sum() + 500 + 3000 * 800
    assert expected <= estimate_bytes(namespace) <= expected * 1.1
