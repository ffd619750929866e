"""ipywidgets that follow jobs live: one job, the job list, and the meter.

Every widget on screen is refreshed by one background poller per kernel: one request per tick
(the user's job list) however many widgets there are, fast while something changes, slower
while nothing does, and stopped when every widget shows a final job or was closed. Besides the
live widget each job display carries a static HTML snapshot of its last known state, hidden by
CSS while the widget is alive, so a notebook reopened without a kernel still shows it.
"""

from __future__ import annotations

import html
import json
import sys
import threading
import time
import uuid
import weakref
from datetime import datetime, timezone
from urllib.parse import quote, urlparse

import ipywidgets as w
from IPython.display import HTML, display, publish_display_data

from e31_jupyter.client import E31Client
from e31_jupyter.core.states import ACTIVE_STATES, FINAL_STATES, JobState
from e31_jupyter.core.text import (
    format_age,
    format_gpu_hours,
    format_moment,
    format_outlook,
    format_seconds,
    format_size,
    gpu_use_figures,
    name_gpus,
    ordinal,
)
from e31_jupyter.notebook.job_notebook import CELL_TAG

POLL_FAST_S, POLL_SLOW_S = 0.5, 5.0
JOBS_SHOWN = 50  # the newest jobs the jobs widget lists
# One state palette with the JupyterLab extension (labextension/style/palette.css): a state's
# hue (stripes), text and badge background are CSS variables there, made from the theme's
# colours; the JupyterLab Light theme's values are the fallbacks where that CSS is absent (a
# notebook's HTML elsewhere), text on badge 5.4:1 or more (tests/test_widgets.py).
# JobState is a str: a state's plain name finds its colours.
STATE_COLOURS: dict[str, dict[str, str]] = {
    JobState.QUEUED: {"hue": "#50759a", "fg": "#30465c", "bg": "#e0e6ed"},
    JobState.RUNNING: {"hue": "#1976d2", "fg": "#0f477e", "bg": "#d6e6f7"},
    JobState.SUSPENDED: {"hue": "#0097a7", "fg": "#005b64", "bg": "#d1ecef"},
    JobState.SUCCEEDED: {"hue": "#388e3c", "fg": "#225524", "bg": "#dbebdc"},
    JobState.FAILED: {"hue": "#d32f2f", "fg": "#7f1c1c", "bg": "#f7dada"},
    JobState.CANCELLED: {"hue": "#757575", "fg": "#464646", "bg": "#e6e6e6"},
    JobState.EXPIRED: {"hue": "#f57c00", "fg": "#934a00", "bg": "#fde7d1"},
}
# A state the palette does not know: the theme's neutral colours.
UNKNOWN_STATE_COLOURS = {"hue": "#757575", "fg": "#222222", "bg": "#eeeeee"}
UNKNOWN_STATE_VARIABLES = {"hue": "--jp-layout-color4", "fg": "--jp-ui-font-color1", "bg": "--jp-layout-color2"}
MUTED = "var(--jp-ui-font-color2, #616161)"  # secondary text, in the theme's colour
LIVE_CLASS = "e31-live"
DEFAULT_OUTPUT_LIMIT = 1 << 20  # bytes of a job's outputs a notebook shows again, then a notice
output_limit = DEFAULT_OUTPUT_LIMIT  # this kernel's: E31Magics.max_cell_output_bytes sets it
_SNAPSHOT_STYLE = (
    "<style>.jp-OutputArea-child:has(.e31-live) + .jp-OutputArea-child .e31-snapshot,"
    ".output_area:has(.e31-live) + .output_area .e31-snapshot{display:none}</style>"
)


# --- formatting (pure) ------------------------------------------------------------------------


def format_position(position: int | None) -> str:
    return f"{ordinal(position)} in line" if position else "waiting"


def format_meter(meter: dict) -> str:
    text = f"{format_gpu_hours(meter['gpu_hours'])} GPU-hours"
    return text + (f" · {meter['cost']:.2f} {meter['currency']}" if meter.get("cost") else "")


