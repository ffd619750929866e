"""The morning after, in JupyterLab: endings found on return make one summary notification, and the
status bar shows the failure until it is looked at. Headless Chromium against a real `e31 lab`.

Run by tests/ui/test_browser.py in its own process; alone:
    python -m pytest -p no:cacheprovider -o addopts= tests/ui/browser/browser_notifications.py -v
Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import re

from browser_jobs_ui import PANEL_TAB, gate, gated_notebook, open_lab
from labserver import api, browser, context, lab, screenshot  # noqa: F401  (pytest fixtures)
from playwright.sync_api import expect
from support import wait_state, write_notebook

STATUS = ".e31-Status"
SUMMARY = "While you were away, 20 jobs ended: 4 succeeded, 1 failed (“night-broken”), 15 cancelled."


def a_night_of_twenty_endings(lab, api) -> dict:
    """20 jobs end: a GPU job and three CPU jobs succeed, one fails, fifteen are cancelled while
    they wait for the GPUs. Returns the failed job."""
    quick = str(write_notebook(lab.root / "night-quick.ipynb", "1 + 1"))
    broken = str(write_notebook(lab.root / "night-broken.ipynb", "1 / 0"))
    hog = api.submit(
        path=str(gated_notebook(lab, "night")), name="night-hog", gpus=2, parameters={"gate": gate(lab, "night")}
    )
    wait_state(api, hog["id"], "running")
    waiting = [api.submit(path=quick, name=f"night-waits-{i}", gpus=1) for i in range(15)]
    for job in waiting:
        api.cancel(job["id"])
    quick_ones = [api.submit(path=quick, name=f"night-cpu-{i}", gpus=0) for i in range(3)]
    failed = api.submit(path=broken, name="night-broken", gpus=0)
    for job in quick_ones:
        wait_state(api, job["id"], "succeeded")
    wait_state(api, failed["id"], "failed")
    (lab.root / "gate-night").touch()
    wait_state(api, hog["id"], "succeeded")
    for job in waiting:
        wait_state(api, job["id"], "cancelled")
    return failed


def use_theme(page, theme: str) -> None:
    """Settings > Theme > `theme`, as a user picks it."""
    page.keyboard.press("Escape")  # no menu left open
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-item", has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$"))).hover()
    page.get_by_role("menuitem", name=theme, exact=True).click()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
    page.wait_for_timeout(500)  # the theme's style sheet applies


def test_twenty_jobs_ending_while_the_page_is_closed_give_one_summary_notification(lab, api, context):
    page = context.new_page()
    open_lab(page, lab, "evening")
    page.wait_for_function("() => Object.keys(localStorage).some(k => k.startsWith('e31-jupyter:announced-endings'))")
    page.close()

    failed = a_night_of_twenty_endings(lab, api)

    morning = context.new_page()
    open_lab(morning, lab, "morning")
    toasts = morning.locator(".Toastify__toast")
    expect(toasts).to_have_count(1)
    expect(toasts).to_contain_text(SUMMARY)
    status = morning.locator(STATUS)
    expect(status.locator(".e31-Status-failed")).to_have_text("1 failed")
    expect(status).to_have_attribute("title", re.compile(r"1 failed, not looked at yet: “night-broken”"))
    morning.wait_for_timeout(1500)  # later polls add nothing
    expect(toasts).to_have_count(1)
    try:
        screenshot(morning, "notifications-summary-light")
        use_theme(morning, "JupyterLab Dark")
        expect(toasts).to_have_count(1)
        screenshot(morning, "notifications-summary-dark")
    finally:
        use_theme(morning, "JupyterLab Light")  # the theme is a setting the other tests share

    # Its action opens the failed job; the jobs panel then clears the failure from the status bar.
    toasts.get_by_role("button", name="Open “night-broken”").click()
    expect(morning.locator(f'.e31-Detail-body[data-job-id="{failed["id"]}"]')).to_contain_text("ZeroDivisionError")
    expect(status.locator(".e31-Status-failed")).to_have_count(0)
    expect(status).to_contain_text(re.compile(r"0 running\s*·\s*0 queued\s*·"))

    morning.reload()
    open_lab(morning, lab, "morning")
    morning.wait_for_timeout(1500)
    expect(toasts).to_have_count(0)
    expect(status.locator(".e31-Status-failed")).to_have_count(0)
    expect(morning.locator(PANEL_TAB)).to_be_visible()
