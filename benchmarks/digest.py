"""What digesting a `%%e31` cell's inputs costs (every submit, and twice in the job: before and
after the cell), against ``numpy.save`` of the same data, side by side in one run.

    python benchmarks/digest.py [--array-gb 1.0] [--frame-mb 500] [--runs 3] [--dir DIR]

For a float64 array of ``--array-gb`` and a pandas DataFrame of ``--frame-mb`` (8 float64 columns,
plus one text column of 1,000 distinct labels, as real frames have), it times, alternating the
order every round: ``digest(value)`` (``e31_jupyter.notebook.digest``) and ``numpy.save`` of the
array (of the frame's numeric block, ``frame.to_numpy()`` outside the timing, for the frame), into
a fresh file under ``--dir`` (default: the system's temporary folder), deleted untimed after each
run. It prints the median of each and their ratio. Target: well under a second per GB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from e31_jupyter.notebook.digest import digest

GB, MB = 1 << 30, 1 << 20


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def compare(label: str, value, as_array: np.ndarray, folder: Path, runs: int) -> None:
    digests, saves = [], []
    for run in range(runs):
        path = folder / f"run-{run}.npy"
        steps = [(digests, lambda: digest(value)), (saves, lambda path=path: np.save(path, as_array))]
        for samples, action in steps if run % 2 == 0 else steps[::-1]:
            samples.append(timed(action))
        path.unlink()
    d, s = statistics.median(digests), statistics.median(saves)
    print(f"{label:<34} digest {d:6.3f} s   numpy.save {s:6.3f} s   digest/save {d / s:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--array-gb", type=float, default=1.0)
    parser.add_argument("--frame-mb", type=float, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    import pandas as pd

    print(f"cores: {os.cpu_count()}")
    array = np.random.default_rng(0).random(int(args.array_gb * GB) // 8)
    rows = int(args.frame_mb * MB) // (8 * 8)
    frame = pd.DataFrame(np.random.default_rng(1).random((rows, 8)), columns=[f"c{i}" for i in range(8)])
    frame["label"] = pd.Categorical.from_codes(np.arange(rows) % 1000, [f"label-{i}" for i in range(1000)])
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        compare(f"array {array.nbytes / GB:.2f} GiB", array, array, Path(folder), args.runs)
        numeric = frame.drop(columns="label").to_numpy()
        size = frame.memory_usage(deep=True).sum() / MB
        compare(f"DataFrame {size:.0f} MiB", frame, numeric, Path(folder), args.runs)


if __name__ == "__main__":
    main()
