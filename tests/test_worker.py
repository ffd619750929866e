"""The worker cleans up after workers that were killed before they could, and saves the
executed notebook so that a worker killed mid-save leaves the last whole one."""

from __future__ import annotations

import os
import subprocess
import sys

import nbformat
import pytest
from papermill.iorw import write_ipynb

from e31_jupyter.execution.worker import SOCKETS_PREFIX, remove_orphaned_sockets, save_notebooks_whole


def test_socket_folders_of_dead_workers_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphaned = tmp_path / f"{SOCKETS_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{SOCKETS_PREFIX}{os.getpid()}-def"
    unrelated = tmp_path / f"{SOCKETS_PREFIX}notapid"
    for folder in (orphaned, live, unrelated):
        folder.mkdir()
        (folder / "kernel-1").write_text("")
    remove_orphaned_sockets(str(tmp_path))
    assert not orphaned.exists()
    assert live.exists() and unrelated.exists()


def test_a_save_cut_short_leaves_the_last_whole_notebook(tmp_path):
    """Papermill saves the executed notebook after every cell. A save cut short (here by text
    that cannot be written as UTF-8; in life by a SIGKILL) must leave the previous save whole,
    not a truncated file that loses every cell that ran (papermill's own save rewrites in place)."""
    job = tmp_path / "job"
    job.mkdir()
    executed = job / "executed.ipynb"
    save_notebooks_whole(job)
    write_ipynb(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), str(executed))
    cut_short = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("\udc80")]
    )
    with pytest.raises(UnicodeEncodeError):
        write_ipynb(cut_short, str(executed))
    assert [cell.source for cell in nbformat.read(executed, as_version=4).cells] == ["x = 1"]
    assert [p.name for p in job.iterdir()] == ["executed.ipynb"]  # nothing half-written left beside it
