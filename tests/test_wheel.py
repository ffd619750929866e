"""A wheel built with ``python -m build`` carries the prebuilt JupyterLab extension, so that
installing it needs no Node (a clone's ``pip install -e .`` builds the extension once, with Node)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUILT = ROOT / "e31_jupyter" / "labextension"


def _without_node(tmp_path: Path) -> dict:
    """An environment whose PATH holds only this Python: no node, npm or jlpm to call."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "python").symlink_to(os.path.realpath(sys.executable))
    return {**os.environ, "PATH": str(folder)}


def _clean_copy(destination: Path) -> Path:
    """The repository's tracked files, as a clean clone has them, and the extension built here."""
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    shutil.copytree(BUILT, destination / "e31_jupyter" / "labextension")
    return destination


@pytest.mark.slow
def test_a_built_wheel_carries_the_prebuilt_labextension_and_installs_without_node(tmp_path):
    assert (BUILT / "static" / "style.js").is_file(), "pip install -e . builds the extension (with Node) first"
    source = _clean_copy(tmp_path / "source")
    no_node = _without_node(tmp_path)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp_path / "dist", source],
        capture_output=True, text=True, env=no_node, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "jlpm" not in built.stdout + built.stderr  # the prebuilt extension was taken as it is
    (wheel,) = (tmp_path / "dist").glob("e31_jupyter-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    share = "share/jupyter/labextensions/e31-jupyter/"
    assert any(n.endswith(share + "install.json") for n in names)
    assert any(share + "static/remoteEntry." in n for n in names), names

    # A fresh environment that sees this one's packages (jupyterlab), so that pip installs the wheel
    # into it alone and leaves this environment's install of e31 as it is.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "--ignore-installed",
         wheel],
        capture_output=True, text=True, env=no_node, timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert "uninstall" not in installed.stdout.lower()
    extension = venv / share
    assert any(extension.glob("static/remoteEntry.*.js")) and (extension / "package.json").is_file()
    listed = subprocess.run(
        [python, "-m", "jupyterlab.labextensions", "list"], capture_output=True, text=True, timeout=120
    )
    found = listed.stdout + listed.stderr
    assert str(venv / "share" / "jupyter" / "labextensions") in found and "e31-jupyter" in found, found
