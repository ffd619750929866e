"""The GPU inventory: which devices the queue may hand out, and who holds which.

The inventory is a configured list (``c.E31.gpus``; also how a queue gets a subset of a
machine's GPUs) or, by default, every GPU that NVML reports (``nvml.py``). Who holds a device is not kept
here: it follows from the running jobs' grants in the store, so a restarted server agrees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from e31_jupyter.execution import nvml

J = TypeVar("J", bound=Mapping[str, Any])  # a running job: anything with its granted devices


def discover() -> list[str]:
    """The GPUs NVML reports (indices, or MIG instances' ids where MIG is on); none when there
    is no NVIDIA driver."""
    return nvml.device_ids()


def holders(inventory: list[str], running_jobs: Sequence[J]) -> dict[str, J | None]:
    """Each device of the inventory with the running job that holds it (or None)."""
    held = {device: job for job in running_jobs for device in job["granted"]}
    return {device: held.get(device) for device in inventory}


def free_devices(inventory: list[str], running_jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    return [d for d, job in holders(inventory, running_jobs).items() if job is None]


def visible_devices_env(devices: list[str]) -> dict[str, str]:
    """The environment that makes a job see exactly ``devices`` (and nothing when empty)."""
    value = ",".join(devices) if devices else ""
    # An empty CUDA_VISIBLE_DEVICES hides every GPU; NVIDIA's container runtime wants "void".
    return {"CUDA_VISIBLE_DEVICES": value, "NVIDIA_VISIBLE_DEVICES": value or "void"}
