"""Inside a job: what the notebook's own code may ask of e31, for work within one long cell (a
training loop) that a checkpoint at a cell's end cannot save.

    import e31_jupyter.job as job

    start = job.restore("step", 0)      # 0 on the first run; the last saved step after a resume
    model = job.restore("model", model)
    for step in range(start, steps):
        train_one_epoch(model)
        job.checkpoint(model, "model")   # saved whole or not at all, as cell checkpoints are
        job.checkpoint(step + 1, "step")

A job that saved objects this way can be resumed (``e31 resume``) even if none of its cells had
finished: it then starts again from its first cell, and ``restore`` gives back what was saved.
Outside a job (the same notebook run interactively) ``checkpoint`` does nothing, ``restore``
gives the default and ``resumed`` is False, so the code runs unchanged in both places.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.execution.jobdir import JobDir


def checkpoint(obj: Any, name: str) -> None:
    """Save ``obj`` as ``name`` for a resumed run of this job to ``restore``; it replaces what was
    saved under that name before, atomically. Outside a job: nothing."""
    folder = _folder(name)
    if folder is None:
        return
    from e31_jupyter.notebook import checkpoint as saved

    result = saved.save(folder, {name: obj}, after_cell=-1)
    if result.cannot_save:
        raise InvalidRequest(f"e31_jupyter.job.checkpoint: {name} cannot be saved: {result.cannot_save[name]}.")


def restore(name: str, default: Any = None) -> Any:
    """What was last saved as ``name`` by ``checkpoint`` in an earlier run of this job, or
    ``default`` when nothing was (the first run, or outside a job)."""
    folder = _folder(name)
    if folder is None:
        return default
    from e31_jupyter.notebook import checkpoint as saved

    loaded = saved.load(folder)
    return default if loaded is None else loaded[0].get(name, default)


def resumed() -> bool:
    """Whether this run of the job continues an earlier one (``e31 resume``, or a restarted
    server putting back a job it found lost)."""
    job_dir = os.environ.get("E31_JOB_DIR")
    return job_dir is not None and JobDir(job_dir).attempt.is_file()


def stopping() -> bool:
    """Whether the job has been asked to stop at its cell's end (``e31 suspend``), or its time
    limit is near (within c.E31.suspend_grace): a long cell may then save what it needs
    (``checkpoint``) and end early, so that the job's own checkpoint after it is taken. The
    kernel is told by SIGUSR1; code may install its own handler instead."""
    return os.environ.get("E31_STOPPING") == "1"


def _folder(name: str) -> Path | None:
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise InvalidRequest(
            f"e31_jupyter.job: {name!r} is not a name to save under; give a Python identifier not starting with _."
        )
    job_dir = os.environ.get("E31_JOB_DIR")
    return JobDir(job_dir).saved_objects / name if job_dir else None
