"""A cell is named in the user's words: in a notebook job, "cell N", its place in the notebook as
submitted (markdown cells counted, papermill's and e31's own cells not), the same in a submit's
warning and in a failure's reason; in a ``%%e31`` cell's job, "the cell"; and e31's own cells
around it by what e31 was doing there."""

from __future__ import annotations

import json
import re

import nbformat
from conftest import wait_state
from kernels import Kernel, kernel  # noqa: F401 (kernel: a fixture)
from kernels import job_id_in as _job_id
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from shared_server import server, shared_server  # noqa: F401 (fixtures: one server, a user per test)

from e31_jupyter.core.cell_words import as_the_user_counts, cell_words, died_in, raised, users_cells
from e31_jupyter.notebook.checks import syntax_warnings
from e31_jupyter.notebook.job_notebook import cell_notebook

PYTHON = {
    "language_info": {"name": "python"},
    "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
}


def _submitted(*cells) -> list:
    """A notebook's cells as the user submits it: a title, a parameters cell, code and markdown."""
    return [
        new_markdown_cell("# Training"),
        new_code_cell("epochs = 1", metadata={"tags": ["parameters"]}),
        new_code_cell("import math"),
        new_markdown_cell("## Fit"),
        *cells,
    ]


def _as_papermill_runs_it(cells: list) -> list:
    """With papermill's cell of the job's parameters after the parameters cell."""
    injected = new_code_cell("# Parameters\nepochs = 3\n", metadata={"tags": ["injected-parameters"]})
    return [*cells[:2], injected, *cells[2:]]


def test_a_notebook_cell_is_numbered_as_the_user_sees_it_at_submit_and_when_it_fails():
    cells = _submitted(new_code_cell("\n  model.fit(X)  \nmore()"), new_code_cell("print('done')"))
    ran = _as_papermill_runs_it(cells)
    assert raised(ran, 5, "ValueError", "bad shape") == "cell 5 ('model.fit(X)') raised ValueError: bad shape"
    assert raised(ran, 6, "CellExecutionError", "") == "cell 6 (\"print('done')\") raised CellExecutionError"
    assert raised(cells, 4, "ValueError", "bad shape") == "cell 5 ('model.fit(X)') raised ValueError: bad shape"
    assert died_in(ran, 5) == "in cell 5 of 6 ('model.fit(X)')"
    assert died_in(ran, 2) == "while setting the job's parameters"
    assert (
        raised(ran, 2, "SyntaxError", "invalid syntax")
        == "the job's parameters could not be set: SyntaxError: invalid syntax"
    )
    # The submit's warning names the same place the same way.
    broken = _submitted(new_code_cell("model.fit(X\n"), new_code_cell("print('done')"))
    (warning,) = syntax_warnings(new_notebook(cells=broken, metadata=PYTHON))
    assert warning.startswith("Cell 5 ('model.fit(X') is not valid Python")


def test_papermills_notes_on_a_failed_cell_are_not_counted_and_a_long_first_line_is_cut():
    marker = {"tags": ["papermill-error-cell-tag"]}
    long = "x = " + "1 + " * 30 + "1"
    cells = [
        new_markdown_cell("An Exception was encountered", metadata=marker),  # a failed job's notebook, resubmitted
        new_code_cell("a = 1"),
        new_markdown_cell('<span id="papermill-error-cell">', metadata=marker),
        new_code_cell(long),
        new_code_cell("   \n"),
    ]
    assert cell_words(cells, 3) == f"cell 2 ({long[:40]!r})"
    assert cell_words(cells, 4) == "cell 3"  # nothing to quote
    assert cell_words(cells, 3, of_all=True) == f"cell 2 of 3 ({long[:40]!r})"
    assert cell_words(cells, 9) == "cell 10"  # an index these cells do not have: as given


def test_progress_counts_the_users_cells_as_a_failures_reason_numbers_them():
    cells = _as_papermill_runs_it(_submitted(new_code_cell("fit()"), new_code_cell("save()")))
    users = users_cells(cells)
    assert len(cells) == 7 and users == [0, 1, 3, 4, 5, 6]  # papermill's cell 2 is not the user's
    failed = {"cells_done": 6, "cells_total": 7, "current_cell": None, "users_cells": users}  # fit() failed
    assert as_the_user_counts(failed) == {"cells_done": 5, "cells_total": 6, "current_cell": None}
    assert cell_words(cells, 5, of_all=True) == "cell 5 of 6 ('fit()')"  # the same cell, the same count
    running = {**failed, "cells_done": 4, "current_cell": 4}
    assert as_the_user_counts(running) == {"cells_done": 3, "cells_total": 6, "current_cell": 3}
    setting_parameters = {**failed, "cells_done": 2, "current_cell": 2}
    assert as_the_user_counts(setting_parameters)["current_cell"] is None
    # a %%e31 cell's job (all its cells e31's) and a job recorded before: papermill's counts
    assert as_the_user_counts({"cells_done": 2, "cells_total": 3, "users_cells": []})["cells_total"] == 3
    assert as_the_user_counts({"cells_done": 2, "cells_total": 3, "current_cell": 2}) == {
        "cells_done": 2, "cells_total": 3, "current_cell": 2,
    }  # fmt: skip


