"""A job's environment: an allowlist of the server's variables plus the job's own, never a secret.

A job runs someone's code, often another user's than the server's: it gets what a program needs
to run as the server's machine is set up (PATH, locale, thread counts, the Python environment),
its account's HOME/USER/LOGNAME, its GPUs and its id; and the names an admin adds with
``c.E31.job_env``. Nothing else of the server's environment passes, and no configured name may
carry a token, a secret or a password.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from e31_jupyter.execution.accounts import Account

JOB_ID_VAR = "E31_JOB_ID"
ALLOWED = (
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR", "PYTHONPATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV",
    "CONDA_PREFIX", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "JUPYTER_PATH", "MPLBACKEND",
)  # fmt: skip
ALLOWED_PREFIXES = ("LC_", "OPENBLAS_")  # OPENBLAS_CORETYPE: some machines need it to compute right
# Folders of the server's own account: another account could not write them.
SERVERS_OWN = ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR")
# Paths of this machine, which mean nothing in a container.
HOST_PATHS = ("PATH", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "JUPYTER_PATH", *SERVERS_OWN)
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD")
SET_PER_JOB = ("HOME", "USER", "LOGNAME", JOB_ID_VAR, "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def refusal(name: str) -> str:
    """Why ``name`` may not be given to jobs ("" when it may)."""
    if not _NAME.fullmatch(name):
        return f"{name!r} is not a variable name"
    upper = name.upper()
    if any(word in upper for word in SECRET_WORDS) or upper.startswith(("JPY_", "E31_")):
        return (
            f"{name} looks like a credential, and a job runs its submitter's code (a job that needs "
            "one reads it from a file its submitter owns)"
        )
    if name in SET_PER_JOB:
        return f"{name} is set by e31 for each job"
    return ""


def check_configured(items: list[str]) -> list[str]:
    """``c.E31.job_env`` as given (NAME, or NAME=VALUE), or ValueError saying what to change."""
    for item in items:
        why = refusal(item.partition("=")[0])
        if why:
            raise ValueError(
                f"c.E31.job_env: {item.partition('=')[0]!r} cannot be given to jobs: {why}. Remove it "
                "from c.E31.job_env."
            )
    return list(items)


def job_environment(
    account: Account,
    job_id: str,
    devices: dict[str, str],
    configured: Sequence[str] = (),
    server: Account | None = None,
    environ: Mapping[str, str] = os.environ,
    on_host: bool = True,
) -> dict[str, str]:
    """The whole environment of a job run as ``account``: the allowed variables of ``environ``,
    the ``configured`` ones, the account's HOME/USER/LOGNAME, ``devices`` (the variables that
    show the job its GPUs) and the job's id. ``server`` is the server's own account (whose Jupyter folders a job run as
    it may use); ``on_host`` False (a container) leaves out paths of this machine."""
    own_account = server is not None and account.uid == server.uid
    env = {name: value for name, value in environ.items() if passes(name, own_account, on_host)}
    for item in configured:
        name, given, value = item.partition("=")
        if refusal(name):
            continue  # checked at configuration; never passed whatever the caller gave
        if given:
            env[name] = value
        elif name in environ:
            env[name] = environ[name]
    env.update({"HOME": account.home, "USER": account.name, "LOGNAME": account.name})
    env.update(devices)
    env[JOB_ID_VAR] = job_id
    return env


def passes(name: str, own_account: bool = True, on_host: bool = True) -> bool:
    """Whether the server's variable ``name`` passes to a job (``own_account``: one run as the
    server's account; ``on_host``: not in a container)."""
    if refusal(name):
        return False
    if not on_host and name in HOST_PATHS:
        return False
    if name in SERVERS_OWN:
        return own_account
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES)
