"""A finished job's page in JupyterLab shows what its GPUs did, or why it cannot (issue 42).

The queue here has the configured GPUs "0" and "1" and no NVIDIA driver, so the server reports a
job's GPU use as absent, with the reason; the page must show that sentence, and no figures (a
zero would read as "the GPU sat idle"). A job that held no GPU has no GPU-use section at all.

Chromium runs in a thread of its own: Playwright's sync API starts an event loop, which must not
meet one of another test's in this process (see tests/ui/test_browser.py). Screenshots go to
test-artifacts/ui/.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from browser.labserver import CHROMIUM, CHROMIUM_ARGS, LabProcess, screenshot
from support import wait_state, write_notebook

from e31_jupyter.client import E31Client

# One worker for both tests, so that they share the module's JupyterLab.
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("gpu-use-page")]

PANEL_TAB = '.jp-SideBar [data-id="e31-jobs-panel"]'
# A figure as the page would print it: "0%", "42%", "7.8 GiB", "245 W".
FIGURE = re.compile(r"\b\d+(\.\d+)?\s?(%|W\b|B\b|KiB|MiB|GiB|TiB)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu-use") / "root"
    root.mkdir()
    process = LabProcess(root).start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def finished_jobs(lab):
    """A job that held GPU "0" and one that held none, both succeeded, as the server has them."""
    client = E31Client(lab.url, lab.token)
    notebook = write_notebook(lab.root / "small.ipynb", "print('done')")
    with_gpu = client.submit(path=str(notebook), name="held-a-gpu", gpus=1)
    without_gpu = client.submit(path=str(notebook), name="held-no-gpu", gpus=0)
    return wait_state(client, with_gpu["id"], "succeeded"), wait_state(client, without_gpu["id"], "succeeded")


def in_own_thread(work):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


def job_page(lab, job: dict, shot: str) -> dict:
    """Open the job's page from the jobs panel; what its GPU-use section shows."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        page.set_default_timeout(30_000)
        page.goto(lab.lab_url(f"gpu-use-{job['id']}"))
        expect(page.locator(PANEL_TAB)).to_be_visible(timeout=60_000)
        if not page.locator("#e31-jobs-panel").is_visible():
            page.locator(PANEL_TAB).click()
        page.locator(f'.e31-JobRow[data-job-id="{job["id"]}"]').click()
        detail = page.locator(f'.e31-Detail-body[data-job-id="{job["id"]}"]')
        expect(detail).to_have_attribute("data-state", "succeeded")
        expect(detail.locator(".e31-Timeline")).to_contain_text("Finished")  # the page has rendered
        section = detail.locator(".e31-GpuUse")
        seen = {"sections": section.count()}
        if seen["sections"]:
            section.scroll_into_view_if_needed()
            seen.update(
                text=section.inner_text(),
                available=section.get_attribute("data-available"),
                figures=section.locator("dt").count(),
                sparklines=section.locator("svg").count(),
            )
        screenshot(page, shot)
        browser.close()
        return seen


@pytest.mark.timeout(300)
def test_finished_jobs_page_says_why_it_has_no_gpu_figures(lab, finished_jobs):
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: install scripts/system-packages/browser.txt"
    job = finished_jobs[0]
    use = job.get("gpu_use")
    assert use is not None, f"the server reports no gpu_use for a job that held GPU 0: {job}"
    assert use["available"] is False and use["why_absent"], f"no NVML here, yet: {use}"
    assert use["util_mean"] is None and use["memory_peak_bytes"] is None, use

    seen = in_own_thread(lambda: job_page(lab, job, "detail-gpu-use-absent"))

    assert seen["sections"] == 1, seen
    assert seen["available"] == "false", seen
    assert use["why_absent"] in seen["text"], seen
    assert seen["figures"] == 0 and seen["sparklines"] == 0, seen
    assert not FIGURE.search(seen["text"].replace(use["why_absent"], "")), seen  # no "0%", "0 W", ...


@pytest.mark.timeout(300)
def test_a_job_that_held_no_gpu_has_no_gpu_use_section(lab, finished_jobs):
    job = finished_jobs[1]
    assert job.get("gpu_use") is None, job

    seen = in_own_thread(lambda: job_page(lab, job, "detail-gpu-use-none"))

    assert seen == {"sections": 0}
