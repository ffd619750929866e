"""A job back in line to continue from its checkpoint (``--checkpoint``): resumed by a person
after it failed (``Queue.resume``), or by a restarted server when its process was lost while no
server watched (``LocalScheduler``). Either way it keeps its id, files and history; the run that
ended becomes one of its ``attempts`` (the meter counts them all), and its folder is made ready
for the next run, which loads the checkpoint and goes on with the cell after it.
"""

from __future__ import annotations

from e31_jupyter.core import meter
from e31_jupyter.core.cell_words import cell_words, first_line, is_injected, without_error_notes
from e31_jupyter.core.errors import Conflict, InvalidRequest
from e31_jupyter.core.states import Cause, JobState
from e31_jupyter.execution.jobdir import JobDir
from e31_jupyter.notebook import checkpoint
from e31_jupyter.service.job_record import JobRecord
from e31_jupyter.service.store import Store


def checkpoint_words(jobdir: JobDir) -> str | None:
    """The words for where the job's checkpoint resumes it: "after cell 2 ('b = a + 1')", or
    "at the start, with the objects its code saved" (``e31_jupyter.job.checkpoint``, no cell
    having finished); None when it has no checkpoint."""
    info = checkpoint.read_info(jobdir.checkpoint)
    if info is None:
        saved = jobdir.saved_objects.is_dir() and any(jobdir.saved_objects.iterdir())
        return "at the start, with the objects its code saved (e31_jupyter.job.checkpoint)" if saved else None
    cells = (jobdir.read_json(jobdir.executed_notebook) or {}).get("cells") or []
    return f"after {cell_words(cells, info.after_cell)}"


def corrected(jobdir: JobDir, notebook: dict) -> dict:
    """The notebook a resumed run goes on with when its owner corrected it: the cells its
    checkpoint follows, as they ran (with their outputs), then the corrected notebook's cells
    after them. The cells the checkpoint covers must be unchanged (their work is in it):
    InvalidRequest names the first that is not."""
    info = checkpoint.read_info(jobdir.checkpoint)
    if info is None:
        raise Conflict("A corrected notebook goes on from a checkpoint after a cell, and this job has none.")
    executed = jobdir.read_json(jobdir.executed_notebook) or {}
    ran = without_error_notes(executed.get("cells") or [])[: info.after_cell + 1]
    theirs = [cell for cell in ran if not is_injected(cell)]
    given = notebook.get("cells")
    if not isinstance(given, list) or len(given) < len(theirs):
        raise InvalidRequest(
            f"The corrected notebook has {len(given or [])} cell(s); the checkpoint follows cell {len(theirs)}, "
            "and those cells must be there, unchanged."
        )
    for number, (before, after) in enumerate(zip(theirs, given), 1):
        if _source(before) != _source(after):
            raise InvalidRequest(
                f"Cell {number} ({first_line(before)!r}) of the corrected notebook differs from the one that ran: "
                f"the checkpoint holds what cells 1 to {len(theirs)} did, so they must stay as they were. "
                "Change only the cells after them, or resubmit the notebook to run it all again."
            )
    return {**executed, "cells": ran + given[len(theirs) :]}


def _source(cell) -> str:
    source = cell.get("source") or "" if isinstance(cell, dict) else ""
    return "".join(source) if isinstance(source, list) else source


def back_in_line(store: Store, job: JobRecord, reason: str, now: float, cause: Cause, ended: dict, **fields) -> bool:
    """Record ``job`` queued again, to resume from its checkpoint (its folder made ready first:
    ``JobDir.start_again``); ``ended`` is how its run ended where the record does not say it yet
    (a lost run's ``finished_at``, ``state`` and ``reason``). False when the job was no longer
    where it was expected."""
    attempt = meter.attempt({**job, **ended})
    return store.transition(
        job.id, (job.state,), JobState.QUEUED, reason, now, cause=cause, attempts=[*job.attempts, attempt],
        **{"started_at": None, "released_at": None, "finished_at": None, "granted": [], "returned": [],
           "handle": None, "result": {}, "stop_requested": "", "stop_by": "", "node": None, "position": None,
           **fields},
    )  # fmt: skip


def after_loss(store: Store, jobdir: JobDir, job: JobRecord, lost_at: float, now: float) -> bool:
    """A running job whose process a restarted server found gone, without a result: back in line
    from its checkpoint, if it has one and was not being stopped. False: it has none (it fails
    as lost)."""
    words = checkpoint_words(jobdir)
    if words is None or job.stop_requested is not None:
        return False
    lost = "lost: its process ended while no server watched, without writing a result"
    reason = f"{lost}; back in line to resume from its checkpoint {words}"
    ended = {"finished_at": max(lost_at, job.started_at or lost_at), "state": JobState.FAILED, "reason": lost}
    jobdir.start_again()
    return back_in_line(store, job, reason, now, Cause.RESTART, ended)


def after_making_room(store: Store, jobdir: JobDir, job: JobRecord, now: float) -> bool:
    """A job the queue suspended to make room for another (``StopRequest.MAKE_ROOM``, its
    ``stop_by``): back in line at once, to go on from its checkpoint (from the top when it had
    none yet). False when it was no longer suspended."""
    words = checkpoint_words(jobdir) or "(none yet: it starts from the top)"
    reason = (
        f"back in line: the queue suspended it to make room for {job.stop_by}; it goes on from its checkpoint {words}"
    )
    jobdir.start_again()
    return back_in_line(store, job, reason, now, Cause.SCHEDULER, {}, suspended_for=job.stop_by)
