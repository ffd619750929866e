"""The queue under load: many clients submitting at once, and a long queue being read.

    python benchmarks/load.py [--jobs 1000] [--clients 20] [--queued 10000] [--json]
                              [--fill auto|api|store] [--fill-timeout 180] [--query-seconds 60]

Starts a real e31 server (``tests/server_process.py's ServerProcess``, local backend, two configured
GPUs) in a temporary directory and talks to it over loopback HTTP only. A *blocker* job holds
both GPUs (it waits for a gate file), and every job the benchmark submits asks for both GPUs, so
all of them stay queued: no kernel ever starts besides the blocker's.

(a) ``--jobs`` submits of a small inline notebook from ``--clients`` concurrent clients (a thread
    and a ``requests.Session`` each): latency p50/p99 and throughput; then every acknowledged job
    must be in the API's job list, queued.
(b) the queue filled up to ``--queued`` jobs: through the API, from the same clients, for at most
    ``--fill-timeout`` seconds (throughput, and submit latency as the queue grows); with ``--fill
    auto`` (the default) the rest is written with the server stopped, as copies of a submitted job
    through the package's own ``Store``, and the server restarted (how long until it answers).
    Then, with the queue that long: the server's CPU while nobody asks, ``5 x --clients`` more
    submits, the list query (a page of ``GET /e31/api/jobs``, of ``?state=queued``, and one deep
    in the queue with ``before=``; and every queued job page by page, once), the queue-position
    query (``GET /e31/api/jobs/{id}``), ``GET /e31/api/gpus`` and a submit's check (``POST
    /e31/api/check``: the line made again with the job in it, and the forecast), p50/p99 against
    the 200 ms target, and the server's memory (RSS) along the way.

Bounded: each submit phase stops at ``--fill-timeout`` (the submits into the long queue at 300 s
if that is more) and each query kind at ``--query-seconds``
(or ``--samples``) even if the server is slow, and says so; the server is stopped and the temporary
directory removed at the end (``--keep`` keeps it). Exit status 0 when every target is met.
Nothing in the package is changed or patched. Other work on the machine slows every figure: the
load average at the start and at the end is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import psutil
import requests
from nbformat.v4 import new_code_cell, new_notebook

from e31_jupyter.client import E31Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from overhead import percentile  # the one percentile of the benchmarks (same folder)
from server_process import ServerProcess  # noqa: E402  (the test suite's server in a subprocess)

TOKEN = "e31-load-token"
TARGETS = {"query_p99_ms": 200.0}
LONG_QUEUE_SUBMITS_S = 300.0  # the most the submits into the long queue may take
BLOCKER = """
import os, time
started = time.time()
while not os.path.exists(gate) and time.time() - started < 3600:
    time.sleep(0.2)
