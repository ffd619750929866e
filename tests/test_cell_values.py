"""What a %%e31 cell gives back, in real kernels with the libraries people use (pandas,
scikit-learn, torch on the CPU): what it changed in place, never a stale result, objects of the
kernel's own classes, functions that travel."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import wait_state
from kernels import (
    Kernel,
    job_id_in,
    kernel,  # noqa: F401 (a fixture)
)
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter.cli import main


def _run_and_collect(kernel: Kernel, cell: str, client) -> tuple[str, str]:
    """Submit ``cell`` with --wait; the job's id and what the collect printed (stdout + stderr)."""
    out = kernel.run(cell, timeout=240)
    assert out.error == "", out.error
    job_id = job_id_in(out)
    job = wait_state(client, job_id, "succeeded", "failed", timeout=60)
    assert job["state"] == "succeeded", (job["reason"], client.log_tail(job_id, 40))
    return job_id, out.stdout + out.stderr


def test_what_the_cell_changed_in_place_comes_back_with_what_it_assigned(kernel, client, server, capsys):
    kernel.run(
        "import numpy as np, torch\n"
        "from sklearn.linear_model import LogisticRegression\n"
        "rng = np.random.default_rng(0)\n"
        "X = rng.normal(size=(200, 4)); y = (X[:, 0] + X[:, 1] > 0).astype(int)\n"
        "clf = LogisticRegression()\n"
        "hist = []\n"
        "torch.manual_seed(0)\n"
        "net = torch.nn.Linear(4, 1)\n"
        "weights_before = net.weight.detach().clone()\n"
        "counter = 0\n"
        "def bump():\n"
        "    global counter\n"
        "    counter += 1\n"
        "untouched = [1, 2, 3]"
    )
    cell = (
        "%%e31 submit --wait --name in-place\n"
        "clf.fit(X, y)\n"
        "for epoch in range(3):\n"
        "    hist.append(epoch * 0.5)\n"
        "optimizer = torch.optim.SGD(net.parameters(), lr=0.1)\n"
        "loss = net(torch.tensor(X, dtype=torch.float32)).pow(2).mean()\n"
        "loss.backward(); optimizer.step()\n"
        "bump(); bump()\n"
        "score = clf.score(X, y) + len(untouched) * 0"
    )
    job_id, printed = _run_and_collect(kernel, cell, client)
    # Fitted in the job, it predicts here as a fit here does.
    kernel.run("local = LogisticRegression().fit(X, y)")
    assert kernel.value("bool((clf.predict(X) == local.predict(X)).all())") == "True", printed
    assert kernel.value("hist") == "[0.0, 0.5, 1.0]"
    assert kernel.value("bool((net.weight != weights_before).any())") == "True"
    assert kernel.value("counter") == "2"  # as the cell gives when run here
    assert "clf (changed in place)" in printed and "hist (changed in place)" in printed
    loaded = printed.split("loaded ", 1)[1].split(";")[0]
    assert "score," in loaded + "," and "untouched" not in loaded  # what it assigned, and only what changed
    listed = {v["name"]: v["why"] for v in client.values(job_id)["values"]}
    assert listed["clf"] == "changed in place" and listed["net"] == "changed in place"
    assert listed["counter"] == "set again by a function the cell called" and "untouched" not in listed
    assert main(["--url", server.url, "--token", server.token, "status", job_id]) == 0
    status = capsys.readouterr().out
    assert re.search(r"^  clf  sklearn\S*LogisticRegression  .*changed in place$", status, re.M), status
    assert re.search(r"^  score  float  .*assigned by the cell$", status, re.M), status


