"""What readings of the GPUs mean (core/gpu_use.py), on recorded readings: a job's figures and
series, idle warnings and GPUs given back, GPUs busy outside the queue. Pure: no NVML."""

from __future__ import annotations

import pytest

from e31_jupyter.core import gpu_use
from e31_jupyter.core.gpu_use import GIB, DeviceReading, GpuProcess, WatchRules

T = 1.8e9
RULES = WatchRules(sample_s=5.0, idle_below_pct=5.0, idle_after_s=60.0)


def _reading(device: str, util: float | None, *processes: GpuProcess, power: float | None = 300.0):
    used = sum(p.memory_bytes or 0 for p in processes)
    return DeviceReading(device, util, used, 80 * GIB, power, tuple(processes))


def _job_process(job: str, gib: float, pid: int = 100) -> GpuProcess:
    return GpuProcess(pid, int(gib * GIB), "ann", job)


def _run(readings_at: list[tuple[float, list[DeviceReading]]], rules: WatchRules = RULES, job: str = "j"):
    """Sample a job started at T through readings taken at T + t; every sample's result."""
    use, taken = None, []
    for t, readings in readings_at:
        sample = gpu_use.sample(use, readings, job, T + t, T, rules)
        use = sample.use
        taken.append(sample)
    return taken


def test_figures_of_a_busy_job_are_its_mean_and_peaks_and_used_gpu_hours():
    taken = _run([
        (5, [_reading("0", 100.0, _job_process("j", 10)), _reading("1", 50.0, _job_process("j", 6))]),
        (10, [_reading("0", 100.0, _job_process("j", 12)), _reading("1", 0.0, _job_process("j", 6))]),
    ])  # fmt: skip
    figures = gpu_use.summary(taken[-1].use)
    assert figures is not None
    assert figures["util_mean"] == pytest.approx((75.0 + 50.0) / 2)  # each sample: the mean over its GPUs
    assert figures["util_peak"] == 75.0
    assert figures["memory_peak_bytes"] == 18 * GIB  # the job's processes on both GPUs
    assert figures["power_peak_w"] == 600.0
    # used: (1.0 + 0.5) GPUs busy for 5 s, then 1.0 for 5 s
    assert figures["used_gpu_hours"] == pytest.approx((1.5 * 5 + 1.0 * 5) / 3600, abs=1e-6)
    assert [point[1] for point in taken[-1].use["series"]] == [75.0, 50.0]


def test_a_gap_in_readings_is_not_counted_as_use():
    taken = _run([(5, [_reading("0", 100.0)]), (605, [_reading("0", 100.0)])])  # a server restart between
    assert taken[-1].use["acc"]["used_gpu_s"] == pytest.approx(5 + 2 * RULES.sample_s)


def test_without_utilisation_figures_are_absent_not_zero():
    mig = DeviceReading("MIG-4a1c", None, 2 * GIB, 10 * GIB, None, None)
    figures = gpu_use.summary(_run([(5, [mig]), (10, [mig])])[-1].use)
    assert figures is not None
    assert figures["util_mean"] is None and figures["used_gpu_hours"] is None and figures["power_peak_w"] is None
    assert figures["memory_peak_bytes"] is None  # NVML could not list the processes: not the device's total


def test_no_readings_say_why_and_give_no_figures():
    figures = gpu_use.summary(gpu_use.absent("NVML is not available on this machine (no NVIDIA driver)"))
    assert figures == {
        "available": False, "why_absent": "NVML is not available on this machine (no NVIDIA driver)",
        "util_mean": None, "util_peak": None, "memory_peak_bytes": None, "power_peak_w": None, "used_gpu_hours": None,
    }  # fmt: skip


