"""The papermill engine a job runs its notebook with: papermill's own (nbclient), plus what e31
adds between cells.

- Progress: each cell's start and end go to ``progress.json`` (``Progress``).
- Checkpoints (``--checkpoint``): after each cell that finished, the job's kernel is asked to
  save its variables when that is worth its cost (``notebook/checkpoint.py`` decides and saves,
  in the kernel); what it says goes to the progress record and the log.
- Resume: a job that has a checkpoint continues from it. Before the first cell, the kernel loads
  the checkpoint's variables; the cells up to the one it followed keep the earlier run's outputs
  and are not run again.

The kernel is asked with silent requests between cells (no execution count, no history, nothing
in the notebook); this module knows the kernel-side functions only by name.
"""

from __future__ import annotations

import ast
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e31_jupyter.core.cell_words import users_cells

CHECKPOINT_MODULE = "e31_jupyter.notebook.checkpoint"


class CheckpointFailed(Exception):
    """The kernel could not load the checkpoint the job was to resume from."""


class Suspended(Exception):
    """The job stopped at a cell's end, as asked, its checkpoint saved (or why not)."""


class Checkpoints:
    """A job's checkpoints: whether to take them, and the one to resume from."""

    def __init__(
        self,
        folder: Path,
        take: bool,
        resume: bool,
        earlier_cells: list | None = None,
        share: float = 0.05,
        suspend_asked: threading.Event | None = None,
    ):
        self.folder = folder
        self.take = take
        self.share = share  # the most of the run since the last checkpoint that one may cost
        self.resume = resume
        self.earlier_cells = earlier_cells or []  # the earlier run's cells, with their outputs
        self.after_cell: int | None = None  # the cell the loaded checkpoint follows
        self.started = time.monotonic()
        self.suspend_asked = suspend_asked or threading.Event()  # set by the worker's SIGUSR1 handler

    def call(self, function: str, *arguments) -> str:
        """The code that calls ``function(globals(), folder, *arguments)`` in the kernel's
        module, binding no name in the notebook's namespace."""
        args = ", ".join(repr(a) for a in (str(self.folder), *arguments))
        return f"__import__({CHECKPOINT_MODULE!r}, fromlist=['{function}']).{function}(globals(), {args})"

    @property
    def summary(self) -> str:
        """An expression the kernel evaluates after a call: what it did, as JSON text."""
        return f"__import__({CHECKPOINT_MODULE!r}, fromlist=['summary']).summary()"


