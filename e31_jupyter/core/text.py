"""Numbers and times as people read them, shared by the CLI, the widgets and error messages."""

from __future__ import annotations

from datetime import datetime, timezone

from e31_jupyter.core.states import JobState


def name_gpus(devices: list[str]) -> str:
    """Devices as a sentence names them: "GPU 1", "GPUs 0, 1"; a UUID or MIG id names itself
    ("GPU-aef6…", not "GPU GPU-aef6…")."""
    if devices and all(device.isdigit() for device in devices):
        return f"GPU{'s' if len(devices) > 1 else ''} {', '.join(devices)}"
    return ", ".join(devices)


def format_seconds(seconds: float) -> str:
    """A compact span of time: '45s', '12m', '1h30m', '2d3h'."""
    seconds = int(seconds)
    units = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    parts: list[str] = []
    for unit, size in units:
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
        if len(parts) == 2 or (parts and not seconds):
            break
    return "".join(parts)


def parse_time(iso: str) -> datetime:
    moment = datetime.fromisoformat(iso)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def format_moment(iso: str | None, seconds: bool = True, utc: bool = False) -> str | None:
    """An ISO time in this machine's time zone, or in UTC: '2026-12-01 15:57:28 UTC' (None for
    no time)."""
    if not iso:
        return None
    moment = parse_time(iso).astimezone(timezone.utc if utc else None)
    return moment.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M") + f" {moment.tzname()}"


def format_gpu_hours(hours: float) -> str:
    """GPU-hours to as many digits as tell a small job's from nothing: '<0.001', '0.004', '1.25',
    '37.5', '1,204' (as the JupyterLab panel's formatHours reads them)."""
    if hours <= 0:
        return "0"
    if hours < 0.001:
        return "<0.001"
    for below, digits in ((0.01, 3), (10, 2), (100, 1)):
        if hours < below:
            return f"{hours:.{digits}f}"
    return f"{round(hours):,}"


def format_age(iso: str | None, now: datetime | None = None) -> str | None:
    """How long ago an ISO time was: '12m', '3h20m' (None for no time)."""
    if not iso:
        return None
    now = now or datetime.now(timezone.utc)
    return format_seconds(max(0.0, (now - parse_time(iso)).total_seconds()))


def format_until(iso: str | None, now: datetime | None = None) -> str | None:
    """How long until an ISO time, to the minute: 'in 1h30m', 'in under a minute', or 'now' once
    it has come (None for no time). For forecasts, which are not to the second."""
    if not iso:
        return None
    now = now or datetime.now(timezone.utc)
    seconds = (parse_time(iso) - now).total_seconds()
    if seconds <= 0:
        return "now"
    minutes = round(seconds / 60)
    return f"in {format_seconds(minutes * 60)}" if minutes >= 1 else "in under a minute"


def format_outlook(job: dict, now: datetime | None = None) -> list[str]:
    """What the forecast expects of a queued (or checked) job, in a few words each: 'expected to
    start in 1h', 'to end in 1h30m', and why it is held back while GPUs are free, where it is;
    or that it is expected to expire; first, that it waits for other jobs to succeed, where it
    does. Of a running job: 'expected to end in 40m'."""
    if job.get("state") == JobState.RUNNING:
        return [f"expected to end {format_until(job['expected_end'], now)}"] if job.get("expected_end") else []
    waiting = [f"waiting for {', '.join(job['waiting_for'])} to succeed"] if job.get("waiting_for") else []
    return waiting + _line_outlook(job, now)


def _line_outlook(job: dict, now: datetime | None) -> list[str]:
    """What the forecast expects of a queued job in the line, or of one once the jobs it waits
    for end."""
    if job.get("expected_to_expire"):
        return ["expected to expire: its deadline is out of reach"]
    words = []
    if job.get("expected_start"):
        words.append(f"expected to start {format_until(job['expected_start'], now)}")
        if job.get("expected_end"):
            words.append(f"to end {format_until(job['expected_end'], now)}")
    if job.get("held_back"):
        words.append(f"held back though GPUs are free: {job['held_back']}")
    return words


def format_size(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def gpu_use_figures(use: dict) -> list[str]:
    """A job's GPU use (the API's ``gpu_use``) in words: "mean 62%, peak 99%", "7.8 GB peak
    memory", "410 W peak", "used 0.52 of 0.84 GPU-h held"; only those NVML gave."""
    figures = []
    if use.get("util_mean") is not None:
        figures.append(f"mean {use['util_mean']:.0f}%, peak {use['util_peak']:.0f}%")
    if use.get("memory_peak_bytes") is not None:
        figures.append(f"{format_size(use['memory_peak_bytes'])} peak memory")
    if use.get("power_peak_w") is not None:
        figures.append(f"{use['power_peak_w']:.0f} W peak")
    if use.get("used_gpu_hours") is not None:
        used, held = format_gpu_hours(use["used_gpu_hours"]), format_gpu_hours(use["held_gpu_hours"])
        figures.append(f"used {used} of {held} GPU-h held")
    return figures
