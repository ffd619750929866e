"""Values for any Python, the public face of ``notebook/values.py``: ``load`` what a job captured
(``e31 collect JOB --to DIR`` puts it in ``DIR/values``), or ``restore`` it with what could not be
loaded; inside a job, ``load_inputs`` and ``save_outputs`` (the cells e31 wraps around a
``%%e31`` cell call them, from ``notebook/cell_job.py``)."""

from e31_jupyter.notebook.cell_job import load_inputs, save_outputs
from e31_jupyter.notebook.values import describe, load, read_index, restore, save

__all__ = ["describe", "load", "load_inputs", "read_index", "restore", "save", "save_outputs"]
