"""The JupyterLab UI in headless Chromium against a real `e31 lab` with GPUs "0" and "1".

Run by tests/ui/test_browser.py in its own process; alone:
    python -m pytest tests/ui/browser/browser_jobs_ui.py -v
Screenshots go to test-artifacts/ui/.
"""

from __future__ import annotations

import re
import time
from datetime import datetime

import requests
from labserver import api, browser, context, lab, screenshot  # noqa: F401  (pytest fixtures)
from playwright.sync_api import expect
from support import wait_for, wait_state, why, write_notebook

from e31_jupyter.core.errors import E31Error

GATE = """
import os, time
started = time.time()
while not os.path.exists(gate) and time.time() - started < 120:
    time.sleep(0.05)
assert os.path.exists(gate), "the test never opened the gate"
"""

PANEL_TAB = '.jp-SideBar [data-id="e31-jobs-panel"]'
JOB_END_WAIT = 60_000  # ms
AFTER_CHOICES = 8  # active jobs the submit dialog lists to run after until asked for all (form.ts)
# Time for a job's start and first cell (about 2 s here), however loaded the machine; not for its second.
RESUMABLE_MAX_RUNTIME = "10s"


def open_lab(page, lab, workspace: str, notebook: str | None = None) -> None:
    page.goto(lab.lab_url(workspace, notebook))
    expect(page.locator(PANEL_TAB)).to_be_visible(timeout=60_000)
    # The first look at the jobs is done (status bar filled in from the server).
    expect(page.locator(".e31-Status")).to_contain_text("today", timeout=30_000)


def show_sidebar(page, widget_id: str, timeout_s: float = 20.0) -> None:
    """Open a sidebar panel by its tab. Its tab toggles it, and JupyterLab may still be laying
    out the workspace (opening or closing panels) when the page looks ready: a click made just
    before that can be undone, so click again until the panel stays open."""
    panel = page.locator(f"#{widget_id}")
    tab = page.locator(f'.jp-SideBar [data-id="{widget_id}"]')
    deadline = time.monotonic() + timeout_s
    while not panel.is_visible():
        assert time.monotonic() < deadline, f"the sidebar panel {widget_id} did not open in {timeout_s:.0f} s"
        tab.click()
        try:
            expect(panel).to_be_visible(timeout=2000)
        except AssertionError:
            continue
        page.wait_for_timeout(300)  # a layout still being restored would close it again now


def show_panel(page) -> None:
    show_sidebar(page, "e31-jobs-panel")


def job_row(page, name: str):
    return page.locator(".e31-JobRow").filter(
        has=page.locator(".e31-JobRow-name", has_text=re.compile(f"^{re.escape(name)}$"))
    )


def toast(page, text: str):
    return page.locator(".Toastify__toast").filter(has_text=text)


def gated_notebook(lab, name: str):
    return write_notebook(lab.root / f"{name}.ipynb", GATE, parameters="gate = ''")


def gate(lab, name: str) -> str:
    return str(lab.root / f"gate-{name}")


def hold_gpus(lab, api, name: str) -> None:
    """Both GPUs held by a running job until the file gate-<name> is made."""
    blocker = api.submit(path=str(gated_notebook(lab, name)), name=name, gpus=2, parameters={"gate": gate(lab, name)})
    wait_state(api, blocker["id"], "running")


def settled(dialog) -> None:
    """Wait until a submit or change dialog has moved the focus to its GPUs field, as it does
    once its form has rendered. Text typed into another field before then can land in the GPUs
    field (Playwright focuses a field, then types in a second step): the submit dialog's number
    field turns invalid and JupyterLab's dialog disables its accept button for good (seen in CI:
    "locator resolved to <button disabled ...>"); the change dialog's form refuses the GPUs."""
    expect(dialog.locator('input[name="gpus"]')).to_be_focused()


def submit_from_file_browser(page, name: str):
    """Open the submit dialog on the notebook ``name`` from the file browser's context menu,
    once its form has settled; returns the dialog."""
    show_sidebar(page, "filebrowser")
    item = page.locator('.jp-DirListing-item[data-file-type="notebook"]').filter(has_text=name)
    item.click(button="right")
    page.locator(".lm-Menu-item").filter(has_text="Submit as GPU Job…").click()
    dialog = page.locator(".e31-SubmitDialog")
    settled(dialog)
    return dialog


def open_advanced(dialog) -> None:
    """Unfold the submit dialog's 'Advanced' section (outputs, data, run after)."""
    advanced = dialog.locator("details.e31-SubmitForm-advanced")
    if advanced.get_attribute("open") is None:
        advanced.locator("summary").click()
    expect(advanced).to_have_attribute("open", "")


def closes_once_saved(dialog) -> None:
    """The dialog closes when the server has taken the submit or change; a slow machine gets
    15 s, and a dialog left open says why (its error, if the server refused)."""
    try:
        expect(dialog).to_have_count(0, timeout=15_000)
    except AssertionError:
        raise AssertionError(f"the dialog stayed open: {dialog.inner_text()!r}") from None