"""


def notebook(source: str, parameters: str | None = None) -> dict:
    nb = new_notebook()
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if parameters is not None:
        nb.cells.append(new_code_cell(parameters, metadata={"tags": ["parameters"]}))
    nb.cells.append(new_code_cell(source))
    return json.loads(nbformat.writes(nb))


def summary_ms(samples_s: list[float]) -> dict:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms) if ms else None,
        "mean_ms": statistics.fmean(ms) if ms else None,
    }


class MemoryWatch:
    """The server process's RSS, sampled every ``interval`` seconds in a thread."""

    def __init__(self, pid: int, interval: float = 0.5):
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        value = self.process.memory_info().rss
        self.peak = max(self.peak, value)
        return value

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.rss()
            except psutil.Error:
                return

    def start(self) -> MemoryWatch:
        self.rss()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def submit_many(url: str, count: int, clients: int, body: dict, timeout_s: float) -> dict:
    """``count`` submits from ``clients`` threads, each with its own session; stops taking new
    work after ``timeout_s``. Returns acknowledged ids, latencies (with their order) and errors."""
    lock = threading.Lock()
    next_index = iter(range(count))
    acknowledged: list[str] = []
    latencies: list[tuple[int, float]] = []  # (sequence number, seconds)
    errors: list[str] = []
    deadline = time.monotonic() + timeout_s
    sequence = [0]

    def client():
        session = requests.Session()
        session.headers["Authorization"] = f"token {TOKEN}"
        while time.monotonic() < deadline:
            with lock:
                if next(next_index, None) is None:
                    return
            started = time.perf_counter()
            try:
                response = session.post(f"{url}/e31/api/jobs", json=body, timeout=120)
            except requests.RequestException as error:
                with lock:
                    errors.append(f"{type(error).__name__}: {error}")
                continue
            elapsed = time.perf_counter() - started
            with lock:
                sequence[0] += 1
                if response.status_code == 201:
                    acknowledged.append(response.json()["id"])
                    latencies.append((sequence[0], elapsed))
                else:
                    errors.append(f"{response.status_code} {response.text[:200]}")

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for _ in range(clients):
            pool.submit(client)
    wall = time.perf_counter() - started
    return {
        "acknowledged": acknowledged,
        "latencies": [s for _, s in sorted(latencies)],
        "errors": errors,
        "wall_s": wall,
        "timed_out": len(acknowledged) + len(errors) < count,
    }


def time_query(
    session: requests.Session, url: str, samples: int, budget_s: float, pick=None, body: dict | None = None
) -> dict:
    """GET ``url`` (or ``pick()``'s URL) up to ``samples`` times within ``budget_s``; POST
    ``body`` instead when given."""
    latencies, sizes, statuses = [], [], set()
    deadline = time.monotonic() + budget_s
    while len(latencies) < samples and time.monotonic() < deadline:
        target = pick() if pick else url
        started = time.perf_counter()
        response = session.post(target, json=body, timeout=120) if body else session.get(target, timeout=120)
        latencies.append(time.perf_counter() - started)
        statuses.add(response.status_code)
        sizes.append(len(response.content))
    result = summary_ms(latencies)
    result["statuses"] = sorted(statuses)
    result["bytes"] = int(statistics.fmean(sizes)) if sizes else 0
    result["cut_short"] = len(latencies) < samples
    return result


