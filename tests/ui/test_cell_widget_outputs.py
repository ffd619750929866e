"""Issue 41, item 3, in a real JupyterLab in headless Chromium: a ``%%e31`` cell that waits in line
behind another job, then prints and plots, shows both in its widget once it has succeeded, though
the page was reloaded while it waited; on each ipykernel major version pyproject allows (6 and 7).

The notebook's kernel (the one that holds the widget) is the version under test: ipykernel 7 is
this Python's, ipykernel 6 a venv's that scripts/install-system-packages.sh makes
(``E31_IPYKERNEL6_VENV``, /opt/e31-ipykernel6), with the package under test on its PYTHONPATH.
The job itself runs on the server's default kernel. Screenshots go to
test-artifacts/cell-widget-outputs/.

What lost them before: the widgets' poller thread printed the outputs inside ``with self.outputs``,
which captures the messages whose parent is the kernel's last shell request. After a reload that
is the old page's ``comm_close``, for which the new page holds no request, so JupyterLab drops
them (ipykernel 6 and 7 alike; without the reload it is the cell's own execute request and they
show). Now the widget's ``outputs`` state is set instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from browser.labserver import CHROMIUM, CHROMIUM_ARGS, LabProcess, stop_active_jobs
from support import cannot_run_here, wait_for, wait_state, write_notebook

import e31_jupyter
from e31_jupyter.client import E31Client

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("cell-widget-outputs")]  # one lab

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "cell-widget-outputs"
PACKAGE_ROOT = Path(e31_jupyter.__file__).resolve().parents[1]  # what the notebook's kernel imports
IPYKERNEL6_VENV = Path(os.environ.get("E31_IPYKERNEL6_VENV", "/opt/e31-ipykernel6"))
PYTHONS = {7: Path(sys.executable), 6: IPYKERNEL6_VENV / "bin" / "python"}

GATE = """
import os, time
started = time.time()
while not os.path.exists(gate) and time.time() - started < 120:
    time.sleep(0.05)
assert os.path.exists(gate), "the test never opened the gate"
"""
LINES = [f"epoch {n} done" for n in range(3)]
CELL = (
    "%%e31 submit --gpus 2 --name waited\n"
    "import time\nimport matplotlib.pyplot as plt\n"
    "for epoch in range(3):\n    print(f'epoch {epoch} done')\n    time.sleep(0.5)\n"
    "plt.plot([1, 3, 2])\nplt.show()\n"
)


def kernel_name(major: int) -> str:
    return f"e31-ipykernel{major}"


def display_name(major: int) -> str:
    return f"Python (ipykernel {major})"


def check_python(major: int) -> None:
    """The Python of the kernelspec ``kernel_name(major)`` has that ipykernel and can load the magics."""
    python = PYTHONS[major]
    how = "bash scripts/install-system-packages.sh makes it" if major == 6 else "pip install -e '.[test]'"
    if not python.exists():
        cannot_run_here(f"no Python with ipykernel {major} at {python} ({how})")
    probe = subprocess.run(
        [str(python), "-c", "import ipykernel, e31_jupyter.magics, matplotlib; print(ipykernel.__version__)"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)},
    )  # fmt: skip
    version = probe.stdout.strip()
    if probe.returncode != 0 or not version.startswith(f"{major}."):
        cannot_run_here(f"{python} has no usable ipykernel {major} ({version or probe.stderr[-500:]}; {how})")


@pytest.fixture(params=[7, 6], ids=["ipykernel7", "ipykernel6"])
def major(request) -> int:
    """The ipykernel major version of the notebook's kernel; checked before a lab starts."""
    check_python(request.param)
    return request.param


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`e31 lab` with GPUs "0" and "1", and a kernelspec per ipykernel major version."""
    root = tmp_path_factory.mktemp("cell-widget-outputs") / "root"
    root.mkdir()
    jupyter_path = root.parent / "jupyter-path"
    for major, python in PYTHONS.items():
        spec = jupyter_path / "kernels" / kernel_name(major)
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(
            json.dumps({
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": display_name(major),
                "language": "python",
                "env": {"PYTHONPATH": str(PACKAGE_ROOT)},
            })
        )  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:  # LabProcess passes its environment on
        patch.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [str(jupyter_path), os.environ.get("JUPYTER_PATH")])))
        server = LabProcess(root).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def chromium():
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: bash scripts/install-system-packages.sh"
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def api(lab):
    """The queue's client; at the end no job is left active and no kernel running."""
    client = E31Client(lab.url, lab.token)
    yield client
    stop_active_jobs(client)
    for session in requests.get(f"{lab.url}/api/sessions", headers=lab.headers, timeout=10).json():
        requests.delete(f"{lab.url}/api/sessions/{session['id']}", headers=lab.headers, timeout=10)


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def run_cell(page, index: int) -> None:
    page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def reload_until_live(page, idle, widget, name: str) -> None:
    """Reload the page and wait for ``widget`` to be live again; once more if ipywidgets says
    "model not found".

    ipywidgets' renderer (jupyterlab_widgets 3.0) shows that text for good when it renders a view
    after the widget manager says it has restored from the kernel but before the model is in its
    registry; it never renders that output again. Seen once in CI (2026-12-06); not once in 32
    runs on a 2-core machine, 26 of them with both cores kept busy. A user reloads; so does the
    test, keeping a screenshot and the browser's console of the first try. A second failure
    fails the test.
    """
    from playwright.sync_api import expect

    console: list[str] = []
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    lost = page.get_by_text("Error displaying widget: model not found")
    for attempt in (1, 2):
        page.reload()
        expect(idle).to_be_visible(timeout=90_000)
        expect(widget.or_(lost).first).to_be_visible(timeout=60_000)
        if widget.count() and not lost.count():
            return
        screenshot(page, f"{name}-reload-{attempt}-model-not-found")
        (ARTIFACTS / f"{name}-reload-{attempt}-console.txt").write_text("\n".join(console))
    pytest.fail(f"the widget was not restored after two reloads; see {ARTIFACTS}")


