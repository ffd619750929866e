"""What a checkpoint of a job's kernel costs (``e31_jupyter.notebook.checkpoint``), against
``numpy.save`` of the same arrays to the same disk, side by side in one run.

    python benchmarks/checkpoint.py [--gb 1.0] [--runs 5] [--dir DIR]

The namespace: three float64 arrays of a quarter of ``--gb`` each, a pandas DataFrame of the last
quarter (8 float64 columns), and small values (numbers, a dict, a list, a function, a module). Each
round, alternating the order every round: (a) ``checkpoint.save`` into a fresh folder under
``--dir`` (default: the system's temporary folder), and ``numpy.save`` of the three arrays and of
the frame's numeric block (``frame.to_numpy()``, made outside the timing) into fresh files; (b)
``checkpoint.save`` of the same namespace again, unchanged, into the same folder; and, to explain
(b), ``digests`` of the namespace alone. Each is timed after an ``os.sync`` (untimed), so that no
write pays for the one before it; files are deleted, untimed, after each round, and a first round
is a warm-up, not counted. It prints each figure's median and the ratios against the targets: (a)
at most 1.5x numpy.save, (b) under 5% of (a).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from e31_jupyter.notebook import checkpoint
from e31_jupyter.notebook.digest import digests

GB, MB = 1 << 30, 1 << 20
FULL_TARGET, UNCHANGED_TARGET = 1.5, 0.05


def timed(action) -> float:
    """Seconds ``action`` takes, from a page cache with nothing left to write back (``os.sync``,
    untimed): a write is not slowed by the one before it."""
    os.sync()
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def namespace_of(gb: float) -> dict:
    """About ``gb`` GiB: three large arrays, a DataFrame and a few small values."""
    import pandas as pd

    quarter = int(gb * GB / 4) // 8
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.random((quarter // 8, 8)), columns=[f"c{i}" for i in range(8)])
    kernel = {"__name__": "__main__", "np": np, "math": math, "lr": 3e-4, "epoch": 12, "tag": "resnet-run-7"}
    kernel.update(config={"layers": [64, 128, 256], "dropout": 0.1}, losses=[1.0 / (n + 1) for n in range(1000)])
    exec("def schedule(step):\n    return lr * min(1.0, step / 1000)\n", kernel)
    kernel.update(weights=rng.random(quarter), gradients=rng.random(quarter), moments=rng.random(quarter))
    kernel["frame"] = frame
    return kernel


def numpy_saves(arrays: list[np.ndarray], folder: Path) -> None:
    for n, array in enumerate(arrays):
        np.save(folder / f"array-{n}.npy", array)


def one_round(kernel: dict, arrays: list[np.ndarray], base: Path, first_checkpoint: bool) -> dict[str, float]:
    """One round's four figures, (a)'s two sides in the order given; files deleted untimed."""
    ckpt, plain = base / "ckpt", base / "plain"
    plain.mkdir()
    steps = [
        ("checkpoint", lambda: checkpoint.save(ckpt, kernel, after_cell=1)),
        ("numpy.save", lambda: numpy_saves(arrays, plain)),
    ]
    times = {label: timed(action) for label, action in (steps if first_checkpoint else steps[::-1])}
    times["unchanged"] = timed(lambda: checkpoint.save(ckpt, kernel, after_cell=2))
    times["digests"] = timed(lambda: digests({n: v for n, v in kernel.items() if n in checkpoint.user_names(kernel)}))
    shutil.rmtree(ckpt)
    shutil.rmtree(plain)
    return times


def verdict(ratio: float, target: float, at_most: bool, shown: str) -> str:
    met = ratio <= target if at_most else ratio < target
    return f"target {'<=' if at_most else '<'} {shown}: {'met' if met else 'NOT met'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()

    kernel = namespace_of(args.gb)
    arrays = [kernel["weights"], kernel["gradients"], kernel["moments"], kernel["frame"].to_numpy()]
    size = checkpoint.estimate_bytes(kernel)
    print(f"cores: {os.cpu_count()}   namespace: {size / GB:.2f} GiB ({len(checkpoint.user_names(kernel))} values)")
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        one_round(kernel, arrays, Path(folder), True)  # warm-up, not counted: the first writes fault pages in
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(dir=args.dir) as folder:
            for label, seconds in one_round(kernel, arrays, Path(folder), run % 2 == 0).items():
                samples.setdefault(label, []).append(seconds)
    median = {label: statistics.median(values) for label, values in samples.items()}
    full, plain, unchanged = median["checkpoint"], median["numpy.save"], median["unchanged"]
    full_ratio, unchanged_ratio = full / plain, unchanged / full
    print(f"medians of {args.runs}:")
    print(f"(a) full checkpoint      {full:6.3f} s   numpy.save of the arrays {plain:6.3f} s")
    print(f"    checkpoint / numpy.save  {full_ratio:5.2f}   ({verdict(full_ratio, FULL_TARGET, True, '1.5')})")
    print(f"(b) unchanged checkpoint {unchanged:6.3f} s")
    print(
        f"    unchanged / full         {unchanged_ratio:5.1%}   ({verdict(unchanged_ratio, UNCHANGED_TARGET, False, '5%')})"
    )
    print(f"    of which digests alone   {median['digests']:6.3f} s   (every value is digested to find what changed)")
    for label, runs in samples.items():
        print(f"    {label:<11} runs: " + "  ".join(f"{run:.3f}" for run in runs))


if __name__ == "__main__":
    main()
