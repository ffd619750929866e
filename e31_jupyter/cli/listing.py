"""Jobs, the meter and the GPUs as the terminal shows them: tables, one-line states, warnings."""

from __future__ import annotations

import json
import sys
from datetime import datetime

from e31_jupyter.core.states import FINAL_STATES, JobState
from e31_jupyter.core.text import (
    format_age,
    format_gpu_hours,
    format_moment,
    format_outlook,
    format_seconds,
    format_size,
    format_until,
    gpu_use_figures,
    name_gpus,
)


def format_table(headers: list[str], rows: list[list]) -> str:
    """Left-aligned columns, two spaces apart; None shows as '-'."""
    cells = [headers] + [["-" if cell is None else str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def describe(job: dict) -> str:
    """The job's state in a few words: 'queued (position 2)', 'running on GPU 0 (3/10 cells)'."""
    state, reason = job["state"], job.get("reason")
    if state == JobState.QUEUED:
        details = [f"position {job['queue_position']}"] if job.get("queue_position") else []
        details += format_outlook(job)
        return f"queued ({', '.join(details)})" if details else JobState.QUEUED.value
    if state == JobState.RUNNING and reason and reason.startswith(("cancelling", "suspending")):
        return reason
    if state == JobState.RUNNING:
        text = "running on GPU " + ",".join(job["gpus"]) if job.get("gpus") else JobState.RUNNING.value
        progress = job.get("progress") or {}
        details = [f"{progress['cells_done']}/{progress['cells_total']} cells"] if progress.get("cells_total") else []
        details += format_outlook(job)
        return f"{text} ({', '.join(details)})" if details else text
    if state == JobState.SUCCEEDED and job.get("after_work_failures"):
        steps = dict.fromkeys(f["step"] for f in job["after_work_failures"])
        return f"succeeded (after it, failed: {', '.join(steps)})"
    return f"{state}: {reason}" if reason and state != JobState.SUCCEEDED else state


def gpu_hours(job: dict) -> str:
    return format_gpu_hours((job.get("meter") or {}).get("gpu_hours") or 0)


def format_jobs(jobs: list[dict], now: datetime | None = None) -> str:
    rows = [
        [
            job["id"],
            _shorten(job.get("name") or "", 32),
            job["state"],
            job.get("queue_position"),
            _starts(job, now),
            (job.get("request") or {}).get("gpus", 0),
            gpu_hours(job),
            format_age(job.get("submitted_at"), now),
        ]
        for job in jobs
    ]
    table = format_table(["ID", "NAME", "STATE", "POS", "STARTS", "GPUS", "GPU-H", "AGE"], rows)
    held = [f"  {job['id']}  {job['held_back']}" for job in jobs if job.get("held_back")]
    return "\n".join([table, "", "Held back though GPUs are free:", *held]) if held else table


def _starts(job: dict, now: datetime | None) -> str | None:
    """The STARTS column: when, or 'expires'; and 'after JOB' while it waits for other jobs."""
    when = "expires" if job.get("expected_to_expire") else format_until(job.get("expected_start"), now)
    waiting = job.get("waiting_for") or []
    if not waiting:
        return when
    after = f"after {waiting[0].partition('-')[2]}" + (f" +{len(waiting) - 1}" if len(waiting) > 1 else "")
    return f"{when}, {after}" if when else after


def format_job(job: dict) -> str:
    request, meter = job.get("request") or {}, job.get("meter") or {}
    gpus = request.get("gpus", 0)
    wanted = [f"{gpus} GPU{'' if gpus == 1 else 's'}"]
    if request.get("max_runtime_s"):
        wanted.append(f"max {format_seconds(request['max_runtime_s'])}")
    if request.get("expected_runtime_s"):
        wanted.append(f"expected {format_seconds(request['expected_runtime_s'])}")
    if request.get("deadline"):
        wanted.append(f"deadline {format_moment(request['deadline'])}")
    owner = job.get("owner") or "-"
    work = job.get("work") or {}
    fields = [
        ("job", job["id"]),
        ("name", job.get("name")),
        ("owner", f"{owner} (team {job['team']})" if job.get("team") else owner),
        ("state", describe(job)),
        ("request", ", ".join(wanted)),
        ("meter", f"{gpu_hours(job)} GPU-h, {meter.get('cost') or 0:.2f} {meter.get('currency') or ''}"),
        *([("GPU use", format_gpu_use(job["gpu_use"]))] if job.get("gpu_use") else []),
        ("notebook", work.get("notebook")),
        *([("params", _parameters(work["parameters"]))] if work.get("parameters") else []),
        *([("data", ", ".join(work["data"]))] if work.get("data") else []),
        ("files", _files(job)),
        ("submitted", format_moment(job.get("submitted_at"))),
        ("started", format_moment(job.get("started_at"))),
        *(
            [("released", f"{format_moment(job['gpus_released_at'])} (its GPUs)")]
            if job.get("gpus_released_at")
            else []
        ),
        ("finished", format_moment(job.get("finished_at"))),
        *([("resumes", _checkpoint(job["last_checkpoint"]))] if job.get("last_checkpoint") else []),
        *[("attempt", _attempt(n, attempt)) for n, attempt in enumerate(job.get("attempts") or [], 1)],
    ]
    lines = [f"{label + ':':<11}{'-' if value is None else value}" for label, value in fields]
    failures = job.get("after_work_failures") or []
    if failures:
        lines.append("after the notebook:")
    lines += [f"  {item['step']}: {item['reason']}" for item in failures]
    transitions = job.get("transitions") or []
    if transitions:
        lines.append("history:")
    for step in transitions:
        reason = f"  {step['reason']}" if step.get("reason") else ""
        lines.append(f"  {format_moment(step.get('at'))}  {step.get('from') or '-'} -> {step.get('to')}{reason}")
    return "\n".join(lines)


def format_gpu_use(use: dict) -> str:
    """What a job's GPUs did (``gpu_use_figures``), with its idle warning and the GPUs it gave
    back; or why nothing was read."""
    if not use.get("available"):
        return f"not measured: {use.get('why_absent')}"
    lines = [", ".join(gpu_use_figures(use)) or "no figures NVML could give"]
    if use.get("idle"):
        lines.append(f"warning: {use['idle']['message']}")
    lines += [
        f"gave back {name_gpus([r['device']])} at {format_moment(r['at'])} (idle)" for r in use.get("returned") or []
    ]
    return "\n           ".join(lines)


def _checkpoint(saved: dict) -> str:
    """Where the job's last checkpoint would resume it: "after cell 3 (checkpoint of 12.0 MB at
    10:04); not saved: log (an open file...)"."""
    size, at = format_size(saved["bytes"]), format_moment(saved["saved_at"])
    words = f"after cell {saved['after_cell'] + 1} (checkpoint of {size} at {at})"
    cannot = saved.get("cannot_save") or {}
    return words + ("; not saved: " + "; ".join(f"{name} ({why})" for name, why in cannot.items()) if cannot else "")


def _attempt(number: int, attempt: dict) -> str:
    """An earlier run of a resumed job: "1: 10:00 -> 10:04 on GPU 0, failed: timeout ..."."""
    on = f" on {name_gpus(attempt['gpus'])}" if attempt.get("gpus") else ""
    reason = f": {attempt['reason']}" if attempt.get("reason") else ""
    span = f"{format_moment(attempt.get('started_at'))} -> {format_moment(attempt.get('finished_at'))}"
    return f"{number}: {span}{on}, {attempt.get('state')}{reason}"


def format_values(returned: list[dict]) -> str:
    """The values a cell's job handed back, each with its type, size and why it came back."""
    lines = ["values:"]
    for value in returned:
        if value.get("skipped"):
            note = f"not returned: {value['skipped']}"
        else:
            note = ", ".join(filter(None, [format_size(value["size"]), value.get("why")]))
        lines.append(f"  {value['name']}  {value['type']}  {note}")
    return "\n".join(lines)


def _files(job: dict):
    deleted = job.get("files_deleted")
    if not deleted:
        return job.get("files_count")
    return f"deleted {format_moment(deleted['at'])} by {deleted['by']} ({format_size(deleted['bytes'])} freed)"


def _parameters(parameters: dict) -> str:
    """``epochs=3, opt='adam'``: as the notebook will read them."""
    return ", ".join(f"{name}={value!r}" for name, value in parameters.items())


def format_meter(meter: dict) -> str:
    currency = meter.get("currency") or ""
    lines = [
        f"{format_moment(meter['since'], seconds=False)} .. {format_moment(meter['until'], seconds=False)}: "
        f"{format_gpu_hours(meter['gpu_hours'])} GPU-h held{_used(meter)}, {meter['cost']:.2f} {currency}".rstrip()
    ]
    for title, usage in (("USER", meter.get("by_user")), ("TEAM", meter.get("by_team"))):
        if usage:
            rows = [
                [who, format_gpu_hours(u["gpu_hours"]), _used_column(u), f"{u['cost']:.2f}"]
                for who, u in sorted(usage.items())
            ]
            lines += ["", format_table([title, "GPU-H HELD", "USED", f"COST {currency}".rstrip()], rows)]
    if meter.get("used_why_absent"):
        lines += ["", f"GPU-hours used are not measured: {meter['used_why_absent']}"]
    return "\n".join(lines)


def _used(reading: dict) -> str:
    used = reading.get("used_gpu_hours")
    return f" ({format_gpu_hours(used)} used)" if used is not None else ""


def _used_column(reading: dict) -> str:
    used = reading.get("used_gpu_hours")
    return format_gpu_hours(used) if used is not None else "-"


def format_gpus(inventory: dict) -> str:
    rows = [
        [gpu["id"], gpu.get("job"), gpu.get("job_name"), gpu.get("owner"), *_gpu_reading(gpu.get("reading"))]
        for gpu in inventory["gpus"]
    ]
    table = format_table(["GPU", "JOB", "NAME", "OWNER", "UTIL", "MEMORY", "POWER"], rows)
    summary = (
        f"{inventory['total']} GPUs ({inventory['source']}), {inventory['free']} free; "
        f"{inventory[JobState.RUNNING]} running, {inventory[JobState.QUEUED]} queued"
    )
    outside = [
        f"{name_gpus([gpu['id']])}: busy outside the queue, not handed out: "
        + ", ".join(_outside_process(p) for p in gpu["outside"])
        for gpu in inventory["gpus"]
        if gpu.get("busy_outside")
    ]
    telemetry = inventory.get("telemetry") or {}
    unread = [f"no readings: {telemetry['why_absent']}"] if telemetry.get("why_absent") else []
    return "\n".join([table, summary, *outside, *unread])


def _gpu_reading(reading: dict | None) -> list:
    """UTIL, MEMORY and POWER of a GPU's last reading ("-" where NVML does not say)."""
    if reading is None:
        return ["-", "-", "-"]
    util, used, total, power = (reading.get(k) for k in ("util", "memory_used_bytes", "memory_total_bytes", "power_w"))
    return [
        f"{util:.0f}%" if util is not None else "-",
        f"{format_size(used)} / {format_size(total)}" if used is not None and total else "-",
        f"{power:.0f} W" if power is not None else "-",
    ]


def _outside_process(process: dict) -> str:
    memory = f", {format_size(process['memory_bytes'])}" if process.get("memory_bytes") is not None else ""
    return f"{process.get('user') or 'unknown user'}'s process {process['pid']}{memory}"


def _shorten(text: str, width: int) -> str:
    """Cut in the middle, so that both ends show: a sweep's jobs differ at the end of the name."""
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head) :]


def as_json(value) -> str:
    return json.dumps(value, indent=2)


def print_job_lines(jobs: list[dict], file=None) -> None:
    """A line per job: id, name, state in words, and GPU-hours once it has ended."""
    for job in jobs:
        ended = f"  {gpu_hours(job)} GPU-h" if job["state"] in FINAL_STATES else ""
        print(f"{job['id']}  {job['name']}  {describe(job)}{ended}", file=file)


def print_warnings(warnings) -> None:
    for warning in warnings:
        print(f"e31: warning: {warning}", file=sys.stderr)


def describe_check(check: dict) -> str:
    """A checked submit in a line: 'train: would be queued (position 3, expected to start in
    12m, to end in 1h12m); nothing was submitted'."""
    return f"{check['name']}: would be {describe({**check, 'state': JobState.QUEUED.value})}; nothing was submitted"
