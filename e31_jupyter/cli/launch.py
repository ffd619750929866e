"""``e31 lab`` and ``e31 serve``: Jupyter with the queue, started in this process's place."""

from __future__ import annotations

import os
import sys

LAUNCHERS = ("lab", "serve")


def launcher_argv(command: str, extra: list[str], as_root: bool | None = None) -> list[str]:
    """The command line that ``e31 lab`` or ``e31 serve`` runs; ``extra`` passes through last."""
    as_root = os.geteuid() == 0 if as_root is None else as_root
    root_flag = ["--allow-root"] if as_root else []
    if command == "lab":
        return [sys.executable, "-m", "jupyterlab", *root_flag, *extra]
    extensions = {name: False for name in _enabled_server_extensions()} | {"e31_jupyter": True}
    return [
        sys.executable,
        "-m",
        "jupyter_server",
        f"--ServerApp.jpserver_extensions={extensions!r}",
        "--ServerApp.open_browser=False",
        "--ServerApp.reraise_server_extension_failures=True",  # a server without its queue is no use
        *root_flag,
        *extra,
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
    argv = launcher_argv(command, extra)
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached
