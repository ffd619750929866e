"""Sphinx configuration of the e31-jupyter documentation.

Markdown pages, read by MyST. The build needs no network:

    sphinx-build -W --keep-going -b html docs docs/_build/html    (or scripts/build-docs.sh)

The REST API page (api.md) gets its endpoint and schema tables from
e31_jupyter/server/openapi.yaml when it is read (see ``openapi_tables`` below), so the page
and the API description cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
OPENAPI = ROOT / "e31_jupyter" / "server" / "openapi.yaml"

project = "e31-jupyter"
author = "the e31-jupyter authors"
copyright = "the e31-jupyter authors"
_version = re.search(r'^version\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
release = version = _version.group(1) if _version else ""

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_heading_anchors = 3  # [text](page.md#a-heading) links, as on GitHub

html_theme = "alabaster"
html_title = f"e31-jupyter {release}"
html_theme_options = {"description": "Jupyter as the front door of a GPU queue", "fixed_sidebar": True}
html_static_path: list[str] = []

# The marker in api.md that the generated tables replace.
ENDPOINTS_MARKER = "<!-- openapi-tables -->"
METHODS = ("get", "post", "put", "patch", "delete")


def _one_line(text: object) -> str:
    """Text for a table cell: one line, pipes escaped."""
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _resolve(spec: dict, item: dict) -> dict:
    """A parameter or response that is a $ref, looked up in components."""
    while isinstance(item, dict) and "$ref" in item:
        parts = item["$ref"].lstrip("#/").split("/")
        found = spec
        for part in parts:
            found = found[part]
        item = found
    return item


def _type(schema: dict | None) -> str:
    """A schema's type, as a reader wants it in one cell."""
    if not schema:
        return ""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"{{ref}}`{name} <schema-{name.lower()}>`"
    if "allOf" in schema:
        return " + ".join(_type(part) or "object" for part in schema["allOf"])
    if "oneOf" in schema and "type" not in schema:
        kinds = [_type(part) for part in schema["oneOf"]]
        return " or ".join(kind for kind in kinds if kind) or "object"
    kind = schema.get("type", "")
    if kind == "array":
        kind = f"array of {_type(schema.get('items')) or 'items'}"
    if "format" in schema:
        kind += f" ({schema['format']})"
    if "enum" in schema:
        kind += " (" + ", ".join(f"`{value}`" for value in schema["enum"]) + ")"
    if schema.get("nullable"):
        kind += ", nullable"
    return kind


def _body_schema(spec: dict, holder: dict) -> dict | None:
    content = _resolve(spec, holder).get("content", {})
    for media in content.values():
        return media.get("schema")
    return None


def _schema_label(schema: dict | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema or "allOf" in schema or schema.get("type") == "array":
        return _type(schema)
    return "object" if schema.get("type") == "object" or "properties" in schema else _type(schema)


def _operations(spec: dict):
    for path, item in spec.get("paths", {}).items():
        shared = item.get("parameters", [])
        for method in METHODS:
            if method in item:
                yield path, method, item[method], shared


def openapi_markdown(spec: dict) -> str:
    """The endpoints and schemas of an OpenAPI 3 description, as MyST Markdown."""
    base = (spec.get("servers") or [{}])[0].get("url", "")
    lines = [
        "## Endpoints",
        "",
        f"Paths are under `{base}`.",
        "",
        "| method | path | what it does |",
        "| --- | --- | --- |",
    ]
    operations = list(_operations(spec))
    for path, method, op, _ in operations:
        label = f"api-{op.get('operationId', method + path).lower()}"
        lines.append(f"| `{method.upper()}` | {{ref}}`{path} <{label}>` | {_one_line(op.get('summary'))} |")
    lines.append("")
    for path, method, op, shared in operations:
        label = f"api-{op.get('operationId', method + path).lower()}"
        lines += [f"({label})=", f"### `{method.upper()} {path}`", "", f"**{_one_line(op.get('summary'))}**", ""]
        if op.get("description"):
            lines += [op["description"].strip(), ""]
        parameters = [_resolve(spec, p) for p in shared + op.get("parameters", [])]
        if parameters:
            lines += ["| parameter | in | type | required | meaning |", "| --- | --- | --- | --- | --- |"]
            for p in parameters:
                required = "yes" if p.get("required") else "no"
                lines.append(
                    f"| `{p['name']}` | {p.get('in', '')} | {_one_line(_type(p.get('schema')))} "
                    f"| {required} | {_one_line(p.get('description'))} |"
                )
            lines.append("")
        if "requestBody" in op:
            lines += [f"Body: {_schema_label(_body_schema(spec, op['requestBody']))}", ""]
        lines += ["| status | meaning | body |", "| --- | --- | --- |"]
        for status, response in op.get("responses", {}).items():
            resolved = _resolve(spec, response)
            lines.append(
                f"| {status} | {_one_line(resolved.get('description'))} "
                f"| {_one_line(_schema_label(_body_schema(spec, response)))} |"
            )
        lines.append("")

    lines += ["## Schemas", ""]
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        lines += [f"({'schema-' + name.lower()})=", f"### `{name}`", ""]
        if schema.get("description"):
            lines += [_one_line(schema["description"]), ""]
        properties = dict(schema.get("properties", {}))
        needed = set(schema.get("required", []))
        for part in schema.get("allOf", []):
            if "$ref" in part:
                lines += [f"Everything in {_type(part)}, and:", ""]
            properties.update(part.get("properties", {}))
            needed.update(part.get("required", []))
        if properties:
            lines += ["| field | type | required | meaning |", "| --- | --- | --- | --- |"]
            for field, prop in properties.items():
                lines.append(
                    f"| `{field}` | {_one_line(_type(prop))} | {'yes' if field in needed else 'no'} "
                    f"| {_one_line(prop.get('description'))} |"
                )
            lines.append("")
        elif not schema.get("allOf"):
            lines += [f"Type: {_one_line(_type(schema))}", ""]
    return "\n".join(lines) + "\n"


def openapi_tables(app, docname: str, source: list[str]) -> None:
    """Put the generated tables where api.md holds its marker."""
    if ENDPOINTS_MARKER not in source[0]:
        return
    app.env.note_dependency(str(OPENAPI))
    spec = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    source[0] = source[0].replace(ENDPOINTS_MARKER, openapi_markdown(spec))


def setup(app):
    from pygments.lexers.special import TextLexer

    app.add_lexer("mermaid", TextLexer)  # the life-cycle diagram (ARCHITECTURE.md): shown as text, no JS
    app.connect("source-read", openapi_tables)
    return {"parallel_read_safe": True}
