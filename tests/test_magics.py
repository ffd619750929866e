"""%%e31 in real kernels (jupyter_client) against a real server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading

from conftest import EXAMPLES, wait_state, write_notebook
from kernels import Kernel, kernel  # noqa: F401 (kernel: a fixture)
from kernels import job_id_in as _job_id
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

HEADLINE_SETUP = """
import numpy as nmp
big = nmp.arange(13_500_000, dtype=nmp.float64)  # 108 MB
offset = 3
def scale(x):
    return x * 2 + offset
"""

HEADLINE_CELL = """%%e31 submit --gpus 1 --name headline
import matplotlib.pyplot as plt
doubled = scale(big)
total = float(nmp.sum(doubled[:1000]))
with open("result.txt", "w") as out:
    out.write(str(total))
plt.plot([0, 1, 2], [0, 1, 4])
plt.show()
print("computed", total)
"""


def test_a_cell_runs_as_a_job_and_is_collected_in_a_new_kernel(kernel, client, tmp_path):
    kernel.run(HEADLINE_SETUP)
    submitted = kernel.run(HEADLINE_CELL)
    job_id = _job_id(submitted)
    job = wait_state(client, job_id, "succeeded", "failed", timeout=180)
    assert job["state"] == "succeeded", (job["reason"], client.log_tail(job_id, 60))
    assert job["gpus"] and job["meter"]["gpu_seconds"] > 0
    executed = client.notebook(job_id)
    assert any(HEADLINE_CELL.split("\n", 1)[1].strip() in "".join(c["source"]) for c in executed["cells"])

    kernel.restart()  # the next morning: a fresh kernel knows nothing of the cell
    assert "NameError" in kernel.run("doubled").error
    kernel.run("%load_ext e31_jupyter")
    collected = kernel.run(f"%e31 collect {job_id}")
    assert collected.error == "", collected.error
    assert "computed 1002000.0" in collected.stdout  # the cell's printout, shown again
    assert any("image/png" in d for d in collected.displays)  # and its plot
    kernel.run("import numpy as np\nexpected = np.arange(13_500_000, dtype=np.float64) * 2 + 3")
    assert kernel.value("bool((doubled == expected).all()) and doubled.shape == expected.shape") == "True"
    assert kernel.value("total") == "1002000.0"
    assert kernel.value("plt.__name__") == "'matplotlib.pyplot'"  # what the cell imported is imported again
    assert (tmp_path / "e31-outputs" / "headline" / "result.txt").read_text() == "1002000.0"
    # The closed file handle could not come back, and it says so, in words for the way back.
    assert "e31: out was not returned: out (_io.TextIOWrapper) is an open file of the job's kernel" in collected.stderr
    assert "--out" in collected.stderr and "--in" not in collected.stderr


def test_rerunning_the_cell_attaches_and_new_submits_again(kernel, client):
    cell = "%%e31 submit\nanswer = 6 * 7"
    first = _job_id(kernel.run(cell))
    again = kernel.run(cell)
    assert "already ran as job" in again.stdout and first in again.stdout
    assert len(client.jobs()) == 1
    wait_state(client, first, "succeeded")
    collected = kernel.run(cell)  # once it succeeded, re-running collects it
    assert kernel.value("answer") == "42", collected
    assert len(client.jobs()) == 1
    second = _job_id(kernel.run(cell.replace("submit", "submit --new")))
    assert second != first and len(client.jobs()) == 2
    for option in ("--name renamed", "--out answer"):  # another name, other values back: another job
        changed = kernel.run(cell.replace("submit", f"submit {option}"))
        assert "already ran" not in changed.stdout, (option, changed.stdout)
    assert len(client.jobs()) == 4
    again = kernel.run(cell.replace("submit", "submit --out answer"))
    assert "already ran as job" in again.stdout and len(client.jobs()) == 4


def test_rerunning_after_a_value_it_reads_changed_runs_again_and_back_to_it_attaches(kernel, client):
    kernel.run("lr = 0.1\nsizes = [64, 128]\ndef scale(x):\n    return 2 * x")
    cell = "%%e31 submit --wait\nresult = scale(lr) * len(sizes)"
    first = _job_id(kernel.run(cell))
    assert kernel.value("result") == "0.4"
    kernel.run("lr = 0.2")  # set in another cell
    changed = kernel.run(cell)
    assert "already ran" not in changed.stdout and _job_id(changed) != first
    assert kernel.value("result") == "0.8"
    kernel.run("lr = 0.1\ndef scale(x):\n    return 2 * x")  # a function defined again, as in a new kernel
    back = kernel.run(cell)
    assert f"already ran as job {first}" in back.stdout and kernel.value("result") == "0.4"
    assert len(client.jobs()) == 2


def test_a_value_that_cannot_travel_is_refused_before_submitting(kernel, client, server, tmp_path):
    kernel.run("handle = open('notes.txt', 'w')\nimport threading\nlock = threading.Lock()")
    refused = kernel.run("%%e31 submit\nhandle.write('x')")
    assert "handle" in refused.stderr and "open file" in refused.stderr and "inside the cell" in refused.stderr
    refused = kernel.run("%%e31 submit\nwith lock:\n    pass")
    assert "lock" in refused.stderr and "_thread.lock" in refused.stderr
    assert client.jobs() == []
    assert list((server.data_dir / "inbox").iterdir()) == []  # nothing left behind


def test_a_capture_over_the_limit_is_refused_with_its_size(kernel, client):
    kernel.run("%config E31Magics.max_capture_bytes = 1_000_000\nimport numpy as np\nx = np.ones(500_000)")
    refused = kernel.run("%%e31 submit\ny = x + 1")
    assert "x (numpy.ndarray)" in refused.stderr and "3.8 MB" in refused.stderr and "limit" in refused.stderr
    assert client.jobs() == []


def test_what_the_kernel_cannot_load_is_named_and_the_rest_comes_back(kernel, client):
    kernel.run("factor = 3\ndef f(v):\n    return v * factor")  # f reads a global the cell does not name
    cell = (
        "%%e31 submit --name helper --wait\n"
        "import pathlib, importlib\n"
        "pathlib.Path('job_only_helper.py').write_text('class Thing:\\n    pass\\n')\n"
        "importlib.invalidate_caches()\n"
        "import job_only_helper as helper\n"
        "thing = helper.Thing()\n"
        "answer = f(14)"
    )
    collected = kernel.run(cell)
    assert collected.error == "", collected.error
    assert kernel.value("answer") == "42" and kernel.value("pathlib.Path.__name__") == "'Path'"
    assert "NameError" in kernel.run("helper").error and "NameError" in kernel.run("thing").error
    lines = {line.split(" was not loaded: ")[0]: line for line in collected.stderr.splitlines() if "not loaded" in line}
    assert set(lines) == {"e31: helper", "e31: thing"}, collected.stderr
    assert "job_only_helper, which this kernel cannot import (ModuleNotFoundError" in lines["e31: helper"]
    assert "job_only_helper.Thing" in lines["e31: thing"] and "collect again" in lines["e31: thing"]
    assert re.search(r"loaded pathlib, importlib, answer;", collected.stdout), collected.stdout
    job_id = _job_id(collected)
    modules = {v["name"]: v["module"] for v in client.values(job_id)["values"] if v["type"] == "module"}
    assert modules == {"pathlib": "pathlib", "importlib": "importlib", "helper": "job_only_helper"}


def test_a_failing_cell_fails_the_job_and_collect_shows_the_traceback(kernel, client):
    job_id = _job_id(kernel.run("%%e31 submit\nbefore = 1\nafter = 1 / 0"))
    job = wait_state(client, job_id, "failed", "succeeded")
    assert job["state"] == "failed" and "ZeroDivisionError" in job["reason"]
    kernel.run("import time; time.sleep(2.5)")  # the submit cell's widget shows the end meanwhile (poller)
    collected = kernel.run(f"%e31 collect {job_id}")
    shown = re.sub(r"(\x1b|\\u001b)\[[0-9;]*m", "", collected.stderr + json.dumps(collected.comms))  # no colours
    tracebacks = re.findall(r"ZeroDivisionError: division by zero(?:\n|\\n)", shown)  # in the cell or its widget
    assert len(tracebacks) == 1, shown  # the traceback, once
    assert (
        collected.error == f"e31: job {job_id} (before = 1) failed: the cell raised ZeroDivisionError: division by zero"
    )
    assert "NameError" in kernel.run("before").error  # no values loaded from a failed job
    waited = kernel.run(f"%e31 wait {job_id}\nprint('not reached')")  # the cell fails: Run All stops
    assert waited.error.startswith(f"e31: job {job_id}") and "not reached" not in waited.stdout
    assert kernel.run("%%e31 submit --wait\n1 / 0").error.endswith("raised ZeroDivisionError: division by zero")


def test_submit_notebook_with_parameters(kernel, client):
    out = kernel.run(f"%e31 submit-notebook {EXAMPLES / 'train.ipynb'} -p epochs 3 --gpus 1 --wait")
    job_id = _job_id(out)
    job = client.job(job_id)
    assert job["state"] == "succeeded", job["reason"]
    assert job["work"]["parameters"] == {"epochs": 3}
    assert len(client.download(job_id, "metrics.csv").decode().splitlines()) == 1 + 3
    again = client.job(_job_id(kernel.run("%e31 resubmit last -p epochs=2 --wait")))  # the same, but 2 epochs
    assert again["id"] != job_id and again["state"] == "succeeded", again["reason"]
    assert again["work"]["parameters"] == {"epochs": 2} and again["request"]["gpus"] == 1


def test_submit_notebook_sweeps_a_parameter(kernel, client):
    out = kernel.run(f"%e31 submit-notebook {EXAMPLES / 'train.ipynb'} --sweep epochs 1 2 --wait")
    assert any("JobsWidget" in d.get("text/plain", "") for d in out.displays)  # to follow them
    ended = [line.split() for line in out.stdout.splitlines() if "GPU-h" in line]
    assert [(name, state) for _, name, state, *_ in ended] == [
        ("train[epochs=1]", "succeeded"),
        ("train[epochs=2]", "succeeded"),
    ]
    assert [client.job(job_id)["work"]["parameters"] for job_id, *_ in ended] == [{"epochs": 1}, {"epochs": 2}]


def test_line_commands(kernel, client, gated):
    job = wait_state(client, gated.submit(client, "listed", gpus=1)["id"], "running")
    listing = kernel.run("%e31 jobs").displays  # the jobs widget
    assert any("application/vnd.jupyter.widget-view+json" in d and "JobsWidget" in d["text/plain"] for d in listing)
    assert job["id"] in kernel.run("%e31 jobs --state running").stdout  # with options: the CLI's table
    assert "listed" in kernel.run(f"%e31 status {job['id']}").stdout
    assert "listed" in kernel.run("%e31 status last").stdout  # the newest job
    waiting = gated.submit(client, "waiting", gpus=2)  # behind the one running
    out = kernel.run("%e31 update last --deadline +1h --name renamed").stdout
    assert out.startswith(f"{waiting['id']}  changed deadline none -> ") and "name waiting -> renamed" in out
    kernel.run(f"%e31 cancel {waiting['id']}")
    kernel.run(f"%e31 cancel {job['id'].split('-')[1]}")  # enough of its id
    assert wait_state(client, job["id"], "cancelled")["state"] == "cancelled"
    assert "No job's id starts with 'nope'" in kernel.run("%e31 status nope").stderr
    assert "Usage" in kernel.run("%e31 frobnicate").stderr


def test_several_jobs_are_waited_for_and_collected_at_once(kernel, client, tmp_path):
    cell = '%%e31 submit --name part{n}\nvalue_{n} = {n} * 10\nwith open("out.txt", "w") as f:\n    f.write("{n}")'
    ids = [_job_id(kernel.run(cell.format(n=n))) for n in (1, 2)]
    out = kernel.run(f"%e31 wait {ids[0]} {ids[1].split('-')[1]}")  # by whole id and by part of one
    ended = [line.split()[:3] for line in out.stdout.splitlines() if "GPU-h" in line]
    assert ended == [[ids[0], "part1", "succeeded"], [ids[1], "part2", "succeeded"]], (out.stdout, out.stderr)
    collected = kernel.run(f"%e31 collect {ids[0]} {ids[1]} --to together")
    assert collected.error == "" and kernel.value("(value_1, value_2)") == "(10, 20)", collected.stderr
    assert [(tmp_path / "together" / f"part{n}" / "out.txt").read_text() for n in (1, 2)] == ["1", "2"]
    assert "No job's id starts with 'nope'" in kernel.run(f"%e31 wait {ids[0]} nope").stderr  # names checked first


def test_a_cell_can_wait_for_another_job_to_succeed(kernel, client, gated):
    first = wait_state(client, gated.submit(client, "first", gpus=1)["id"], "running")
    then = client.job(_job_id(kernel.run(f"%%e31 submit --after {first['id'].split('-')[1]}\nlater = 2")))
    assert then["state"] == "queued" and then["waiting_for"] == [first["id"]]
    gated.open("first")
    assert wait_state(client, then["id"], "succeeded", "failed", "expired")["state"] == "succeeded"


def test_kernels_started_by_the_server_find_the_queue_by_themselves(start_server):
    """The server puts its address in its kernels' environment, never its token: the client reads
    that from the server's runtime file, which only this user can read."""
    server = start_server()  # its own: the shared one's users are tokens, and it is found by its runtime file
    import psutil
    import requests

    headers = {"Authorization": f"token {server.token}"}
    kernel = requests.post(f"{server.url}/api/kernels", json={"name": "python3"}, headers=headers, timeout=30)
    assert kernel.status_code == 201, kernel.text
    try:
        children = psutil.Process(server.proc.pid).children(recursive=True)
        kernels = [p for p in children if "ipykernel_launcher" in " ".join(p.cmdline())]
        assert kernels
        environ = kernels[0].environ()
        assert environ["E31_URL"].rstrip("/") == server.url.rstrip("/")
        assert "E31_TOKEN" not in environ and server.token not in "".join(environ.values())
        found = subprocess.run(
            [sys.executable, "-c", "from e31_jupyter.client import E31Client; print(len(E31Client().jobs()))"],
            env={k: v for k, v in environ.items() if k in ("E31_URL", "PATH", "HOME", "JUPYTER_RUNTIME_DIR")},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert found.returncode == 0 and found.stdout.strip() == "0", found.stderr
    finally:
        requests.delete(f"{server.url}/api/kernels/{kernel.json()['id']}", headers=headers, timeout=30)


def test_a_cells_job_is_named_after_its_first_line_in_plain_text(kernel, client):
    out = kernel.run("%%e31 submit --check\n\n  y =\t1  # \x1b[31mred")
    assert out.error == "" and "e31: y = 1  #  [31mred: would be queued" in out.stdout, out.stdout + out.stderr


def test_a_cell_whose_jobs_files_were_deleted_runs_again_when_rerun(kernel, client):
    cell = "%%e31 submit --wait\nanswer = 6 * 7"
    first = _job_id(kernel.run(cell))
    kernel.run(f"%e31 delete {first}")
    assert client.job(first)["files_deleted"] is not None
    again = kernel.run(cell)
    assert "already ran" not in again.stdout and _job_id(again) != first
    assert kernel.value("answer") == "42" and len(client.jobs()) == 2


def test_a_file_the_cell_reads_but_the_job_will_not_have_is_named_and_data_brings_it(kernel, client, tmp_path):
    (tmp_path / "rows.csv").write_text("a\nb\nc\n")
    alone = kernel.run("%%e31 submit --name alone\nrows = len(open('rows.csv').readlines())")
    assert "The job will not have 'rows.csv'" in alone.stderr and "(--data rows.csv)" in alone.stderr
    given = kernel.run("%%e31 submit --name given --data rows.csv --wait\nrows = len(open('rows.csv').readlines())")
    assert "will not have" not in given.stderr
    assert kernel.value("rows") == "3"
    assert "FileNotFoundError" in wait_state(client, _job_id(alone), "failed")["reason"]


def test_a_module_beside_the_notebook_that_a_cells_values_come_from_is_named_and_data_brings_it(
    kernel, client, tmp_path
):
    (tmp_path / "mylib.py").write_text("def double(x):\n    return 2 * x\n")
    kernel.run("from mylib import double")  # the kernel imports it from the notebook's folder
    alone = kernel.run("%%e31 submit --name alone\ny = double(3)")
    assert "The job will not have the module mylib (mylib.py, next to the notebook)" in alone.stderr
    assert "(--data mylib.py)" in alone.stderr
    given = kernel.run("%%e31 submit --name given --data mylib.py --wait\ny = double(3)")
    assert "will not have" not in given.stderr
    assert kernel.value("y") == "6"  # the function went by reference, and the job imported mylib from its folder
    assert "No module named 'mylib'" in wait_state(client, _job_id(alone), "failed")["reason"]


def test_check_says_where_a_cell_or_notebook_would_wait_and_submits_nothing(kernel, client, server, tmp_path):
    (tmp_path / "rows.csv").write_text("a\n")
    kernel.run("import numpy as np\nx = np.ones(3)")
    cell = kernel.run("%%e31 submit --gpus 1 --check --name checked\ny = x + len(open('rows.csv').read())")
    assert cell.error == "", cell.error
    assert cell.stdout.startswith("e31: checked: would be queued (position 1, expected to start now")
    assert cell.stdout.rstrip().endswith("; nothing was submitted")
    assert "The job will not have 'rows.csv'" in cell.stderr
    notebook = kernel.run(f"%e31 submit-notebook {EXAMPLES / 'train.ipynb'} -p epoch 3 --check")
    assert "train: would be queued" in notebook.stdout and "did you mean 'epochs'" in notebook.stderr
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "rows.csv").write_text("a\n")
    write_notebook(tmp_path / "exp" / "count.ipynb", "print(len(open('rows.csv').readlines()))")
    below = kernel.run("%e31 submit-notebook exp/count.ipynb --check")  # from the kernel's folder, above it
    assert "give it as data (--data exp/rows.csv)" in below.stderr
    assert client.jobs() == [] and list((server.data_dir / "inbox").iterdir()) == []  # nothing captured