def test_the_series_stays_bounded_and_keeps_its_peaks():
    readings = [
        (5.0 * i, [_reading("0", 100.0 if i == 7 else 10.0, _job_process("j", 1 + (i == 9)))]) for i in range(1, 400)
    ]
    use = _run(readings)[-1].use
    assert len(use["series"]) <= gpu_use.SERIES_MAX
    assert max(point[2] for point in use["series"]) == 2 * GIB  # the peak memory survives the merges
    assert gpu_use.summary(use)["util_peak"] == 100.0  # exact, whatever the series keeps
    times = [point[0] for point in use["series"]]
    assert times == sorted(times) and times[0] == T + 5


def test_a_gpu_idle_past_the_threshold_warns_once_and_again_after_use():
    busy, idle = _reading("0", 90.0, _job_process("j", 4)), _reading("0", 1.0, _job_process("j", 4))
    taken = _run(
        [(5, [busy]), (10, [idle]), (40, [idle]), (70, [idle]), (75, [idle]), (80, [busy]), (85, [idle]), (150, [idle])]
    )
    warnings = [(i, s.warning) for i, s in enumerate(taken) if s.warning]
    assert [i for i, _ in warnings] == [3, 7]  # 60 s below 5% (from 10 s), then anew after the GPU was used
    assert "GPU 0 has been below 5% utilisation for 1m" in warnings[0][1]
    assert taken[4].use["idle"]["devices"] == ["0"] and taken[4].use["idle"]["since"] == T + 10
    assert taken[5].use["idle"] is None  # used again
    assert taken[3].give_back == []  # warn is the default


def test_release_gives_back_only_the_idle_gpus_the_job_holds_no_memory_on():
    rules = WatchRules(sample_s=5.0, idle_below_pct=5.0, idle_after_s=60.0, release_idle=True)
    readings = [
        _reading("0", 95.0, _job_process("j", 20)),  # in use
        _reading("1", 0.0),  # idle, nothing of the job's on it
        _reading("2", 0.0, _job_process("j", 3, pid=101)),  # idle, but the job holds memory on it
    ]
    taken = _run([(5, readings), (70, readings)], rules)
    assert taken[-1].give_back == ["1"]
    assert sorted(taken[-1].use["idle"]["devices"]) == ["1", "2"]
    assert "took back GPU 1" in taken[-1].warning


def test_release_keeps_a_gpu_whose_processes_nvml_cannot_list():
    rules = WatchRules(sample_s=5.0, idle_after_s=10.0, release_idle=True)
    unlisted = DeviceReading("0", 0.0, 5 * GIB, 80 * GIB, 60.0, None)
    assert _run([(5, [unlisted]), (20, [unlisted])], rules)[-1].give_back == []


def test_processes_no_running_job_started_make_a_free_gpu_busy_outside_the_queue():
    readings = [
        _reading("0", 30.0, GpuProcess(7, 3 * GIB, "bob", None)),  # bob's own kernel, on a free GPU
        _reading("1", 90.0, GpuProcess(8, 5 * GIB, "ann", "j"), GpuProcess(9, GIB, "ann", None)),  # j's GPU
        _reading("2", 0.0, GpuProcess(10, 2 * GIB, "cy", "ended-job")),  # a job that is no longer running
        _reading("3", 0.0),
    ]
    outside = gpu_use.outside_processes(readings, holders={"1": "j"})
    assert {d: [p.pid for p in ps] for d, ps in outside.items()} == {"0": [7], "2": [10]}
    busy = gpu_use.busy_outside(outside, WatchRules())
    assert busy == {
        "0": "GPU 0 is in use outside the queue (bob's process 7, 3.0 GiB)",
        "2": "GPU 2 is in use outside the queue (cy's process 10, 2.0 GiB)",
    }
    assert gpu_use.outside_note(busy).endswith(": it is handed out once that ends")


def test_a_small_outside_process_may_be_allowed_but_one_of_unknown_size_never():
    small = {"0": [GpuProcess(7, 200 << 20, "bob")], "1": [GpuProcess(8, None, None)]}
    assert list(gpu_use.busy_outside(small, WatchRules(outside_memory_bytes=256 << 20))) == ["1"]
    assert list(gpu_use.busy_outside(small, WatchRules(outside_memory_bytes=0))) == ["0", "1"]