def test_submit_with_a_changed_parameter_queue_run_notify_and_open_results(lab, api, context):
    root = lab.root
    train = write_notebook(
        root / "train.ipynb",
        GATE,
        'print(f"label={label} epochs={epochs}")\n_ = open("result.txt", "w").write(label)',
        parameters=f'epochs = 3  # passes over the data\nlabel = "baseline"\ngate = {gate(lab, "train")!r}',
    )
    blocker = api.submit(
        path=str(gated_notebook(lab, "blocker")), name="blocker", gpus=2, team="nlp", expected_runtime="1h",
        parameters={"gate": gate(lab, "blocker")},
    )  # fmt: skip
    wait_state(api, blocker["id"], "running")
    api.submit(
        path=str(gated_notebook(lab, "ahead")), name="ahead", gpus=2, deadline="+2h", expected_runtime="30m",
        parameters={"gate": gate(lab, "ahead")},
    )  # fmt: skip

    page = context.new_page()
    open_lab(page, lab, "submit", train.name)
    page.locator(".e31-SubmitButton").click()
    dialog = page.locator(".e31-SubmitDialog")
    expect(dialog.locator(".e31-SubmitForm-pool")).to_contain_text("2 GPUs in the pool, 0 free")
    expect(dialog.locator(".e31-SubmitForm-pool")).to_contain_text("1 waiting, 1 running")
    expect(dialog.locator('input[name="gpus"]')).to_have_attribute("max", "2")
    expect(dialog.locator('input[name="param-epochs"]')).to_have_value("3")
    expect(dialog.locator('input[name="param-label"]')).to_have_value("baseline")
    settled(dialog)
    dialog.locator('input[name="name"]').fill("ui-train")
    dialog.locator('input[name="team"]').fill("vision")
    dialog.locator('input[name="param-label"]').fill("changed-by-ui")
    screenshot(page, "submit-dialog")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)

    # In the panel: queued, second in line behind "ahead" (the blocker holds both GPUs).
    expect(page.locator("#e31-jobs-panel")).to_be_visible()
    row = job_row(page, "ui-train")
    expect(row).to_have_attribute("data-state", "queued")
    expect(row.locator(".e31-JobRow-position")).to_have_text("#2")
    expect(job_row(page, "ahead").locator(".e31-JobRow-position")).to_have_text("#1")
    expect(row.locator(".e31-JobRow-summary")).to_contain_text(re.compile(r"· starts (in \d|now)"))
    expect(page.locator(".e31-Status")).to_contain_text(re.compile(r"1 running\s*·\s*2 queued"))
    screenshot(page, "panel-queued")
    job = next(j for j in api.jobs() if j["name"] == "ui-train")
    assert job["work"]["parameters"] == {"label": "changed-by-ui"}  # only what was changed
    assert job["request"]["gpus"] == 1 and job["team"] == "vision"

    # The blocker ends: "ahead" takes both GPUs, ours is next; then ours runs.
    (root / "gate-blocker").touch()
    expect(job_row(page, "ahead")).to_have_attribute("data-state", "running", timeout=JOB_END_WAIT)
    expect(row.locator(".e31-JobRow-position")).to_have_text("#1")
    (root / "gate-ahead").touch()
    expect(row).to_have_attribute("data-state", "running", timeout=JOB_END_WAIT)
    expect(row.locator(".e31-JobRow-meter")).to_contain_text("GPU-h")

    row.click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{job["id"]}"]')
    expect(detail).to_have_attribute("data-state", "running")
    expect(detail.locator(".e31-Timeline")).to_contain_text("Started")
    expect(detail.locator(".e31-Card").first).to_contain_text("GPUs")
    screenshot(page, "detail-running")

    (root / "gate-train").touch()
    expect(row).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)
    done = toast(page, "Job “ui-train” succeeded")
    expect(done).to_have_count(1)
    expect(detail).to_have_attribute("data-state", "succeeded")
    expect(detail.locator(".e31-Files")).to_contain_text("result.txt")
    expect(detail.locator(".e31-Log")).to_contain_text("label=changed-by-ui epochs=3")  # what the notebook printed
    expect(detail.locator(".e31-Parameters")).to_contain_text('"changed-by-ui"')
    page.wait_for_timeout(700)  # let the notifications settle
    screenshot(page, "detail-succeeded")

    # A collected file downloads; the HTML report opens in a sandboxed frame.
    with page.expect_download() as download:
        detail.locator(".e31-Files a", has_text="result.txt").click()
    assert open(download.value.path()).read() == "changed-by-ui"
    detail.get_by_role("button", name="HTML report").click()
    report = page.frame_locator(".e31-Report iframe")
    expect(report.locator("body")).to_contain_text("label=changed-by-ui epochs=3")

    done.get_by_role("button", name="Open results").click()
    notebook = page.locator(".jp-NotebookPanel.e31-ExecutedNotebook")
    expect(notebook).to_be_visible()
    expect(notebook.locator(".jp-CodeCell").last).to_contain_text("label=changed-by-ui epochs=3")
    expect(notebook.locator(".jp-CodeCell").nth(1)).to_contain_text('label = "changed-by-ui"')
    expect(notebook.locator(".jp-NotebookPanel-toolbar")).to_contain_text("read-only")
    screenshot(page, "executed-notebook")
    sessions = requests.get(f"{lab.url}/api/sessions", headers=lab.headers, timeout=10).json()
    assert not [s for s in sessions if job["id"] in s["path"]], "a kernel was started for a result"

    # Its action dismissed the notification; more polls do not bring it back.
    page.wait_for_timeout(2500)
    expect(toast(page, "Job “ui-train” succeeded")).to_have_count(0)

    page.locator(".e31-Tab", has_text="Meter").click()
    legend = page.locator(".e31-Legend")
    expect(legend).to_contain_text("vision")
    expect(legend).to_contain_text("nlp")
    expect(page.locator(".e31-MeterChart rect").first).to_be_visible()
    screenshot(page, "meter")