def state_colour(state: str, part: str = "hue") -> str:
    """A state's colour for CSS: ``part`` "hue", "fg" (text) or "bg" (a badge's background), as
    the labextension's palette variable with the Light theme's value as its fallback."""
    if state in STATE_COLOURS:
        variable = f"--e31-state-{state}" + ("" if part == "hue" else f"-{part}")
    else:
        variable = UNKNOWN_STATE_VARIABLES[part]
    return f"var({variable}, {plain_colour(state, part)})"


def plain_colour(state: str, part: str = "hue") -> str:
    """A state's colour in the JupyterLab Light theme, as a hex colour."""
    return STATE_COLOURS.get(state, UNKNOWN_STATE_COLOURS)[part]


def colour_style(prop: str, state: str, part: str = "hue", before: str = "") -> str:
    """``prop`` in a state's colour, twice: the plain fallback first, for where JupyterLab's
    sanitizer (an untrusted notebook) drops a ``var()``; then the palette's variable."""
    return f"{prop}:{before}{plain_colour(state, part)};{prop}:{before}{state_colour(state, part)}"


def badge(state: str) -> str:
    colours = f"{colour_style('background', state, 'bg')};{colour_style('color', state, 'fg')}"
    return (
        f'<span class="e31-badge" data-state="{html.escape(state)}" style="{colours};border-radius:3px;'
        f'padding:1px 6px;font-size:85%;font-weight:600">{html.escape(state)}</span>'
    )


def status_line(job: dict, pool: dict | None = None) -> str:
    """One line on where the job stands: its place in line, its grant, or how it ended."""
    state = job["state"]
    if state == JobState.QUEUED:
        text = format_position(job.get("queue_position"))
        text += "".join(f" · {words}" for words in format_outlook(job))
        if pool:
            text += f" · {pool['total'] - pool['free']} of {pool['total']} GPUs busy ({pool[JobState.RUNNING]} jobs)"
        return text
    if state == JobState.RUNNING:
        gpus = name_gpus(job["gpus"]) if job["gpus"] else "no GPUs"
        text = f"{gpus} · running for {format_seconds(_elapsed(job))} · {format_meter(job['meter'])}"
        return text + "".join(f" · {words}" for words in format_outlook(job))
    return f"{format_meter(job['meter'])} · ended {format_moment(job.get('finished_at'), seconds=False) or '-'}"


def gpu_use_html(use: dict | None) -> str:
    """What the job's GPUs did: a sparkline of utilisation and its figures, the idle warning in
    warning colours; or why nothing was read. Nothing for a job that never held a GPU."""
    if not use:
        return ""
    if not use.get("available"):
        return f"<span style='color:{MUTED}'>GPU use: not measured: {html.escape(use.get('why_absent') or '')}</span>"
    figures = gpu_use_figures(use)
    text = f"{sparkline_svg(use.get('series') or [])} GPU use: {' · '.join(figures) or 'no figures NVML could give'}"
    if use.get("idle"):
        warning = html.escape(use["idle"]["message"])
        text += (
            "<div class='e31-idle-warning' style='color:var(--e31-warning-fg, #934a00);"
            f"background:var(--e31-warning-bg, #fde7d1);padding:2px 6px'>⚠ {warning}</div>"
        )
    return text


def sparkline_svg(series: list, width: int = 120, height: int = 18) -> str:
    """A small SVG line of utilisation (0-100%) over the series; points without a reading are skipped."""
    points = [(p[0], p[1]) for p in series if p[1] is not None]
    if len(points) < 2:
        return ""
    start, span = points[0][0], (points[-1][0] - points[0][0]) or 1.0
    path = " ".join(f"{(t - start) / span * width:.1f},{height - u / 100.0 * height:.1f}" for t, u in points)
    return (
        f"<svg class='e31-sparkline' width='{width}' height='{height}' style='vertical-align:middle'>"
        f"<polyline points='{path}' fill='none' stroke='var(--jp-brand-color1, #1565c0)' stroke-width='1.5'/></svg>"
    )


def _elapsed(job: dict) -> float:
    started = job.get("started_at")
    return time.time() - datetime.fromisoformat(started).timestamp() if started else 0.0


