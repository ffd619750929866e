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

from . import accounts
from .errors import E31Error

log = logging.getLogger("e31")


def prepare(data_dir: Path) -> None:
    """Create ``data_dir`` (0700), or check that it is this user's and make it private."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
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
    private_folder(data_dir)


def private_folder(path: Path) -> None:
    """Create ``path`` (0700); one of this user's that others may read or enter is made 0700."""
    path.mkdir(mode=0o700, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o700)
        log.warning("e31: %s was readable by other users (%s); it is now 0700", path, oct(mode))