def server_cpu(pid: int, seconds: float) -> float:
    """The server's CPU use over ``seconds`` while nobody talks to it (percent of one core)."""
    process = psutil.Process(pid)
    process.cpu_percent(None)
    time.sleep(seconds)
    return process.cpu_percent(None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="submits in phase (a) (default 1000)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (default 20)")
    parser.add_argument("--queued", type=int, default=10000, help="queued jobs in phase (b) (default 10000)")
    parser.add_argument(
        "--fill",
        choices=("auto", "api", "store"),
        default="auto",
        help="how phase (b) fills the queue: api: POST /e31/api/jobs from --clients "
        "clients for at most --fill-timeout seconds; store: with the server stopped, "
        "copies of a submitted job written with the package's own Store; auto (default): "
        "the API for --fill-timeout seconds, then the store for the rest",
    )
    parser.add_argument("--samples", type=int, default=50, help="requests per query kind (default 50)")
    parser.add_argument(
        "--fill-timeout",
        type=float,
        default=180.0,
        help="seconds a submit phase may take; it stops there and says so (default 180)",
    )
    parser.add_argument(
        "--query-seconds", type=float, default=60.0, help="seconds each query kind may take (default 60)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="e31-load-"))
    gate = tmp / "gate"
    server = ServerProcess(
        tmp / "data",
        gpus=["0", "1"],
        root_dir=tmp,
        token=TOKEN,
        log_path=tmp / "server.log",
        extra_args=[f"--E31.max_queued_per_user={args.queued + args.jobs + 1000}"],
    )
    say = (lambda *a: print(*a, file=sys.stderr, flush=True)) if args.json else (lambda *a: print(*a, flush=True))
    results: dict = {
        "config": {k: getattr(args, k) for k in ("jobs", "clients", "queued", "samples", "fill")},
        "targets": TARGETS,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average_at_start": os.getloadavg()[0],
        },
        "rss_mb": {},
    }
    blocker_id = None
    started = time.monotonic()
    try:
        server.start()
        api = f"{server.url}/e31/api"
        session = requests.Session()
        session.headers["Authorization"] = f"token {TOKEN}"
        blocker = session.post(f"{api}/jobs", json={
            "notebook": notebook(BLOCKER, parameters="gate = ''"), "notebook_name": "blocker.ipynb",
            "parameters": {"gate": str(gate)}, "gpus": 2, "max_runtime": "2h", "name": "blocker",
        }, timeout=60)  # fmt: skip
        blocker.raise_for_status()
        blocker_id = blocker.json()["id"]
        _wait(lambda: session.get(f"{api}/jobs/{blocker_id}", timeout=30).json()["state"] == "running", 120)
        body = {"notebook": notebook("pass"), "notebook_name": "load.ipynb", "gpus": 2, "name": "load"}
        memory = MemoryWatch(server.proc.pid).start()
        results["rss_mb"]["start"] = memory.rss() / 2**20

        # (a) concurrent submits into an empty queue
        say(f"(a) {args.jobs} submits from {args.clients} clients ...")
        a = submit_many(server.url, args.jobs, args.clients, body, args.fill_timeout)
        listed = E31Client(server.url, TOKEN).jobs(state="queued")  # every page
        missing = sorted(set(a["acknowledged"]) - {j["id"] for j in listed})
        results["submit"] = {
            **summary_ms(a["latencies"]),
            "acknowledged": len(a["acknowledged"]), "errors": len(a["errors"]),
            "error_examples": a["errors"][:5], "wall_s": a["wall_s"],
            "per_s": len(a["acknowledged"]) / a["wall_s"], "timed_out": a["timed_out"],
            "missing_from_list": len(missing), "listed_queued": len(listed),
        }  # fmt: skip
        results["rss_mb"]["after_a"] = memory.rss() / 2**20

        # (b) fill the queue: through the API (as long as --fill-timeout allows), then, for
        # --fill auto, the rest through the store with the server stopped
        to_fill = max(0, args.queued - len(listed))
        results["fill"] = {"api": None, "store": None}
        if args.fill in ("api", "auto") and to_fill:
            say(f"(b) filling the queue with {to_fill} more jobs through the API "
                f"(at most {args.fill_timeout:.0f} s) ...")  # fmt: skip
            b = submit_many(server.url, to_fill, args.clients, body, args.fill_timeout)
            lat = b["latencies"]
            tenth = max(1, len(lat) // 10)
            results["fill"]["api"] = {
                "submitted": len(b["acknowledged"]), "errors": len(b["errors"]),
                "error_examples": b["errors"][:5], "wall_s": b["wall_s"],
                "per_s": len(b["acknowledged"]) / b["wall_s"] if b["wall_s"] else None,
                "timed_out": b["timed_out"], "queued_before": len(listed),
                "first_tenth": summary_ms(lat[:tenth]), "last_tenth": summary_ms(lat[-tenth:]),
            }  # fmt: skip
            to_fill -= len(b["acknowledged"])
        if args.fill in ("store", "auto") and to_fill > 0:
            say(f"    {to_fill} more jobs through the store, with the server stopped ...")
            results["rss_mb"]["before_restart"] = memory.rss() / 2**20
            memory.stop()
            server.stop()
            took = seed_store(tmp / "data", listed[0]["id"], to_fill)
            restart = time.perf_counter()
            server.start(timeout=600)  # on a new port
            api = f"{server.url}/e31/api"
            results["fill"]["store"] = {
                "submitted": to_fill, "wall_s": took, "restart_s": time.perf_counter() - restart,
            }  # fmt: skip
            memory = MemoryWatch(server.proc.pid).start()
        results["rss_mb"]["after_fill"] = memory.rss() / 2**20
        whole_list = time.perf_counter()
        queued = E31Client(server.url, TOKEN).jobs(state="queued")
        results["whole_list_s"] = time.perf_counter() - whole_list
        queued_ids = [j["id"] for j in queued]
        results["queued"] = len(queued_ids)
        results["server_cpu_idle_pct"] = server_cpu(server.proc.pid, 5.0)

        # Submits into the long queue: what a user sees when the queue is this long.
        say(f"    {len(queued_ids)} queued; {args.clients * 5} more submits, then the queries ...")
        c = submit_many(server.url, args.clients * 5, args.clients, body, max(args.fill_timeout, LONG_QUEUE_SUBMITS_S))
        results["submit_long_queue"] = {
            **summary_ms(c["latencies"]), "acknowledged": len(c["acknowledged"]), "errors": len(c["errors"]),
            "per_s": len(c["acknowledged"]) / c["wall_s"] if c["wall_s"] else None, "timed_out": c["timed_out"],
        }  # fmt: skip
        q = {}
        q["list_all"] = time_query(session, f"{api}/jobs", args.samples, args.query_seconds)
        q["list_queued"] = time_query(session, f"{api}/jobs?state=queued", args.samples, args.query_seconds)
        q["list_deep"] = time_query(
            session, None, args.samples, args.query_seconds,
            pick=lambda: f"{api}/jobs?state=queued&before={random.choice(queued_ids)}",
        )  # fmt: skip
        q["job"] = time_query(
            session, None, args.samples * 4, args.query_seconds,
            pick=lambda: f"{api}/jobs/{random.choice(queued_ids)}",
        )  # fmt: skip
        q["gpus"] = time_query(session, f"{api}/gpus", args.samples, args.query_seconds)
        q["check"] = time_query(session, f"{api}/check", args.samples, args.query_seconds, body=body)
        results["queries"] = q
        results["rss_mb"]["after_queries"] = memory.rss() / 2**20
        results["rss_mb"]["peak"] = memory.peak / 2**20
        memory.stop()
    finally:
        server.stop()  # first: with the server gone, opening the gate starts no queued job
        gate.touch()
        if blocker_id:
            _wait(lambda: (tmp / "data" / "jobs" / blocker_id / "manifest.json").exists(), 60, fail=False)
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    results["wall_s"] = time.monotonic() - started
    results["machine"]["load_average_at_end"] = os.getloadavg()[0]

    if args.json:
        print(json.dumps(results, indent=2))
    else:
        report(results)
    target = TARGETS["query_p99_ms"]
    ok = results["submit"]["missing_from_list"] == 0 and all(
        (q["p99_ms"] or 0) <= target for q in results["queries"].values()
    )
    return 0 if ok else 1


def seed_store(data_dir: Path, template_id: str, count: int) -> float:
    """``count`` copies of a queued job (its record and its directory), written while no server
    runs, through the package's own Store: as if submitted one after the other."""
    from e31_jupyter.service.store import Store

    started = time.perf_counter()
    store = Store(data_dir / "e31.sqlite")
    try:
        template = store.get(template_id)
        folder = data_dir / "jobs" / template_id
        now = time.time()
        for i in range(count):
            job_id = f"{template_id[:7]}s{i:07x}"
            shutil.copytree(folder, data_dir / "jobs" / job_id)
            store.insert_job({**template.row(), "id": job_id, "submitted_at": now + i * 1e-4}, reason="seeded")
    finally:
        store.close()
    return time.perf_counter() - started


def report(r: dict) -> None:
    def ms(v):
        return "       -   " if v is None else f"{v:8.1f} ms"

    s, f, c = r["submit"], r["fill"], r["submit_long_queue"]
    target = r["targets"]["query_p99_ms"]
    print()
    print(f"(a) {r['config']['jobs']} submits from {r['config']['clients']} clients into an empty queue")
    print(f"    latency p50 {ms(s['p50_ms'])}   p99 {ms(s['p99_ms'])}   max {ms(s['max_ms'])}")
    print(
        f"    {s['acknowledged']} acknowledged, {s['errors']} errors, {s['per_s']:.1f} submits/s "
        f"({s['wall_s']:.1f} s){'  STOPPED AT THE TIME LIMIT' if s['timed_out'] else ''}"
    )
    print(
        f"    every acknowledged job listed (queued): {'yes' if s['missing_from_list'] == 0 else 'NO'} "
        f"({s['missing_from_list']} missing of {s['acknowledged']})   target: all"
    )
    for e in s["error_examples"]:
        print(f"    error: {e}")
    print(f"(b) filling the queue to {r['config']['queued']} jobs")
    fa, fs = f["api"], f["store"]
    if fa:
        print(
            f"    through the API: {fa['submitted']} submits ({fa['queued_before']} queued before) in "
            f"{fa['wall_s']:.1f} s = {fa['per_s'] or 0:.1f}/s, {fa['errors']} errors"
            f"{', STOPPED AT THE TIME LIMIT' if fa['timed_out'] else ''}"
        )
        print(
            f"    submit latency p50 / p99: first tenth of the fill {ms(fa['first_tenth']['p50_ms'])} / "
            f"{ms(fa['first_tenth']['p99_ms'])}; last tenth {ms(fa['last_tenth']['p50_ms'])} / "
            f"{ms(fa['last_tenth']['p99_ms'])}"
        )
        for e in fa["error_examples"]:
            print(f"    error: {e}")
    if fs:
        print(
            f"    through the store (server stopped): {fs['submitted']} jobs in {fs['wall_s']:.1f} s; "
            f"the server answers {fs['restart_s']:.1f} s after its restart"
        )
    print(f"    with {r['queued']} jobs queued:")
    print(f"    server CPU, nobody asking: {r['server_cpu_idle_pct']:.0f}% of a core")
    print(
        f"    {c['acknowledged']} more submits from {r['config']['clients']} clients: p50 {ms(c['p50_ms'])}  "
        f"p99 {ms(c['p99_ms'])}  ({c['per_s'] or 0:.1f}/s){'  STOPPED AT THE TIME LIMIT' if c['timed_out'] else ''}"
    )
    print(f"    {'query':28} {'p50':>11}  {'p99':>11}   target p99")
    names = {"list_all": "GET /jobs (first page)", "list_queued": "GET /jobs?state=queued",
             "list_deep": "  a page deep in the queue", "job": "GET /jobs/{id}", "gpus": "GET /gpus",
             "check": "POST /check (a submit's)"}  # fmt: skip
    for key, q in r["queries"].items():
        flag = "ok" if (q["p99_ms"] or 0) <= target else "MISSED"
        short = f", only {q['n']} in the time limit" if q["cut_short"] else ""
        print(
            f"    {names[key]:28} {ms(q['p50_ms'])}  {ms(q['p99_ms'])}   {target:.0f} ms {flag:6}"
            f"  ({q['bytes'] / 1024:.0f} KiB{short})"
        )
    print(f"    every queued job, page by page ({r['queued']} jobs): {r['whole_list_s']:.2f} s")
    m = r["rss_mb"]
    parts = [f"{k.replace('_', ' ')} {v:.0f} MB" for k, v in m.items()]
    print(f"    server RSS: {', '.join(parts)}")
    mach = r["machine"]
    print(
        f"    ({r['wall_s']:.0f} s in all; {mach['cpus']} CPUs, load average {mach['load_average_at_start']:.1f} "
        f"at the start and {mach['load_average_at_end']:.1f} at the end: other work on the machine slows "
        "every figure)"
    )


def _wait(predicate, timeout: float, fail: bool = True) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except (requests.RequestException, KeyError, ValueError):
            pass
        time.sleep(0.2)
    if fail:
        raise TimeoutError(f"gave up after {timeout}s")
    return False


if __name__ == "__main__":
    sys.exit(main())
