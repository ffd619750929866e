"""Jobs and the GPU pool as the API shows them (``server/openapi.yaml``): store rows, and records
about to be rows, turned into JSON. Pure: the queue gathers what a view needs (place in line,
forecast, meter, progress) and hands it over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from e31_jupyter.core import gpu_use
from e31_jupyter.core.cell_words import as_the_user_counts
from e31_jupyter.core.forecast import Forecast
from e31_jupyter.core.job import iso

if TYPE_CHECKING:
    from e31_jupyter.core.gpu_use import DeviceReading
    from e31_jupyter.service.admission import Caller
    from e31_jupyter.service.gpu_watch import GpuWatch


def job_view(
    job: Mapping[str, Any],
    *,
    position: int | None,
    outlook: dict,
    waiting_for: list[str],
    meter: dict,
    progress: dict,
    gpu_use: dict | None = None,
) -> dict:
    """A job (a store row) as the API shows it."""
    spec, result = job["spec"], job["result"]
    return {
        "id": job["id"],
        "name": job["name"],
        "owner": job["owner"],
        "team": job["team"],
        "state": job["state"],
        "reason": job["reason"],
        "queue_position": position,
        **outlook,
        "waiting_for": waiting_for,
        "request": request_view(job),
        "gpus": job["granted"],
        "meter": meter,
        "gpu_use": gpu_use,
        "progress": {**as_the_user_counts(progress), "last_line": progress.get("last_line")},
        "submitted_at": iso(job["submitted_at"]),
        "started_at": iso(job["started_at"]),
        "finished_at": iso(job["finished_at"]),
        "gpus_released_at": iso(job.get("released_at")),
        "work": work_view(spec),
        "output": {
            "files": spec.get("outputs", []),
            "reports": result["reports"] if "reports" in result else spec.get("reports", []),  # those made, once ended
        },
        "files_count": result.get("files_count", 0),
        "files_left_out": result.get("files_left_out", 0),
        "values": result.get("values", []),
        "after_work_failures": result.get("after_work_failures", []),
        "files_deleted": _deleted_view(result.get("deleted")),
        "fingerprint": job["fingerprint"],
        "last_checkpoint": _checkpoint_view(progress.get("checkpoint")),
        "attempts": [_attempt_view(attempt) for attempt in job.get("attempts") or []],
        "suspended_for": job.get("suspended_for") or None,
    }


def gpu_use_view(job: Mapping[str, Any], held_seconds: float, why_unread: str) -> dict | None:
    """What the job's GPUs did (``core/gpu_use.py``): figures, series, idle warning and GPUs
    given back; where nothing was read, why. None for a job that never held a GPU."""
    use = job.get("gpu_use") or {}
    held_any = job["granted"] or job.get("returned") or any(a.get("granted") for a in job.get("attempts") or ())
    if not use and not held_any:
        return None
    use = use or gpu_use.absent(why_unread)
    idle = use.get("idle")
    return {
        **(gpu_use.summary(use) or {}),
        "sample_s": use.get("sample_s"),
        "series": use.get("series", []),
        "held_gpu_hours": round(held_seconds / 3600.0, 6),
        "idle": {**idle, "since": iso(idle["since"])} if idle else None,
        "returned": [{"device": r["device"], "at": iso(r["at"])} for r in job.get("returned") or ()],
    }


def _checkpoint_view(saved: dict | None) -> dict | None:
    """The job's last checkpoint, as its worker reported it: after which cell, when, its size
    and what could not be saved; None before the first."""
    return {**saved, "saved_at": iso(saved["saved_at"])} if saved else None


def _attempt_view(attempt: dict) -> dict:
    """One earlier run of a resumed job: its hold of GPUs and how it ended."""
    return {
        "started_at": iso(attempt.get("started_at")),
        "finished_at": iso(attempt.get("finished_at")),
        "gpus_released_at": iso(attempt.get("released_at")),
        "gpus": attempt.get("granted") or [],
        "state": attempt.get("state"),
        "reason": attempt.get("reason") or "",
    }


def _deleted_view(deleted: dict | None) -> dict | None:
    """When and by whom the job's files were deleted, and how much that freed; None while kept."""
    return {**deleted, "at": iso(deleted["at"])} if deleted else None


def outlook_view(job_id: str, forecast: Forecast, queued: bool = True) -> dict:
    """What the forecast expects of a queued job, or of a running one (only its end), as the
    API shows it."""
    return {
        "expected_start": iso(forecast.starts.get(job_id)) if queued else None,
        "expected_end": iso(forecast.ends.get(job_id)),
        "expected_to_expire": queued and job_id in forecast.expired,
        "held_back": forecast.held_back.get(job_id) if queued else None,
    }


def request_view(job: Mapping[str, Any]) -> dict:
    """What a job (a store row, or a record about to be one) asked for, as the API shows it."""
    return {
        "gpus": job["gpus_requested"],
        "max_runtime_s": job["max_runtime_s"],
        "expected_runtime_s": job["expected_runtime_s"],
        "deadline": iso(job["deadline"]),
        "after": job.get("after_jobs") or [],
        "checkpoint": bool((job.get("spec") or {}).get("checkpoint")),
    }


def work_view(spec: dict) -> dict:
    """What a job runs (its stored spec), as the API shows it."""
    return {
        "notebook": spec.get("notebook_name"),
        "parameters": spec.get("parameters", {}),
        "kernel": spec.get("kernel"),
        "data": spec.get("data", []),
    }


def pool_view(
    caller: Caller,
    devices: Sequence[tuple[str, bool, Mapping[str, Any] | None]],
    running: int,
    queued: int,
    watch: GpuWatch | None = None,
) -> dict:
    """The pool as the API shows it: each device, busy or free, whose job holds it (the job
    itself only to its owner and admins), its last reading and the processes outside the queue
    on it; how many jobs run and wait; and whether the GPUs are read."""
    pool = []
    for device, busy, job in devices:
        shown = job is not None and (caller.is_admin or job["owner"] == caller.name)
        outside = watch.outside.get(device, []) if watch else []
        pool.append({
            "id": device,
            "busy": busy,
            "job": job["id"] if job and shown else None,
            "job_name": job["name"] if job and shown else None,
            "owner": job["owner"] if job else None,
            "busy_outside": bool(watch and device in watch.busy),
            "outside": [{"pid": p.pid, "user": p.user, "memory_bytes": p.memory_bytes} for p in outside],
            "reading": _reading_view(watch.readings.get(device)) if watch else None,
        })  # fmt: skip
    why_absent = watch.why_absent if watch else "the cluster's GPUs are read by the cluster, not by e31"
    return {
        "gpus": pool,
        "total": len(pool),
        "free": sum(1 for g in pool if not g["busy"] and not g["busy_outside"]),
        "running": running,
        "queued": queued,
        "telemetry": {"available": why_absent is None, "why_absent": why_absent},
    }


def _reading_view(reading: DeviceReading | None) -> dict | None:
    if reading is None:
        return None
    return {
        "util": reading.util,
        "memory_used_bytes": reading.memory_used,
        "memory_total_bytes": reading.memory_total,
        "power_w": reading.power_w,
    }