def test_a_cell_that_reads_what_nothing_defines_is_warned_of(kernel, client):
    kernel.run("known = 1")
    warned = kernel.run("%%e31 submit --check\nscores = [model(x) for x in known_inputs]\nbest = max(scores) + known")
    assert "reads known_inputs, model, which neither this kernel nor the cell defines" in warned.stderr
    assert "NameError" in warned.stderr and "Run the cells that define them first" in warned.stderr
    quiet = [
        "def g():\n    return later\nlater = known\nprint(len([g()]))\ndisplay(g())",  # builtins, and a later global
        "from math import *\ny = sqrt(4)",  # a star import binds what the syntax does not show
        "try:\n    z = w\nexcept NameError:\n    w = 2",  # the cell defines w itself
    ]
    for cell in quiet:
        out = kernel.run(f"%%e31 submit --check\n{cell}")
        assert "would be queued" in out.stdout and "defines" not in out.stderr, (cell, out.stderr)
    for cell in ("steps = steps + 1", "steps += known", "class Run:\n    n = steps\nsteps = 0"):  # read, then assigned
        out = kernel.run(f"%%e31 submit --check\n{cell}")
        said = "reads steps, which this kernel does not define and the cell does not assign before reading it:"
        assert said in out.stderr, (cell, out.stderr)
    submitted = kernel.run("%%e31 submit\nanswer = undefined_name")  # a warning: the job is still submitted
    assert (
        "reads undefined_name, which" in submitted.stderr and "run the cells that define it" in submitted.stderr.lower()
    )
    job = wait_state(client, _job_id(submitted), "failed", "succeeded")
    assert job["state"] == "failed" and "NameError" in job["reason"]


