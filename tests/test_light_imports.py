"""What the kernel and the ``e31`` command load: none of the notebook machinery.

``%load_ext e31_jupyter`` runs in the user's kernel and ``e31 jobs`` at a prompt; both must answer
at once, so neither may import papermill, nbformat, nbconvert or jupyter_server (seconds of
imports: nbformat's jsonschema alone compiles parsers for two of its formats). Each check runs in
a fresh interpreter and reads its ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HEAVY = ("papermill", "nbformat", "nbconvert", "jupyter_server")
REPORT = f"import json, sys; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"


def _heavy_modules_after(code: str, env: dict | None = None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("E31_")} | (env or {})
    run = subprocess.run(
        [sys.executable, "-c", f"{code}\n{REPORT}"], capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_loading_the_magics_in_a_shell_imports_no_notebook_machinery():
    loaded = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'e31_jupyter')\n"
        "assert 'e31' in shell.magics_manager.magics['cell']\n"
        "from e31_jupyter.notebook.job_notebook import cell_notebook\n"  # what a cell's submit sends
        "cell_notebook('y = x + 1', [], ['x'], ['y'], 'python3')"
    )
    assert _heavy_modules_after(loaded) == []


def test_e31_jobs_imports_no_notebook_machinery_with_the_address_given_or_found(start_server, tmp_path):
    runtime = tmp_path / "runtime"
    server = start_server(env={"JUPYTER_RUNTIME_DIR": str(runtime)})
    jobs = "from e31_jupyter.cli import main\nassert main(['jobs', '--json']) == 0"
    given = {"E31_URL": server.url, "E31_TOKEN": server.token}
    assert _heavy_modules_after(jobs, given) == []
    found = {"JUPYTER_RUNTIME_DIR": str(runtime)}  # this user's runtime files name the server and its token
    assert _heavy_modules_after(jobs, found) == []