def replay_outputs(notebook: dict, job_id: str, limit: int, errors_only: bool = False) -> None:
    """Show again, in the cell running now, what the job's cell displayed (``outputs_to_show``)."""
    for output in outputs_to_show(notebook, job_id, limit, errors_only):
        _show(output)


def outputs_to_show(notebook: dict, job_id: str, limit: int, errors_only: bool = False) -> list[dict]:
    """What to show again of the job's cell's outputs (every cell's, for a whole-notebook job),
    as notebook outputs: its errors always (as their tracebacks, on stderr), the rest until
    ``limit`` bytes, then a word on where all of it is."""
    outputs = _job_outputs(notebook)
    chosen: list[dict] = []
    shown, cut = 0, False
    for output in outputs:
        if output["output_type"] == "error":
            chosen.append(_stream_output("stderr", "\n".join(output.get("traceback", [])) + "\n"))
        elif not (errors_only or cut):
            size = _size(output)
            if shown + size <= limit:
                chosen.append(_displayed(output))
                shown += size
            else:
                head = _head(output, limit - shown)
                chosen += [_stream_output(output["name"], head)] if head else []
                shown += len(head.encode())
                chosen.append(_stream_output("stderr", cut_notice(job_id, shown, sum(map(_size, outputs))) + "\n"))
                cut = True
    return chosen


def cut_notice(job_id: str, shown: int, total: int) -> str:
    return (
        f"e31: job {job_id}'s output is cut here, at {format_size(shown)} of {format_size(total)} "
        f"(E31Magics.max_cell_output_bytes). All of it: `e31 logs {job_id}` in a terminal (or "
        f"%e31 logs {job_id}) prints what it printed; `e31 collect {job_id}` downloads its executed "
        "notebook and report."
    )


def _job_outputs(notebook: dict) -> list[dict]:
    """The outputs of the job's cell (of every cell, for a whole-notebook job), in order."""
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    tagged = [c for c in cells if CELL_TAG in c.get("metadata", {}).get("tags", [])]
    return [output for cell in tagged or cells for output in cell.get("outputs", [])]


def _size(output: dict) -> int:
    """What an output takes in a notebook, in bytes (an image by its encoded size); an error: 0,
    as errors are always shown."""
    kind = output["output_type"]
    if kind == "stream":
        return len(_text(output.get("text", "")).encode())
    if kind in ("display_data", "execute_result"):
        data = output.get("data", {})
        return sum(len(json.dumps(v) if _is_json(mime) else _text(v).encode()) for mime, v in data.items())
    return 0


def _displayed(output: dict) -> dict:
    """A stream or display of the executed notebook as shown again: text in one piece, a result
    as a display (it has no execution count here)."""
    if output["output_type"] == "stream":
        return _stream_output(output.get("name", "stdout"), _text(output.get("text", "")))
    data = {mime: v if _is_json(mime) else _text(v) for mime, v in output.get("data", {}).items()}
    return {"output_type": "display_data", "data": data, "metadata": output.get("metadata", {})}


def _stream_output(name: str, text: str) -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def _show(output: dict) -> None:
    if output["output_type"] == "stream":
        _stream(output).write(output["text"])
    else:
        publish_display_data(output["data"], output["metadata"])


def _head(output: dict, room: int) -> str:
    """The whole lines of a stream's text that fit in ``room`` bytes (a display does not cut:
    none of it)."""
    if output["output_type"] != "stream" or room <= 0:
        return ""
    head = _text(output.get("text", "")).encode()[:room].decode(errors="ignore")
    if "\n" in head:
        return head[: head.rfind("\n") + 1]
    return head + "\n" if head else ""  # the start of one long line: the notice goes below it


def _stream(output: dict):
    return sys.stderr if output.get("name") == "stderr" else sys.stdout


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def _is_json(mime: str) -> bool:
    """nbformat keeps JSON types (application/json, application/vnd.x+json) as JSON, every
    other type as text, split in lines."""
    return mime.endswith(("/json", "+json"))


# --- the poller -------------------------------------------------------------------------------


