"""A job's outputs in the notebook: shown once, and cut past a size with a word on where all of it is."""

from __future__ import annotations

import json
import re

from kernels import Kernel, Output, job_id_in, kernel  # noqa: F401 (kernel: a fixture)
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)
from support import wait_state

from e31_jupyter.core.text import format_size

LINES = ("first of three", "second of three", "third of three")
PRINT_THREE = "".join(f"print({line!r})\n" for line in LINES)
POLLER_SETTLES_S = 3  # the widgets' poller has seen the job's end meanwhile
MANY_LINES = "for i in range(5000):\n    print(f'line {i}')"  # 48 KB
LIMIT = 2000
THE_LAST_JOB_WIDGET = """
import ipywidgets
from e31_jupyter.widgets import JobWidget
shown = [w for w in ipywidgets.widgets.widget._instances.values() if isinstance(w, JobWidget)][-1]
"""


def everything_sent(*outputs: Output) -> str:
    """What the kernel sent for these cells: streams, displays and widget messages (an Output
    widget's content reaches the notebook through them, and is saved in its widget state)."""
    return "\n".join(
        part
        for out in outputs
        for part in (out.stdout, out.stderr, json.dumps(out.displays), json.dumps(out.comms), out.error)
    )


def run_and_settle(kernel: Kernel, code: str) -> tuple[Output, str]:
    """Run ``code``; then all that it and the widgets it left showed, once the poller has caught up."""
    out = kernel.run(code)
    return out, everything_sent(out, kernel.listen(POLLER_SETTLES_S))


def test_a_waited_cell_shows_each_output_once(kernel, client):
    out, sent = run_and_settle(kernel, "%%e31 submit --wait --name three\n" + PRINT_THREE)
    assert out.error == "", out.error
    assert client.job(job_id_in(out))["state"] == "succeeded"
    assert [sent.count(line) for line in LINES] == [1, 1, 1], sent
    assert [out.stdout.count(line) for line in LINES] == [1, 1, 1]  # in the cell, not in its widget


def test_a_widget_shown_alone_shows_the_outputs_once_and_its_collect_button_not_again(kernel, client):
    job_id = job_id_in(kernel.run("%%e31 submit --wait --name three\n" + PRINT_THREE))
    _, sent = run_and_settle(kernel, f"%e31 status {job_id}")
    assert [sent.count(line) for line in LINES] == [1, 1, 1], sent
    kernel.run(THE_LAST_JOB_WIDGET)
    clicked = kernel.run("shown.collect_button.click()")
    assert f"e31: job {job_id} (three) succeeded" in clicked.stdout, clicked  # collected,
    assert [everything_sent(clicked).count(line) for line in LINES] == [0, 0, 0]  # its outputs shown above already
    log = kernel.run("shown.log_box.selected_index = 0\nprint(shown.log_html.value)")  # the Log opened
    assert [log.stdout.count(line) for line in LINES] == [1, 1, 1], log


def test_a_failed_waited_cell_shows_its_traceback_once(kernel, client):
    out, sent = run_and_settle(kernel, "%%e31 submit --wait --name fails\nbefore = 1\nafter = 1 / 0")
    assert out.error.endswith("raised ZeroDivisionError: division by zero"), out.error
    assert sent.count("Traceback (most recent call last)") == 1, sent


