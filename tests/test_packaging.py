"""How a submitted notebook's parameters are checked against what papermill can do with them."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from e31_jupyter.errors import InvalidRequest
from e31_jupyter.packaging import parameter_warnings


def _notebook(language: str, parameters_cell: str) -> nbformat.NotebookNode:
    cell = new_code_cell(parameters_cell, metadata={"tags": ["parameters"]})
    return new_notebook(cells=[cell], metadata={"language_info": {"name": language}})


def test_parameters_the_cell_declares_are_not_warned_about():
    nb = _notebook("python", "epochs = 10  # how long\nlr: float = 0.1")
    assert parameter_warnings(nb, "python3", {"epochs": 3, "lr": 0.5}) == []
    assert parameter_warnings(nb, "python3", {}) == []


def test_an_unknown_name_is_warned_about_with_the_closest_declared_one():
    nb = _notebook("python", "learning_rate = 0.1\nbatch = 8")
    (warning,) = parameter_warnings(nb, "python3", {"learning_rte": 0.5})
    assert "'learning_rte'" in warning and "(learning_rate, batch)" in warning
    assert warning.endswith("Did you mean 'learning_rate'?")


def test_a_language_whose_parameters_cell_papermill_cannot_read_gets_no_warnings():
    assert parameter_warnings(_notebook("R", "epochs <- 10"), "ir", {"anything": 1}) == []


def test_parameters_papermill_could_not_pass_are_refused():
    with pytest.raises(InvalidRequest, match="cannot pass parameters to a notebook in 'cobol'"):
        parameter_warnings(_notebook("cobol", "01 EPOCHS PIC 9."), "gnucobol", {"epochs": 3})
    assert parameter_warnings(_notebook("cobol", "01 EPOCHS PIC 9."), "gnucobol", {}) == []
