"""The scheduling server's readings of its GPUs (service/gpu_watch.py) acting on a real store and
the queue's own passes, with readings scripted (this machine has no GPU): idle warnings in the
job's log and record, idle GPUs taken back and off the meter, GPUs busy outside the queue kept
from jobs until the process is gone. tests/test_real_gpus.py shows the same on real GPUs."""

from __future__ import annotations

import pytest

from e31_jupyter.core import meter
from e31_jupyter.core.gpu_use import GIB, DeviceReading, GpuProcess, WatchRules
from e31_jupyter.core.job import iso
from e31_jupyter.execution.nvml import NvmlAbsent
from e31_jupyter.service.admission import Caller
from e31_jupyter.service.queue import Queue
from e31_jupyter.service.settings import Settings

T = 1.8e9


class Readings:
    """What NVML would say, set by the test."""

    def __init__(self) -> None:
        self.devices: dict[str, DeviceReading] = {}
        self.absent = ""

    def set(self, device: str, util: float, *processes: GpuProcess) -> None:
        used = sum(p.memory_bytes or 0 for p in processes)
        self.devices[device] = DeviceReading(device, util, used, 80 * GIB, 100.0, tuple(processes))

    def __call__(self, devices):
        if self.absent:
            raise NvmlAbsent(self.absent)
        return [self.devices[d] for d in devices if d in self.devices]


def _job(job_id: str, state: str, **fields) -> dict:
    return {
        "id": job_id, "owner": "ann", "name": job_id, "team": "", "state": state, "gpus_requested": 1,
        "max_runtime_s": 86400.0, "expected_runtime_s": None, "max_runtime_given": 0, "deadline": None,
        "submitted_at": T - 100, **fields,
    }  # fmt: skip


@pytest.fixture
def queue(tmp_path):
    clock = [T]
    rules = WatchRules(sample_s=5.0, idle_below_pct=5.0, idle_after_s=60.0, release_idle=True)
    settings = Settings(inventory=["0", "1"], policy="fifo", gpu_watch=rules)
    queue = Queue(tmp_path / "data", backend=None, settings=settings, clock=lambda: clock[0])
    queue.clock_at = clock  # type: ignore[attr-defined]
    queue.readings = Readings()  # type: ignore[attr-defined]
    queue.scheduler.gpu_watch.read = queue.readings
    queue.scheduler.leadership.holds = True
    yield queue
    queue.store.close()


def test_an_idle_gpu_is_warned_of_in_the_log_then_taken_back_and_off_the_meter(queue):
    store, watch, clock = queue.store, queue.scheduler.gpu_watch, queue.clock_at
    store.insert_job(_job("j", "running", started_at=T, granted=["0", "1"]), "started")
    jobdir = queue.files.jobdir("j")
    jobdir.path.mkdir(parents=True)
    jobdir.log.write_text("epoch 1\n")
    queue.readings.set("0", 97.0, GpuProcess(10, 30 * GIB, "ann", "j"))
    queue.readings.set("1", 0.0)  # never touched
    for t in (5, 35, 65):
        clock[0] = T + t
        gave_back = watch.round()
    assert gave_back  # GPU 1 is free again: the queue should schedule
    job = store.job("j")
    assert job.granted == ["0"] and job.returned == [{"device": "1", "at": T + 65}]
    assert job.gpu_use["idle"]["devices"] == ["1"]
    log = jobdir.log.read_text()
    assert log.startswith("epoch 1\n") and "e31: warning: GPU 1 has been below 5% utilisation for 1m" in log
    assert "took back GPU 1" in log
    # held: GPU 0 for the whole 100 s, GPU 1 until it was taken back at 65 s
    assert meter.gpu_seconds(job, T + 100) == pytest.approx(100 + 65)
    view = queue.views.describe(job)
    assert view["gpus"] == ["0"] and view["gpu_use"]["returned"][0]["device"] == "1"
    assert view["gpu_use"]["idle"]["devices"] == ["1"] and view["gpu_use"]["util_peak"] == 48.5
    history = queue.views.transitions(job)
    assert history[-1] == {"at": iso(T + 65), "from": "running", "to": "running", "reason": "gave back GPU 1: idle"}
    # GPU 1 is free for the next job
    assert [d for d, busy, _ in queue.scheduler.devices()[0] if not busy] == ["1"]


def test_a_gpu_busy_outside_the_queue_is_not_handed_out_until_the_process_ends(queue, monkeypatch):
    store, scheduler = queue.store, queue.scheduler
    store.insert_job(_job("holder", "running", started_at=T, granted=["1"]), "started")
    store.insert_job(_job("next", "queued"), "submitted")
    queue.files.jobdir("next").path.mkdir(parents=True)
    started: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(scheduler, "_start", lambda job_id, devices: started.append((job_id, devices)))
    queue.readings.set("0", 40.0, GpuProcess(4242, 3 * GIB, "bob", None))  # bob's own kernel
    queue.readings.set("1", 90.0, GpuProcess(11, 9 * GIB, "ann", "holder"))
    assert scheduler.gpu_watch.round()  # what may be handed out changed
    scheduler.schedule()
    assert started == [] and store.job("next").state == "queued"
    waiting = queue.views.describe(store.job("next"))
    assert waiting["held_back"] == (
        "GPU 0 is in use outside the queue (bob's process 4242, 3.0 GiB): it is handed out once that ends"
    )
    pool = queue.views.gpu_pool(_admin(queue))
    gpu0 = pool["gpus"][0]
    assert gpu0["busy_outside"] and gpu0["outside"] == [{"pid": 4242, "user": "bob", "memory_bytes": 3 * GIB}]
    assert pool["free"] == 0 and pool["telemetry"] == {"available": True, "why_absent": None}

    queue.readings.set("0", 0.0)  # bob's kernel ended
    queue.clock_at[0] = T + 5
    assert scheduler.gpu_watch.round()
    scheduler.schedule()
    assert started == [("next", ["0"])]


def test_without_nvml_every_running_job_says_why_and_the_meter_says_used_is_not_measured(queue):
    store = queue.store
    store.insert_job(_job("j", "running", started_at=T, granted=["0"]), "started")
    queue.readings.absent = "NVML is not available on this machine (no NVIDIA driver)"
    queue.clock_at[0] = T + 5
    assert not queue.scheduler.gpu_watch.round()
    use = queue.views.describe(store.job("j"))["gpu_use"]
    assert use["available"] is False and use["why_absent"] == queue.readings.absent
    assert use["util_mean"] is None and use["used_gpu_hours"] is None and use["held_gpu_hours"] > 0
    summary = queue.views.meter_summary(_admin(queue), T - 10, T + 10)
    assert summary["used_gpu_hours"] is None and summary["used_why_absent"] == queue.readings.absent
    assert queue.views.gpu_pool(_admin(queue))["telemetry"]["why_absent"] == queue.readings.absent


def _admin(queue) -> Caller:
    return Caller("root", is_admin=True)