def test_cancel_from_the_panel(lab, api, context):
    job = api.submit(
        path=str(gated_notebook(lab, "long")), name="to-cancel", gpus=1,
        parameters={"gate": gate(lab, "never")},
    )  # fmt: skip
    wait_state(api, job["id"], "running")
    page = context.new_page()
    open_lab(page, lab, "cancel")
    show_panel(page)
    row = job_row(page, "to-cancel")
    expect(row).to_have_attribute("data-state", "running")
    page.locator(".e31-Status").click()  # the status bar item opens the panel too
    row.locator(".e31-JobRow-cancel").click()
    confirm = page.locator(".jp-Dialog").filter(has_text="Cancel “to-cancel”?")
    confirm.locator(".jp-Dialog-button.jp-mod-warn").click()
    expect(row).to_have_attribute("data-state", "cancelled", timeout=JOB_END_WAIT)
    assert api.job(job["id"])["state"] == "cancelled"
    expect(page.locator(".e31-Status")).to_contain_text(re.compile(r"0 running\s*·\s*0 queued"))
    page.wait_for_timeout(1000)
    expect(toast(page, "to-cancel")).to_have_count(0)  # the user did it: nothing to announce


def test_a_sweeps_jobs_are_told_apart_by_their_point(lab, api, context):
    notebook = write_notebook(lab.root / "sweep.ipynb", "print(lr)", parameters="lr = 1.0")
    for lr in ("0.1", "0.01"):
        job = api.submit(path=str(notebook), name=f"sweep[lr={lr},batch=32]", parameters={"lr": float(lr)})
        wait_state(api, job["id"], "succeeded")
    page = context.new_page()
    open_lab(page, lab, "sweep")
    show_panel(page)
    rows = job_row(page, "sweep")
    expect(rows).to_have_count(2)
    expect(rows.locator(".e31-JobRow-point")).to_have_text(["lr=0.01, batch=32", "lr=0.1, batch=32"])  # newest first
    expect(rows.first).to_have_attribute("title", re.compile(r"^sweep\[lr=0\.01,batch=32\] \("))
    page.close()


def test_a_job_is_set_to_run_after_another_in_the_dialog_and_says_what_it_waits_for(lab, api, context):
    first = api.submit(
        path=str(gated_notebook(lab, "first")), name="first", gpus=1, parameters={"gate": gate(lab, "first")}
    )
    wait_state(api, first["id"], "running")
    later = write_notebook(lab.root / "later.ipynb", "x = 1")
    newer = [api.submit(path=str(later), name=f"later-{i}", gpus=0, after=first["id"]) for i in range(AFTER_CHOICES)]
    gated_notebook(lab, "then")
    hexpart = first["id"].split("-")[1]
    page = context.new_page()
    open_lab(page, lab, "after")
    dialog = submit_from_file_browser(page, "then.ipynb")
    open_advanced(dialog)
    choice = dialog.locator(".e31-AfterField-choice").filter(has_text=f"job {hexpart}")
    # Eight active jobs came after it: it is listed once the older ones are asked for.
    expect(dialog.locator(".e31-AfterField-choice")).to_have_count(AFTER_CHOICES)
    expect(choice).to_have_count(0)
    dialog.locator(".e31-AfterField-more").click()
    expect(dialog.locator(".e31-AfterField-more")).to_have_count(0)
    expect(choice).to_have_text(f"first · running · job {hexpart}")
    expect(dialog.locator(".e31-SubmitForm-outlook")).to_be_visible(timeout=15_000)  # the form has settled
    gate_field = dialog.locator('input[name="param-gate"]')
    gate_field.fill(gate(lab, "then"))
    expect(gate_field).to_have_value(gate(lab, "then"))
    choice.locator('input[name="after"]').check()
    # The server's check of the request with it. Whether it can tell when: that depends on how
    # long the undeclared jobs of the tests before ran ("first" declared no run time).
    expect(dialog.locator(".e31-SubmitForm-forecast")).to_have_text(
        re.compile(r"^Would wait for first to succeed, then join the line(; expected to start .+)?\.$"),
        timeout=15_000,
    )
    screenshot(page, "submit-dialog-after")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    then = next(job for job in api.jobs() if job["name"] == "then")
    assert then["request"]["after"] == [first["id"]] and then["waiting_for"] == [first["id"]]
    for job in newer:
        api.cancel(job["id"])

    show_panel(page)
    row = job_row(page, "then")
    expect(row.locator(".e31-JobRow-summary")).to_contain_text(f"after job {hexpart}")
    expect(row.locator(".e31-JobRow-position")).to_have_count(0)  # no place in line yet
    row.click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{then["id"]}"]')
    expect(detail.locator(".e31-Detail-after")).to_have_text(first["id"])
    expect(detail).to_contain_text(f"waiting for {first['id']} to succeed")
    (lab.root / "gate-first").touch()
    (lab.root / "gate-then").touch()
    expect(row).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)
    page.close()


