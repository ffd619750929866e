"""What the GPUs' readings mean for the queue, pure: readings in; each job's use, idle warnings,
GPUs to give back and GPUs busy outside the queue out. ``execution/nvml.py`` takes the
readings; ``service/gpu_watch.py`` takes them every few seconds and acts on what this says.

A job's use is kept in its record as a small dict (JSON): a series of at most ``SERIES_MAX``
points, halved in resolution when full, and running figures that compaction does not blur.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from e31_jupyter.core.text import format_seconds, name_gpus

SERIES_MAX = 120  # points a job's series keeps; when full, neighbours are merged in pairs
GIB = 1 << 30


@dataclass(frozen=True)
class GpuProcess:
    """A compute process NVML lists on a device: whose it is, where the machine can tell."""

    pid: int
    memory_bytes: int | None  # None: NVML does not say (some drivers, MIG, containers)
    user: str | None = None
    job_id: str | None = None  # the queue's job it belongs to (E31_JOB_ID in its environment)


@dataclass(frozen=True)
class DeviceReading:
    """One device at one moment, named as the queue's inventory names it."""

    device: str
    util: float | None  # SM utilisation, % (None: not supported, e.g. a MIG instance)
    memory_used: int | None
    memory_total: int | None
    power_w: float | None
    processes: tuple[GpuProcess, ...] | None = ()  # None: NVML cannot list them here


@dataclass(frozen=True)
class WatchRules:
    """How readings are judged (``c.E31.gpu_*``)."""

    sample_s: float = 5.0
    idle_below_pct: float = 5.0  # a GPU under this utilisation is idle...
    idle_after_s: float = 1800.0  # ...once it stays so this long
    release_idle: bool = False  # give idle GPUs back (only those the job's processes hold no memory on)
    outside_memory_bytes: int = 0  # a GPU is busy outside the queue when others' processes hold more


@dataclass
class Sample:
    """What the queue learns of one job from one round of readings."""

    use: dict  # the job's new use record
    warning: str = ""  # newly idle GPUs: the warning to give (log, widget, panel)
    give_back: list[str] = field(default_factory=list)  # idle GPUs to take back (release_idle)


def absent(why: str) -> dict:
    """A use record that says why there are no figures (never zeros)."""
    return {"available": False, "why_absent": why, "series": [], "idle": None}


def sample(
    use: Mapping | None, readings: Sequence[DeviceReading], job_id: str, now: float, since: float, rules: WatchRules
) -> Sample:
    """The job's use record with the readings of its devices at ``now`` added; ``since``: when
    it got them (the first sample covers the time since, up to one interval)."""
    record = _fresh(rules) if not use or not use.get("available") else _copy(use)
    last = record.get("last_t") or since
    interval = max(0.0, min(now - last, 2 * rules.sample_s))  # a gap (a restart) is not extrapolated
    record["last_t"] = now
    point = _point(readings, job_id, now)
    _accumulate(record["acc"], point, readings, interval)
    record["series"] = _appended(record["series"], point)
    newly_idle = _follow_idle(record, readings, now, rules)
    if not newly_idle:
        return Sample(record)
    give_back = releasable(newly_idle, readings, job_id) if rules.release_idle else []
    record["idle"] = {
        "devices": sorted({*(record["idle"] or {}).get("devices", []), *newly_idle}),
        "since": min(record["below_since"][d] for d in newly_idle),
        "message": idle_message(newly_idle, rules, give_back),
    }
    return Sample(record, record["idle"]["message"], give_back)


def _fresh(rules: WatchRules) -> dict:
    acc = {"observed_s": 0.0, "util_s": 0.0, "util_observed_s": 0.0, "used_gpu_s": None}
    acc |= {"util_peak": None, "memory_peak": None, "power_peak": None}
    return {
        "available": True, "why_absent": None, "sample_s": rules.sample_s, "series": [], "acc": acc,
        "last_t": None, "below_since": {}, "idle": None,
    }  # fmt: skip


def _copy(use: Mapping) -> dict:
    return {**use, "acc": dict(use["acc"]), "below_since": dict(use["below_since"]), "series": list(use["series"])}


def _point(readings: Sequence[DeviceReading], job_id: str, now: float) -> list:
    """[t, mean utilisation %, memory of the job's processes, power W] over its devices."""
    utils = [r.util for r in readings if r.util is not None]
    memories = [job_memory(r, job_id) for r in readings]
    powers = [r.power_w for r in readings if r.power_w is not None]
    return [
        round(now, 1),
        round(sum(utils) / len(utils), 1) if utils else None,
        sum(m for m in memories if m is not None) if any(m is not None for m in memories) else None,
        round(sum(powers), 1) if powers else None,
    ]


def _accumulate(acc: dict, point: list, readings: Sequence[DeviceReading], interval: float) -> None:
    _, util, memory, power = point
    acc["observed_s"] += interval
    if util is not None:
        acc["util_s"] += util * interval
        acc["util_observed_s"] += interval
        busy = sum(r.util for r in readings if r.util is not None) / 100.0
        acc["used_gpu_s"] = (acc["used_gpu_s"] or 0.0) + busy * interval
    for key, value in (("util_peak", util), ("memory_peak", memory), ("power_peak", power)):
        if value is not None:
            acc[key] = value if acc[key] is None else max(acc[key], value)


def _appended(series: list, point: list) -> list:
    series = [*series, point]
    if len(series) <= SERIES_MAX:
        return series
    return [_merged(series[i : i + 2]) for i in range(0, len(series), 2)]


def _merged(pair: list) -> list:
    """Two neighbouring points as one: the first's time, mean utilisation and power, peak memory."""
    if len(pair) == 1:
        return pair[0]
    (t, u1, m1, p1), (_, u2, m2, p2) = pair
    return [t, _mean(u1, u2), _peak(m1, m2), _mean(p1, p2)]


