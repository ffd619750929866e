"""Turning what the user hands over into a job's work: a notebook (from a path or inline
content), checked, with the kernel it will run on."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from .errors import InvalidRequest

DEFAULT_KERNEL = "python3"


def notebook_from_request(body: dict, root_dir: Path) -> tuple[nbformat.NotebookNode, str]:
    """The job's notebook and its file name, from ``path`` (server-readable, relative paths
    from the server's root directory) or inline ``notebook`` content."""
    if ("path" in body) == ("notebook" in body):
        raise InvalidRequest(
            "Give exactly one of path (a notebook file the server can read) "
            "or notebook (the notebook's JSON content)."
        )
    if "path" in body:
        return _read_notebook_file(body["path"], root_dir)
    name = body.get("notebook_name") or "notebook.ipynb"
    if not isinstance(name, str) or "/" in name or not name.endswith(".ipynb"):
        raise InvalidRequest("notebook_name must be a file name ending in .ipynb, without folders.")
    content = body["notebook"]
    if isinstance(content, str):
        try:
            content = json.loads(content)
        except ValueError as error:
            raise InvalidRequest(f"notebook: not valid JSON ({error}).") from None
    return _validated(content, "notebook"), name


def _read_notebook_file(path, root_dir: Path) -> tuple[nbformat.NotebookNode, str]:
    if not isinstance(path, str) or not path:
        raise InvalidRequest("path must be the path of a notebook file (.ipynb).")
    file = Path(path).expanduser()
    if not file.is_absolute():
        file = root_dir / file
    if not file.is_file():
        raise InvalidRequest(f"path: no notebook file at {str(file)!r}.")
    if file.suffix != ".ipynb":
        raise InvalidRequest(f"path: {file.name!r} is not a notebook (.ipynb) file.")
    try:
        content = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"path: {file.name} is not valid notebook JSON ({error}).") from None
    except OSError as error:
        raise InvalidRequest(f"path: cannot read {str(file)!r}: {error.strerror}.") from None
    return _validated(content, f"path: {file.name}"), file.name


def _validated(content, label: str) -> nbformat.NotebookNode:
    if not isinstance(content, dict):
        raise InvalidRequest(f"{label}: a notebook must be a JSON object with a cells list.")
    try:
        notebook = nbformat.from_dict(content)
        if notebook.get("nbformat", 0) < 4:
            notebook = nbformat.convert(notebook, 4)
        nbformat.validate(notebook)
    except Exception as error:  # nbformat raises several kinds; all mean "not a notebook"
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidRequest(f"{label}: not a valid notebook ({message}).") from None
    return notebook


def kernel_of(notebook: nbformat.NotebookNode, available: list[str]) -> str:
    """The kernel the notebook asks for (python3 when it names none), if this server has it."""
    name = notebook.metadata.get("kernelspec", {}).get("name") or DEFAULT_KERNEL
    if name not in available:
        raise InvalidRequest(
            f"The notebook asks for kernel {name!r}, which this server does not have. "
            f"Available kernels: {', '.join(sorted(available)) or 'none'}. "
            "Change the notebook's kernel (Kernel > Change Kernel) and submit again."
        )
    return name