def test_an_impossible_deadline_shows_the_servers_message_and_the_dialog_stays_open(lab, api, context):
    notebook = write_notebook(lab.root / "deadline.ipynb", "x = 1", parameters="n = 1")
    page = context.new_page()
    open_lab(page, lab, "deadline", notebook.name)

    # The command palette's command submits the notebook in view.
    # (Once its kernel is up: the notebook takes the focus back when it connects.)
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(timeout=60_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
    page.locator(".lm-Menu-item", has_text="Activate Command Palette").click()
    palette = page.locator(".lm-CommandPalette")
    page.keyboard.type("Submit Notebook as GPU")
    palette.locator(".lm-CommandPalette-item").filter(has_text="Submit Notebook as GPU Job…").click()
    dialog = page.locator(".e31-SubmitDialog")
    expect(dialog.locator(".e31-SubmitForm-notebook")).to_have_text("deadline.ipynb")
    dialog.locator(".jp-Dialog-button.jp-mod-reject").click()
    expect(dialog).to_have_count(0)

    # The file browser's context menu.
    show_sidebar(page, "filebrowser")
    item = page.locator('.jp-DirListing-item[data-file-type="notebook"]').filter(has_text="deadline.ipynb")
    item.click(button="right")
    page.locator(".lm-Menu-item").filter(has_text="Submit as GPU Job…").click()
    expect(dialog.locator(".e31-SubmitForm-source")).to_contain_text("deadline.ipynb")
    settled(dialog)
    dialog.locator('input[name="deadline"]').fill("2001-01-01T00:00")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()

    try:
        api.submit(path=str(notebook), deadline="2001-01-01T00:00")
        raise AssertionError("the server accepted a deadline in the past")
    except E31Error as error:
        message = error.message
    error_box = dialog.locator(".e31-SubmitForm-error")
    expect(error_box).to_have_text(message)
    expect(dialog).to_be_visible()
    screenshot(page, "submit-dialog-error")

    # Corrected, the same dialog submits.
    dialog.locator('input[name="deadline"]').fill("+2h")
    dialog.locator('input[name="param-n"]').fill("7")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    row = job_row(page, "deadline")
    expect(row).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)

    # Resubmit from the detail view: the dialog starts from the job, without its deadline.
    row.click()
    page.get_by_role("button", name="Resubmit…").click()
    expect(dialog.locator('input[name="deadline"]')).to_have_value("")
    expect(dialog.locator('input[name="param-n"]')).to_have_value("7")
    settled(dialog)
    dialog.locator('input[name="gpus"]').fill("0")
    expect(dialog.locator(".e31-SubmitForm-forecast")).to_have_text(
        re.compile(r"^Would start now")
    )  # the server's check
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    expect(job_row(page, "deadline")).to_have_count(2)
    first, again = sorted((j for j in api.jobs() if j["name"] == "deadline"), key=lambda j: j["submitted_at"])
    assert (again["request"]["gpus"], again["request"]["deadline"]) == (0, None)
    assert first["request"]["gpus"] == 1 and again["work"]["parameters"] == {"n": 7}


def test_a_notebook_naming_a_kernel_the_server_lacks_is_run_on_the_kernel_typed_in_the_dialog(lab, api, context):
    notebook = write_notebook(
        lab.root / "elsewhere.ipynb", "import sys\nprint('on', sys.version_info[0])", kernel="python"
    )
    page = context.new_page()
    open_lab(page, lab, "kernel")  # the notebook itself is not opened: Lab would ask for a kernel
    dialog = submit_from_file_browser(page, "elsewhere.ipynb")
    expect(dialog.locator('input[name="kernel"]')).to_have_value("")  # the notebook's, unless one is typed
    dialog.locator('input[name="gpus"]').fill("0")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    expect(dialog.locator(".e31-SubmitForm-error")).to_contain_text("kernel 'python'")
    dialog.locator('input[name="kernel"]').fill("python3")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    show_panel(page)
    expect(job_row(page, "elsewhere")).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)
    (job,) = [j for j in api.jobs() if j["name"] == "elsewhere"]
    assert job["work"]["kernel"] == "python3" and str(notebook).endswith("elsewhere.ipynb")


def test_a_queued_job_is_changed_in_place_from_its_detail_view(lab, api, context):
    # A gate of its own: the first test opened "blocker"'s, which would end this blocker at once.
    blocker = api.submit(
        path=str(gated_notebook(lab, "blocker")),
        name="blocker",
        gpus=2,
        parameters={"gate": gate(lab, "change-blocker")},
    )
    wait_state(api, blocker["id"], "running")
    waiting = api.submit(
        path=str(gated_notebook(lab, "waiting")), name="waiting", gpus=2, max_runtime="2h",
        parameters={"gate": gate(lab, "waiting")},
    )  # fmt: skip
    page = context.new_page()
    open_lab(page, lab, "change")
    show_panel(page)
    job_row(page, "waiting").click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{waiting["id"]}"]')
    expect(detail).to_have_attribute("data-state", "queued")
    detail.get_by_role("button", name="Change…").click()
    dialog = page.locator(".e31-ChangeDialog")
    expect(dialog.locator('input[name="gpus"]')).to_have_value("2")
    expect(dialog.locator('input[name="maxRuntime"]')).to_have_value("2h")
    settled(dialog)

    # What the form can tell: marked at the field, nothing sent, the dialog stays open.
    dialog.locator('input[name="gpus"]').fill("two")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    expect(dialog.locator(".e31-Field-error")).to_have_text("GPUs must be a whole number (0 for a CPU-only job).")
    # What only the server can tell: its message, word for word.
    dialog.locator('input[name="gpus"]').fill("1")
    dialog.locator('input[name="deadline"]').fill("2001-01-01T00:00")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    try:
        api.update(waiting["id"], deadline="2001-01-01T00:00")
        raise AssertionError("the server accepted a deadline in the past")
    except E31Error as error:
        expect(dialog.locator(".e31-ChangeForm-error")).to_have_text(error.message)
    screenshot(page, "change-dialog-error")
    assert api.job(waiting["id"])["request"]["gpus"] == 2  # nothing changed yet

    dialog.locator('input[name="deadline"]').fill("+6h")
    dialog.locator('input[name="maxRuntime"]').fill("30m")
    after_blocker = dialog.locator(".e31-AfterField-choice").filter(has_text=f"job {blocker['id'].split('-')[1]}")
    itself = dialog.locator(".e31-AfterField-choice").filter(has_text=f"job {waiting['id'].split('-')[1]}")
    expect(itself).to_have_count(0)  # a job cannot run after itself
    after_blocker.locator('input[name="after"]').check()
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    changed = api.job(waiting["id"])
    assert changed["request"]["after"] == [blocker["id"]] and changed["waiting_for"] == [blocker["id"]]
    assert (changed["request"]["gpus"], changed["request"]["max_runtime_s"]) == (1, 1800)
    assert changed["request"]["deadline"] is not None and changed["state"] == "queued"
    expect(detail.locator(".e31-Card").first).to_contain_text("30m")
    screenshot(page, "change-dialog-done")

    # The deadline shows as a local time to the minute with its offset, which reads back as the
    # same moment; accepted untouched, it changes nothing.
    history = api.job(waiting["id"])["transitions"]
    detail.get_by_role("button", name="Change…").click()
    expect(after_blocker.locator('input[name="after"]')).to_be_checked()
    shown = dialog.locator('input[name="deadline"]').input_value()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d[+-]\d\d:\d\d", shown), shown
    deadline = datetime.fromisoformat(changed["request"]["deadline"]).timestamp()
    assert datetime.fromisoformat(shown).timestamp() == deadline // 60 * 60
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    assert api.job(waiting["id"])["transitions"] == history
    for name in ("change-blocker", "waiting"):
        (lab.root / f"gate-{name}").touch()
    expect(detail).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)
    assert api.job(waiting["id"])["gpus"] and len(api.job(waiting["id"])["gpus"]) == 1