def test_a_notebook_files_json_is_read_as_nbformat_reads_it():
    cells = json.loads(nbformat.writes(new_notebook(cells=_submitted(new_code_cell("fit()\nplot()")))))["cells"]
    cells[4]["source"] = ["fit()\n", "plot()"]  # as a notebook file may store it
    assert cell_words(cells, 4) == "cell 5 ('fit()')"


def test_a_cells_job_names_the_cell_and_says_what_e31_was_doing_around_it():
    cells = cell_notebook("y = 1 / x", ["import numpy as np"], ["x", "fib"], ["y"], "python3")["cells"]
    assert (
        raised(cells, 1, "ZeroDivisionError", "division by zero")
        == "the cell raised ZeroDivisionError: division by zero"
    )
    assert died_in(cells, 1) == "in the cell"
    loading = raised(cells, 0, "AttributeError", "Can't get attribute 'fib' on <module '__main__'>")
    assert loading == (
        "the cell's inputs could not be loaded in the job: AttributeError: Can't get attribute 'fib' on "
        "<module '__main__'> (a value captured from your kernel that refers to something the job's kernel "
        "does not define, such as a function or class defined in your notebook); resubmit with "
        "--in=-NAME to leave it out, or define it inside the cell"
    )
    missing = raised(cells, 0, "ModuleNotFoundError", "No module named 'mine'")
    assert missing.startswith("the cell's inputs could not be loaded in the job: ModuleNotFoundError: No module")
    assert "--data PATH" in missing and "--in=-NAME" in missing
    assert "--in=-NAME" in raised(cells, 0, "NotTrusted", "e31 will not load it")
    assert (
        raised(cells, 2, "FileExistsError", "values")
        == "the cell's results could not be handed back: FileExistsError: values"
    )
    assert died_in(cells, 0) == "while loading the cell's inputs"
    assert died_in(cells, 2) == "while handing the cell's results back"
    assert "cell 1" not in loading and "cell 2" not in raised(cells, 1, "E", "")
    # A cell that does not parse is named the same way at submit.
    broken = cell_notebook("y = (1 / x", [], ["x"], ["y"], "python3")
    (warning,) = syntax_warnings(nbformat.from_dict({**broken, "metadata": PYTHON}))
    assert warning.startswith("The cell is not valid Python (line 1: ")


# --- end to end: a real server, real jobs -------------------------------------------------------


def test_a_failing_notebook_cell_is_named_in_the_reason_as_the_submit_warning_names_it(client, tmp_path):
    """A notebook whose fifth cell (after a markdown cell, with the parameters papermill injects
    before the third) fails: its reason and a submit's warning both call it cell 5."""
    failing = _submitted(new_code_cell("assert epochs == 1, epochs"), new_code_cell("never = True"))
    nbformat.write(new_notebook(cells=failing, metadata=PYTHON), tmp_path / "fails.ipynb")
    job = client.submit(path=str(tmp_path / "fails.ipynb"), parameters={"epochs": 3})
    job = wait_state(client, job["id"], "failed", "succeeded")
    assert job["reason"] == "cell 5 ('assert epochs == 1, epochs') raised AssertionError: 3"
    # where it stopped, counted as the reason counts: cell 5 of the user's 6 (papermill ran 7)
    assert job["progress"]["cells_done"] == 5 and job["progress"]["cells_total"] == 6
    broken = _submitted(new_code_cell("assert epochs == (1"), new_code_cell("never = True"))
    nbformat.write(new_notebook(cells=broken, metadata=PYTHON), tmp_path / "typo.ipynb")
    (warning,) = client.check(path=str(tmp_path / "typo.ipynb"), parameters={"epochs": 3})["warnings"]
    assert re.match(r"Cell (\d+) ", warning).group(1) == re.match(r"cell (\d+) ", job["reason"]).group(1) == "5"


def test_a_cell_that_raises_is_the_cell_and_one_whose_inputs_cannot_load_says_so(kernel, client, tmp_path):
    job_id = _job_id(kernel.run("%%e31 submit\nbefore = 1\nafter = 1 / 0"))
    assert (
        wait_state(client, job_id, "failed", "succeeded")["reason"]
        == "the cell raised ZeroDivisionError: division by zero"
    )
    # A module of the kernel's own folder, which the job (in a folder of its own) cannot import.
    (tmp_path / "kernel_only_module.py").write_text("def double(x):\n    return 2 * x\n")
    kernel.run("import kernel_only_module")
    job_id = _job_id(kernel.run("%%e31 submit\ny = kernel_only_module.double(21)"))
    reason = wait_state(client, job_id, "failed", "succeeded")["reason"]
    assert reason.startswith(
        "the cell's inputs could not be loaded in the job: ModuleNotFoundError: No module named 'kernel_only_module' ("
    ), reason
    assert "cell 1" not in reason and "--data PATH" in reason
