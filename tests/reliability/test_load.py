"""The load benchmark in a CI-sized form: what it checks must hold, whatever the timings.

``benchmarks/load.py`` is run as a user runs it (a real server, loopback HTTP, concurrent
clients), with fewer jobs. Timings are the benchmark's to print, not this test's to judge (the
machine is shared); what is asserted is that nothing was lost or refused under the load, that
the long queue was read back whole, and that every query kind answered 200.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "load.py"


def test_a_ci_sized_load_loses_nothing_and_reports_its_figures(tmp_path):
    run = subprocess.run(
        [sys.executable, str(BENCHMARK), "--jobs", "200", "--clients", "10", "--queued", "1500",
         "--fill-timeout", "30", "--samples", "10", "--query-seconds", "20", "--json"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    assert run.stdout, run.stderr[-3000:]
    figures = json.loads(run.stdout)

    submit = figures["submit"]
    assert submit["acknowledged"] == 200 and submit["errors"] == 0, submit["error_examples"]
    assert submit["missing_from_list"] == 0 and submit["p99_ms"] > 0
    assert figures["queued"] >= 1500  # filled through the API and, past --fill-timeout, the store
    assert figures["submit_long_queue"]["errors"] == 0
    queries = figures["queries"]
    assert set(queries) == {"list_all", "list_queued", "list_deep", "job", "gpus", "check"}
    for name, query in queries.items():
        assert query["statuses"] == [200], name
        assert query["n"] > 0 and query["p99_ms"] is not None, name
    assert figures["rss_mb"]["peak"] > 0
    print(json.dumps({k: (q["p50_ms"], q["p99_ms"]) for k, q in queries.items()}))