class Poller:
    """One thread per kernel refreshes every live widget from one request per tick: the jobs
    the widgets follow (their ``wants``), asked for by id."""

    def __init__(self, client: E31Client):
        self.client = client
        self._widgets: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()

    def watch(self, widget) -> None:
        with self._lock:
            self._widgets.add(widget)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="e31-widgets", daemon=True)
                self._thread.start()
        self._wake.set()

    def forget(self, widget) -> None:
        with self._lock:
            self._widgets.discard(widget)

    def following(self, job_id: str) -> list:
        """The live widgets that follow ``job_id``."""
        with self._lock:
            return [x for x in self._widgets if job_id in x.wants and not x.done]

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _live(self) -> list:
        with self._lock:
            live = [x for x in self._widgets if not x.done]
            if not live:
                self._thread = None  # decided under the lock: a new watch() starts a new thread
            return live

    def _run(self) -> None:
        interval = POLL_FAST_S
        while live := self._live():
            try:
                wanted = sorted({job_id for x in live for job_id in x.wants})
                jobs = {job["id"]: job for job in self.client.jobs(ids=wanted)} if wanted else {}
                changed = [x.refresh(jobs) for x in live]
            except Exception:  # the server is restarting, say: keep the widgets, try later
                changed = []
            busy = any(changed) or any(j["state"] == JobState.RUNNING for j in jobs.values())
            interval = POLL_FAST_S if busy else min(interval * 1.5, POLL_SLOW_S)
            self._wake.wait(interval)
            self._wake.clear()


_pollers: dict[int, Poller] = {}


def poller_for(client: E31Client) -> Poller:
    if id(client) not in _pollers:
        _pollers[id(client)] = Poller(client)
    return _pollers[id(client)]


# --- one job --------------------------------------------------------------------------------


