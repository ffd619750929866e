"""Real Unix users for tests run as root (as CI runs them): ``make_user(name) -> Account``.

Use the fixtures in a test module with ``from unix_users import make_user, open_to_users  # noqa:
F401``. Users are created with ``useradd`` (a home of their own) and removed with ``userdel -r``
when the session ends. Their names are ``name`` plus this run's pid, so that a run never meets a
real user or a leftover of another run.

Jobs run as such a user start this test run's Python and import this repository, so for the
session the folders above them (``/root`` for a pyenv Python) are made enterable by others
(mode 0711: nothing in them listed) and put back at the end.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import e31_jupyter
from e31_jupyter.execution import accounts

REPOSITORY = Path(e31_jupyter.__file__).resolve().parent.parent
ENTER = stat.S_IXGRP | stat.S_IXOTH


@pytest.fixture(scope="session")
def make_user():
    """``make_user(name) -> Account``: a new Unix user, with the Python and repository usable by it."""
    if os.geteuid() != 0:
        pytest.skip("creating Unix users needs root; CI runs the tests as root")
    if shutil.which("useradd") is None:
        pytest.skip("creating Unix users needs useradd (the passwd package)")
    python = Path(sys.executable).resolve()
    opened = _let_others_enter([python.parent, Path(sys.prefix).resolve(), REPOSITORY])
    created: list[str] = []

    def make(name: str) -> accounts.Account:
        unique = f"{name}{os.getpid()}"
        result = subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/sh", unique], capture_output=True, text=True
        )
        if result.returncode != 0:
            pytest.fail(f"useradd {unique} failed: {result.stderr.strip()}")
        created.append(unique)
        account = accounts.by_name(unique)
        _check_usable_by(account, [python, Path(e31_jupyter.__file__)])
        return account

    try:
        yield make
    finally:
        for name in created:
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        _restore(opened)


@pytest.fixture
def open_to_users():
    """``open_to_users(path)``: let other users enter the folders down to ``path`` (a tmp_path,
    say) for this test; their modes are put back at its end."""
    opened: list[tuple[Path, int]] = []

    def open_to(path: Path) -> Path:
        opened.extend(_let_others_enter([path]))
        return path

    yield open_to
    _restore(opened)


def _let_others_enter(paths: list[Path]) -> list[tuple[Path, int]]:
    """Add the search bits for group and others to every folder from / down to each of ``paths``
    that lacks them; returns what they were."""
    opened: list[tuple[Path, int]] = []
    for path in paths:
        for folder in [*reversed(path.parents), path]:
            mode = stat.S_IMODE(os.stat(folder).st_mode)
            if mode & ENTER != ENTER and not any(folder == done for done, _ in opened):
                opened.append((folder, mode))
                os.chmod(folder, mode | ENTER)
    return opened


def _restore(opened: list[tuple[Path, int]]) -> None:
    for folder, mode in reversed(opened):
        try:
            os.chmod(folder, mode)
        except FileNotFoundError:
            pass  # a test's folder, already removed


def _check_usable_by(account: accounts.Account, files: list[Path]) -> None:
    for file in files:
        if not accounts.can_read(account, file):
            closed = accounts.closed_folder(account, file)
            where = f"it cannot enter {closed}" if closed else f"it cannot read {file}"
            pytest.fail(
                f"the test user {account.name} cannot use {file} ({where}); jobs run as it would fail. "
                "Let other users enter the folders above this Python and this repository, and read "
                "their files (chmod o+x on the folders, o+r on the files)."
            )
