"""What e31 costs on top of running the notebook yourself.

    python benchmarks/overhead.py [--runs N] [--json] [--phases]

Starts a real e31 server (``tests/server_process.py's ServerProcess``) with a one-GPU inventory in a
temporary directory, talks to it only through ``E31Client`` (the REST API), and prints, next to
its target:

1. submit -> running with a free GPU: the job record's ``submitted_at -> started_at`` and the
   client-observed time from sending POST /e31/api/jobs to seeing the job ``running``.
2. release: job A holds the only GPU and the next job waits behind it. "kernel ended -> next
   started" runs from A's ``released.json`` being written (the worker's mark that its kernel has
   ended; its mtime) to the next job's ``started_at``; "release recorded -> next started" from
   A's ``gpus_released_at`` (or ``finished_at``, had its process ended first) to the next job's
   ``started_at``. A then goes on making its reports, off the meter.
3. wall time of a one-cell notebook (``x = 1``): through e31 (client-observed, POST -> final
   state, with the default HTML report and with ``reports=[]``) against bare papermill, both the
   CLI (``python -m papermill in.ipynb out.ipynb``) and in-process ``papermill.execute_notebook``.
   The kinds of run are interleaved, round by round, so that noise hits them all, and each starts
   once e31's processes are idle (the standby worker, started ahead for the next job, has done its
   imports), so no run pays for work done ahead for another.

Section 1's samples are the e31 runs of section 3 (each asks for the one GPU while it is free).
5. at the prompt: ``%load_ext e31_jupyter`` in a fresh kernel against ``import json`` in the same
   kernel, and ``e31 jobs`` (its own process) finding the server from this user's runtime files
   against ``e31 jobs`` with ``E31_URL``/``E31_TOKEN`` set.

``--phases`` adds a breakdown of a worker-like process (python start, imports, kernel start,
execution, HTML report, exit) to show where the time goes. Needs no GPU: the inventory is a
configured list. Nothing in the package is changed or monkey-patched.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

from e31_jupyter.client import FINAL_STATES, E31Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from server_process import ServerProcess  # noqa: E402  (the test suite's server in a subprocess)

TARGETS = {
    "submit_running_s": 0.5, "release_s": 0.2,
    "ratio": 0.5,  # e31 (HTML report) / python -m papermill
    "ratio_inprocess": 2.0,  # e31 (HTML report) / warm in-process papermill
    "load_ext_s": 0.5, "discovery_s": 0.2,
}  # fmt: skip
TOKEN = "e31-bench-token"
NOTEBOOK = "trivial.ipynb"


# --- small helpers ----------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear between the closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "median": statistics.median(values) if values else None,
        "p90": percentile(values, 90),
        "min": min(values) if values else None,
        "max": max(values) if values else None,
        "samples": [round(v, 4) for v in values],
    }


def ts(value: str | None) -> float | None:
    """An ISO time from the API as a POSIX timestamp (the API gives milliseconds)."""
    return None if value is None else dt.datetime.fromisoformat(value).timestamp()


def write_trivial_notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


# --- the measurements -------------------------------------------------------------------------


class Bench:
    def __init__(self, root: Path, poll_s: float, standby: bool = True):
        self.root = root
        self.poll_s = poll_s
        self.standby = standby  # c.E31.standby_worker
        self.notebook = root / NOTEBOOK
        self.runtime_dir = root / "runtime"  # the server's runtime file: what `e31 jobs` finds it by
        self.server: ServerProcess | None = None
        self.client: E31Client | None = None

    def start_server(self) -> float:
        t0 = time.perf_counter()
        self.server = ServerProcess(
            self.root / "data", gpus=["0"], root_dir=self.root, token=TOKEN,
            log_path=self.root / "server.log", env={"JUPYTER_RUNTIME_DIR": str(self.runtime_dir)},
            extra_args=[f"--E31.standby_worker={self.standby}"],
        ).start()  # fmt: skip
        self.client = E31Client(self.server.url, TOKEN)
        return time.perf_counter() - t0

    def stop_server(self) -> None:
        if self.server:
            self.server.stop()

    def jobdir(self, job_id: str) -> Path:
        return self.root / "data" / "jobs" / job_id

    def settle(self, timeout: float = 15.0) -> None:
        """Wait until the server and everything it started (the standby worker importing for
        the next job) are idle, so that no kind of run pays for work done ahead for another."""
        import psutil

        server = psutil.Process(self.server.proc.pid)

        def cpu() -> float:
            total = 0.0
            for process in [server, *server.children(recursive=True)]:
                try:
                    times = process.cpu_times()
                    total += times.user + times.system
                except psutil.Error:
                    pass
            return total

        deadline = time.monotonic() + timeout
        before = cpu()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            now = cpu()
            if now - before < 0.02:
                return
            before = now

    # 1 + 3: one e31 job on a free GPU, followed by the client --------------------------------

    def e31_run(self, reports: list[str] | None) -> dict:
        body = {"path": NOTEBOOK, "gpus": 1, "name": "bench"}
        if reports is not None:
            body["reports"] = reports
        # E31Client.wait() with its default poll, as the magics and the CLI use it, in its own
        # thread and session, to show what a user who waits that way sees.
        waited: dict = {}

        def default_wait(job_id: str, t0: float) -> None:
            job = E31Client(self.server.url, TOKEN).wait(job_id, timeout=120)
            waited["s"], waited["state"] = time.perf_counter() - t0, job["state"]

        t0 = time.perf_counter()
        job = self.client.submit(**body)
        t_response = time.perf_counter()
        job_id = job["id"]
        waiter = threading.Thread(target=default_wait, args=(job_id, t0), daemon=True)
        waiter.start()
        t_running = t_response if job["state"] != "queued" else None
        deadline = t0 + 120
        while job["state"] not in FINAL_STATES:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"job {job_id} still {job['state']} after 120 s")
            time.sleep(self.poll_s if t_running else 0.005)
            job = self.client.job(job_id)
            if t_running is None and job["state"] != "queued":
                t_running = time.perf_counter()
        t_final = time.perf_counter()
        waiter.join(130)
        if job["state"] != "succeeded":
            raise RuntimeError(f"job {job_id} ended {job['state']}: {job['reason']}")
        manifest = json.loads((self.jobdir(job_id) / "manifest.json").read_text())
        submitted, started, finished = (ts(job[k]) for k in ("submitted_at", "started_at", "finished_at"))
        return {
            "id": job_id,
            "post_response_s": t_response - t0,
            "client_submit_running_s": t_running - t0,
            "record_submit_running_s": started - submitted,
            "client_total_s": t_final - t0,
            "record_total_s": finished - submitted,
            "client_wait_default_s": waited.get("s"),
            # where the time goes, from the records and the worker's manifest
            "started_to_worker_run_s": manifest["started_at"] - started,
            "worker_notebook_s": manifest["finished_at"] - manifest["started_at"],
            "worker_after_notebook_s": self._manifest_written(job_id) - manifest["finished_at"],
            "manifest_to_release_s": finished - self._manifest_written(job_id),
            # what the meter charges (one GPU) against the job's whole run: the reports are not in it
            "meter_s": job["meter"]["gpu_seconds"],
            "started_to_finished_s": finished - started,
        }

    def _manifest_written(self, job_id: str) -> float:
        return (self.jobdir(job_id) / "manifest.json").stat().st_mtime

    def _kernel_ended(self, job_id: str) -> float:
        """When the worker marked the kernel's end (released.json), its GPUs free from then."""
        return (self.jobdir(job_id) / "released.json").stat().st_mtime

    # 3: bare papermill --------------------------------------------------------------------------

    def papermill_cli(self, i: int) -> float:
        out = self.root / "pm" / f"cli-{i}.ipynb"
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "papermill", str(self.notebook), str(out)],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root,
        )  # fmt: skip
        return time.perf_counter() - t0

    def papermill_inprocess(self, i: int) -> float:
        import papermill

        out = self.root / "pm" / f"inproc-{i}.ipynb"
        t0 = time.perf_counter()
        papermill.execute_notebook(str(self.notebook), str(out), progress_bar=False, cwd=str(self.root))
        return time.perf_counter() - t0

    # 5: at the prompt ---------------------------------------------------------------------------

    def load_ext(self) -> dict:
        """A fresh kernel: ``import json``, then ``%load_ext e31_jupyter``, each timed as the
        kernel reports it (execute request sent -> reply)."""
        from jupyter_client.manager import start_new_kernel

        km, kc = start_new_kernel(kernel_name="python3", cwd=str(self.root))
        try:
            times = {}
            for label, code in (("import_json_s", "import json"), ("load_ext_s", "%load_ext e31_jupyter")):
                t0 = time.perf_counter()
                reply = kc.execute_interactive(code, timeout=60)
                times[label] = time.perf_counter() - t0
                if reply["content"]["status"] != "ok":
                    raise RuntimeError(f"{code!r} failed in the kernel: {reply['content']}")
            return times
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)

    def e31_jobs(self, found: bool) -> float:
        """``e31 jobs`` as its own process; ``found``: from the runtime files, else from the variables."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("E31_")}
        if found:
            env["JUPYTER_RUNTIME_DIR"] = str(self.runtime_dir)
        else:
            env |= {"E31_URL": self.server.url, "E31_TOKEN": TOKEN}
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "e31_jupyter.cli", "jobs"], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        return time.perf_counter() - t0

    def prompt(self, runs: int) -> dict:
        """Section 5, interleaved round by round."""
        out: dict[str, list[float]] = {"import_json_s": [], "load_ext_s": [], "jobs_given_s": [], "jobs_found_s": []}
        for i in range(runs):
            for label, value in self.load_ext().items():
                out[label].append(value)
            for found in (True, False) if i % 2 else (False, True):
                out["jobs_found_s" if found else "jobs_given_s"].append(self.e31_jobs(found))
        return out

    # 2: release -------------------------------------------------------------------------------

    def release_chain(self, n: int) -> dict:
        """n + 1 one-GPU jobs submitted at once: each waits for the one before it, so every
        hand-over is a release sample."""
        ids = [self.client.submit(path=NOTEBOOK, gpus=1, reports=[], name=f"chain-{i}")["id"] for i in range(n + 1)]
        jobs = {job_id: self.client.wait(job_id, poll=0.2, timeout=60 + 30 * n) for job_id in ids}
        bad = [j for j in jobs.values() if j["state"] != "succeeded"]
        if bad:
            raise RuntimeError(f"release chain: job {bad[0]['id']} ended {bad[0]['state']}: {bad[0]['reason']}")
        ordered = sorted(jobs.values(), key=lambda j: ts(j["started_at"]))
        exit_to_next, release_to_next, exit_to_release = [], [], []
        for a, b in zip(ordered, ordered[1:]):
            a_finished, b_started = ts(a["gpus_released_at"] or a["finished_at"]), ts(b["started_at"])
            if ts(b["submitted_at"]) > a_finished:
                continue  # b was not waiting when a gave its GPU back: not a hand-over
            written = self._kernel_ended(a["id"])
            exit_to_next.append(b_started - written)
            release_to_next.append(b_started - a_finished)
            exit_to_release.append(a_finished - written)
        return {
            "worker_exit_to_next_started_s": exit_to_next,
            "release_recorded_to_next_started_s": release_to_next,
            "worker_exit_to_release_recorded_s": exit_to_release,
        }


def interleaved(bench: Bench, runs: int, log) -> dict:
    """Section 1 and 3: e31 (HTML), papermill CLI, e31 (no HTML), papermill in-process, with
    the order reversed every other round."""
    kinds = ["e31_html", "papermill_cli", "e31_no_html", "papermill_inprocess"]
    results: dict[str, list] = {k: [] for k in kinds}
    for i in range(runs):
        order = kinds if i % 2 == 0 else [kinds[1], kinds[0], kinds[3], kinds[2]]
        for kind in order:
            bench.settle()
            if kind == "e31_html":
                results[kind].append(bench.e31_run(reports=None))
            elif kind == "e31_no_html":
                results[kind].append(bench.e31_run(reports=[]))
            elif kind == "papermill_cli":
                results[kind].append(bench.papermill_cli(i))
            else:
                results[kind].append(bench.papermill_inprocess(i))
        log(f"  round {i + 1}/{runs}: "
            f"e31 {results['e31_html'][-1]['client_total_s']:.2f}s, "
            f"e31 no-html {results['e31_no_html'][-1]['client_total_s']:.2f}s, "
            f"papermill CLI {results['papermill_cli'][-1]:.2f}s, "
            f"in-process {results['papermill_inprocess'][-1]:.2f}s")  # fmt: skip
    return results


# --- where a worker's time goes (--phases) ----------------------------------------------------

PHASE_CHILD = r"""
import json, sys, time
marks = [("python started", time.time())]
def mark(name): marks.append((name, time.time()))
import e31_jupyter.execution.worker
from e31_jupyter.execution.quick_imports import skip_iri_parsers
skip_iri_parsers()  # as the worker's main() does
mark("import e31_jupyter.execution.worker")
import nbformat, papermill
from papermill.engines import NBClientEngine
mark("import papermill, nbformat")
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name="python3")
mark("kernel start (jupyter_client, until ready)")
kc.execute_interactive("x = 1", timeout=60)
mark("execute x = 1")
kc.stop_channels(); km.shutdown_kernel()
mark("kernel shutdown")
nb_in, nb_out, cwd = sys.argv[1:4]
papermill.execute_notebook(nb_in, nb_out, kernel_name="python3", cwd=cwd, progress_bar=False,
                           log_output=True, request_save_on_cell_execute=True)
