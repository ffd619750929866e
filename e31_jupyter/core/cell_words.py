"""The words a message uses for a cell of a job's notebook, the same at submit and when it fails.

A notebook job's cell is "cell N": its place in the notebook as the user submitted it, counting
every cell (markdown too, as JupyterLab numbers them) but papermill's own (the parameters it
injects, its error markers) and e31's. A ``%%e31`` cell's job has one cell of the user's: "the
cell". e31's cells around it are named by what they were doing: loading the cell's inputs,
handing its results back.

Cells are read as dicts (nbformat's nodes, or a job notebook's JSON): nbformat is not imported,
since the magics import this module into the user's kernel (through checks).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence

from e31_jupyter.core.job import CELL_TAG, RESULTS_TAG, SETUP_TAG

INJECTED_TAG = "injected-parameters"  # papermill's cell of the job's parameters
ERROR_MARKER_TAG = "papermill-error-cell-tag"  # papermill's notes around a failed cell in its output
NOT_THE_USERS = (INJECTED_TAG, ERROR_MARKER_TAG, SETUP_TAG, RESULTS_TAG, CELL_TAG)
FIRST_LINE_CHARS = 40


def cell_words(cells: Sequence[Mapping], index: int, of_all: bool = False) -> str:
    """The words for ``cells[index]``: "cell 3 ('model.fit(X)')" (``of_all``: "cell 3 of 7
    ('model.fit(X)')"), "the cell" in a ``%%e31`` cell's job, or what papermill's or e31's own
    cell does there ("the cell's inputs", "the job's parameters")."""
    if not 0 <= index < len(cells):
        return f"cell {index + 1}"  # not a cell of these: the index is all there is
    tags = _tags(cells[index])
    if CELL_TAG in tags:
        return "the cell"
    if SETUP_TAG in tags:
        return "the cell's inputs"
    if RESULTS_TAG in tags:
        return "the cell's results"
    if INJECTED_TAG in tags:
        return "the job's parameters"
    if ERROR_MARKER_TAG in tags:
        return "papermill's note on the failed cell"
    number = sum(1 for cell in cells[: index + 1] if not _not_the_users(cell))
    total = f" of {sum(1 for cell in cells if not _not_the_users(cell))}" if of_all else ""
    first = first_line(cells[index])
    return f"cell {number}{total}" + (f" ({first[:FIRST_LINE_CHARS]!r})" if first else "")


def raised(cells: Sequence[Mapping], index: int, ename: str, evalue: str) -> str:
    """A job's failure reason for ``cells[index]`` raising: "cell 3 ('model.fit(X)') raised
    ValueError: ...", "the cell raised ...", or, in e31's own cells, what could not be done."""
    error = f"{ename}: {evalue}" if evalue else ename
    tags = _tags(cells[index]) if 0 <= index < len(cells) else []
    if SETUP_TAG in tags:
        return f"the cell's inputs could not be loaded in the job: {error}{_inputs_hint(ename, evalue)}"
    if RESULTS_TAG in tags:
        return f"the cell's results could not be handed back: {error}"
    if INJECTED_TAG in tags:
        return f"the job's parameters could not be set: {error}"
    return f"{cell_words(cells, index)} raised {error}"


def died_in(cells: Sequence[Mapping], index: int) -> str:
    """Where a kernel died, to follow "kernel died": "in cell 2 of 3 ('x = f()')", "in the cell",
    "while loading the cell's inputs"."""
    tags = _tags(cells[index]) if 0 <= index < len(cells) else []
    if SETUP_TAG in tags:
        return "while loading the cell's inputs"
    if RESULTS_TAG in tags:
        return "while handing the cell's results back"
    if INJECTED_TAG in tags:
        return "while setting the job's parameters"
    return f"in {cell_words(cells, index, of_all=True)}"


def users_cells(cells: Sequence[Mapping]) -> list[int]:
    """The indexes of the user's own cells among ``cells``: those ``cell_words`` numbers."""
    return [index for index, cell in enumerate(cells) if not _not_the_users(cell)]


def as_the_user_counts(progress: Mapping) -> dict:
    """A notebook job's progress (papermill's cell indexes, its injected parameters counted) in
    the user's cells, as a failure's reason numbers them: cells done and in all, and the one
    running (None while papermill's or e31's own cell runs). A ``%%e31`` cell's job, whose cells
    are all e31's, and a job that ran before the user's cells were recorded, keep papermill's."""
    done, total, current = progress.get("cells_done", 0), progress.get("cells_total"), progress.get("current_cell")
    users = progress.get("users_cells")
    if not users:
        return {"cells_done": done, "cells_total": total, "current_cell": current}
    return {
        "cells_done": bisect_left(users, done),  # the user's cells among the first ``done``
        "cells_total": len(users),
        "current_cell": users.index(current) if current in users else None,
    }


def without_error_notes(cells: Sequence[Mapping]) -> list:
    """The cells as they ran: the notes papermill adds to its output around a failed cell taken
    out, so each cell is at the index it had when it ran (a checkpoint's ``after_cell``)."""
    return [cell for cell in cells if ERROR_MARKER_TAG not in _tags(cell)]


def is_injected(cell: Mapping) -> bool:
    """Whether ``cell`` is the parameters papermill injected (not one of the user's)."""
    return INJECTED_TAG in _tags(cell)


def first_line(cell: Mapping) -> str:
    """The cell's first line that is not blank, stripped ("" for none)."""
    source = cell.get("source") or ""
    text = "".join(source) if isinstance(source, list) else source  # a notebook file's JSON may split it
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _inputs_hint(ename: str, evalue: str) -> str:
    """What to do when a cell's job could not load what was captured from the user's kernel."""
    if ename in ("ModuleNotFoundError", "ImportError"):
        return (
            " (a module your kernel imports, or that a value captured from it needs, which the job's "
            "kernel cannot import); install it where jobs run, give a module of your own as data "
            "(--data PATH), or resubmit with --in=-NAME to leave the value out"
        )
    if ename == "AttributeError" and "Can't get attribute" in evalue:
        return (
            " (a value captured from your kernel that refers to something the job's kernel does not "
            "define, such as a function or class defined in your notebook); resubmit with --in=-NAME "
            "to leave it out, or define it inside the cell"
        )
    return " (what was captured from your kernel); resubmit with --in=-NAME to leave a value out, or compute it in the cell"


def _tags(cell: Mapping) -> list:
    return (cell.get("metadata") or {}).get("tags") or []


def _not_the_users(cell: Mapping) -> bool:
    return any(tag in NOT_THE_USERS for tag in _tags(cell))
