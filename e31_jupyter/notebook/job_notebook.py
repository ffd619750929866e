"""Turning what the user hands over into a job's work: a notebook (from a path or inline
content), checked, with the kernel it will run on; or a single cell, packaged as a notebook
that restores the cell's inputs, runs the cell as written, and hands its results back.

nbformat is imported where it is used, not here: the magics import this module into the user's
kernel, where ``%load_ext e31_jupyter`` must take well under a second (nbformat's import costs
seconds: it validates with jsonschema)."""

from __future__ import annotations

import ast
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, ModuleType
from typing import TYPE_CHECKING

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.job import CELL_TAG, RESULTS_TAG, SETUP_TAG, server_path

if TYPE_CHECKING:
    import nbformat

DEFAULT_KERNEL = "python3"


def notebook_from_request(body: dict, root_dir: Path) -> tuple[nbformat.NotebookNode, str, Path | None]:
    """The job's notebook, its file name and its folder, from ``path`` (server-readable,
    relative paths from the server's root directory) or inline ``notebook`` content (with the
    ``folder`` it is saved in, when the client says; None otherwise)."""
    if ("path" in body) == ("notebook" in body):
        raise InvalidRequest(
            "Give exactly one of path (a notebook file the server can read) or notebook (the notebook's JSON content)."
        )
    if "path" in body:
        if "folder" in body:
            raise InvalidRequest("folder goes with notebook (inline content); a path says its own folder.")
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
    return _validated(content, "notebook"), name, _folder(body.get("folder"), root_dir)


def _folder(value, root_dir: Path) -> Path | None:
    if value is None:
        return None
    folder = server_path(value, root_dir, "folder") if isinstance(value, str) else None
    if folder is None or not folder.is_dir():
        raise InvalidRequest(
            f"folder: {value!r} is not a folder the server can read; give the notebook's folder, "
            "absolute or relative to the server's root dir, or leave it out."
        )
    return folder


def _read_notebook_file(path, root_dir: Path) -> tuple[nbformat.NotebookNode, str, Path]:
    if not isinstance(path, str) or not path:
        raise InvalidRequest("path must be the path of a notebook file (.ipynb).")
    file = server_path(path, root_dir, "path")
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
    return _validated(content, f"path: {file.name}"), file.name, file.parent


def _validated(content, label: str) -> nbformat.NotebookNode:
    import nbformat

    if not isinstance(content, dict):
        raise InvalidRequest(f"{label}: a notebook must be a JSON object with a cells list.")
    try:
        major, minor = nbformat.reader.get_version(content)
        if major not in nbformat.versions:
            raise ValueError(f"nbformat {major} is not a version this server reads")
        # As nbformat reads a file (sources joined into one string each), from the parsed JSON.
        notebook = nbformat.convert(nbformat.versions[major].to_notebook_json(content, minor=minor), 4)
        nbformat.validate(notebook)
    except Exception as error:  # nbformat raises several kinds; all mean "not a notebook"
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InvalidRequest(f"{label}: not a valid notebook ({message}).") from None
    return notebook


def kernel_of(notebook: nbformat.NotebookNode, available: list[str], asked: str | None = None) -> str:
    """The kernel the job runs on, if this server has it: ``asked`` (``kernel`` in the request,
    papermill's ``-k``), else the one the notebook names. A notebook that names none (one written
    by a script, say) is a Python notebook for python3: that is written into its metadata, where
    papermill looks for the language it writes parameters in."""
    if asked is not None:
        return _asked_kernel(asked, available)
    name = notebook.metadata.get("kernelspec", {}).get("name") or _python_by_default(notebook)
    if name not in available:
        raise InvalidRequest(
            f"The notebook asks for kernel {name!r}, which this server does not have. "
            f"Available kernels: {', '.join(sorted(available)) or 'none'}. "
            "Change the notebook's kernel (Kernel > Change Kernel) and submit again, or name one with --kernel."
        )
    return name


def _asked_kernel(asked, available: list[str]) -> str:
    if not isinstance(asked, str) or not asked.strip():
        raise InvalidRequest(
            f"kernel must be the name of a kernel, got {asked!r}. Available kernels: {', '.join(sorted(available)) or 'none'}."
        )
    if asked not in available:
        raise InvalidRequest(
            f"kernel: this server has no kernel {asked!r}. Available kernels: {', '.join(sorted(available)) or 'none'} "
            "(jupyter kernelspec list shows them)."
        )
    return asked


def _python_by_default(notebook: nbformat.NotebookNode) -> str:
    language = notebook.metadata.get("language_info", {}).get("name") or "python"
    if language != "python":
        raise InvalidRequest(
            f"The notebook names no kernel, and it is in {language!r}. Choose its kernel in "
            "Jupyter (Kernel > Change Kernel), save it and submit again."
        )
    notebook.metadata["kernelspec"] = {"name": DEFAULT_KERNEL, "display_name": "Python 3", "language": "python"}
    return DEFAULT_KERNEL


