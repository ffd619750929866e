"""``e31 lab`` and ``e31 serve``: Jupyter with the queue, started in this process's place."""

from __future__ import annotations

import os
import sys

LAUNCHERS = ("lab", "serve")
SYSTEM_FLAG = "--system"  # e31 serve --system: the scheduler of a machine shared by several users


def launcher_argv(command: str, extra: list[str], as_root: bool | None = None) -> list[str]:
    """The command line that ``e31 lab`` or ``e31 serve`` runs; ``extra`` passes through last."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    root_flag = ["--allow-root"] if as_root else []
    if command == "lab":
        return [sys.executable, "-m", "jupyterlab", *root_flag, *extra]
    extensions = {name: False for name in _enabled_server_extensions()} | {"e31_jupyter": True}
    system = _not_overridden([*system_args(), "--allow-root"], extra) if SYSTEM_FLAG in extra else []
    return [
        sys.executable,
        "-m",
        "e31_jupyter.server",  # jupyter_server, started a little faster (server/__main__.py)
        f"--ServerApp.jpserver_extensions={extensions!r}",
        "--ServerApp.open_browser=False",
        "--ServerApp.reraise_server_extension_failures=True",  # a server without its queue is no use
        *root_flag,
        *system,
        *(arg for arg in extra if arg != SYSTEM_FLAG),  # after ours: the caller's settings win
    ]


def system_args() -> list[str]:
    """What makes ``e31 serve --system`` the machine's scheduler: a Unix socket that anyone may
    connect to (the kernel names each caller), nothing on TCP, no token, root's own config only."""
    from e31_jupyter.client import SYSTEM_SOCKET

    return [
        "--E31.system=True",
        f"--ServerApp.sock={SYSTEM_SOCKET}",
        "--ServerApp.sock_mode=0666",
        "--ServerApp.identity_provider_class=e31_jupyter.server.identity.PeerCredIdentityProvider",
        "--ServerApp.root_dir=/",
        "--ServerApp.allow_remote_access=True",  # no TCP, so no DNS rebinding; the Host header names the socket
    ]


def _enabled_server_extensions() -> list[str]:
    """The server extensions enabled in Jupyter's config; ``e31 serve`` turns them all off.

    Naming e31_jupyter alone is not enough: ServerApp adds every extension enabled in the
    config paths that the command line does not mention.
    """
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    enabled = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    return sorted(name for name, on in enabled.items() if on and name != "e31_jupyter")


def launch(command: str, extra: list[str]) -> int:
    """Replace this process with Jupyter, so Ctrl-C and exit codes are Jupyter's own."""
    if SYSTEM_FLAG in extra:
        if command != "serve":
            print("e31: --system is for `e31 serve`, the scheduler of a shared machine.", file=sys.stderr)
            return 2
        if os.geteuid() != 0:
            print(
                "e31: the system scheduler runs as root: it starts each job as the user who submitted it. "
                "Run `sudo e31 serve --system` (or its systemd unit); a queue of your own is `e31 lab`.",
                file=sys.stderr,
            )
            return 2
        _make_socket_folder()
    argv = launcher_argv(command, extra)
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached


def _not_overridden(defaults: list[str], given: list[str]) -> list[str]:
    """The ``--Name=value`` defaults that ``given`` does not set itself (traitlets takes one each)."""
    names = {arg.split("=", 1)[0] for arg in given}
    return [arg for arg in defaults if arg.split("=", 1)[0] not in names]


def _make_socket_folder() -> None:
    """/run/e31, where the socket goes: root's, and searchable by everyone."""
    from e31_jupyter.client import SYSTEM_SOCKET

    folder = os.path.dirname(SYSTEM_SOCKET)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    os.chmod(folder, 0o755)