class JobWidget(w.VBox):
    """A job: state, place in line, progress, meter, log; its outputs, files and values at the end;
    Cancel, Collect and Open report.

    Its outputs are shown once in the notebook: here, unless a magic collecting the job shows them
    in the cell (``leave_outputs_to_collect``; errors are shown here still). The Collect button
    runs ``on_collect(job_id, show_outputs=False)``: the outputs are shown already, here or there.
    """

    def __init__(self, client: E31Client, job: dict, on_collect=None):
        self.client, self.job_id, self.on_collect = client, job["id"], on_collect
        self.job: dict = {}
        self.done = False
        self.shows_outputs = True  # False: a magic collecting the job shows them instead
        self._snapshot = None
        self.header = w.HTML()
        self.line = w.HTML()
        self.gpu_use = w.HTML()
        self.progress = w.IntProgress(value=0, min=0, max=1, layout=w.Layout(width="60%"))
        self.progress_text = w.HTML()
        self.log_html = w.HTML()
        self.log_box = w.Accordion(children=[self.log_html], selected_index=None)
        self.log_box.set_title(0, "Log")
        self.log_box.observe(self._log_opened, names="selected_index")
        self.outputs = w.Output()
        self.files = w.HTML()
        self.values = w.HTML()
        self.cancel_button = w.Button(description="Cancel", button_style="danger", icon="stop")
        self.collect_button = w.Button(description="Collect", button_style="success", icon="download")
        self.report_link = w.HTML()
        self.cancel_button.on_click(lambda _: self.cancel())
        self.collect_button.on_click(lambda _: self.collect())
        buttons = w.HBox([self.cancel_button, self.collect_button, self.report_link])
        progress_row = w.HBox([self.progress, self.progress_text])
        super().__init__(
            [
                self.header,
                self.line,
                self.gpu_use,
                progress_row,
                self.log_box,
                self.outputs,
                self.files,
                self.values,
                buttons,
            ]
        )
        self.add_class(LIVE_CLASS)
        self.update(job)

    @property
    def wants(self) -> tuple[str]:
        """The jobs whose news this widget needs from the poller."""
        return (self.job_id,)

    # state ---------------------------------------------------------------------------------

    def refresh(self, jobs: dict) -> bool:
        """Take the job's newest record from the poller's list; True when something changed."""
        job = jobs.get(self.job_id)
        if job is None:
            return False
        changed = _essentials(job) != _essentials(self.job)
        self.update(job)
        return changed

    def update(self, job: dict) -> None:
        was_final = self.job.get("state") in FINAL_STATES
        first_update = not self.job
        self.job = job
        state = job["state"]
        reason = f" — {html.escape(job['reason'])}" if job.get("reason") else ""
        self.header.value = (
            f"<b>{html.escape(job['name'])}</b> {badge(state)}<span style='color:{MUTED}'>{reason}</span>"
            f" <code style='color:{MUTED}'>{job['id']}</code>"
        )
        self.line.value = status_line(job)
        self.gpu_use.value = gpu_use_html(job.get("gpu_use"))
        self._show_progress(job)
        self.cancel_button.layout.display = None if state in ACTIVE_STATES else "none"
        self.collect_button.layout.display = None if state == JobState.SUCCEEDED else "none"
        if self.log_box.selected_index == 0 and state == JobState.RUNNING:
            self._show_log()
        if state in FINAL_STATES and (not was_final or first_update):
            self._show_results(job)
        self.done = state in FINAL_STATES
        self._update_snapshot()

    def _show_progress(self, job: dict) -> None:
        progress = job.get("progress") or {}
        total = progress.get("cells_total") or 0
        done = progress.get("cells_done") or 0
        self.progress.max = max(total, 1)
        self.progress.value = min(done, self.progress.max)
        visible = job["state"] == JobState.RUNNING or (job["state"] in FINAL_STATES and total)
        self.progress.layout.visibility = "visible" if visible else "hidden"
        current = progress.get("current_cell")
        at = f", running cell {current + 1}" if current is not None and job["state"] == JobState.RUNNING else ""
        self.progress_text.value = f"&nbsp;{done} of {total} cells{at}" if total else ""

    def _log_opened(self, change: dict) -> None:
        if change["new"] == 0:
            self._show_log()

    def _show_log(self) -> None:
        """The log's tail, fetched only when the Log is open: the notebook keeps no copy of what
        the job printed beside its outputs unless asked to."""
        try:
            tail = self.client.log_tail(self.job_id, 40)
        except Exception:
            return
        self.log_html.value = f"<pre style='max-height:16em;overflow:auto;font-size:85%'>{html.escape(tail)}</pre>"

    def _show_results(self, job: dict) -> None:
        """Once: the cell's outputs, the files with download links, the values, the report link."""
        if self.log_box.selected_index == 0:
            self._show_log()  # its last lines
        base = _api_path(self.client)
        try:
            files = self.client.files(self.job_id)
            listing = self.client.values(self.job_id)["values"] if job["state"] == JobState.SUCCEEDED else []
            notebook = self.client.notebook(self.job_id)
        except Exception:
            files, listing, notebook = [], [], None
        self.files.value = _files_html(base, self.job_id, files)
        self.values.value = _values_html(listing)
        if job["state"] != JobState.CANCELLED and job.get("started_at"):
            href = f"{base}jobs/{quote(self.job_id)}/report"
            self.report_link.value = f'<a href="{href}" target="_blank" rel="noopener">Open report ↗</a>'
        if notebook is not None:
            errors_only = job["state"] != JobState.SUCCEEDED or not self.shows_outputs
            # Set as the widget's state, not printed inside `with self.outputs`: this runs in the
            # poller's thread, whose prints reach the widget only by the kernel's message routing
            # (lost to a page reloaded while the job waited, and routed differently by ipykernel 7).
            self.outputs.outputs = tuple(outputs_to_show(notebook, self.job_id, output_limit, errors_only))

    # actions -------------------------------------------------------------------------------

    def cancel(self) -> None:
        try:
            self.update(self.client.cancel(self.job_id))
        except Exception as error:
            self.line.value = (
                f"<span style='color:{state_colour(JobState.FAILED, 'fg')}'>{html.escape(str(error))}</span>"
            )

    def collect(self) -> None:
        if self.on_collect is not None:
            with self.outputs:
                self.on_collect(self.job_id, show_outputs=False)

    # the static snapshot -----------------------------------------------------------------------

    def display_with_snapshot(self) -> None:
        display(self)
        self._snapshot = display(HTML(self.snapshot_html()), display_id=f"e31-{uuid.uuid4().hex}")

    def _update_snapshot(self) -> None:
        if self._snapshot is not None:
            self._snapshot.update(HTML(self.snapshot_html()))

    def snapshot_html(self) -> str:
        job = self.job
        return (
            f"{_SNAPSHOT_STYLE}<div class='e31-snapshot' style='"
            f"{colour_style('border-left', job['state'], before='3px solid ')};padding:2px 8px'>"
            f"<b>{html.escape(job['name'])}</b> {badge(job['state'])} "
            f"<code>{job['id']}</code><br>{status_line(job)}"
            f"{'<br>' + use if (use := gpu_use_html(job.get('gpu_use'))) else ''}"
            f"<br><small style='color:{MUTED}'>last known state, {datetime.now():%Y-%m-%d %H:%M}; "
            f"<code>%e31 status {job['id']}</code> shows it now</small></div>"
        )

    def close(self):
        poller_for(self.client).forget(self)
        super().close()