# --- a cell -> a job notebook ---------------------------------------------------------------


@dataclass
class CellNames:
    reads: list[str]  # names the cell reads before it assigns them, in order of first use
    assigns: list[str]  # names the cell assigns at top level, in order
    star_import: bool = False  # "from m import *": it binds names its syntax does not show
    # Of ``reads``, those read as the cell runs (``x = x + 1``), not only in a function body it
    # defines, which reads them when called: one the cell assigns later is still needed first.
    read_first: list[str] = field(default_factory=list)
    # Names the cell's functions declare ``global`` and set when called.
    set_globals: list[str] = field(default_factory=list)


def cell_names(source: str) -> CellNames:
    """The cell's free names and its assigned names, from its syntax tree, the code its magics
    run included. Raises SyntaxError for a cell that does not parse."""
    tree = parse_cell_strictly(source)
    scope = _Scope()
    for statement in tree.body:
        scope.visit(statement)
    return CellNames(scope.reads, scope.assigns, scope.star_import, scope.read_first, scope.set_globals)


class _Scope(ast.NodeVisitor):
    """Walks statements in execution order, noting each name's first use: read or assignment."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.assigns: list[str] = []
        self.read_first: list[str] = []
        self.set_globals: list[str] = []
        self.star_import = False
        self._bound: set[str] = set()
        self._in_try = 0  # inside a try body: a missing name may be what its handler expects

    def read(self, name: str, when_called: bool = False) -> None:
        """Note a read of ``name``; ``when_called``: in a function body, read only when it runs."""
        if name in self._bound:
            return
        if name not in self.reads:
            self.reads.append(name)
        if not when_called and not self._in_try and name not in self.read_first:
            self.read_first.append(name)

    def visit_Try(self, node):
        self._in_try += 1
        for statement in node.body:
            self.visit(statement)
        self._in_try -= 1
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    visit_TryStar = visit_Try

    def bind(self, name: str) -> None:
        self._bound.add(name)
        if name not in self.assigns:
            self.assigns.append(name)

    def visit_Name(self, node):
        self.read(node.id) if isinstance(node.ctx, ast.Load) else self.bind(node.id)

    def visit_Assign(self, node):
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AugAssign(self, node):
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self.read(node.target.id)
        self.visit(node.target)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node):
        self.visit(node.iter)
        self.visit(node.target)
        for statement in node.body + node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node):
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node):
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name)
        for statement in node.body:
            self.visit(statement)

    def visit_Import(self, node):
        for alias in node.names:
            self.bind(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node):
        for alias in node.names:
            if alias.name == "*":
                self.star_import = True
            else:
                self.bind(alias.asname or alias.name)

    def visit_FunctionDef(self, node):
        for expression in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if expression is not None:
                self.visit(expression)
        for name in _free_in_body(node):
            self.read(name, when_called=True)  # a function reads its globals when called; capture them now
        for name in _declared_global(node):
            if name not in self.set_globals:
                self.set_globals.append(name)
        self.bind(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        for name in _free_in_body(node):
            self.read(name, when_called=True)

    def visit_ClassDef(self, node):
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        body = _Scope()
        for statement in node.body:
            body.visit(statement)
        self._read_from(body)
        self.bind(node.name)

    def _comprehension(self, node, *results):
        inner = _Scope()
        for generator in node.generators:
            inner.visit(generator.iter)
            inner.visit(generator.target)
            for condition in generator.ifs:
                inner.visit(condition)
        for result in results:
            inner.visit(result)
        self._read_from(inner)

    def _read_from(self, inner: _Scope) -> None:
        """The reads of a scope run at once (a class body, a comprehension), as this one's."""
        for name in inner.reads:
            self.read(name, when_called=name not in inner.read_first)

    def visit_ListComp(self, node):
        self._comprehension(node, node.elt)

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node):
        self._comprehension(node, node.key, node.value)

    def visit_Call(self, node):
        self.generic_visit(node)
        code = code_run_by_magic(node)
        if code is not None:
            for statement in parse_cell(code).body:
                self.visit(statement)
        captured_into = name_bound_by_magic(node)
        if captured_into:
            self.bind(captured_into)

    def visit_Global(self, node):
        pass

    visit_Nonlocal = visit_Global


