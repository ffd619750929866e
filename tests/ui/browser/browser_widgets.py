"""The %%e31 job widgets in a real notebook in JupyterLab, in headless Chromium.

Run by tests/ui/test_browser.py in its own process. Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import re
import time

import nbformat
import requests
from labserver import api, browser, context, lab, screenshot  # noqa: F401  (pytest fixtures)
from playwright.sync_api import expect
from support import wait_for, wait_state

WAIT = "import os, time\nwhile not os.path.exists({gate!r}):\n    time.sleep(0.05)\n"


def _notebook(lab) -> str:
    gates = {name: str(lab.root / f"widget-gate-{name}") for name in ("blocker", "follower", "doomed")}
    cells = [
        "%load_ext e31_jupyter",
        "%%e31 submit --gpus 2 --name blocker\n" + WAIT.format(gate=gates["blocker"]),
        "%%e31 submit --gpus 1 --name follower\n"
        + WAIT.format(gate=gates["follower"])
        + "import matplotlib.pyplot as plt\nplt.plot([0, 1, 2], [0, 1, 4])\nplt.show()\n"
        "open('out.txt', 'w').write('bytes from the job')",
        "%%e31 submit --gpus 1 --name doomed\n" + WAIT.format(gate=gates["doomed"]),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, lab.root / "widgets.ipynb")
    return gates


def _run_cell(page, index: int) -> None:
    page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def _widget(page, name: str):
    return page.locator(".e31-live").filter(has=page.locator("b", has_text=re.compile(f"^{name}$")))


def _meter(widget) -> float:
    text = widget.inner_text()
    return float(re.search(r"([\d.]+) GPU-hours", text).group(1))


def test_widgets_follow_jobs_from_queued_to_results_and_cancel(lab, api, context):
    gates = _notebook(lab)
    page = context.new_page()
    page.goto(lab.lab_url("widgets", "widgets.ipynb"))
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(timeout=90_000)
    for index in range(4):
        _run_cell(page, index)
    blocker, follower, doomed = (_widget(page, n) for n in ("blocker", "follower", "doomed"))

    expect(blocker).to_contain_text("running", timeout=60_000)
    expect(follower).to_contain_text("queued", timeout=30_000)
    expect(follower).to_contain_text("1st in line")
    expect(doomed).to_contain_text("2nd in line")
    # The status bar counts the jobs the kernel submitted, though the jobs panel was never open.
    expect(page.locator("#e31-jobs-panel")).not_to_be_visible()
    expect(page.locator(".e31-Status")).to_contain_text(re.compile(r"1 running\s*·\s*2 queued"), timeout=15_000)
    screenshot(page, "widgets-1-queued")

    open(gates["blocker"], "w").close()
    expect(follower).to_contain_text("running", timeout=60_000)
    expect(follower.locator(".widget-hprogress")).to_be_visible()
    expect(follower).to_contain_text(re.compile(r"\d of 3 cells"), timeout=30_000)
    first = _meter(follower)
    wait_for(lambda: _meter(follower) > first, timeout=20, what="the meter to tick in the page")
    screenshot(page, "widgets-2-running")

    doomed.get_by_role("button", name="Cancel").click()
    doomed_id = next(j["id"] for j in api.jobs() if j["name"] == "doomed")
    assert wait_state(api, doomed_id, "cancelled", "succeeded", "failed")["state"] == "cancelled"
    expect(doomed.locator("span", has_text=re.compile("^cancelled$"))).to_be_visible(timeout=30_000)

    open(gates["follower"], "w").close()
    expect(follower).to_contain_text("succeeded", timeout=90_000)
    expect(follower.locator("img")).to_be_visible(timeout=30_000)  # the cell's plot
    link = follower.get_by_role("link", name="out.txt")
    expect(link).to_be_visible()
    download = page.request.get(lab.url + link.get_attribute("href"))
    assert download.ok and download.body() == b"bytes from the job"
    expect(follower.get_by_role("button", name="Collect")).to_be_visible()
    screenshot(page, "widgets-3-succeeded")

    # Saved, and reopened with no kernel: the last known state, not an empty "model not found".
    page.keyboard.press("Control+s")
    time.sleep(1)
    sessions = requests.get(f"{lab.url}/api/sessions", headers=lab.headers, timeout=10).json()
    for session in sessions:
        requests.delete(f"{lab.url}/api/sessions/{session['id']}", headers=lab.headers, timeout=10)
    reopened = context.new_page()
    reopened.goto(lab.lab_url("widgets-reopened", "widgets.ipynb"))
    snapshot = reopened.locator(".e31-snapshot").filter(has_text="follower")
    expect(snapshot).to_be_visible(timeout=60_000)
    expect(snapshot).to_contain_text("succeeded")
    screenshot(reopened, "widgets-4-reopened-without-kernel")
