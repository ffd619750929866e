"""What capturing a large kernel value for ``%%e31 submit`` costs, against ``numpy.save``/``numpy.load``.

    python benchmarks/capture.py [--size-gb 1.0] [--runs 5] [--dir DIR] [--fsync] [--json]

``e31_jupyter.notebook.values.save`` writes each value as a cloudpickle stream (protocol 5) whose large
buffers go out of band, straight from the array's memory to their own files; ``values.load`` maps
those files back copy-on-write. This prints, next to the targets:

1. save time: ``values.save({"big": arr}, folder)`` against ``numpy.save(path, arr)`` of the same
   float64 array, into the same parent folder. The two alternate over ``--runs`` rounds (the order
   flips every round), after one untimed full-size write of each; every run writes a fresh file, which is deleted (untimed) straight after it
   is timed, so dirty pages never pile up from one run to the next. Without ``--fsync`` neither is
   fsynced: the writes land in the page cache and the figure is the cost of getting the bytes
   there. With ``--fsync`` every file each writes is fsynced, inside the timed region, for both.
   Target: median capture / numpy.save <= 1.5.
2. peak memory of a save, above the baseline: a fresh ``python`` per measurement imports
   everything, allocates the array (``arange`` writes every page), reads ``VmHWM`` from
   ``/proc/self/status`` (the baseline peak), saves, and reads ``VmHWM`` again; the difference is
   the extra peak the save itself needed. ``VmHWM`` cannot be reset, hence a fresh process for each.
   Done for the capture, ``numpy.save``, and a naive ``pickle.dumps(arr)`` (one giant pickle in
   memory, then written) to show what the out-of-band buffers avoid.
   Target: the capture's extra < 1.2 x the array's size.
3. load: ``values.load(folder)`` against ``numpy.load(path)`` (reads into memory) and
   ``numpy.load(path, mmap_mode="c")`` (the like-for-like mapping), from a warm page cache (the
   files were just written; dropping caches needs root). Time of the load alone, and of load plus
   a first pass over every element (``arr.sum()``), since a mapping defers the reading. Extra peak
   memory as in 2, in a fresh process per measurement, after the load and after the pass; the
   pass over a mapping shows up as file-backed RSS (shared page cache), not as a private copy.

Everything is written in a temporary folder (under ``--dir`` if given, else under /tmp) that is
removed at the end. Nothing in the package is changed or patched.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from e31_jupyter.notebook import values

TARGETS = {"save_ratio": 1.5, "capture_extra_peak_x_size": 1.2}
GB = 1 << 30
MB = 1 << 20


# --- helpers ------------------------------------------------------------------------------------


def summary(samples: list[float]) -> dict:
    return {
        "n": len(samples),
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "samples": [round(s, 4) for s in samples],
    }


def fsync_paths(paths) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def meminfo_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def filesystem_of(path: Path) -> str:
    """The mount (and its type) that holds ``path``: tmpfs would make "disk" mean memory."""
    best, kind = "", "?"
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                _dev, mount, fstype, *_ = line.split()
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
                    best, kind = mount, fstype
    except OSError:
        pass
    return f"{kind} at {best or '?'}"


def capture(arr: np.ndarray, folder: Path, fsync: bool) -> None:
    values.save({"big": arr}, folder)
    if fsync:
        fsync_paths(sorted(folder.iterdir()))


def npsave(arr: np.ndarray, path: Path, fsync: bool) -> None:
    np.save(path, arr)
    if fsync:
        fsync_paths([path])


# --- 1. save time -------------------------------------------------------------------------------


def time_saves(arr: np.ndarray, work: Path, runs: int, fsync: bool) -> dict:
    # Warm up, untimed, at full size: both code paths, and the first large write of the process
    # (on this VM the first GB written into the page cache after a while costs 2-3 s more,
    # whichever writer comes first; left in, it would land on round 0's first writer).
    capture(arr, work / "warm-cap", fsync)
    remove(work / "warm-cap")
    npsave(arr, work / "warm.npy", fsync)
    remove(work / "warm.npy")

    times = {"capture": [], "numpy.save": []}
    for i in range(runs):
        kinds = ["capture", "numpy.save"] if i % 2 == 0 else ["numpy.save", "capture"]
        for kind in kinds:
            target = work / (f"cap-{i}" if kind == "capture" else f"np-{i}.npy")
            gc.collect()
            t0 = time.perf_counter()
            if kind == "capture":
                capture(arr, target, fsync)
            else:
                npsave(arr, target, fsync)
            times[kind].append(time.perf_counter() - t0)
            remove(target)  # a fresh file next time; unlinking drops its dirty pages
    ratios = [c / n for c, n in zip(times["capture"], times["numpy.save"])]
    out = {kind: summary(samples) for kind, samples in times.items()}
    out["ratio_of_medians"] = out["capture"]["median"] / out["numpy.save"]["median"]
    out["ratio_per_round"] = summary(ratios)
    return out


# --- 3. load time -------------------------------------------------------------------------------


def time_loads(arr: np.ndarray, work: Path, runs: int) -> dict:
    folder, npy = work / "load-cap", work / "load.npy"
    values.save({"big": arr}, folder)
    np.save(npy, arr)
    expected = float(arr.sum())

    def values_load():
        return values.load(folder)["big"]

    loaders = {
        "values.load": values_load,
        "numpy.load": lambda: np.load(npy),
        "numpy.load mmap_mode='c'": lambda: np.load(npy, mmap_mode="c"),
    }
    load_t = {k: [] for k in loaders}
    touch_t = {k: [] for k in loaders}
    try:
        for i in range(runs):
            order = list(loaders) if i % 2 == 0 else list(reversed(loaders))
            for kind in order:
                gc.collect()
                t0 = time.perf_counter()
                loaded = loaders[kind]()
                t1 = time.perf_counter()
                total = float(loaded.sum())
                t2 = time.perf_counter()
                if total != expected or loaded.shape != arr.shape:
                    raise SystemExit(f"{kind} loaded something else ({loaded.shape}, sum {total})")
                load_t[kind].append(t1 - t0)
                touch_t[kind].append(t2 - t0)
                del loaded
    finally:
        remove(folder)
        remove(npy)
    return {k: {"load": summary(load_t[k]), "load_and_sum": summary(touch_t[k])} for k in loaders}


# --- 2 and 3. peak memory, one fresh process per measurement -------------------------------------

CHILD = r"""
import json, os, pickle, sys, time
from pathlib import Path
import numpy as np
import cloudpickle
from e31_jupyter.notebook import values
mode, n, work, fsync = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4] == "1"

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0]) * 1024
    return out

