"""The jobs list follows the queue, and the jobs table sorts and acts on many jobs at once; both by
keyboard too. Headless Chromium (1440x900) against a real `e31 lab` with GPUs "0" and "1".

Run by tests/ui/test_browser.py in its own process; alone:
    python -m pytest -p no:cacheprovider -o addopts= tests/ui/browser/browser_job_lists.py -v
Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import re

import pytest
from browser_jobs_ui import GATE, gate, gated_notebook, job_row, open_lab, show_panel
from browser_notifications import use_theme
from labserver import api, browser, lab, screenshot  # noqa: F401  (pytest fixtures)
from playwright.sync_api import expect
from support import wait_state, write_notebook

LONG_NAME = "jl-resnet-baseline-imagenet-224px-mixed-precision-second-in-line"
CLOCK = re.compile(r"^~(\w{3} )?\d\d:\d\d$")  # "~10:42", "~Tue 00:05" past midnight


@pytest.fixture
def context(browser):  # noqa: F811  (this module's own size)
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    ctx.set_default_timeout(30000)
    yield ctx
    ctx.close()


def hold_both_gpus(lab, api, name: str) -> dict:
    """A job that holds both GPUs until its gate opens (never, here), expected to take an hour."""
    printing = write_notebook(lab.root / f"{name}.ipynb", "print('epoch 3/12')\n" + GATE, parameters="gate = ''")
    job = api.submit(
        path=str(printing), name=name, gpus=2, expected_runtime="1h", parameters={"gate": gate(lab, name)},
    )  # fmt: skip
    wait_state(api, job["id"], "running")
    return job


def queue(lab, api, name: str) -> dict:
    """A one-GPU job that waits in line behind the holder."""
    notebook = str(gated_notebook(lab, "jl-waits"))
    return api.submit(path=notebook, name=name, gpus=1, expected_runtime="30m", parameters={"gate": gate(lab, name)})


def quick(lab, api, name: str, source: str) -> dict:
    """A CPU job (no GPU: it runs at once) that has ended on return."""
    job = api.submit(path=str(write_notebook(lab.root / f"{name}.ipynb", source)), name=name, gpus=0)
    return wait_state(api, job["id"], "succeeded", "failed")


def screenshots_in_both_themes(page, name: str) -> None:
    try:
        screenshot(page, f"{name}-light")
        use_theme(page, "JupyterLab Dark")
        screenshot(page, f"{name}-dark")
    finally:
        use_theme(page, "JupyterLab Light")  # the theme is a setting the other tests share


def test_the_list_shows_running_then_queued_in_line_order_then_ended_and_works_by_keyboard(lab, api, context):
    broken = quick(lab, api, "jl-broken", "1 / 0")
    hold_both_gpus(lab, api, "jl-running")
    first = queue(lab, api, "jl-first-in-line")
    queue(lab, api, LONG_NAME)
    page = context.new_page()
    open_lab(page, lab, "job-lists")
    show_panel(page)

    panel = page.locator("#e31-jobs-panel")
    titles = panel.locator(".e31-JobSection-title")
    expect(titles).to_have_text([re.compile(r"^Running\s*1$"), re.compile(r"^Queued\s*2$"), re.compile(r"^Ended")])
    expect(panel.locator('[data-section="running"] .e31-JobRow-name')).to_have_text(["jl-running"])
    expect(panel.locator('[data-section="running"] .e31-JobRow-printed')).to_have_text("epoch 3/12")  # its last line
    waiting = panel.locator('[data-section="queued"] .e31-JobRow')
    expect(waiting.locator(".e31-JobRow-name")).to_have_text(["jl-first-in-line", LONG_NAME])
    expect(waiting.locator(".e31-JobRow-position")).to_have_text(["#1", "#2"])
    expect(waiting.locator(".e31-JobRow-start").first).to_have_text(CLOCK)
    ended = panel.locator('[data-section="ended"] .e31-JobRow').filter(
        has=page.locator(".e31-JobRow-name", has_text=re.compile(r"^jl-broken$"))
    )
    expect(ended.locator(".e31-JobRow-reason")).to_contain_text(broken["reason"][:40])
    expect(ended.locator(".e31-JobRow-cost")).to_have_text("0 GPU-h")
    expect(ended.get_by_role("button", name="Open results of jl-broken")).to_be_visible()
    # The long name takes two lines, cut only after the second.
    name = job_row(page, LONG_NAME).locator(".e31-JobRow-name")
    lines = name.evaluate("el => el.getBoundingClientRect().height / parseFloat(getComputedStyle(el).fontSize)")
    assert 1.8 < lines < 3, f"the name is {lines:.1f} font sizes high"
    screenshots_in_both_themes(page, "job-lists-panel")

    # Keyboard: a row is a button that opens on Space; the tabs and the chips move with the arrows.
    opener = job_row(page, "jl-first-in-line").get_by_role("button").first
    opener.focus()
    page.keyboard.press("Space")
    expect(page.locator(f'.e31-Detail-body[data-job-id="{first["id"]}"]')).to_be_visible()
    panel.get_by_role("tab", name="Jobs").focus()
    page.keyboard.press("ArrowRight")
    expect(panel.get_by_role("tab", name="Meter")).to_be_focused()
    expect(panel.get_by_role("tab", name="Meter")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowLeft")
    expect(panel.get_by_role("tab", name="Jobs")).to_have_attribute("aria-selected", "true")
    chips = panel.get_by_role("radio")
    expect(chips.first).to_have_attribute("tabindex", "0")
    chips.first.focus()
    page.keyboard.press("ArrowRight")
    expect(chips.nth(1)).to_be_focused()
    expect(chips.nth(1)).to_have_attribute("aria-checked", "true")  # "Active": nothing ended listed
    expect(panel.locator('[data-section="ended"]')).to_have_count(0)
    page.keyboard.press("Home")
    expect(chips.first).to_have_attribute("aria-checked", "true")
    page.close()


def table_names(table, prefix: str) -> list[str]:
    names = table.locator("tbody .e31-JobsTable-name").all_inner_texts()
    return [name for name in names if name.startswith(prefix)]


def test_the_jobs_table_sorts_and_cancels_two_queued_jobs_at_once(lab, api, context):
    done = quick(lab, api, "jl-tb-done", "1 + 1")
    hold_both_gpus(lab, api, "jl-tb-hold")
    zulu = queue(lab, api, "jl-tb-zulu")  # first in line
    alpha = queue(lab, api, "jl-tb-alpha")
    page = context.new_page()
    open_lab(page, lab, "job-table")
    show_panel(page)
    page.locator("#e31-jobs-panel .e31-Panel-table").click()
    table = page.locator("#e31-jobs-table")
    expect(table.locator("tbody tr").filter(has_text="jl-tb-alpha")).to_have_count(1)
    assert table_names(table, "jl-tb-")[:3] == ["jl-tb-hold", "jl-tb-zulu", "jl-tb-alpha"]  # the queue's order

    by_name = table.locator('th[data-column="name"]')
    by_name.get_by_role("button").click()
    expect(by_name).to_have_attribute("aria-sort", "ascending")
    assert table_names(table, "jl-tb-") == ["jl-tb-alpha", "jl-tb-done", "jl-tb-hold", "jl-tb-zulu"]
    by_name.get_by_role("button").click()
    expect(by_name).to_have_attribute("aria-sort", "descending")
    assert table_names(table, "jl-tb-") == ["jl-tb-zulu", "jl-tb-hold", "jl-tb-done", "jl-tb-alpha"]
    table.locator('th[data-column="position"]').get_by_role("button").click()
    expect(by_name).to_have_attribute("aria-sort", "none")
    expect(table.locator("tbody tr").nth(0)).to_contain_text("#1")
    expect(table.locator("tbody tr").nth(1)).to_contain_text("#2")

    for job in ("jl-tb-zulu", "jl-tb-alpha", "jl-tb-done"):
        table.get_by_role("checkbox", name=f"Select {job}").check()
    cancel = table.locator('[data-action="cancel"]')
    expect(cancel).to_have_text("Cancel (2)")
    expect(table.locator('[data-action="collect"]')).to_have_text("Collect (1)")
    screenshots_in_both_themes(page, "job-lists-table")
    cancel.click()
    confirm = page.locator(".jp-Dialog").filter(has_text="Cancel: 2 jobs?")
    confirm.locator(".jp-Dialog-button.jp-mod-warn").click()
    report = table.locator(".e31-JobsTable-report")
    expect(report).to_have_text(re.compile(r"^Cancelled 2 jobs\. Not cancelled: “jl-tb-done” \(already succeeded\)\."))
    for job in (zulu, alpha):
        assert wait_state(api, job["id"], "cancelled", timeout=15)["state"] == "cancelled"
    expect(table.locator(f'tr[data-job-id="{alpha["id"]}"]')).to_have_attribute("data-state", "cancelled")
    assert api.job(done["id"])["state"] == "succeeded"
    page.close()
