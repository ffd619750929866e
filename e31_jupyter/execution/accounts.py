"""Unix accounts: who a caller is, who a job runs as, and what an account may read.

Identity always comes from the kernel (the process's uid, a socket peer's uid), never from
``$LOGNAME`` or ``$USER``, which any process may set to anything.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Account:
    """A Unix user as a job runs as one: ids, supplementary groups and home."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str = "/bin/sh"

    @property
    def is_root(self) -> bool:
        return self.uid == 0


def _account(entry: pwd.struct_passwd) -> Account:
    groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir, entry.pw_shell or "/bin/sh")


def current() -> Account:
    """The account this process runs as (its effective uid)."""
    return by_uid(os.geteuid())


def by_uid(uid: int) -> Account:
    """The account of ``uid``; a uid without a passwd entry gets its number as its name."""
    try:
        return _account(pwd.getpwuid(uid))
    except KeyError:
        return Account(str(uid), uid, uid, (uid,), "/", "/bin/sh")


def by_name(name: str) -> Account | None:
    """The Unix account called ``name``, or None when there is none."""
    try:
        return _account(pwd.getpwnam(name))
    except (KeyError, TypeError):
        return None


def can_switch_user() -> bool:
    """Whether this process may start processes as other users (it runs as root)."""
    return os.geteuid() == 0


def in_group(name: str, group: str) -> bool:
    """Whether the user ``name`` is in Unix group ``group`` (as a supplementary or primary group):
    one lookup of that user's groups, not a walk through every account (a request asks it)."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        return False
    account = by_name(name)
    return account is not None and gid in account.groups


def can_read(account: Account, path: Path) -> bool:
    """Whether ``account`` could open ``path`` for reading (and list it, for a folder): every
    folder above it searchable, the path itself readable, by the permission bits. Root reads all."""
    if account.is_root:
        return True
    if closed_folder(account, path) is not None:
        return False
    try:
        info = os.stat(path)
    except OSError:
        return False
    need = stat.S_IRUSR | (stat.S_IXUSR if stat.S_ISDIR(info.st_mode) else 0)
    return _allowed(account, info, need)


def _allowed(account: Account, info: os.stat_result, user_bits: int) -> bool:
    """Whether ``account`` has ``user_bits`` (given as the owner's bits) on a file with ``info``."""
    if info.st_uid == account.uid:
        shift = 0
    elif info.st_gid in account.groups:
        shift = 3
    else:
        shift = 6
    bits = user_bits >> shift
    return info.st_mode & bits == bits


def jobs_run_as_others(jobs_run_as: str) -> bool:
    """Whether jobs may run as other accounts than this process's (it is root, and they run as
    their submitters)."""
    return jobs_run_as == "submitter" and can_switch_user()


def runs_as(owner: str, jobs_run_as: str) -> Account:
    """The account a job of ``owner`` runs as, by ``c.E31.jobs_run_as``; E31Error when it cannot
    run as its submitter here."""
    from e31_jupyter.core.errors import E31Error

    server = current()
    # A server that is not root runs every job as itself: it can do nothing else. That is one
    # person's server, or a JupyterHub single-user server whose user the Hub names (alice)
    # while it runs as another account (jovyan); a shared machine has a system scheduler.
    if jobs_run_as == "server" or owner == server.name or not can_switch_user():
        return server
    instead = f'or set c.E31.jobs_run_as = "server" to run every job as {server.name}, with no isolation between users.'
    account = by_name(owner)
    if account is None:
        raise E31Error(
            f"{owner!r} is not a Unix account on this machine, and jobs run as their submitter "
            f'(c.E31.jobs_run_as = "submitter"). Give {owner} an account of that name, {instead}'
        )
    return account


def runs_as_or_none(owner: str, jobs_run_as: str) -> Account | None:
    """The account a job of ``owner`` runs as, or None for one that never could (nothing of it
    runs, so there is nothing of it to signal or clean up)."""
    from e31_jupyter.core.errors import E31Error

    try:
        return runs_as(owner, jobs_run_as)
    except E31Error:
        return None


def give_folder(folder: Path, uid: int, gid: int) -> None:
    """Make ``folder`` and everything in it ``uid``:``gid``'s (links themselves, never what they
    point to), mode 0700, before a job run as that user starts. Only root gives files away; a
    folder that stays another user's keeps its mode."""
    if os.geteuid() == 0 and uid != 0:
        os.chown(folder, uid, gid, follow_symlinks=False)
        # fwalk opens each folder and checks it is the one listed: a link swapped in is not entered
        for _, dirs, files, dir_fd in os.fwalk(folder, follow_symlinks=False):
            for name in dirs + files:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
    if os.lstat(folder).st_uid == uid and os.geteuid() in (0, uid):
        os.chmod(folder, 0o700)


def closed_folder(account: Account, path: Path) -> Path | None:
    """The first folder above ``path`` that ``account`` may not enter (None: it may reach it)."""
    for folder in reversed(Path(os.path.abspath(path)).parents):
        try:
            if not _allowed(account, os.stat(folder), stat.S_IXUSR) and not account.is_root:
                return folder
        except OSError:
            return folder
    return None