def counts(text: str) -> list[int]:
    return [text.count(line) for line in LINES]


@pytest.mark.timeout(300)
def test_a_cell_that_waited_in_line_with_the_page_reloaded_shows_its_prints_and_plot(major, lab, api, page):
    from playwright.sync_api import expect

    name = f"waited-ipykernel{major}"
    gate = lab.root / f"gate-{major}"
    blocker_nb = write_notebook(lab.root / f"blocker-{major}.ipynb", GATE, parameters="gate = ''")
    blocker = api.submit(path=str(blocker_nb), name=f"blocker-{major}", gpus=2, parameters={"gate": str(gate)})
    wait_state(api, blocker["id"], "running")
    notebook = write_notebook(
        lab.root / f"{name}.ipynb",
        "import ipykernel\nprint(f'ipykernel {ipykernel.__version__}')",
        "%load_ext e31_jupyter",
        CELL,
        kernel=kernel_name(major),
    )
    before = {job["id"] for job in api.jobs()}

    page.goto(lab.lab_url(name, notebook.name))
    idle = page.get_by_text(f"{display_name(major)} | Idle")
    expect(idle).to_be_visible(timeout=90_000)
    for index in range(3):
        run_cell(page, index)
    cells = page.locator(".jp-Notebook .jp-Cell")
    expect(cells.nth(0).locator(".jp-OutputArea")).to_contain_text(f"ipykernel {major}.")
    widget = page.locator(".e31-live").filter(has=page.locator("b", has_text=re.compile("^waited$")))
    expect(widget).to_contain_text("queued", timeout=60_000)
    expect(widget).to_contain_text("1st in line")
    (job_id,) = {job["id"] for job in api.jobs()} - before
    assert api.job(job_id)["queue_position"] == 1  # behind the blocker

    try:
        # Saved (the reloaded page shows what the file holds), then reloaded while the job waits.
        page.keyboard.press("Control+s")
        wait_for(lambda: "widget-view+json" in notebook.read_text(), 30, what="the notebook to be saved")
        reload_until_live(page, idle, widget, name)
        expect(widget).to_contain_text("queued", timeout=60_000)  # live again, from the kernel
        assert api.job(job_id)["state"] == "queued"
        screenshot(page, f"{name}-1-queued-after-reload")

        gate.touch()
        ended = wait_state(api, job_id, "succeeded", "failed", timeout=120)
        assert ended["state"] == "succeeded", ended.get("reason")
        expect(widget).to_contain_text("succeeded", timeout=30_000)
        shown = widget.locator(".widget-output")
        expect(shown).to_contain_text(LINES[-1], timeout=30_000)
        expect(shown.locator("img")).to_be_visible()  # the plot
        assert counts(shown.inner_text()) == [1, 1, 1], shown.inner_text()
        # and not beside the widget as well (the cell's other outputs: its first line, the snapshot)
        children = cells.nth(2).locator(".jp-Cell-outputArea > .jp-OutputArea-child")
        beside = children.filter(has_not=page.locator(".e31-live"))
        assert children.count() == beside.count() + 1
        assert [counts(text) for text in beside.all_inner_texts()] == [[0, 0, 0]] * beside.count()
    finally:
        screenshot(page, f"{name}-2-end")
