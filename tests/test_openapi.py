"""``openapi.yaml`` describes the API the server serves: every route and method, nothing more.

The fuzz (``reliability/test_fuzz.py``) calls what the spec lists; an endpoint the spec leaves
out is neither documented for clients nor fuzzed, so the two are held together here."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from tornado import web

import e31_jupyter
from e31_jupyter.server.handlers import routes

SPEC = Path(e31_jupyter.__file__).parent / "server" / "openapi.yaml"
METHODS = ("get", "post", "put", "patch", "delete")
PREFIX = "/e31/api"


def served() -> set[tuple[str, str]]:
    """(method, spec-style path) of every handler method the server routes."""
    operations = set()
    for pattern, handler in routes():
        path = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: "{" + m.group(1) + "}", pattern)
        path = path.removeprefix(PREFIX).replace("{job_id}", "{id}")
        own = (m for m in METHODS if getattr(handler, m) is not getattr(web.RequestHandler, m))
        operations.update((method, path) for method in own)
    return operations


def documented() -> set[tuple[str, str]]:
    spec = yaml.safe_load(SPEC.read_text())
    assert [server["url"] for server in spec["servers"]] == [PREFIX]
    return {(method, path) for path, item in spec["paths"].items() for method in item if method in METHODS}


def test_the_spec_lists_every_route_and_method_the_server_serves():
    assert served() - documented() == set(), "served, but not in openapi.yaml"
    assert documented() - served() == set(), "in openapi.yaml, but not served"
    assert ("get", "/jobs/{id}/values/{name}") in served()  # the path parameters were read


def test_every_operation_has_an_id_and_declares_its_errors():
    spec = yaml.safe_load(SPEC.read_text())
    for path, item in spec["paths"].items():
        for method in (m for m in item if m in METHODS):
            operation = item[method]
            assert operation.get("operationId"), f"{method} {path}"
            errors = {code for code in operation["responses"] if code.startswith("4")}
            assert "403" in errors, f"{method} {path}: a request without the token gets a 403"
            if "{id}" in path:
                assert "404" in errors, f"{method} {path}: an unknown job gets a 404"