def _mean(a, b):
    known = [v for v in (a, b) if v is not None]
    return round(sum(known) / len(known), 1) if known else None


def _peak(a, b):
    known = [v for v in (a, b) if v is not None]
    return max(known) if known else None


def _follow_idle(record: dict, readings: Sequence[DeviceReading], now: float, rules: WatchRules) -> list[str]:
    """Keep when each device went under the threshold; the devices idle long enough now, not
    warned of yet. A device busy again ends the warning."""
    read = {r.device for r in readings}
    below = record["below_since"] = {d: t for d, t in record["below_since"].items() if d in read}
    for reading in readings:
        if reading.util is not None and reading.util < rules.idle_below_pct:
            below.setdefault(reading.device, now)
        else:
            below.pop(reading.device, None)
    idle = record["idle"]
    if idle and not any(d in below for d in idle["devices"]):
        record["idle"] = idle = None  # in use again: the next idle spell is warned of anew
    warned = set(idle["devices"]) if idle else set()
    return sorted(d for d, t in below.items() if now - t >= rules.idle_after_s and d not in warned)


def idle_message(devices: list[str], rules: WatchRules, give_back: list[str]) -> str:
    which = name_gpus(devices)
    message = (
        f"{which} {'have' if len(devices) > 1 else 'has'} been below {rules.idle_below_pct:g}% utilisation for "
        f"{format_seconds(rules.idle_after_s)}: the job holds {'them' if len(devices) > 1 else 'it'} while others may wait."
    )
    if give_back:
        return f"{message} The queue took back {name_gpus(give_back)} (no memory of the job's on them)."
    if rules.release_idle:
        return f"{message} The job's processes hold memory on {'them' if len(devices) > 1 else 'it'}: kept."
    return f"{message} Ask for fewer GPUs, or free them (c.E31.idle_gpu_action = 'release' gives idle ones back)."


def job_memory(reading: DeviceReading, job_id: str) -> int | None:
    """Memory the job's processes hold on the device: those that carry its id, or whose owner
    cannot be told (the job holds the device). None when NVML cannot say."""
    if reading.processes is None:
        return None
    mine = [p for p in reading.processes if p.job_id in (job_id, None)]
    if any(p.memory_bytes is None for p in mine):
        return None
    return sum(p.memory_bytes or 0 for p in mine)


def releasable(devices: Iterable[str], readings: Sequence[DeviceReading], job_id: str) -> list[str]:
    """Of ``devices``, those the job's processes demonstrably hold no memory on."""
    by_device = {r.device: r for r in readings}
    return sorted(d for d in devices if d in by_device and job_memory(by_device[d], job_id) == 0)


def outside_processes(readings: Sequence[DeviceReading], holders: Mapping[str, str]) -> dict[str, list[GpuProcess]]:
    """Per device, the compute processes no running job of the queue started. ``holders``: device
    -> the running job that holds it. On a held device a process whose job cannot be told is
    taken to be the holder's."""
    found: dict[str, list[GpuProcess]] = {}
    running = set(holders.values())
    for reading in readings:
        holder = holders.get(reading.device)
        others = [
            p for p in reading.processes or ()
            if p.job_id not in running and not (p.job_id is None and holder is not None)
        ]  # fmt: skip
        if others:
            found[reading.device] = others
    return found


def busy_outside(outside: Mapping[str, list[GpuProcess]], rules: WatchRules) -> dict[str, str]:
    """The devices not to hand out, each with why: processes outside the queue hold more memory
    on it than ``rules.outside_memory_bytes`` (a process whose memory is unknown counts as more)."""
    busy = {}
    for device, processes in outside.items():
        memory = [p.memory_bytes for p in processes]
        if None in memory or sum(m or 0 for m in memory) > rules.outside_memory_bytes:
            busy[device] = f"{name_gpus([device])} is in use outside the queue ({describe_processes(processes)})"
    return busy


def describe_processes(processes: Sequence[GpuProcess]) -> str:
    return ", ".join(
        f"{p.user or 'unknown user'}'s process {p.pid}"
        + (f", {p.memory_bytes / GIB:.1f} GiB" if p.memory_bytes is not None else "")
        for p in processes
    )


def outside_note(busy: Mapping[str, str]) -> str:
    """Why a job waits for GPUs that no job holds: the sentence its place in line shows."""
    if not busy:
        return ""
    return "; ".join(busy.values()) + ": it is handed out once that ends"


def summary(use: Mapping | None) -> dict | None:
    """The figures of a use record: mean and peak utilisation, peak memory and power, GPU-hours
    used (utilisation-weighted); None where never measured. Without readings, only why."""
    if use is None:
        return None
    if not use.get("available"):
        nothing = dict.fromkeys(("util_mean", "util_peak", "memory_peak_bytes", "power_peak_w", "used_gpu_hours"))
        return {"available": False, "why_absent": use.get("why_absent"), **nothing}
    acc = use["acc"]
    mean = acc["util_s"] / acc["util_observed_s"] if acc["util_observed_s"] > 0 else None
    return {
        "available": True,
        "why_absent": None,
        "util_mean": round(mean, 1) if mean is not None else None,
        "util_peak": acc["util_peak"],
        "memory_peak_bytes": acc["memory_peak"],
        "power_peak_w": acc["power_peak"],
        "used_gpu_hours": round(acc["used_gpu_s"] / 3600.0, 6) if acc["used_gpu_s"] is not None else None,
    }


def used_gpu_seconds(use: Mapping | None) -> float | None:
    """GPU-seconds used (utilisation-weighted), or None where never measured."""
    if not use or not use.get("available"):
        return None
    return use["acc"]["used_gpu_s"]
