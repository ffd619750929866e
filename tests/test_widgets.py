"""The job widgets' models, against a real server (the browser tests check what they look like)."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import wait_for, wait_state
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter import widgets
from e31_jupyter.client import E31Client
from e31_jupyter.core.states import JobState


class CountingClient(E31Client):
    """A real client that also counts the requests it makes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = 0

    def _request(self, *args, **kwargs):
        self.requests += 1
        return super()._request(*args, **kwargs)


@pytest.mark.parametrize(
    "n, text",
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"), (21, "21st"), (113, "113th")],
)
def test_positions_read_as_places_in_line(n, text):
    assert widgets.format_position(n) == f"{text} in line"


def test_a_queued_job_says_when_it_is_expected_to_start():
    soon = (datetime.now(timezone.utc) + timedelta(minutes=45, seconds=10)).isoformat()
    job = {"state": "queued", "queue_position": 3, "expected_start": soon}
    assert widgets.status_line(job) == "3rd in line · expected to start in 45m"
    assert widgets.status_line({**job, "expected_start": None}) == "3rd in line"
    assert widgets.status_line({**job, "expected_to_expire": True}) == (
        "3rd in line · expected to expire: its deadline is out of reach"
    )


def test_a_running_job_says_when_it_is_expected_to_end():
    started = (datetime.now(timezone.utc) - timedelta(minutes=5)).isoformat()
    end = (datetime.now(timezone.utc) + timedelta(minutes=40, seconds=10)).isoformat()
    job = {"state": "running", "gpus": ["0"], "started_at": started, "meter": {"gpu_hours": 0.1}}
    assert widgets.status_line({**job, "expected_end": end}).endswith(" · expected to end in 40m")
    assert "expected" not in widgets.status_line(job)


def test_meter_formatting():
    meter = {"gpu_seconds": 5400, "gpu_hours": 1.5, "cost": 3.75, "currency": "EUR"}
    assert widgets.format_meter(meter) == "1.50 GPU-hours · 3.75 EUR"
    assert widgets.format_meter({**meter, "cost": 0, "gpu_hours": 0.0014}) == "0.001 GPU-hours"


PALETTE_CSS = Path(__file__).resolve().parents[1] / "labextension" / "style" / "palette.css"


def contrast(a: str, b: str) -> float:
    """The WCAG contrast ratio of two hex colours ("#0f477e")."""

    def luminance(hex_colour: str) -> float:
        channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("state", list(JobState))
def test_every_state_badge_reads_at_4_5_to_1_without_the_labextension(state):
    colours = widgets.STATE_COLOURS[state]
    assert contrast(colours["fg"], colours["bg"]) >= 4.5
    assert contrast(colours["fg"], "#ffffff") >= 4.5  # the same text colour on a light page


@pytest.mark.parametrize("state", list(JobState))
def test_a_badge_takes_the_palette_variables_with_its_fallbacks(state):
    shown = widgets.badge(state)
    fg, bg = widgets.STATE_COLOURS[state]["fg"], widgets.STATE_COLOURS[state]["bg"]
    assert f"background:{bg};background:var(--e31-state-{state.value}-bg, {bg})" in shown
    assert f"color:{fg};color:var(--e31-state-{state.value}-fg, {fg})" in shown
    assert f">{state.value}</span>" in shown
    css = PALETTE_CSS.read_text()  # the variables the badge names are the labextension's
    assert f"--e31-state-{state.value}-fg:" in css and f"--e31-state-{state.value}-bg:" in css


def test_the_widgets_html_takes_its_colours_from_the_theme_or_the_palette():
    source = Path(widgets.__file__).read_text()
    # A hex colour only as a var()'s fallback ("var(--jp-border-color2, #ccc)") or in the palette's table.
    assert re.findall(r"(?:color|background|solid)\s*:?\s*#[0-9a-fA-F]{3,6}", source) == []
    assert widgets.badge("unknown").count("var(--jp-") == 2  # a state the palette lacks: theme colours


def test_gpu_use_shows_a_sparkline_its_figures_and_the_idle_warning():
    use = {
        "available": True, "why_absent": None, "util_mean": 40.0, "util_peak": 100.0,
        "memory_peak_bytes": 8 << 30, "used_gpu_hours": 0.5, "held_gpu_hours": 2.0,
        "series": [[100.0, 0.0, None, None], [110.0, None, None, None], [120.0, 100.0, None, None]],
        "idle": {"devices": ["1"], "since": "2026-12-04T10:00:00+00:00", "message": "GPU 1 has been below 5% <idle>"},
    }  # fmt: skip
    shown = widgets.gpu_use_html(use)
    assert "points='0.0,18.0 120.0,0.0'" in shown  # the reading without utilisation is skipped
    assert "mean 40%, peak 100%" in shown and "8.0 GB peak memory" in shown
    assert "used 0.50 of 2.00 GPU-h held" in shown
    assert "e31-idle-warning" in shown and "GPU 1 has been below 5% &lt;idle&gt;" in shown
    assert widgets.gpu_use_html(None) == ""  # never held a GPU
    absent = widgets.gpu_use_html({"available": False, "why_absent": "NVML is not available here", "series": []})
    assert "not measured: NVML is not available here" in absent and "<svg" not in absent


