# Run by IPython in a job's kernel as it starts: the worker names this file in PYTHONSTARTUP,
# which IPython (and so ipykernel) runs before the first cell, in the user's namespace. Other
# kernels (R, Julia) do not read it. Not imported as a module: it must run in a kernel whose
# Python lacks e31_jupyter, so it imports nothing of e31's.
#
# What it does: tqdm.auto (and tqdm.autonotebook) pick tqdm's text bars, not its notebook
# widgets. A job has no browser to draw a widget in; its log records the kernel's text, and a
# widget leaves only its first line (0%) there. tqdm itself is imported only by a cell that asks
# for it; tqdm.notebook, asked for by name, is left as it is.
#
# And: SIGUSR1, which the worker passes on when the job is asked to stop at its cell's end
# (e31 suspend) or its time limit is near, sets E31_STOPPING in the kernel's environment
# instead of ending the kernel, so that code in a long cell can see it
# (e31_jupyter.job.stopping()) and end its cell early. Code may install a handler of its own
# for SIGUSR1, as for Slurm's --signal.
#
# No docstring and no names left behind: a docstring would set __doc__ in the user's namespace.


def _e31_text_progress_bars():
    import importlib.abc
    import importlib.util
    import os
    import sys

    class TextProgressBars(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """tqdm.autonotebook as tqdm makes it outside a notebook: its text bars."""

        def find_spec(self, name, path=None, target=None):
            return importlib.util.spec_from_loader(name, self) if name == "tqdm.autonotebook" else None

        def create_module(self, spec):
            return None  # the default module

        def exec_module(self, module):
            from tqdm.std import tqdm, trange

            module.tqdm, module.trange, module.__all__ = tqdm, trange, ["tqdm", "trange"]

    sys.meta_path.insert(0, TextProgressBars())
    # For this kernel only: a Python the job starts (python -i, a kernel of its own) is left alone.
    if os.environ.get("PYTHONSTARTUP", "").endswith("kernel_startup.py"):
        del os.environ["PYTHONSTARTUP"]


def _e31_note_stop_requests():
    import os
    import signal

    def stopping(signum, frame):
        os.environ["E31_STOPPING"] = "1"

    signal.signal(signal.SIGUSR1, stopping)


try:
    _e31_text_progress_bars()
    _e31_note_stop_requests()
except Exception:  # never stop a job's kernel from starting
    pass
finally:
    del _e31_text_progress_bars, _e31_note_stop_requests
