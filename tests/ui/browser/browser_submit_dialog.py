"""The submit dialog at 1440x900 in headless Chromium: the forecast and cost pinned at its top,
run times and deadlines checked as they are typed, and a file picker when no notebook is open.

Run by tests/ui/test_browser.py in its own process; alone:
    python -m pytest -p no:cacheprovider -o addopts= tests/ui/browser/browser_submit_dialog.py -v
Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import json
import re

import pytest
import requests
from browser_jobs_ui import gate, gated_notebook, open_lab, settled, show_sidebar
from labserver import api, browser, lab, screenshot  # noqa: F401  (pytest fixtures)
from playwright.sync_api import expect
from support import wait_state, write_notebook

VIEWPORT = {"width": 1440, "height": 900}
RATE = {"gpu_hour_rate": 2.5, "currency": "EUR"}  # the server's rate is 0 in these tests


def with_a_rate(route) -> None:
    """The server's /e31/api/info, with the rate of RATE."""
    info = route.fetch()
    route.fulfill(response=info, json={**info.json(), **RATE})


MANY_PARAMETERS = "\n".join(f"option_{i} = {i}  # a setting of the run" for i in range(14))


@pytest.fixture
def page(browser, lab):  # noqa: F811
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(30000)
    yield context.new_page()
    context.close()
    light_theme(lab)


def light_theme(lab) -> None:  # noqa: F811
    """Back to the light theme, a user setting that the next tests' screenshots would keep."""
    url = f"{lab.url}/lab/api/settings/@jupyterlab/apputils-extension:themes"
    body = {"raw": json.dumps({"theme": "JupyterLab Light"})}
    requests.put(url, json=body, headers=lab.headers, timeout=10).raise_for_status()


def open_dialog_on(page, name: str):
    """The submit dialog on notebook ``name``, from the file browser's context menu."""
    show_sidebar(page, "filebrowser")
    page.locator('.jp-DirListing-item[data-file-type="notebook"]').filter(has_text=name).click(button="right")
    page.locator(".lm-Menu-item").filter(has_text="Submit as GPU Job…").click()
    dialog = page.locator(".e31-SubmitDialog")
    settled(dialog)
    return dialog


def in_view(page, dialog, element) -> None:
    """``element`` is shown whole inside the viewport and inside the dialog's scrolled body."""
    box, body = element.bounding_box(), dialog.locator(".jp-Dialog-body").bounding_box()
    assert box and body, "the element or the dialog's body is not shown"
    for outer in ({"x": 0, "y": 0, **VIEWPORT}, body):
        assert outer["x"] <= box["x"] and box["x"] + box["width"] <= outer["x"] + outer["width"] + 0.5, (box, outer)
        assert outer["y"] <= box["y"] and box["y"] + box["height"] <= outer["y"] + outer["height"] + 0.5, (box, outer)


def field_of(dialog, name: str):
    """The form's field (label, input, hint or error) of the input ``name``."""
    return dialog.locator(".e31-Field").filter(has=dialog.page.locator(f'input[name="{name}"]'))


def use_theme(page, theme: str) -> None:
    """Settings > Theme > ``theme`` (the apputils:change-theme command), as a user picks it."""
    page.keyboard.press("Escape")  # no menu left open
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    menu_item(page, "Theme").hover()
    menu_item(page, theme).click()
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme)
    page.wait_for_timeout(500)  # the theme's style sheet applies


def menu_item(page, label: str):
    return page.locator(".lm-Menu-item").filter(
        has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$"))
    )


def check_forecast_in_view(page, dialog, theme: str) -> None:
    forecast, cost = dialog.locator(".e31-SubmitForm-forecast"), dialog.locator(".e31-SubmitForm-cost")
    expect(forecast).to_have_text(
        re.compile(r"^Would wait for resnet-baseline to succeed, then join the line(; expected to start .+)?\.$"),
        timeout=15_000,
    )
    expect(cost).to_have_text("Estimated cost: 3.75 EUR (~1.50 GPU-h: 1 GPU × 1h 30m expected).")
    in_view(page, dialog, forecast)
    in_view(page, dialog, cost)
    screenshot(page, f"submit-dialog-forecast-{theme}")
    body = dialog.locator(".jp-Dialog-body")
    body.evaluate("b => { b.scrollTop = b.scrollHeight; }")  # down to the Advanced section: still pinned
    assert body.evaluate("b => b.scrollTop") > 0, "the dialog's body does not scroll: nothing to pin"
    in_view(page, dialog, forecast)
    in_view(page, dialog, cost)