def test_output_past_the_limit_is_cut_with_a_notice_and_all_of_it_is_in_the_log(kernel, client):
    kernel.run(f"%config E31Magics.max_cell_output_bytes = {LIMIT}")
    out, sent = run_and_settle(kernel, "%%e31 submit --wait --name many\n" + MANY_LINES)
    job_id = job_id_in(out)
    shown = re.findall(r"^line \d+\n", out.stdout, re.MULTILINE)
    assert shown[0] == "line 0\n" and LIMIT - 20 < len("".join(shown)) <= LIMIT, out.stdout
    assert "line 4999" not in sent
    shown_size = format_size(len("".join(shown)))  # 1.9 KB: whole lines only
    notice = f"e31: job {job_id}'s output is cut here, at {shown_size} of 47.7 KB (E31Magics.max_cell_output_bytes)."
    assert out.stderr.startswith(notice) and sent.count(notice) == 1, out.stderr
    assert f"`e31 logs {job_id}` in a terminal (or %e31 logs {job_id})" in out.stderr
    assert f"`e31 collect {job_id}` downloads its executed notebook and report" in out.stderr
    assert "line 4999\n" in client.log(job_id)["text"]  # all of it, where the notice says
    assert "line 4999\\n" in json.dumps(client.notebook(job_id))

    _, status = run_and_settle(kernel, f"%e31 status {job_id}")  # its widget shown alone: cut the same
    assert "line 4999" not in status and status.count(f"e31: job {job_id}'s output is cut here") == 1


def test_displays_count_by_their_size_and_errors_are_always_shown(kernel):
    image = "iVBORw0KGgo" * 100  # 1.1 KB of base64
    notebook = {
        "cells": [
            {"cell_type": "code", "outputs": [
                {"output_type": "stream", "name": "stdout", "text": ["small\n"]},
                {"output_type": "display_data", "data": {"image/png": image, "text/plain": ["<Figure>"]}, "metadata": {}},
                {"output_type": "display_data", "data": {"image/png": image, "text/plain": ["<Figure 2>"]}, "metadata": {}},
                {"output_type": "stream", "name": "stdout", "text": ["after the figures\n"]},
                {"output_type": "error", "ename": "ValueError", "evalue": "late", "traceback": ["ValueError: late"]},
            ]},
        ]
    }  # fmt: skip
    out = kernel.run(f"from e31_jupyter import widgets\nwidgets.replay_outputs({notebook!r}, 'job-1', {LIMIT})")
    assert "small" in out.stdout and "after the figures" not in out.stdout
    assert [d["text/plain"] for d in out.displays] == ["<Figure>"]  # the second one did not fit
    assert out.stderr.startswith("e31: job job-1's output is cut here, at 1.1 KB of 2.2 KB")
    assert out.stderr.rstrip().endswith("ValueError: late")  # past the cut still


def test_a_cell_that_waited_in_line_then_printed_and_plotted_shows_both_in_its_widget(kernel, client, gated):
    """The widget's outputs are its state, set once the job has ended, whichever thread sees
    the end: not prints routed to it by the kernel, which a page reloaded while the job waited
    (or ipykernel 7's routing of a background thread's output) loses."""
    blocker = gated.submit(client, "blocker", gpus=2)
    cell = (
        "%%e31 submit --gpus 2 --name waited\n"
        "import time\nimport matplotlib.pyplot as plt\n"
        "for epoch in range(3):\n    print(f'epoch {epoch} done')\n    time.sleep(0.5)\n"
        "plt.plot([1, 3, 2])\nplt.show()\n"
    )
    out = kernel.run(cell)
    job_id = job_id_in(out)
    assert client.job(job_id)["queue_position"] == 1  # it waits behind the blocker
    gated.open("blocker")
    ended = wait_state(client, job_id, "succeeded", "failed", timeout=120)
    assert ended["state"] == "succeeded", ended["reason"]
    kernel.listen(POLLER_SETTLES_S)
    kernel.run(THE_LAST_JOB_WIDGET)
    shown = json.loads(kernel.run("import json\nprint(json.dumps(shown.outputs.outputs))").stdout)
    texts = "".join(o.get("text", "") for o in shown if o["output_type"] == "stream")
    assert [texts.count(f"epoch {n} done") for n in range(3)] == [1, 1, 1], shown
    assert any("image/png" in o.get("data", {}) for o in shown), shown
    assert client.job(blocker["id"])["state"] in ("running", "succeeded")