def test_a_cell_job_resubmitted_with_a_parameter_uses_it_instead_of_the_captured_value(kernel, client):
    kernel.run("lr = 0.1")
    first = kernel.run("%%e31 submit --name lr --wait\nresult = lr * 10")
    assert kernel.value("result") == "1.0", first
    resubmitted = kernel.run("%e31 resubmit last -p lr 0.5 --wait")
    assert "tagged 'parameters'" not in resubmitted.stderr, resubmitted.stderr  # a cell's job has none to tag
    job = client.job(_job_id(resubmitted))
    assert job["state"] == "succeeded" and job["work"]["parameters"] == {"lr": 0.5}, job
    kernel.run(f"%e31 collect {job['id']}")
    assert kernel.value("result") == "5.0" and kernel.value("lr") == "0.1"  # the kernel's own lr is untouched
    typo = kernel.run("%e31 resubmit last -p lrr 0.5 --check")
    assert "Parameter 'lrr' is not a name the cell reads: did you mean 'lr'?" in typo.stderr


def test_a_cell_that_is_not_python_is_refused_and_code_run_by_magics_is_read(kernel, client):
    refused = kernel.run("%%e31 submit\nx = 1\ny = (x,")
    assert "e31: The cell is not valid Python (line 2)" in refused.stderr and "nothing was submitted" in refused.stderr
    assert refused.error == "" and client.jobs() == []
    kernel.run("lr = 0.1\ndef model(v):\n    return v * 10")
    timed = kernel.run(
        "%%e31 submit --wait\n%time result = model(lr)"
    )  # %time runs code that IPython passes as a string
    assert timed.error == "" and "defines" not in timed.stderr, timed.stderr
    assert kernel.value("result") == "1.0", (timed.stdout, timed.stderr)


def test_interrupting_a_wait_stops_the_cell_and_says_the_job_goes_on(kernel, client, gated):
    job = wait_state(client, gated.submit(client, "held", gpus=1)["id"], "running")
    threading.Timer(3, kernel.manager.interrupt_kernel).start()
    waited = kernel.run(f"%e31 wait {job['id']}")
    assert waited.error.startswith("e31: interrupted. Jobs already submitted go on"), waited.error
    assert "Traceback" not in waited.error and "%e31 collect JOB" in waited.error
    assert client.job(job["id"])["state"] == "running"  # the interrupt stopped the wait, not the job
    assert kernel.value("1 + 1") == "2"  # and the kernel is fine
    gated.open("held")