def parse_cell(source: str) -> ast.Module:
    """The cell's syntax tree (``parse_cell_strictly``); empty when it does not parse, or nests
    too deep for the parser."""
    try:
        return parse_cell_strictly(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ast.Module(body=[], type_ignores=[])


def parse_cell_strictly(source: str) -> ast.Module:
    """The cell's syntax tree: as plain Python, which most cells are, else as IPython reads it
    (magics and ! lines turned into calls). Raises SyntaxError when it does not parse either way."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        pass
    return ast.parse(TransformerManager().transform_cell(source))


# Magics whose line (or cell) is Python code that they run; others take words, not code.
MAGICS_THAT_RUN_CODE = {"time", "timeit", "prun", "capture", "debug"}


def code_run_by_magic(call: ast.Call) -> str | None:
    """The code a magic runs, for a call as IPython writes a magic (``%time x = f()`` is
    ``get_ipython().run_line_magic('time', 'x = f()')``); None for any other call."""
    strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    runner = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if runner in ("run_line_magic", "run_cell_magic") and len(strings) == len(call.args) >= 2:
        if strings[0] in MAGICS_THAT_RUN_CODE:
            return strings[-1]
    return None


def name_bound_by_magic(call: ast.Call) -> str | None:
    """The name ``%%capture NAME`` binds (its line's last word that is not an option)."""
    strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    runner = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if runner == "run_cell_magic" and len(strings) == len(call.args) == 3 and strings[0] == "capture":
        words = [word for word in strings[1].split() if not word.startswith("-")]
        return words[-1] if words and words[-1].isidentifier() else None
    return None


def _declared_global(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The names a function (or one nested in it) declares ``global``: it sets them when called."""
    found = [name for node in ast.walk(function) if isinstance(node, ast.Global) for name in node.names]
    return list(dict.fromkeys(found))


def globals_set_by(functions) -> list[str]:
    """The global names that ``functions`` (and their nested functions) set or delete when called
    (``global counter; counter += 1``), read from their code."""
    import dis

    found: list[str] = []
    codes = [f.__code__ for f in functions if isinstance(getattr(f, "__code__", None), CodeType)]
    while codes:
        code = codes.pop()
        codes.extend(c for c in code.co_consts if isinstance(c, CodeType))
        for instruction in dis.get_instructions(code):
            if instruction.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") and instruction.argval not in found:
                found.append(instruction.argval)
    return found


def _free_in_body(function: ast.FunctionDef | ast.Lambda) -> list[str]:
    """Names a function's body reads that are neither its parameters nor its own locals."""
    args = function.args
    params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
    params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    body = function.body if isinstance(function.body, list) else [function.body]
    local, loads, declared = set(params), [], set()
    for node in (n for statement in body for n in ast.walk(statement)):
        if isinstance(node, ast.Name):
            (loads.append(node.id) if isinstance(node.ctx, ast.Load) else local.add(node.id))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            local.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            local.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, ast.Global):
            declared.update(node.names)
    return list(dict.fromkeys(n for n in loads if n not in local or n in declared))


def import_line(alias: str, module: ModuleType) -> str:
    """The statement that binds ``alias`` to ``module`` again in the job."""
    name = module.__name__
    if alias == name:
        return f"import {name}"
    if "." in name and alias == name.rsplit(".", 1)[1]:
        package, leaf = name.rsplit(".", 1)
        return f"from {package} import {leaf}"
    return f"import {name} as {alias}"


def cell_notebook(
    source: str,
    imports: list[str],
    inputs: list[str],
    outputs: list[str],
    kernel: str,
    set_by_functions: Sequence[str] = (),
    changed: bool = True,
) -> dict:
    """The job notebook for a cell: its inputs restored, the cell itself as it was written,
    then its results handed back: ``outputs`` (what it assigns, or the names given with --out),
    the globals its functions set, and, if ``changed``, each input the cell changed. Each part is
    its own readable cell.

    Written as nbformat 4.5 JSON, not with nbformat's builders: this runs in the user's kernel at
    a cell's first submit, and importing nbformat there costs seconds (the server validates it)."""
    setup = ["# e31: this cell's inputs, as they were in the kernel that submitted it", *imports]
    if inputs:
        noted = "" if changed else ", note_changes=False"  # nothing to compare after the cell
        setup += ["from e31_jupyter.values import load_inputs", "", f"load_inputs(globals(){noted})"]
    # With --out (not ``changed``), only the names given come back.
    also = f", set_by_functions={list(set_by_functions)!r}" if set_by_functions and changed else ""
    also += "" if changed else ", changed=False"
    results = [
        "# e31: hand back what this cell assigned, and what it changed",
        "from e31_jupyter.values import save_outputs",
        "",
        f"save_outputs(globals(), {outputs!r}{also})",
    ]
    cells = [("\n".join(setup), SETUP_TAG), (source, CELL_TAG), ("\n".join(results), RESULTS_TAG)]
    return {
        "cells": [_code_cell(text, tag) for text, tag in cells],
        "metadata": {"kernelspec": {"name": kernel, "display_name": kernel, "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _code_cell(source: str, tag: str) -> dict:
    """A code cell as nbformat 4.5 writes it (an id of 8 hex digits, as nbformat makes them)."""
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": secrets.token_hex(4),
        "metadata": {"tags": [tag]},
        "outputs": [],
        "source": source,
    }
