"""NVML: the one place e31 asks the NVIDIA driver which GPUs there are and what they are doing.
What the readings mean is decided in ``core/gpu_use.py``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psutil

from e31_jupyter.core.gpu_use import DeviceReading, GpuProcess
from e31_jupyter.execution.job_env import JOB_ID_VAR


class NvmlAbsent(Exception):
    """No readings can be taken here; the message says why."""


@contextmanager
def _session() -> Iterator:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as error:  # no library, no driver, no device
        raise NvmlAbsent(f"NVML is not available on this machine ({_why(error)})") from None
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def device_ids() -> list[str]:
    """The GPUs of this machine: each device's index, or its MIG instances' ids where MIG is on.
    None without an NVIDIA driver."""
    try:
        with _session() as nvml:
            return [name for i in range(nvml.nvmlDeviceGetCount()) for name in _names(nvml, i)]
    except NvmlAbsent:
        return []


def _names(nvml, index: int) -> list[str]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    if not _mig_on(nvml, handle):
        return [str(index)]
    names = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            names.append(_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))))
        except nvml.NVMLError:  # an empty slot
            continue
    return names


def _mig_on(nvml, handle) -> bool:
    try:
        current, _ = nvml.nvmlDeviceGetMigMode(handle)
        return current == nvml.NVML_DEVICE_MIG_ENABLE
    except nvml.NVMLError:  # not a MIG-capable GPU
        return False


def read(devices: Sequence[str]) -> list[DeviceReading]:
    """A reading of each of ``devices`` (indices, GPU-… or MIG-… ids); NvmlAbsent when none
    can be taken. A device NVML cannot find is left out."""
    with _session() as nvml:
        readings = []
        for device in devices:
            try:
                handle = _handle(nvml, device)
            except nvml.NVMLError:
                continue
            readings.append(_reading(nvml, device, handle))
        return readings


def _handle(nvml, device: str):
    if device.startswith(("GPU-", "MIG-")):
        return nvml.nvmlDeviceGetHandleByUUID(device)
    return nvml.nvmlDeviceGetHandleByIndex(int(device))


def _reading(nvml, device: str, handle) -> DeviceReading:
    memory = _asked(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    util = _asked(nvml, nvml.nvmlDeviceGetUtilizationRates, handle)
    power_mw = _asked(nvml, nvml.nvmlDeviceGetPowerUsage, handle)
    return DeviceReading(
        device,
        util=float(util.gpu) if util is not None else None,
        memory_used=int(memory.used) if memory is not None else None,
        memory_total=int(memory.total) if memory is not None else None,
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        processes=_processes(nvml, handle),
    )


def _processes(nvml, handle) -> tuple[GpuProcess, ...] | None:
    listed = _asked(nvml, nvml.nvmlDeviceGetComputeRunningProcesses, handle)
    if listed is None:
        return None
    return tuple(_process(p.pid, p.usedGpuMemory) for p in listed)


def _process(pid: int, memory: int | None) -> GpuProcess:
    """Who a listed process is: its user, and its job where it carries one's id (readable for
    one's own processes, or all as root)."""
    user = job_id = None
    try:
        process = psutil.Process(pid)
        user = process.username()
        job_id = process.environ().get(JOB_ID_VAR)
    except (psutil.Error, OSError):
        pass
    # NVML reports memory it cannot see (another container's process) as a huge sentinel or None.
    known = memory if isinstance(memory, int) and 0 <= memory < (1 << 50) else None
    return GpuProcess(pid, known, user, job_id)


def _asked(nvml, call, handle):
    """``call(handle)``, or None where this device does not support it."""
    try:
        return call(handle)
    except nvml.NVMLError:
        return None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _why(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return "no NVIDIA driver" if "Library Not Found" in text or "Driver Not Loaded" in text else text
