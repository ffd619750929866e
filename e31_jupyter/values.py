"""Values for any Python, the public face of ``notebook/values.py``: ``load`` what a job captured
(``e31 collect JOB --to DIR`` puts it in ``DIR/values``); inside a job, ``load_inputs`` and
``save_outputs`` (the cells e31 wraps around a ``%%e31`` cell call them)."""

from e31_jupyter.notebook.values import load, load_inputs, save_outputs

__all__ = ["load", "load_inputs", "save_outputs"]