def job_engine(progress, checkpoints: Checkpoints | None, kernel_ready: Callable[[], None] = lambda: None):
    """A papermill engine that reports each cell to ``progress`` and takes ``checkpoints``;
    ``kernel_ready`` is called once the kernel answers, before the first cell."""
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine
    from papermill.log import logger
    from papermill.utils import merge_kwargs, remove_args

    class JobClient(PapermillNotebookClient):
        def papermill_execute_cells(self):
            kernel_ready()
            first = 0
            if checkpoints is not None and checkpoints.resume:
                first = self._resume()
            for index in range(first, len(self.nb.cells)):
                if not self._run_cell(index):
                    break
                last = index == len(self.nb.cells) - 1  # after it there is nothing left to resume
                if checkpoints is not None and checkpoints.suspend_asked.is_set() and not last:
                    raise Suspended(self._checkpoint(index, force=True))
                if checkpoints is not None and checkpoints.take and not last:
                    self._checkpoint(index)

        def _run_cell(self, index: int) -> bool:
            """papermill's own loop, one cell at a time; False once a cell raised."""
            from nbclient.exceptions import CellExecutionError

            cell = self.nb.cells[index]
            try:
                self.nb_man.cell_start(cell, index)
                self.execute_cell(cell, index)
                return True
            except CellExecutionError as error:
                self.nb_man.cell_exception(self.nb.cells[index], cell_index=index, exception=error)
                return False
            finally:
                self.nb_man.cell_complete(self.nb.cells[index], cell_index=index)

        def _resume(self) -> int:
            """Load the checkpoint in the kernel; put back the earlier run's cells up to the one
            it follows. Returns the index of the first cell to run."""
            assert checkpoints is not None
            done = self._ask(checkpoints.call("resume_from"))
            if not done.get("loaded"):
                raise CheckpointFailed(done.get("error") or "the kernel loaded nothing")
            after = checkpoints.after_cell = int(done["after_cell"])
            for index, earlier in enumerate(checkpoints.earlier_cells[: after + 1]):
                if index < len(self.nb.cells) and earlier.get("cell_type") == "code":
                    cell = self.nb.cells[index]
                    cell.outputs = earlier.get("outputs", [])
                    cell.execution_count = earlier.get("execution_count")
                    cell.metadata["papermill"] = earlier.get("metadata", {}).get("papermill", {})
            self.nb_man.save()
            progress.write(cells_done=after + 1, resumed_after=after, checkpoint=done.get("checkpoint"))
            print(f"e31: resumed from the checkpoint after cell {after + 1}: {done.get('words', '')}", flush=True)
            return after + 1

        def _checkpoint(self, index: int, force: bool = False) -> str:
            """Ask the kernel to checkpoint after cell ``index`` (``force``: whatever it costs);
            what it did, in words."""
            assert checkpoints is not None
            run_seconds = time.monotonic() - checkpoints.started
            done = self._ask(checkpoints.call("at_cell_end", index, run_seconds, checkpoints.share, force))
            if done.get("error"):
                words = f"no checkpoint after cell {index + 1}: {done['error']}"
            elif done.get("saved"):
                progress.write(checkpoint=done["checkpoint"])
                words = f"checkpoint after cell {index + 1}: {done.get('words', '')}"
            else:
                return f"no checkpoint after cell {index + 1}: {done.get('why', '')}"
            print(f"e31: {words}", flush=True)
            return words

        def _ask(self, code: str) -> dict[str, Any]:
            """Run ``code`` in the kernel silently; what ``Checkpoints.summary`` then says."""
            assert checkpoints is not None and self.kc is not None
            msg_id = self.kc.execute(
                code, silent=True, store_history=False, user_expressions={"e31": checkpoints.summary}
            )
            reply = self.wait_for_reply(msg_id) or {}
            content = reply.get("content", {})
            if content.get("status") != "ok":
                return {"error": f"{content.get('ename', 'the kernel did not answer')}: {content.get('evalue', '')}"}
            answer = content.get("user_expressions", {}).get("e31", {})
            if answer.get("status") != "ok":
                return {"error": f"{answer.get('ename', 'no summary')}: {answer.get('evalue', '')}"}
            return _json(ast.literal_eval(answer["data"]["text/plain"]))

    class JobEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(
            cls, nb_man, kernel_name, log_output=False, stdout_file=None, stderr_file=None, start_timeout=60,
            execution_timeout=None, **kwargs,
        ):  # fmt: skip
            # As papermill's NBClientEngine does, with e31's client.
            _report_cells(nb_man, progress)
            kwargs = remove_args(["input_path"], **kwargs)
            safe_kwargs = remove_args(["timeout", "startup_timeout"], **kwargs)
            final_kwargs = merge_kwargs(
                safe_kwargs, timeout=execution_timeout or kwargs.get("timeout"), startup_timeout=start_timeout,
                kernel_name=kernel_name, log=logger, log_output=log_output, stdout_file=stdout_file,
                stderr_file=stderr_file,
            )  # fmt: skip
            return JobClient(nb_man, **final_kwargs).execute()

    return JobEngine


def _report_cells(nb_man, progress) -> None:
    """Each cell's start and end, as ``progress.json`` says them."""
    cell_start, cell_complete = nb_man.cell_start, nb_man.cell_complete
    progress.cells = list(nb_man.nb.cells)  # papermill inserts its error notes into its own list
    progress.write(users_cells=users_cells(progress.cells))  # the API counts these (as_the_user_counts)

    def on_start(cell, cell_index=None, **kw):
        progress.last_started = cell_index
        progress.write(current_cell=cell_index)
        return cell_start(cell, cell_index, **kw)

    def on_complete(cell, cell_index=None, **kw):
        result = cell_complete(cell, cell_index, **kw)
        progress.write(cells_done=cell_index + 1, current_cell=None)
        return result

    nb_man.cell_start, nb_man.cell_complete = on_start, on_complete


def _json(text: str) -> dict:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}
