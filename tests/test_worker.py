"""The worker cleans up after workers that were killed before they could."""

from __future__ import annotations

import os
import subprocess
import sys

from e31_jupyter.worker import SOCKETS_PREFIX, remove_orphaned_sockets


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