def _essentials(job: dict) -> tuple:
    if not job:
        return ()
    progress = job.get("progress") or {}
    idle = (job.get("gpu_use") or {}).get("idle")
    return (job["state"], job.get("reason"), job.get("queue_position"), progress.get("cells_done"), bool(idle))


def _api_path(client: E31Client) -> str:
    """The API's path on the server (base URL included), for links the browser follows with its
    own login cookie."""
    return urlparse(client.url).path.rstrip("/") + "/e31/api/"


def _files_html(base: str, job_id: str, files: list[dict]) -> str:
    if not files:
        return ""
    rows = "".join(
        f"<li><a href='{base}jobs/{quote(job_id)}/files/{quote(f['path'])}' download>"
        f"{html.escape(f['path'])}</a> <span style='color:{MUTED}'>{format_size(f['size'])}</span></li>"
        for f in files
    )
    return f"<b>Files</b><ul style='margin:2px 0'>{rows}</ul>"


def _values_html(listing: list[dict]) -> str:
    if not listing:
        return ""
    rows = "".join(
        f"<tr><td><code>{html.escape(v['name'])}</code></td><td>{html.escape(v['type'])}</td>"
        f"<td>{_value_note(v)}</td></tr>"
        for v in listing
    )
    return f"<b>Values</b><table style='margin:2px 0'>{rows}</table>"


def _value_note(value: dict) -> str:
    if value.get("skipped"):
        return "not returned: " + html.escape(value["skipped"])
    if value.get("module"):
        return f"<code>{html.escape(value['module'])}</code>, imported again when collected"
    return format_size(value["size"]) + (f" · {html.escape(value['why'])}" if value.get("why") else "")


def leave_outputs_to_collect(client: E31Client, job_id: str) -> None:
    """A magic will collect ``job_id`` and show its outputs in the cell: the widgets following it
    (the one above in that cell) show only its errors, so that the notebook holds them once."""
    for widget in poller_for(client).following(job_id):
        widget.shows_outputs = False


def show_job(client: E31Client, job: dict, on_collect=None) -> JobWidget:
    widget = JobWidget(client, job, on_collect)
    widget.display_with_snapshot()
    if not widget.done:
        poller_for(client).watch(widget)
    return widget


# --- the job list ---------------------------------------------------------------------------


class JobsWidget(w.VBox):
    """The user's jobs, the meter today and this week by team, and the GPU pool."""

    def __init__(self, client: E31Client):
        self.client = client
        self.done = False
        self.table = w.HTML()
        self.meter = w.HTML()
        self.pool = w.HTML()
        super().__init__([self.table, self.meter, self.pool])
        self.add_class(LIVE_CLASS)
        self.refresh()

    wants = ()  # it lists the newest jobs itself, whichever they are

    def refresh(self, jobs: dict | None = None) -> bool:
        jobs = {job["id"]: job for job in self.client.jobs(limit=JOBS_SHOWN)}
        self.table.value = jobs_table(list(jobs.values()))
        now = time.time()
        midnight = datetime.now().replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
        today = self.client.meter(since=_iso(midnight))
        week = self.client.meter(since=_iso(now - 7 * 86400))
        self.meter.value = meter_table(today, week)
        self.pool.value = pool_html(self.client.gpus())
        self.done = all(job["state"] in FINAL_STATES for job in jobs.values())
        return True

    def close(self):
        poller_for(self.client).forget(self)
        super().close()


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat()