def test_a_cell_run_again_after_a_dataframe_changed_runs_again_and_never_shows_the_old_result(kernel, client):
    kernel.run("import pandas as pd\nframe = pd.DataFrame({'v': range(100)})")
    cell = "%%e31 submit --wait --name frame-sum\ntotal = int(frame['v'].sum())"
    first, _ = _run_and_collect(kernel, cell, client)
    assert kernel.value("total") == "4950"
    kernel.run("frame.loc[:, 'v'] = frame['v'] * 100")  # changed in place, the same object
    second, printed = _run_and_collect(kernel, cell, client)
    assert second != first and "already ran" not in printed
    assert kernel.value("total") == "495000"
    kernel.run("frame = pd.DataFrame({'v': range(100)})")  # as it was at first: that job is found
    again = kernel.run(cell, timeout=120)
    assert f"already ran as job {first}, with the same code, options and inputs" in again.stdout
    assert kernel.value("total") == "4950"


def test_an_instance_comes_back_as_an_instance_of_the_class_the_kernel_defines_now(kernel, client):
    point = "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
    equality = "    def __eq__(self, other):\n        return (self.x, self.y) == (other.x, other.y)\n"
    kernel.run(point + equality)
    job_id, _ = _run_and_collect(kernel, "%%e31 submit --wait\np = Point(1, 2)", client)
    kernel.restart()  # the next morning: the notebook run again from the top defines Point again
    kernel.run("%load_ext e31_jupyter")
    kernel.run(point + equality)
    collected = kernel.run(f"%e31 collect {job_id}")
    assert collected.error == "", collected.error
    assert kernel.value("isinstance(p, Point) and p == Point(1, 2)") == "True"
    assert "differ" not in collected.stderr
    # Defined otherwise now: still this kernel's class, and it says in what they differ.
    kernel.run(point + equality + "    def norm(self):\n        return abs(self.x) + abs(self.y)\n")
    collected = kernel.run(f"%e31 collect {job_id}")
    assert kernel.value("isinstance(p, Point) and p.norm()") == "3"
    assert "the job's Point is not the class Point this kernel defines now (they differ in norm)" in collected.stderr


def test_a_cached_function_travels_and_a_name_the_job_lacks_is_refused_at_submit(kernel, client):
    kernel.run(
        "from functools import lru_cache\n"
        "@lru_cache(maxsize=None)\n"
        "def fib(n):\n"
        "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    )
    _run_and_collect(kernel, "%%e31 submit --wait\nanswer = fib(60)", client)
    assert kernel.value("answer") == "1548008755920"
    # An object that pickles as a name of the notebook (here a singledispatch-like wrapper whose
    # __reduce__ names it) would fail in the job after its wait: refused now, naming it.
    kernel.run(
        "class Named:\n    def __reduce__(self):\n        return 'named'\n"
        "named = Named()\nNamed.__module__ = 'builtins'\nnamed.__module__ = '__main__'"
    )
    refused = kernel.run("%%e31 submit\nvalue = named")
    assert "named (Named) cannot be sent to the job" in refused.stderr
    assert "the name 'named' of the notebook's namespace" in refused.stderr.replace("\n", " ")
    assert "e31: job" not in refused.stdout


def test_ipythons_underscore_is_not_handed_back_and_a_capture_is(kernel, client):
    kernel.run("'kept'")  # IPython's _ is now 'kept'
    _run_and_collect(kernel, "%%e31 submit --wait\n%%capture cap\nfor _ in range(2):\n    print('hi')", client)
    assert kernel.value("_") == "'kept'"
    assert kernel.value("cap.stdout") == "'hi\\nhi\\n'"


def test_collected_values_are_mapped_from_the_outputs_folder_not_from_tmp(kernel, client, tmp_path):
    kernel.run("import numpy as np")
    _run_and_collect(kernel, "%%e31 submit --wait --name big-array\narr = np.ones(1_000_000)", client)
    folder = Path(tmp_path) / "e31-outputs" / "big-array" / "e31-values"
    assert (folder / "values.json").is_file()
    maps = kernel.value("open('/proc/self/maps').read().count('e31-values')")
    assert int(maps) >= 1, "the array is mapped from its file in the outputs folder"
    assert kernel.value("open('/proc/self/maps').read().count('/tmp/e31-values-')") == "0"
    kernel.run("%e31 collect big-array")  # again: the folder is replaced, the mapped array still reads
    assert kernel.value("float(arr.sum())") == "1000000.0"