def test_a_file_left_behind_is_named_and_the_dialogs_data_brings_it(lab, api, context):
    folder = lab.root / "project"
    (folder / "inputs").mkdir(parents=True)
    (folder / "inputs" / "rows.csv").write_text("a,b\n1,2\n")
    write_notebook(folder / "reader.ipynb", "print('rows:', len(open('inputs/rows.csv').readlines()))")
    page = context.new_page()
    open_lab(page, lab, "data", "project/reader.ipynb")
    dialog = page.locator(".e31-SubmitDialog")

    # Submitted as it is open: the server knows its folder and names the file the job lacks,
    # in the dialog before anything is submitted, and again when it is.
    page.locator(".e31-SubmitButton").click()
    settled(dialog)
    outlook = dialog.locator(".e31-SubmitForm-outlook")
    expect(outlook.locator(".e31-SubmitForm-warning")).to_contain_text("'inputs/rows.csv'")
    expect(outlook.locator(".e31-SubmitForm-forecast")).to_have_text(re.compile(r"^Would (start now|wait at position)"))
    screenshot(page, "submit-dialog-outlook")
    open_advanced(dialog)
    dialog.locator('input[name="data"]').fill("inputs")
    expect(outlook.locator(".e31-SubmitForm-warning")).to_have_count(0)
    dialog.locator('input[name="data"]').fill("")
    expect(outlook.locator(".e31-SubmitForm-warning")).to_contain_text("--data inputs")
    dialog.locator('input[name="gpus"]').fill("9")  # more than the pool: no check is asked for
    expect(outlook).to_have_count(0)
    dialog.locator('input[name="gpus"]').fill("1")
    dialog.locator('input[name="deadline"]').fill("2001-01-01T00:00")  # the server refuses it; the form cannot tell
    expect(dialog.locator(".e31-SubmitForm-outlook.e31-mod-refused")).to_contain_text("The server would refuse this: ")
    dialog.locator('input[name="deadline"]').fill("")
    expect(outlook.locator(".e31-SubmitForm-warning")).to_contain_text("--data inputs")
    assert [j for j in api.jobs() if j["name"] in ("reader", "no-data")] == []  # the checks submitted nothing
    dialog.locator('input[name="name"]').fill("no-data")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    warning = toast(page, "'inputs/rows.csv'")
    expect(warning).to_contain_text("--data inputs")
    expect(job_row(page, "no-data")).to_have_attribute("data-state", "failed", timeout=JOB_END_WAIT)

    # The dialog's Data field, next to the notebook, brings it.
    page.locator(".e31-SubmitButton").click()
    settled(dialog)
    dialog.locator('input[name="name"]').fill("with-data")
    open_advanced(dialog)
    dialog.locator('input[name="data"]').fill("inputs")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    expect(job_row(page, "with-data")).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)
    job = next(j for j in api.jobs() if j["name"] == "with-data")
    assert job["work"]["data"] == [str(folder / "inputs")]
    job_row(page, "with-data").click()
    expect(page.locator(".e31-Detail-data")).to_have_text(str(folder / "inputs"))