def fsync_paths(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

result = {"mode": mode}
if mode in ("capture", "numpy.save", "pickle.dumps"):
    arr = np.arange(n, dtype=np.float64)  # writes every page
    before = status()
    t0 = time.perf_counter()
    if mode == "capture":
        folder = work / "mem-cap"
        values.save({"big": arr}, folder)
        written = sorted(folder.iterdir())
    elif mode == "numpy.save":
        path = work / "mem.npy"
        np.save(path, arr)
        written = [path]
    else:
        path = work / "mem.pkl"
        blob = pickle.dumps(arr, protocol=5)  # no buffer_callback: the data goes in band
        with open(path, "wb") as f:
            f.write(blob)
        del blob
        written = [path]
    if fsync:
        fsync_paths(written)
    result["seconds"] = time.perf_counter() - t0
    after = status()
    result.update(before=before, after=after, extra_peak=after["VmHWM"] - before["VmHWM"])
else:
    before = status()
    t0 = time.perf_counter()
    if mode == "values.load":
        loaded = values.load(work / "mem-load-cap")["big"]
    elif mode == "numpy.load":
        loaded = np.load(work / "mem-load.npy")
    else:
        loaded = np.load(work / "mem-load.npy", mmap_mode="c")
    result["seconds"] = time.perf_counter() - t0
    after = status()
    total = float(loaded.sum())  # a first pass over every element
    touched = status()
    result.update(
        before=before, after=after, touched=touched, sum=total, nbytes=int(loaded.nbytes),
        extra_peak=after["VmHWM"] - before["VmHWM"],
        extra_peak_touched=touched["VmHWM"] - before["VmHWM"],
        extra_anon_touched=touched["RssAnon"] - before["RssAnon"],
        extra_file_touched=touched["RssFile"] - before["RssFile"],
    )
print(json.dumps(result))
"""

SAVE_MODES = ["capture", "numpy.save", "pickle.dumps"]
LOAD_MODES = ["values.load", "numpy.load", "numpy.load mmap_mode='c'"]


def child(mode: str, n: int, work: Path, fsync: bool) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(n), str(work), "1" if fsync else "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise SystemExit(f"memory child {mode!r} failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_memory(arr: np.ndarray, work: Path, fsync: bool) -> dict:
    out = {}
    for mode in SAVE_MODES:
        try:
            out[mode] = child(mode, arr.size, work, fsync)
        finally:
            for leftover in ("mem-cap", "mem.npy", "mem.pkl"):
                remove(work / leftover)
    values.save({"big": arr}, work / "mem-load-cap")
    np.save(work / "mem-load.npy", arr)
    try:
        for mode in LOAD_MODES:
            out[mode] = child(mode, arr.size, work, fsync)
    finally:
        remove(work / "mem-load-cap")
        remove(work / "mem-load.npy")
    return out


# --- report -------------------------------------------------------------------------------------


def mb(n: float) -> str:
    return f"{n / MB:8.1f} MB"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_report(r: dict) -> None:
    cfg = r["config"]
    size = cfg["nbytes"]
    print(
        f"array: float64, {size / GB:.3f} GiB ({cfg['elements']:,} elements); folder {cfg['parent']} "
        f"({cfg['filesystem']}); {cfg['runs']} runs; load average at start {cfg['loadavg']}"
    )
    if cfg["fsync"]:
        print("fsync: every file written is fsynced inside the timed region, for both")
    else:
        print("fsync: neither (the writes land in the page cache; --fsync to include it for both)")
    print()

    s = r["save"]
    print("1. save time (s), alternating, fresh file each run")
    print(f"   {'':26}{'median':>9}{'min':>9}{'max':>9}   samples")
    for kind in ("capture", "numpy.save"):
        k = s[kind]
        print(f"   {kind:26}{k['median']:9.3f}{k['min']:9.3f}{k['max']:9.3f}   {k['samples']}")
    gbps = size / GB / s["capture"]["median"], size / GB / s["numpy.save"]["median"]
    print(f"   throughput (median): capture {gbps[0]:.2f} GiB/s, numpy.save {gbps[1]:.2f} GiB/s")
    ratio = s["ratio_of_medians"]
    print(
        f"   capture / numpy.save: {ratio:.2f} (of medians), per round median "
        f"{s['ratio_per_round']['median']:.2f}, min {s['ratio_per_round']['min']:.2f}, "
        f"max {s['ratio_per_round']['max']:.2f}   target <= {TARGETS['save_ratio']}: "
        f"{verdict(ratio <= TARGETS['save_ratio'])}"
    )
    print()

    m = r["memory"]
    limit = TARGETS["capture_extra_peak_x_size"] * size
    print("2. save: extra peak memory above the baseline (VmHWM after - before, fresh process each;")
    print(f"   baseline = interpreter + imports + the {size / GB:.2f} GiB array, all pages touched)")
    for mode in SAVE_MODES:
        e = m[mode]
        print(
            f"   {mode:26}{mb(e['extra_peak'])}  ({e['extra_peak'] / size:5.3f} x size)   "
            f"baseline VmHWM {mb(e['before']['VmHWM'])}, took {e['seconds']:.2f} s"
        )
    cap = m["capture"]["extra_peak"]
    print(
        f"   target: capture extra < {TARGETS['capture_extra_peak_x_size']} x size ({limit / MB:.0f} MB): "
        f"{verdict(cap < limit)} ({cap / MB:.1f} MB)"
    )
    print()

    ld = r["load"]
    print("3. load, warm page cache (s)")
    print(f"   {'':26}{'load median':>12}{'min':>8}   {'load+sum median':>16}{'min':>8}")
    for kind in LOAD_MODES:
        a, b = ld[kind]["load"], ld[kind]["load_and_sum"]
        print(f"   {kind:26}{a['median']:12.4f}{a['min']:8.4f}   {b['median']:16.3f}{b['min']:8.3f}")
    print("   extra peak memory (fresh process each), after the load / after a pass over every element")
    print(f"   {'':26}{'after load':>12}{'after pass':>13}{'of which anon':>15}{'file-backed':>14}")
    for kind in LOAD_MODES:
        e = m[kind]
        print(
            f"   {kind:26}{mb(e['extra_peak']):>12}{mb(e['extra_peak_touched']):>13}"
            f"{mb(e['extra_anon_touched']):>15}{mb(e['extra_file_touched']):>14}"
        )
    print("   (file-backed = page-cache pages mapped read-only into the process: shared, reclaimable,")
    print("    not a copy; a write to the array would make private copies page by page)")
    print()
    print(f"total run time {r['elapsed_s']:.1f} s")


# --- main ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0, help="array size in GB (2**30 bytes)")
    parser.add_argument("--runs", type=int, default=5, help="rounds of each timing (default 5)")
    parser.add_argument("--dir", type=Path, default=None, help="parent folder (default: a temp dir under /tmp)")
    parser.add_argument("--fsync", action="store_true", help="fsync every written file, for both, in the timing")
    parser.add_argument("--json", action="store_true", help="print everything, samples included, as JSON")
    args = parser.parse_args()
    if args.runs < 1 or args.size_gb <= 0:
        parser.error("--runs must be >= 1 and --size-gb > 0")

    elements = int(args.size_gb * GB) // 8
    nbytes = elements * 8
    parent = args.dir if args.dir is not None else Path("/tmp")
    created = [d for d in (parent, *parent.parents) if not d.exists()]  # removed at the end
    parent.mkdir(parents=True, exist_ok=True)
    # Memory: the array, a numpy.load copy, and a child holding its array plus a giant pickle.
    need_mem = 4.2 * nbytes
    if meminfo_available() < need_mem:
        raise SystemExit(
            f"needs about {need_mem / GB:.1f} GiB of available memory, {meminfo_available() / GB:.1f} GiB available"
        )
    need_disk = 2.2 * nbytes
    if shutil.disk_usage(parent).free < need_disk:
        raise SystemExit(f"needs about {need_disk / GB:.1f} GiB free in {parent}")

    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="e31-capture-bench-", dir=parent))
    try:
        arr = np.arange(elements, dtype=np.float64)  # every page written
        report = {
            "config": {
                "size_gb": args.size_gb,
                "elements": elements,
                "nbytes": nbytes,
                "runs": args.runs,
                "fsync": args.fsync,
                "parent": str(parent),
                "filesystem": filesystem_of(work),
                "loadavg": [round(x, 2) for x in os.getloadavg()],
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "numpy": np.__version__,
            },
            "targets": TARGETS,
        }
        report["save"] = time_saves(arr, work, args.runs, args.fsync)
        report["load"] = time_loads(arr, work, args.runs)
        report["memory"] = measure_memory(arr, work, args.fsync)
        report["elapsed_s"] = time.perf_counter() - started
        cap = report["memory"]["capture"]["extra_peak"]
        report["verdicts"] = {
            "save_ratio": report["save"]["ratio_of_medians"] <= TARGETS["save_ratio"],
            "capture_extra_peak": cap < TARGETS["capture_extra_peak_x_size"] * nbytes,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for d in created:  # innermost first; only if still empty
            try:
                d.rmdir()
            except OSError:
                break
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)


if __name__ == "__main__":
    main()
