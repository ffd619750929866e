"""The data directory of a single-user server: made private (0700), and refused when it is
another user's.

A machine shared by several users needs one system scheduler that owns the data directory
(``e31 serve --system``); a server of one's own keeps its data where nobody else can read it.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from e31_jupyter.core.errors import E31Error
from e31_jupyter.execution import accounts

log = logging.getLogger("e31")


PRIVATE = 0o700  # a single-user server's: nobody else may read or enter
TRAVERSABLE = 0o711  # a root scheduler's whose jobs run as their submitters: they may pass, not look


def mode_for(jobs_run_as_others: bool) -> int:
    """The mode of the data directory and its top folders: each job runs in its own folder
    (0700, its submitter's), which a job run as another user than the scheduler must reach."""
    return TRAVERSABLE if jobs_run_as_others else PRIVATE


def prepare(data_dir: Path, mode: int = PRIVATE) -> None:
    """Create ``data_dir`` (``mode``), or check that it is this user's and give it ``mode``."""
    data_dir.mkdir(mode=mode, parents=True, exist_ok=True)
    info = data_dir.stat()
    me = accounts.current()
    if info.st_uid != me.uid:
        raise E31Error(
            f"The e31 data directory {str(data_dir)!r} belongs to {accounts.by_uid(info.st_uid).name}, "
            f"and this server runs as {me.name}. A machine shared by several users needs one system "
            "scheduler that owns the data directory (e31 serve --system), which each user's server "
            "reaches; or keep a data directory of your own (c.E31.data_dir, --E31.data_dir=...).",
            status=503,
        )
    private_folder(data_dir, mode)


def private_folder(path: Path, mode: int = PRIVATE) -> None:
    """Create ``path`` with ``mode``; one of this user's that others may read or write more than
    ``mode`` allows is given ``mode``."""
    path.mkdir(mode=mode, exist_ok=True)
    had = stat.S_IMODE(path.stat().st_mode)
    if had & 0o077 & ~mode:
        os.chmod(path, mode)
        log.warning("e31: %s was open to other users (%s); it is now %s", path, oct(had), oct(mode))
    elif had != mode:
        os.chmod(path, mode)