_LEFT = "text-align:left;padding:1px 8px"
_NUMBER = "text-align:right;padding:1px 8px;font-variant-numeric:tabular-nums"


def jobs_table(jobs: list[dict]) -> str:
    """The jobs, newest first: text columns aligned left, numbers right, each under its header."""
    jobs = sorted(jobs, key=lambda j: j["submitted_at"], reverse=True)
    columns = (("job", _LEFT), ("name", _LEFT), ("state", _LEFT), ("in line", _NUMBER), ("GPU-h", _NUMBER),
               ("submitted", _NUMBER))  # fmt: skip
    head = "".join(f"<th style='{style}'>{title}</th>" for title, style in columns)
    rows = "".join(
        "<tr>"
        + "".join(f"<td style='{style}'>{cell}</td>" for cell, (_, style) in zip(_job_cells(j), columns))
        + "</tr>"
        for j in jobs
    )
    return f"<table class='e31-jobs'><tr>{head}</tr>{rows}</table>" if jobs else "<i>No jobs yet.</i>"


def _job_cells(job: dict) -> list[str]:
    return [
        f"<code>{job['id']}</code>", html.escape(job["name"]), badge(job["state"]),
        str(job["queue_position"] or ""), format_gpu_hours(job["meter"]["gpu_hours"]),
        f"{format_age(job['submitted_at'])} ago",
    ]  # fmt: skip


def meter_table(today: dict, week: dict) -> str:
    teams = sorted(set(today["by_team"]) | set(week["by_team"]))
    zero = {"gpu_hours": 0.0, "cost": 0.0}
    rows = "".join(
        f"<tr><td>{html.escape(t)}</td><td>{format_gpu_hours(today['by_team'].get(t, zero)['gpu_hours'])}</td>"
        f"<td>{format_gpu_hours(week['by_team'].get(t, zero)['gpu_hours'])}</td></tr>"
        for t in teams
    )
    total = (
        f"<tr><td><b>total</b></td><td><b>{format_gpu_hours(today['gpu_hours'])}</b>{_used(today)}"
        f" ({today['cost']:.2f} {today['currency']})</td>"
        f"<td><b>{format_gpu_hours(week['gpu_hours'])}</b>{_used(week)} ({week['cost']:.2f} {week['currency']})</td></tr>"
    )
    return f"<b>Meter</b> (GPU-hours)<table><tr><th>team</th><th>today</th><th>7 days</th></tr>{rows}{total}</table>"


def _used(reading: dict) -> str:
    used = reading.get("used_gpu_hours")
    return f", {format_gpu_hours(used)} used" if used is not None else ""


def pool_html(pool: dict) -> str:
    cells = "".join(
        f"<td style='padding:2px 6px;border:1px solid var(--jp-border-color2, #ccc)'>GPU {html.escape(g['id'])}: {_holder(g)}</td>"
        for g in pool["gpus"]
    )
    return f"<b>GPUs</b> ({pool['free']} of {pool['total']} free, {pool[JobState.QUEUED]} queued)<table><tr>{cells}</tr></table>"


def _holder(gpu: dict) -> str:
    """Who has a GPU of the pool: its job (or owner), busy outside the queue (whose process), or free."""
    if gpu["busy"]:
        return html.escape(gpu["job_name"] or gpu["owner"] or "busy")
    if gpu.get("busy_outside"):
        users = sorted({p.get("user") or "unknown user" for p in gpu.get("outside") or []})
        return f"busy outside the queue ({html.escape(', '.join(users))})"
    return "free"


def show_jobs(client: E31Client) -> JobsWidget:
    widget = JobsWidget(client)
    display(widget)
    if not widget.done:
        poller_for(client).watch(widget)
    return widget