def test_the_jobs_table_aligns_each_cell_as_its_header_and_numbers_right():
    job = {"id": "j1", "name": "a<b", "state": "queued", "queue_position": 12, "meter": {"gpu_hours": 1.5},
           "submitted_at": "2026-12-04T10:00:00+00:00"}  # fmt: skip
    table = widgets.jobs_table([job])
    headers = re.findall(r"<th style='([^']*)'>([^<]*)</th>", table)
    cells = re.findall(r"<td style='([^']*)'>", table)
    assert [style for style, _ in headers] == cells
    aligned = {title: style.split(";")[0] for style, title in headers}
    assert aligned == {
        "job": "text-align:left", "name": "text-align:left", "state": "text-align:left",
        "in line": "text-align:right", "GPU-h": "text-align:right", "submitted": "text-align:right",
    }  # fmt: skip
    assert "a&lt;b" in table and ">12</td>" in table


def test_the_values_table_says_what_came_back_and_how():
    listing = [
        {"name": "model", "type": "dict", "size": 2048, "skipped": None, "module": None},
        {"name": "plt", "type": "module", "size": 0, "skipped": None, "module": "matplotlib.pyplot"},
        {"name": "out", "type": "_io.TextIOWrapper", "size": 0, "skipped": "an open file", "module": None},
    ]
    rows = widgets._values_html(listing).split("<tr>")[1:]
    assert "2.0 KB" in rows[0]
    assert "<code>matplotlib.pyplot</code>, imported again when collected" in rows[1] and "0 B" not in rows[1]
    assert "not returned: an open file" in rows[2]


def test_a_job_widget_follows_its_job_from_queued_to_succeeded(server, gated):
    client = CountingClient(server.url, server.token)
    blocker = wait_state(client, gated.submit(client, "blocker", gpus=2)["id"], "running")
    job = gated.submit(client, "follow", gpus=1)
    widget = widgets.JobWidget(client, job)
    poller = widgets.poller_for(client)
    poller.watch(widget)
    assert "queued" in widget.header.value and "1st in line" in widget.line.value
    assert widget.cancel_button.layout.display is None and widget.collect_button.layout.display == "none"

    gated.open("blocker")
    wait_for(lambda: widget.job["state"] == "running", what="the widget to show running")
    assert widget.line.value.startswith(("GPU 0 ·", "GPU 1 ·"))
    first = widget.job["meter"]["gpu_seconds"]
    wait_for(lambda: widget.job["meter"]["gpu_seconds"] > first, what="the meter to tick")
    wait_for(lambda: widget.progress.max >= 2, what="the widget to know the cell count")
    # this machine has GPU ids configured but no NVIDIA driver: the widget says so, with no figures
    wait_for(lambda: "GPU use: not measured" in widget.gpu_use.value, what="the widget to say the GPUs are not read")
    assert "NVML is not available on this machine" in widget.gpu_use.value and "%" not in widget.gpu_use.value
    assert widget.progress.layout.visibility == "visible" and "of 2 cells" in widget.progress_text.value  # the user's 2

    gated.open("follow")
    wait_for(lambda: widget.done, what="the widget to show the end")
    assert "succeeded" in widget.header.value
    assert widget.collect_button.layout.display is None and widget.cancel_button.layout.display == "none"
    assert "devices.txt" in widget.files.value and "/e31/api/jobs/" in widget.files.value
    assert "Open report" in widget.report_link.value
    assert widget.progress.value == widget.progress.max
    assert "succeeded" in widget.snapshot_html() and "follow" in widget.snapshot_html()
    wait_for(lambda: not poller.running, what="the poller to stop once every job is final")
    assert blocker["id"] != job["id"]


def test_cancel_from_the_widget(client, gated):
    job = wait_state(client, gated.submit(client, "doomed", gpus=1)["id"], "running")
    widget = widgets.JobWidget(client, job)
    widget.cancel_button.click()
    assert "cancelling" in widget.header.value or widget.job["state"] == "cancelled"
    assert wait_state(client, job["id"], "cancelled")["state"] == "cancelled"


def test_many_widgets_share_one_request_per_tick(server, gated):
    client = CountingClient(server.url, server.token)
    jobs = [gated.submit(client, f"many{i}", gpus=0) for i in range(6)]
    shown = [widgets.JobWidget(client, job) for job in jobs]
    poller = widgets.poller_for(client)
    threads_before = threading.active_count()
    for widget in shown:
        poller.watch(widget)
    assert threading.active_count() <= threads_before + 1  # one poller thread, not one per widget
    before, started = client.requests, time.monotonic()
    time.sleep(3)
    ticks = (time.monotonic() - started) / widgets.POLL_FAST_S
    assert client.requests - before <= ticks + 2  # about one request per tick for six widgets

    for widget in shown:
        widget.close()
    wait_for(lambda: not poller.running, what="the poller to stop when its widgets are closed")
    for job in jobs:
        gated.open(job["name"])


def test_the_jobs_widget_lists_jobs_meter_and_pool(client, gated):
    job = wait_state(client, gated.submit(client, "listed", gpus=1, team="vision")["id"], "running")
    widget = widgets.JobsWidget(client)
    assert job["id"] in widget.table.value and "listed" in widget.table.value
    assert "vision" in widget.meter.value and "today" in widget.meter.value
    assert "GPU 0" in widget.pool.value and "1 of 2 free" in widget.pool.value
    assert not widget.done
    gated.open("listed")
    wait_state(client, job["id"], "succeeded")
    widget.refresh({j["id"]: j for j in client.jobs()})
    assert widget.done and "2 of 2 free" in widget.pool.value
