"""Inside a ``%%e31`` cell's job: the cells that ``job_notebook.cell_notebook`` writes around the
user's cell call these, in the job's kernel.

``load_inputs`` puts the captured values into the job's namespace (its functions reading and setting
that namespace's globals, as they did the kernel's) and notes each value's digest. After the cell,
``save_outputs`` hands back what the cell assigned, and every captured value the cell changed: set
again (by a function's ``global``), or changed in place (``clf.fit(X, y)``), found by comparing
digests, not identity. Each value's index entry says why it went back.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.notebook import values
from e31_jupyter.notebook.digest import digest

ASSIGNED = "assigned by the cell"
CHANGED_IN_PLACE = "changed in place"
SET_AGAIN = "set again by a function the cell called"

# name -> (the value as loaded, its digest then): what the cell may have changed
_captured: dict[str, tuple[object, str | None]] = {}


def _job_dir() -> JobDir:
    return JobDir(os.environ["E31_JOB_DIR"])


def load_inputs(namespace: dict | None = None, note_changes: bool = True) -> dict:
    """The values captured from the submitting kernel, but for those the job's parameters set
    (``e31 resubmit JOB -p NAME VALUE``): papermill set them before this runs, and they win.
    Given the job's ``namespace``, they are put in it, and, if ``note_changes``, their digests
    noted, so that ``save_outputs`` can tell what the cell changed (a job notebook of an older
    e31 passes no namespace; a cell with --out returns only what it names)."""
    job = _job_dir()
    parameters = (job.read_json(job.spec) or {}).get("parameters") or {}
    if namespace is None:
        return values.load(job.inputs, leave_out=parameters)
    # Loading a function puts the globals it reads into the namespace: parameters still win.
    kept = {name: namespace[name] for name in (*parameters, "__builtins__") if name in namespace}
    loaded = values.load(job.inputs, leave_out=parameters, functions_in=namespace)
    namespace.update(loaded)
    namespace.update(kept)
    _captured.clear()
    if note_changes:
        _captured.update((name, (value, digest(value))) for name, value in loaded.items())
    return loaded


def save_outputs(namespace: dict, names: list[str], set_by_functions: Sequence[str] = (), changed: bool = True) -> None:
    """Hand back the cell's results: ``names`` (what it assigns; the modules among them by name, to
    be imported again), the globals its functions set (``set_by_functions``), and, if ``changed``,
    every captured value the cell changed. A value that cannot travel back is left out, and the
    job's values list says why."""
    reasons = {name: ASSIGNED for name in names if name in namespace}
    if changed:
        reasons.update(changed_inputs(namespace, exclude=reasons))
    for name in set_by_functions:
        if name in namespace and name not in reasons and name not in _captured:
            reasons[name] = f"set by a function the cell called (global {name})"
    chosen = {name: namespace[name] for name in reasons}
    index = values.save(chosen, _job_dir().values, limit_bytes=1 << 62, returning=True, reasons=reasons)
    for name, entry in index.items():
        if "skipped" in entry:
            print(f"e31: {name} is not returned: {entry['skipped']}")


def changed_inputs(namespace: dict, exclude=()) -> dict[str, str]:
    """The captured values the cell changed, each with how: ``{name: why}``."""
    found = {}
    for name, (before, digest_then) in _captured.items():
        if name in exclude or name not in namespace:
            continue
        now = namespace[name]
        if now is not before:
            found[name] = SET_AGAIN
        elif digest_then is None or digest(now) != digest_then:
            found[name] = CHANGED_IN_PLACE
    return found
