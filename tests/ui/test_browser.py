"""Runs the Playwright tests (tests/ui/browser/browser_*.py) in their own pytest process.

Playwright's sync API runs its own event loop, which must not meet other fixtures' loops
(FACTS.md: "Cannot close a running event loop"); a separate process also gives the browser
tests a clean environment. Their files are named browser_*.py so that the main run does not
collect them. This test passes when all of them pass, and shows their report.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser.labserver import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@pytest.mark.timeout(900)
def test_browser_suite():
    assert os.path.exists(CHROMIUM), (
        f"{CHROMIUM} is missing: install scripts/system-packages/browser.txt (bash scripts/install-system-packages.sh)"
    )
    files = sorted(str(p) for p in (HERE / "browser").glob("browser_*.py"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}  # not a worker of ours
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *files, "-v", "-p", "no:cacheprovider",
         "-o", "addopts=", "--timeout=300"],
        cwd=REPO, capture_output=True, text=True, timeout=880, env=env,
    )  # fmt: skip
    output = run.stdout + run.stderr
    print(output)
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    passed = re.search(r"(\d+) passed", summary)
    assert run.returncode == 0, f"browser tests failed:\n{output[-8000:]}"
    assert passed and int(passed.group(1)) >= 5, f"unexpected summary: {summary}"