def test_the_values_a_cells_job_returned_are_listed_with_how_to_collect_them(lab, api, context):
    # The cells that wrap a %%e31 cell end with this call (packaging.py); here it is written out.
    cell = (
        "import json as js, threading\nscores = list(range(100))\nlock = threading.Lock()\n"
        "from e31_jupyter.values import save_outputs\nsave_outputs(globals(), ['scores', 'js', 'lock'])"
    )
    notebook = write_notebook(lab.root / "cell-values.ipynb", cell)
    job = wait_state(api, api.submit(path=str(notebook), name="cell-values")["id"], "succeeded")
    assert job["values"] == ["js", "lock", "scores"]
    page = context.new_page()
    open_lab(page, lab, "values")
    show_panel(page)
    job_row(page, "cell-values").click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{job["id"]}"]')
    rows = detail.locator(".e31-Values tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("module json, imported again when collected")
    expect(rows.nth(1)).to_contain_text(re.compile(r"lock.*not returned: lock \(_thread.lock\) cannot be handed back"))
    expect(rows.nth(2)).to_contain_text(re.compile(r"scores\s*list, \d+ B"))
    expect(detail).to_contain_text(f"%e31 collect {job['id']}")
    screenshot(page, "detail-values")


def test_endings_while_the_browser_was_closed_are_announced_once_on_return(lab, api, context):
    page = context.new_page()
    open_lab(page, lab, "away")
    page.wait_for_function("() => Object.keys(localStorage).some(k => k.startsWith('e31-jupyter:announced-endings'))")
    page.close()

    # Overnight: one job succeeds, one fails, one expires (the GPUs stay busy past its deadline).
    good = api.submit(path=str(write_notebook(lab.root / "good.ipynb", "1 + 1")), name="overnight")
    bad = api.submit(path=str(write_notebook(lab.root / "bad.ipynb", "1 / 0")), name="broken")
    wait_state(api, good["id"], "succeeded")
    wait_state(api, bad["id"], "failed")
    blocker = api.submit(
        path=str(gated_notebook(lab, "hog")), name="hog", gpus=2, parameters={"gate": gate(lab, "hog")}
    )
    wait_state(api, blocker["id"], "running")
    # (A near deadline: jobs earlier in this session taught the queue that run times are a
    # fraction of what people declare, so a far one could still look reachable.)
    late = api.submit(
        path=str(lab.root / "good.ipynb"), name="too-late", gpus=1, deadline="+30s", expected_runtime="2h"
    )
    wait_state(api, late["id"], "expired")
    (lab.root / "gate-hog").touch()
    wait_state(api, blocker["id"], "succeeded")

    back = context.new_page()
    open_lab(back, lab, "back")
    # One summary for the four, not a notice each (browser_notifications.py has more).
    summary = toast(back, "While you were away, 4 jobs ended: 2 succeeded, 1 failed (“broken”), 1 expired.")
    expect(summary).to_have_count(1)
    back.wait_for_timeout(700)  # let it settle
    expect(back.locator(".Toastify__toast")).to_have_count(1)
    screenshot(back, "notifications-on-return")
    summary.get_by_role("button", name="Open “broken”").click()
    expect(back.locator(f'.e31-Detail-body[data-job-id="{bad["id"]}"]')).to_contain_text("ZeroDivisionError")

    back.reload()
    open_lab(back, lab, "back")
    back.wait_for_timeout(2000)
    expect(back.locator(".Toastify__toast").filter(has_text=re.compile("jobs ended|Job “"))).to_have_count(0)


def test_nothing_polls_while_the_panel_is_hidden_and_no_job_is_active(lab, api, context):
    page = context.new_page()
    polls: list[float] = []
    page.on("request", lambda r: "/e31/api/jobs" in r.url and polls.append(time.monotonic()))
    open_lab(page, lab, "idle")
    show_panel(page)
    page.wait_for_timeout(3000)
    assert len(polls) >= 3, f"the visible panel should poll; saw {len(polls)} requests"

    page.locator(PANEL_TAB).click()  # collapse the sidebar: the panel is hidden
    expect(page.locator("#e31-jobs-panel")).to_be_hidden()
    page.wait_for_timeout(5000)  # a poll scheduled before may still fire, once
    seen = len(polls)
    page.wait_for_timeout(8000)
    assert len(polls) == seen, f"{len(polls) - seen} polls while hidden and idle"

    # A job submitted elsewhere (a terminal's e31; here, the API) is announced on the server's
    # event bus: the status bar follows it, and its end is notified, though nothing polled before.
    elsewhere = api.submit(
        path=str(gated_notebook(lab, "elsewhere")), name="from-a-terminal", gpus=1,
        parameters={"gate": gate(lab, "elsewhere")},
    )  # fmt: skip
    try:
        expect(page.locator(".e31-Status")).to_contain_text(re.compile(r"1 running\s*·\s*0 queued"), timeout=20_000)
    except AssertionError:
        state = api.job(elsewhere["id"])["state"]
        shown = page.locator(".e31-Status").inner_text()
        raise AssertionError(f"the status bar shows {shown!r} while the job is {state}") from None
    (lab.root / "gate-elsewhere").touch()
    expect(toast(page, "Job “from-a-terminal” succeeded")).to_have_count(1, timeout=JOB_END_WAIT)
    expect(page.locator(".e31-Status")).to_contain_text(re.compile(r"0 running\s*·\s*0 queued"))
    page.wait_for_timeout(5000)  # it ended: the polls that followed it stop
    seen = len(polls)
    page.wait_for_timeout(6000)
    assert len(polls) == seen, f"{len(polls) - seen} polls after the job ended"

    show_panel(page)  # shown again: fresh at once
    page.wait_for_timeout(1000)
    assert len(polls) > seen


def test_deleting_an_ended_jobs_files_from_its_page(lab, api, context):
    notebook = write_notebook(lab.root / "to-delete.ipynb", "open('out.txt', 'w').write('x' * 100)\nprint('ran')")
    job = wait_state(api, api.submit(path=str(notebook), name="to-delete")["id"], "succeeded")
    page = context.new_page()
    open_lab(page, lab, "delete")
    show_panel(page)
    job_row(page, "to-delete").click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{job["id"]}"]')
    expect(detail.locator(".e31-Files")).to_contain_text("out.txt")
    expect(detail.locator(".e31-Log")).to_contain_text("ran")
    detail.get_by_role("button", name="Delete files…").click()
    confirm = page.locator(".jp-Dialog").filter(has_text="Delete the files of “to-delete”?")
    expect(confirm).to_contain_text("Its record and GPU-hours stay")
    confirm.locator(".jp-Dialog-button.jp-mod-warn").click()
    expect(detail.locator(".e31-Detail-deleted")).to_contain_text(
        re.compile(r"Files deleted .* by \S+ \([\d.]+ KB freed\)")
    )
    for name in ("Open executed notebook", "HTML report", "Resubmit…"):
        expect(detail.get_by_role("button", name=name)).to_be_disabled()
    expect(detail.get_by_role("button", name="Delete files…")).to_have_count(0)
    expect(detail.locator(".e31-Log")).to_have_text("(deleted)")
    expect(detail.locator(".e31-Files")).to_have_count(0)
    expect(detail.locator(".e31-Transitions")).to_contain_text("files deleted by")
    assert api.job(job["id"])["files_deleted"]["bytes"] > 0
    screenshot(page, "detail-deleted")


def test_a_job_that_ran_out_of_time_with_checkpoints_is_resumed_from_its_page(lab, api, context):
    # The second cell outlasts the max run time; the first finishes, and its checkpoint is saved.
    write_notebook(lab.root / "resumable.ipynb", "a = 41", "import time\ntime.sleep(30)", "print(a + 1)")
    page = context.new_page()
    open_lab(page, lab, "resume")
    dialog = submit_from_file_browser(page, "resumable.ipynb")
    checkpoints = dialog.locator('input[name="checkpoint"]')
    expect(checkpoints).not_to_be_checked()
    dialog.locator('input[name="maxRuntime"]').fill(RESUMABLE_MAX_RUNTIME)
    checkpoints.check()
    screenshot(page, "submit-dialog-checkpoints")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    closes_once_saved(dialog)
    (job,) = [j for j in api.jobs() if j["name"] == "resumable"]
    assert job["request"]["checkpoint"] is True, job["request"]
    # (JupyterLab adds a query to each request's URL against caches.)
    resume_url = re.compile(rf"/e31/api/jobs/{re.escape(job['id'])}/resume(\?|$)")
    row = job_row(page, "resumable")
    expect(row).to_have_attribute("data-state", "failed", timeout=JOB_END_WAIT)
    failed = api.job(job["id"])
    assert failed["reason"].startswith("timeout") and failed["last_checkpoint"], why(lab.data_dir, failed)

    row.click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{job["id"]}"]')
    expect(detail).to_have_attribute("data-state", "failed")
    expect(detail.locator(".e31-Detail-checkpoint")).to_have_text(re.compile(r"^checkpoint after cell 1, [\d.]+ K?B$"))
    expect(detail.locator(".e31-Detail-attempts")).to_have_count(0)
    expect(detail.locator(".e31-Card").first).to_contain_text("Checkpoints")
    screenshot(page, "detail-resumable")

    # Both GPUs held meanwhile: resumed, it waits in line (and cannot time out before we look).
    hold_gpus(lab, api, "resume-blocker")
    resume = detail.get_by_role("button", name="Resume", exact=True)
    with page.expect_response(resume_url) as answer:
        resume.click()
    assert (answer.value.request.method, answer.value.request.post_data_json) == ("POST", {})
    assert answer.value.status == 200, answer.value.text()
    expect(detail).to_have_attribute("data-state", "queued")
    expect(resume).to_have_count(0)
    expect(detail.locator(".e31-Detail-attempts")).to_have_text(
        re.compile(r"^resumed 1 time; earlier run: failed \(timeout: ran longer than max_runtime")
    )
    assert api.job(job["id"])["state"] == "queued"
    screenshot(page, "detail-resumed")

    # It runs from its checkpoint, and runs out of time again: resumable again. Resumed elsewhere
    # meanwhile (a terminal) by the time the button's request arrives, the server's refusal shows.
    (lab.root / "gate-resume-blocker").touch()
    expect(detail).to_have_attribute("data-state", "failed", timeout=JOB_END_WAIT)
    again = api.job(job["id"])
    assert again["reason"].startswith("timeout") and again["last_checkpoint"], why(lab.data_dir, again)
    expect(detail.locator(".e31-Detail-attempts")).to_contain_text("resumed 1 time")
    hold_gpus(lab, api, "resume-blocker-2")

    def resumed_elsewhere_first(route):
        api.resume(job["id"])
        route.continue_()

    page.route(resume_url, resumed_elsewhere_first)
    with page.expect_response(resume_url) as answer:
        resume.click()
    assert answer.value.status == 409, answer.value.text()
    refused = page.locator(".jp-Dialog").filter(has_text="Cannot resume the job")
    expect(refused).to_contain_text(answer.value.json()["message"])  # word for word
    screenshot(page, "resume-refused")
    refused.locator(".jp-Dialog-button.jp-mod-reject").click()  # "Close"
    expect(detail).to_have_attribute("data-state", "queued")
    expect(resume).to_have_count(0)
    expect(detail.locator(".e31-Detail-attempts")).to_contain_text("resumed 2 times")


def test_a_running_job_is_suspended_from_its_page_gives_its_gpus_back_and_is_resumed(lab, api, context):
    # The second cell waits for the test (a gate, not a fixed sleep: the job must still be in it
    # when Suspend is pressed, and stay there while the page says it is suspending, however
    # loaded the machine); the third is quick and needs the first's variable from the checkpoint.
    write_notebook(lab.root / "suspendable.ipynb", f"gate = {gate(lab, 'suspend')!r}\na = 41", GATE, "print(a + 1)")
    page = context.new_page()
    open_lab(page, lab, "suspend")
    show_panel(page)
    pool = page.locator(".e31-Pool-text")
    expect(pool).to_contain_text(re.compile(r"^2 of 2 GPUs free"))
    job = api.submit(path=str(lab.root / "suspendable.ipynb"), name="suspendable", gpus=1, checkpoint=True)
    assert job["request"]["checkpoint"] is True, job["request"]
    suspend_url = re.compile(rf"/e31/api/jobs/{re.escape(job['id'])}/suspend(\?|$)")
    resume_url = re.compile(rf"/e31/api/jobs/{re.escape(job['id'])}/resume(\?|$)")
    row = job_row(page, "suspendable")
    expect(row).to_have_attribute("data-state", "running", timeout=JOB_END_WAIT)
    wait_for(lambda: api.job(job["id"])["progress"]["cells_done"] >= 1, 60, what="its first cell to end")

    row.click()
    detail = page.locator(f'.e31-Detail-body[data-job-id="{job["id"]}"]')
    expect(detail).to_have_attribute("data-state", "running")
    expect(pool).to_contain_text(re.compile(r"^1 of 2 GPUs free · 1 running"))
    # Each GPU tells who holds it; with no NVIDIA driver here, no reading, and no figure in its place
    (held,) = api.job(job["id"])["gpus"]
    held_gpu = page.locator(f'.e31-Pool-gpu[data-gpu="{held}"]')
    expect(held_gpu).to_have_attribute("title", f"GPU {held}: busy (suspendable)")
    expect(held_gpu).not_to_have_attribute("data-util", re.compile(".*"))
    expect(page.locator(".e31-Pool-util")).to_have_count(0)
    suspend = detail.get_by_role("button", name="Suspend…", exact=True)
    resume = detail.get_by_role("button", name="Resume", exact=True)
    expect(resume).to_have_count(0)
    screenshot(page, "detail-suspendable")
    suspend.click()
    confirm = page.locator(".jp-Dialog").filter(has_text="Suspend “suspendable”?")
    expect(confirm).to_contain_text(
        "The job finishes its running cell, saves a checkpoint and gives its GPUs back; resume it later"
    )
    with page.expect_response(suspend_url) as answer:
        confirm.locator(".jp-Dialog-button.jp-mod-warn").click()
    assert (answer.value.request.method, answer.value.status) == ("POST", 200), answer.value.text()

    # Its second cell still runs: the page says it is suspending, and offers no second Suspend.
    expect(detail.locator(".e31-Detail-suspending")).to_have_text("Suspending…")
    expect(detail.locator(".e31-Detail-reason")).to_contain_text("suspending: asked by")
    expect(suspend).to_have_count(0)
    expect(row.locator(".e31-JobRow-summary")).to_contain_text("suspending")
    assert api.job(job["id"])["state"] == "running"
    expect(detail).to_have_attribute("data-state", "running")
    screenshot(page, "detail-suspending")

    (lab.root / "gate-suspend").touch()  # the cell ends: the job stops there, with a checkpoint
    expect(detail).to_have_attribute("data-state", "suspended", timeout=JOB_END_WAIT)
    suspended = api.job(job["id"])
    assert suspended["last_checkpoint"] and suspended["last_checkpoint"]["after_cell"] == 1, why(
        lab.data_dir, suspended
    )
    expect(detail.locator(".e31-StateBadge")).to_have_text("Suspended")
    expect(row).to_have_attribute("data-state", "suspended")
    expect(row.locator(".e31-StateBadge")).to_have_text("Suspended")
    expect(row.locator(".e31-JobRow-summary")).to_contain_text("suspended after cell 2")
    expect(page.locator('.e31-Filters [data-filter="suspended"]')).to_contain_text(re.compile(r"^Suspended\s*1$"))
    expect(pool).to_contain_text(re.compile(r"^2 of 2 GPUs free · 0 running · 0 queued"))
    assert api.gpus()["free"] == 2
    expect(detail.locator(".e31-Detail-devices")).to_contain_text("none: given back")
    expect(detail.locator(".e31-Detail-checkpoint")).to_have_text(re.compile(r"^checkpoint after cell 2, [\d.]+ K?B"))
    expect(toast(page, "Job “suspendable” is suspended after cell 2")).to_have_count(1)
    expect(page.locator(".e31-Status")).to_contain_text(re.compile(r"0 running\s*·\s*0 queued"))
    expect(suspend).to_have_count(0)
    expect(detail.get_by_role("button", name="Cancel job")).to_be_visible()  # it could still be ended for good
    screenshot(page, "detail-suspended")

    with page.expect_response(resume_url) as answer:
        resume.click()
    assert (answer.value.request.method, answer.value.status) == ("POST", 200), answer.value.text()
    expect(resume).to_have_count(0)
    expect(detail.locator(".e31-Detail-attempts")).to_have_text(re.compile(r"^resumed 1 time; earlier run: suspended"))
    expect(detail).to_have_attribute("data-state", "succeeded", timeout=JOB_END_WAIT)
    done = api.job(job["id"])
    assert [t["to"] for t in done["transitions"]][-4:] == ["suspended", "queued", "running", "succeeded"], why(
        lab.data_dir, done
    )
    outputs = api.notebook(job["id"])["cells"][2]["outputs"]
    printed = "".join("".join(o.get("text", "")) for o in outputs)  # a string, or a list of lines
    assert printed == "42\n", outputs  # `a` came back from the checkpoint
    expect(pool).to_contain_text(re.compile(r"^2 of 2 GPUs free"))
