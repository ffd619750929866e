"""Handing a submit to the system scheduler: what it names is read here, as the submitting user.

The system scheduler (``e31 serve --system``) runs as root and never opens a path on someone's
behalf. The user's side (their Jupyter server, or the ``e31`` command talking to the socket)
reads the notebook and the data with the user's own permissions: the notebook travels inline,
the data is copied into the user's own inbox folder on the scheduler (``/e31/api/info`` says
where; only that user can write it), and the scheduler moves it into the job from there.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.job import server_path
from e31_jupyter.service.staging import copy_in

SUBMITS = ("jobs", "check")  # API paths whose POST body names a notebook and data


def hand_over(body: dict, root_dir: Path, inbox: Path) -> dict:
    """``body`` with its notebook ``path`` read into ``notebook`` and its ``data`` copied into
    a new folder of ``inbox``, each item then naming its copy."""
    body = dict(body)
    if isinstance(body.get("path"), str):
        file = server_path(body.pop("path"), root_dir, "path")
        body["notebook"], body["notebook_name"] = _read_notebook(file), file.name
    if isinstance(body.get("data"), list) and body["data"]:
        body["data"] = _copy_data(body["data"], root_dir, inbox / f"data-{secrets.token_hex(8)}")
    return body


def _read_notebook(file: Path) -> dict:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidRequest(f"path: no notebook at {str(file)!r}.") from None
    except PermissionError:
        raise InvalidRequest(f"path: you cannot read {str(file)!r}.") from None
    except ValueError as error:
        raise InvalidRequest(f"path: {str(file)!r} is not a notebook (not JSON: {error}).") from None


def _copy_data(items: list, root_dir: Path, folder: Path) -> list:
    folder.mkdir(mode=0o700)
    copies = []
    for item in items:
        if not isinstance(item, str):
            copies.append(item)  # the scheduler refuses it, saying what data must be
            continue
        source = server_path(item, root_dir, "data")
        target = folder / source.name
        try:
            copy_in(source, target)
        except FileNotFoundError:
            raise InvalidRequest(f"data: nothing at {str(source)!r}.") from None
        except PermissionError as error:
            raise InvalidRequest(f"data: you cannot read {error.filename or str(source)!r}.") from None
        copies.append(str(target))
    return copies
