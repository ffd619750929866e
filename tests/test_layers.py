"""The package's layers, as docs/ARCHITECTURE.md draws them: imports point down only."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "e31_jupyter"
# Lower number: lower layer. Everything at the top of the package (server/, cli/, client, magics,
# widgets, values) is an interface.
LAYERS = {"core": 0, "execution": 1, "notebook": 2, "service": 3}
INTERFACES = 4


def layer_of(module: str) -> int:
    parts = module.split(".")
    return LAYERS.get(parts[1], INTERFACES) if len(parts) > 1 else INTERFACES


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("e31_jupyter"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("e31_jupyter"))
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)


def test_imports_point_down_only():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        for imported in imports_of(path):
            if imported != "e31_jupyter" and layer_of(imported) > layer_of(name):
                upward.append(f"{name} imports {imported}")
    assert upward == []


def test_the_core_does_no_io():
    io_modules = {"os", "subprocess", "sqlite3", "socket", "shutil", "requests", "psutil", "asyncio", "threading"}
    found = []
    for path in sorted((PACKAGE / "core").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in io_modules]
    assert found == []


def test_the_layer_rule_would_catch_an_upward_import():
    assert layer_of("e31_jupyter.service.store") > layer_of("e31_jupyter.core.policy")
    assert layer_of("e31_jupyter.magics") > layer_of("e31_jupyter.service.queue")


def methods_per_class() -> dict[str, int]:
    counts = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = [b for b in node.body if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))]
                counts[f"{module_name(path)}.{node.name}"] = len(methods)
    return counts


def test_no_class_has_more_than_30_methods():
    """A class that outgrows 30 methods holds more than one concern: split it (issue 37)."""
    counts = methods_per_class()
    assert counts["e31_jupyter.service.store.Store"] > 20  # the count sees methods at all
    assert {name: n for name, n in counts.items() if n > 30} == {}