def fill_request(dialog) -> None:
    """1 GPU for 90 minutes, after the running resnet-baseline (in the Advanced section)."""
    dialog.locator('input[name="gpus"]').fill("1")
    dialog.locator('input[name="expectedRuntime"]').fill("90m")
    dialog.locator(".e31-SubmitForm-advanced > summary").click()
    dialog.locator(".e31-AfterField-choice").filter(has_text="resnet-baseline").locator("input").check()


def test_the_forecast_and_its_cost_are_pinned_in_view_in_both_themes(lab, api, page):  # noqa: F811
    baseline = api.submit(
        path=str(gated_notebook(lab, "resnet-baseline")), name="resnet-baseline", gpus=1,
        parameters={"gate": gate(lab, "resnet-baseline")},
    )  # fmt: skip
    wait_state(api, baseline["id"], "running")
    write_notebook(lab.root / "tall.ipynb", "x = 1", parameters=MANY_PARAMETERS)
    page.route(re.compile(r"/e31/api/info(\?|$)"), with_a_rate)
    open_lab(page, lab, "submit-dialog-themes")
    for theme in ("JupyterLab Light", "JupyterLab Dark"):
        use_theme(page, theme)
        dialog = open_dialog_on(page, "tall.ipynb")
        fill_request(dialog)
        check_forecast_in_view(page, dialog, theme.split()[-1].lower())
        dialog.locator(".jp-Dialog-button.jp-mod-reject").click()
        expect(dialog).to_have_count(0)
    assert [j for j in api.jobs() if j["name"] == "tall"] == []  # the checks submitted nothing


def test_forever_as_a_run_time_is_refused_next_to_the_field(lab, api, page):  # noqa: F811
    write_notebook(lab.root / "forever.ipynb", "x = 1")
    open_lab(page, lab, "submit-dialog-forever")
    dialog = open_dialog_on(page, "forever.ipynb")
    accept = dialog.locator(".jp-Dialog-button.jp-mod-accept")
    max_runtime = dialog.locator('input[name="maxRuntime"]')
    field = field_of(dialog, "maxRuntime")

    max_runtime.fill("forever")
    expect(field.locator(".e31-Field-error")).to_contain_text("Cannot read “forever” as a duration")
    expect(accept).to_be_disabled()
    expect(dialog.locator(".e31-SubmitForm-pending")).to_have_text(
        "Correct the fields marked in red to see the forecast."
    )
    screenshot(page, "submit-dialog-forever")
    max_runtime.press("Enter")  # the dialog's keyboard accept is refused too
    expect(dialog).to_be_visible()
    assert [j for j in api.jobs() if j["name"] == "forever"] == []

    max_runtime.fill("90m")
    expect(field.locator(".e31-Field-error")).to_have_count(0)
    expect(field.locator(".e31-Field-hint")).to_contain_text("= 1h 30m")
    deadline = dialog.locator('input[name="deadline"]')
    deadline.fill("08:00")
    expect(field_of(dialog, "deadline").locator(".e31-Field-hint")).to_have_text(
        re.compile(r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) 08:00, local · ")
    )
    expect(accept).to_be_enabled()
    expect(dialog.locator(".e31-SubmitForm-forecast")).to_have_text(re.compile(r"^Would (start now|wait at position)"))
    dialog.locator(".jp-Dialog-button.jp-mod-reject").click()
    expect(dialog).to_have_count(0)


def test_with_no_notebook_open_a_file_picker_offers_the_notebooks(lab, api, page):  # noqa: F811
    write_notebook(lab.root / "picked.ipynb", "x = 1")
    (lab.root / "notes.txt").write_text("not a notebook")
    open_lab(page, lab, "submit-dialog-picker")
    expect(page.locator(".jp-DirListing-item").filter(has_text="picked.ipynb")).to_be_visible(timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
    page.locator(".lm-Menu-item", has_text="Activate Command Palette").click()
    search = page.locator(".lm-CommandPalette-input")
    expect(search).to_be_visible()
    search.fill("Submit Notebook as GPU")  # into the palette's own field, not wherever the focus was
    page.locator(".lm-CommandPalette-item").filter(has_text="Submit Notebook as GPU Job…").click()

    picker = page.locator(".jp-Dialog").filter(has_text="Submit which notebook as a GPU job?")
    items = picker.locator(".jp-DirListing-item")
    expect(items.filter(has_text="picked.ipynb")).to_have_count(1)
    expect(items.filter(has_text="notes.txt")).to_have_count(0)
    screenshot(page, "submit-dialog-picker")
    items.filter(has_text="picked.ipynb").click()
    picker.locator(".jp-Dialog-button.jp-mod-accept").click()

    dialog = page.locator(".e31-SubmitDialog")
    expect(dialog.locator(".e31-SubmitForm-notebook")).to_have_text("picked.ipynb")
    dialog.locator(".jp-Dialog-button.jp-mod-reject").click()
    expect(dialog).to_have_count(0)
