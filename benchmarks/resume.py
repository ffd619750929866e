"""How soon a resumed job gets back to work, against starting the same notebook afresh, side by
side in one run on a real e31 server (``tests/server_process.py``'s ``ServerProcess``).

    python benchmarks/resume.py [--mb 256] [--prepare 3] [--runs 3]

The notebook: cell 1 prepares (sleeps ``--prepare`` seconds, as loading or preprocessing would,
then makes ``--mb`` MiB of float64 data); cell 2 notes the time it started, then runs for long.
Each round submits it with ``--checkpoint`` and a run time limit that cell 2 outlasts, and times
(a) a fresh start: the submit to cell 2 starting (cell 1 runs). Once the job has failed for lack
of time, it is resumed, and (b) times the resume to cell 2 starting again (the checkpoint after
cell 1 is loaded instead: its ``--mb`` MiB come from disk). The job is then cancelled. The server
lets a checkpoint cost all of the run since the last (``c.E31.checkpoint_share = 1.0``): by the
default 5%, a checkpoint of ``--mb`` MiB after seconds of work is not worth taking.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from e31_jupyter.client import E31Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from server_process import ServerProcess  # noqa: E402  (the test suite's server in a subprocess)
from support import wait_state, write_notebook  # noqa: E402

CELL_1 = "import time\nimport numpy as np\ntime.sleep({prepare})\ndata = np.random.default_rng(0).random({n})"
CELL_2 = "import pathlib, time\npathlib.Path({marker!r}).write_text(repr(time.time()))\ntime.sleep(3600)"


def until_marked(marker: Path, since: float, timeout: float = 300) -> float:
    """Seconds from ``since`` (time.time()) to the time cell 2 wrote into ``marker``."""
    deadline = time.monotonic() + timeout
    while not marker.exists() or not marker.read_text():
        if time.monotonic() > deadline:
            raise RuntimeError("cell 2 never started")
        time.sleep(0.02)
    return float(marker.read_text()) - since


def one_round(client: E31Client, notebook: Path, marker: Path, limit_s: float) -> dict[str, float]:
    marker.unlink(missing_ok=True)
    submitted = time.time()
    job = client.submit(path=str(notebook), gpus=1, checkpoint=True, max_runtime=int(limit_s))
    fresh = until_marked(marker, submitted)
    failed = wait_state(client, job["id"], "failed", "succeeded", "cancelled", timeout=300)
    if failed["state"] != "failed" or not failed.get("last_checkpoint"):
        raise RuntimeError(f"the first run ended {failed['state']} ({failed['reason']}) without a checkpoint")
    marker.unlink()
    resumed_at = time.time()
    client.resume(job["id"], max_runtime=int(limit_s))
    resumed = until_marked(marker, resumed_at)
    client.cancel(job["id"])
    wait_state(client, job["id"], "cancelled", "failed", "succeeded", timeout=300)
    return {"fresh_s": fresh, "resume_s": resumed, "checkpoint_bytes": failed["last_checkpoint"]["bytes"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=256, help="MiB of data cell 1 makes (default 256)")
    parser.add_argument("--prepare", type=float, default=3.0, help="seconds cell 1 spends preparing (default 3)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="e31-resume-bench-"))
    marker, notebook = root / "cell-2-started", root / "resume.ipynb"
    write_notebook(
        notebook,
        CELL_1.format(prepare=args.prepare, n=args.mb * (1 << 20) // 8),
        CELL_2.format(marker=str(marker)),
    )
    # A 256 MiB checkpoint after 3 s of work costs more than the default 5% of them: let it.
    server = ServerProcess(
        root / "data", gpus=["0"], root_dir=root, log_path=root / "server.log",
        extra_args=["--E31.checkpoint_share=1.0"],
    ).start()  # fmt: skip
    client = E31Client(server.url, server.token)
    limit_s = args.prepare + 15  # cell 1 and its checkpoint fit; cell 2 does not
    try:
        rounds = [one_round(client, notebook, marker, limit_s) for _ in range(args.runs)]
    finally:
        server.stop()
    fresh = statistics.median(r["fresh_s"] for r in rounds)
    resume = statistics.median(r["resume_s"] for r in rounds)
    size = rounds[-1]["checkpoint_bytes"] / (1 << 20)
    print(f"cell 1: {args.prepare:g} s of preparing, {args.mb} MiB of data; checkpoint after it: {size:.0f} MiB")
    print("(c.E31.checkpoint_share = 1.0, so that the checkpoint after cell 1 is taken however long it takes)")
    print(f"medians of {args.runs}:")
    print(f"(a) fresh start: submit -> cell 2 running   {fresh:6.2f} s")
    print(f"(b) resume:      resume -> cell 2 running   {resume:6.2f} s   ({resume / fresh:.2f}x the fresh start)")
    print("    fresh runs:  " + "  ".join(f"{r['fresh_s']:.2f}" for r in rounds))
    print("    resume runs: " + "  ".join(f"{r['resume_s']:.2f}" for r in rounds))


if __name__ == "__main__":
    main()