mark("papermill.execute_notebook (warm process)")
from nbconvert import HTMLExporter
mark("import nbconvert HTMLExporter")
body, _ = HTMLExporter().from_filename(nb_out)
open(nb_out + ".html", "w").write(body)
mark("HTML report (render + write)")
print(json.dumps(marks), flush=True)
"""


def phases(root: Path, runs: int) -> dict:
    per_phase: dict[str, list[float]] = {}
    for i in range(runs):
        out = root / "pm" / f"phases-{i}.ipynb"
        start = time.time()
        proc = subprocess.run(
            [sys.executable, "-c", PHASE_CHILD, str(root / NOTEBOOK), str(out), str(root)],
            check=True, capture_output=True, text=True, cwd=root,
        )  # fmt: skip
        end = time.time()
        marks = json.loads(proc.stdout.strip().splitlines()[-1])
        previous = start
        for name, at in marks:
            per_phase.setdefault(name, []).append(at - previous)
            previous = at
        per_phase.setdefault("interpreter exit", []).append(end - previous)
        per_phase.setdefault("total", []).append(end - start)
    return {name: summary(values) for name, values in per_phase.items()}


# --- report -----------------------------------------------------------------------------------


def analyse(runs: dict, chain: dict, prompt: dict) -> dict:
    e31_runs = runs["e31_html"] + runs["e31_no_html"]

    def col(rows, key):
        return [r[key] for r in rows if r.get(key) is not None]

    out = {
        "submit_running": {
            "record_submitted_to_started_s": summary(col(e31_runs, "record_submit_running_s")),
            "client_post_to_running_s": summary(col(e31_runs, "client_submit_running_s")),
            "client_post_response_s": summary(col(e31_runs, "post_response_s")),
        },
        "release": {k: summary(v) for k, v in chain.items()},
        "wall": {
            "e31_html_client_s": summary(col(runs["e31_html"], "client_total_s")),
            "e31_no_html_client_s": summary(col(runs["e31_no_html"], "client_total_s")),
            "e31_html_record_s": summary(col(runs["e31_html"], "record_total_s")),
            "e31_no_html_record_s": summary(col(runs["e31_no_html"], "record_total_s")),
            "e31_html_client_wait_default_s": summary(col(runs["e31_html"], "client_wait_default_s")),
            "e31_no_html_client_wait_default_s": summary(col(runs["e31_no_html"], "client_wait_default_s")),
            "papermill_cli_s": summary(runs["papermill_cli"]),
            "papermill_inprocess_s": summary(runs["papermill_inprocess"]),
        },
        "e31_breakdown": {
            kind: {
                key: summary(col(runs[kind], key))
                for key in (
                    "started_to_worker_run_s",
                    "worker_notebook_s",
                    "worker_after_notebook_s",
                    "manifest_to_release_s",
                    "meter_s",
                    "started_to_finished_s",
                )
            }
            for kind in ("e31_html", "e31_no_html")
        },
    }
    out["prompt"] = {key: summary(values) for key, values in prompt.items()}
    found, given = out["prompt"]["jobs_found_s"]["median"], out["prompt"]["jobs_given_s"]["median"]
    out["prompt"]["discovery_adds_s"] = found - given
    cli = out["wall"]["papermill_cli_s"]["median"]
    inproc = out["wall"]["papermill_inprocess_s"]["median"]
    out["ratios"] = {
        "e31_html_vs_papermill_cli": out["wall"]["e31_html_client_s"]["median"] / cli,
        "e31_no_html_vs_papermill_cli": out["wall"]["e31_no_html_client_s"]["median"] / cli,
        "e31_html_vs_papermill_inprocess": out["wall"]["e31_html_client_s"]["median"] / inproc,
        "e31_no_html_vs_papermill_inprocess": out["wall"]["e31_no_html_client_s"]["median"] / inproc,
    }
    return out


def verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "MISSED"


def print_report(res: dict) -> None:
    a = res["analysis"]
    w = 52

    def row(label, s, target=None, unit="s"):
        t = f"<= {target:g} {unit}" if target is not None else ""
        v = verdict(s["median"], target) if target is not None else ""
        print(f"  {label:<{w}} {s['median']:8.3f} {s['p90']:8.3f} {s['min']:8.3f} {s['max']:8.3f}   {t:<10} {v}")

    def header(title):
        print(f"\n{title}")
        print(f"  {'':<{w}} {'median':>8} {'p90':>8} {'min':>8} {'max':>8}   {'target':<10}")

    m = res["meta"]
    print(f"e31 overhead benchmark: {m['runs']} runs, {m['cpus']} CPUs, Python {m['python']}, "
          f"poll {m['poll_s'] * 1000:g} ms, server start {m['server_start_s']:.2f} s, "
          f"total {m['total_s']:.0f} s")  # fmt: skip

    s = a["submit_running"]
    header(f"1. submit -> running, GPU free (seconds; n={s['record_submitted_to_started_s']['n']})")
    row("record: submitted_at -> started_at", s["record_submitted_to_started_s"], TARGETS["submit_running_s"])
    row("client: POST sent -> job seen running", s["client_post_to_running_s"], TARGETS["submit_running_s"])
    row("client: POST round trip", s["client_post_response_s"])

    r = a["release"]
    header(f"2. release, 1-GPU inventory, next job queued (seconds; n={r['worker_exit_to_next_started_s']['n']})")
    row("kernel ended (released.json) -> next started", r["worker_exit_to_next_started_s"], TARGETS["release_s"])
    row("release recorded -> next started", r["release_recorded_to_next_started_s"], TARGETS["release_s"])
    row("kernel ended (released.json) -> release recorded", r["worker_exit_to_release_recorded_s"])

    wall = a["wall"]
    header(f"3. wall time, one-cell notebook `x = 1` (seconds; n={wall['papermill_cli_s']['n']} each)")
    row("e31, HTML report (default), client-observed", wall["e31_html_client_s"])
    row("e31, reports=[], client-observed", wall["e31_no_html_client_s"])
    row("e31, HTML report, record submitted -> finished", wall["e31_html_record_s"])
    row("e31, reports=[], record submitted -> finished", wall["e31_no_html_record_s"])
    row("e31, HTML report, seen by E31Client.wait()", wall["e31_html_client_wait_default_s"])
    row("e31, reports=[], seen by E31Client.wait()", wall["e31_no_html_client_wait_default_s"])
    row("papermill CLI (python -m papermill)", wall["papermill_cli_s"])
    row("papermill.execute_notebook, in-process (warm)", wall["papermill_inprocess_s"])
    ratios = a["ratios"]
    print(f"\n  {'ratio of medians':<{w}} {'value':>8}   target")
    for key, label, target in (
        ("e31_html_vs_papermill_cli", "e31 (HTML) / papermill CLI", TARGETS["ratio"]),
        ("e31_no_html_vs_papermill_cli", "e31 (reports=[]) / papermill CLI", TARGETS["ratio"]),
        ("e31_html_vs_papermill_inprocess", "e31 (HTML) / papermill in-process", TARGETS["ratio_inprocess"]),
        ("e31_no_html_vs_papermill_inprocess", "e31 (reports=[]) / papermill in-process", None),
    ):
        t = f"<= {target:g}   {verdict(ratios[key], target)}" if target else ""
        print(f"  {label:<{w}} {ratios[key]:8.2f}   {t}")

    header("   where an e31 job's time goes (seconds, from records, manifest and its mtime)")
    for kind, label in (("e31_html", "html"), ("e31_no_html", "no html")):
        b = a["e31_breakdown"][kind]
        row(f"{label}: started -> worker in run() (spawn)", b["started_to_worker_run_s"])
        row(f"{label}: run() -> notebook done (papermill)", b["worker_notebook_s"])
        row(f"{label}: notebook done -> manifest (files, reports)", b["worker_after_notebook_s"])
        row(f"{label}: manifest written -> release recorded", b["manifest_to_release_s"])
        row(f"{label}: meter, GPU-seconds charged (1 GPU)", b["meter_s"])
        row(f"{label}: started -> finished (record)", b["started_to_finished_s"])

    if res.get("phases"):
        header("4. a worker-like process, phase by phase (seconds)")
        for name, s in res["phases"].items():
            row(name, s)

    p = a["prompt"]
    header(f"5. at the prompt (seconds; n={p['load_ext_s']['n']} each)")
    row("%load_ext e31_jupyter, fresh kernel", p["load_ext_s"], TARGETS["load_ext_s"])
    row("import json, same kernel, just before", p["import_json_s"])
    row("e31 jobs, E31_URL and E31_TOKEN set", p["jobs_given_s"])
    row("e31 jobs, server found from runtime files", p["jobs_found_s"])
    added = p["discovery_adds_s"]
    print(f"  {'discovery adds (difference of medians)':<{w}} {added:8.3f}   <= {TARGETS['discovery_s']:g} s     "
          f"{verdict(added, TARGETS['discovery_s'])}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="samples per measurement (default 10)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    parser.add_argument("--phases", action="store_true", help="also time a worker-like process phase by phase")
    parser.add_argument("--phase-runs", type=int, default=3, help="runs of the phase breakdown (default 3)")
    parser.add_argument("--poll", type=float, default=0.05, help="client poll interval in seconds (default 0.05)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (server log, job dirs)")
    parser.add_argument(
        "--no-standby", action="store_true", help="start every job's worker afresh (c.E31.standby_worker = False)"
    )
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2")

    def log(message):
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="e31-bench-"))
    (root / "pm").mkdir()
    write_trivial_notebook(root / NOTEBOOK)
    bench = Bench(root, args.poll, standby=not args.no_standby)
    try:
        log(f"e31 benchmark in {root}")
        server_start = bench.start_server()
        log(f"server up in {server_start:.2f}s; warm-up")
        bench.e31_run(reports=None)  # not counted: cold caches, first imports
        bench.papermill_cli(-1)
        bench.papermill_inprocess(-1)
        log(f"1 + 3: {args.runs} rounds of e31 (HTML), papermill CLI, e31 (reports=[]), papermill in-process")
        runs = interleaved(bench, args.runs, log)
        log(f"2: release chain of {args.runs + 1} jobs on one GPU")
        chain = bench.release_chain(args.runs)
        log(f"5: %load_ext and e31 jobs, {args.runs} rounds")
        prompt = bench.prompt(args.runs)
        phase_results = None
        if args.phases:
            log(f"4: worker phases, {args.phase_runs} runs")
            phase_results = phases(root, args.phase_runs)
    finally:
        bench.stop_server()
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    results = {
        "meta": {
            "runs": args.runs,
            "poll_s": args.poll,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "server_start_s": server_start,
            "total_s": time.perf_counter() - started,
            "targets": TARGETS,
        },
        "analysis": analyse(runs, chain, prompt),
        "phases": phase_results,
        "raw": {"runs": runs, "release_chain": chain, "prompt": prompt},
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
