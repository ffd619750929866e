"""The TypeScript model's unit tests (jest, in labextension/), as part of the one pytest run."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # jest, in its own node process

LABEXTENSION = Path(__file__).resolve().parents[2] / "labextension"


def jlpm(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["jlpm", *args], cwd=LABEXTENSION, capture_output=True, text=True, timeout=timeout)


def test_typescript_model_unit_tests_pass():
    assert shutil.which("jlpm"), "jlpm comes with jupyterlab (jupyter-builder); pip install -e '.[test]'"
    if not (LABEXTENSION / "node_modules" / ".bin" / "jest").exists():
        # A fresh clone whose extension was never built here: install from the lock file.
        install = jlpm("install", "--immutable", timeout=600)
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    run = jlpm("jest", "--ci", "--colors=false", timeout=300)
    output = run.stdout + run.stderr
    print(output)
    counts = re.search(r"^Tests:\s+(.*?)(\d+) total$", output, re.M)
    assert counts, f"no jest summary in:\n{output[-3000:]}"
    summary = counts.group(1)
    passed = int(re.search(r"(\d+) passed", summary).group(1)) if "passed" in summary else 0
    assert "failed" not in summary and run.returncode == 0, output[-5000:]
    assert passed >= 50, f"expected the model's tests to run, got: {counts.group(0)}"
