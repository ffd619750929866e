"""What a submit should tell the user about a notebook before it waits in line: code cells that
do not parse, parameters the notebook does not set, or of another type than its default (or that
papermill could not pass at all), and files and modules next to it that its code reads or imports
but the job will not have.
Warnings, since both are read from the code and can be wrong; refusals only for what would
certainly fail.

nbformat and papermill are imported where they are used, not here: the magics import this module
into the user's kernel, where ``%load_ext e31_jupyter`` must take well under a second."""

from __future__ import annotations

import ast
import builtins
import difflib
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from e31_jupyter.core.cell_words import cell_words
from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.notebook.job_notebook import CELL_TAG, cell_names, code_run_by_magic, parse_cell, parse_cell_strictly

if TYPE_CHECKING:
    import nbformat


def notebook_warnings(
    notebook: nbformat.NotebookNode, kernel: str, parameters: dict, folder: Path | None, data: list[Path]
) -> list[str]:
    """What to tell the user at submit about the notebook's parameters and, when its folder is
    known, the files and modules next to it that it reads or imports but the job will not have."""
    warnings = syntax_warnings(notebook) + parameter_warnings(notebook, kernel, parameters)
    if folder is not None:
        sources = python_sources(notebook)
        warnings += left_behind_warnings(sources, folder, parameters, data)
        warnings += module_warnings(sources, folder, data)
    return warnings


def syntax_warnings(notebook: nbformat.NotebookNode) -> list[str]:
    """The first code cell of a Python notebook that does not parse as IPython reads it (magics
    and ! lines included): the job would wait its turn only to stop there. A cell tagged
    ``raises-exception`` is left out: papermill goes on past it. The cell is named as the job's
    failure would name it (``cell_words``)."""
    if _language(notebook) != "python":
        return []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        try:
            parse_cell_strictly(cell.source)
        except (RecursionError, MemoryError):
            continue  # nested too deep for this parser to tell
        except (SyntaxError, ValueError) as error:
            lineno = getattr(error, "lineno", None)  # a SyntaxError's; a ValueError has none
            where = f"line {lineno}: " if lineno else ""
            words = cell_words(notebook.cells, index)  # "cell 6 ('# train')", as a failure names it
            return [
                f"{words[0].upper()}{words[1:]} is not valid Python ({where}{getattr(error, 'msg', error)}): "
                "the job would stop there after its wait in line. Fix it and submit again."
            ]
    return []


def parameter_warnings(notebook: nbformat.NotebookNode, kernel: str, parameters: dict) -> list[str]:
    """What the user should hear about parameters the notebook does not declare (papermill runs
    them anyway, so a misspelt name would silently leave the default in place) or that are not
    of their default's type (``-p lr 0.1,0.2`` is text). Warnings rather than errors, since
    papermill's reading of a parameters cell can miss unusual assignments. Refuses parameters
    papermill could not pass at all."""
    if not parameters:
        return []
    translator = _translator(notebook, kernel)
    cell = next((c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])), None)
    job_cell = next((c for c in notebook.cells if CELL_TAG in c.metadata.get("tags", [])), None)
    if cell is None and job_cell is not None:
        return _cell_job_parameter_warnings(job_cell.source, parameters)
    if cell is None:
        return [
            "The notebook has no cell tagged 'parameters', so papermill puts the parameters in a "
            "cell at the top, where any later cell that sets the same names overwrites them. Tag "
            "the cell that sets their defaults 'parameters' (View > Cell Toolbar > Tags)."
        ]
    try:
        defaults = {parameter.name: parameter for parameter in translator.inspect(cell)}
    except NotImplementedError:  # papermill cannot read this language's parameters cells
        return []
    declared = list(defaults)
    unknown = [
        f"Parameter {name!r} is not set in the notebook's parameters cell{_did_you_mean(name, declared)} "
        f"It is passed all the same (papermill does), but the notebook may never read it; the "
        f"cell sets {', '.join(declared) or 'nothing'}."
        for name in parameters
        if name not in declared
    ]
    mistyped = [_type_warning(defaults[name], value) for name, value in parameters.items() if name in defaults]
    return unknown + [warning for warning in mistyped if warning]


SCALARS = {"bool": bool, "int": int, "float": float}  # the types a mistyped -p value is told of
KINDS = {bool: "True or False", int: "a whole number", float: "a number"}


def _type_warning(default, value) -> str | None:
    """A value the notebook would compute with as something else than its default: text where
    it sets a number (``-p lr 0.1,0.2``), a fraction where it sets a whole number."""
    expected = _default_type(default)
    if expected is None or value is None or _fits(value, expected):
        return None
    name, text = default.name, " (text)" if isinstance(value, str) else ""
    return (
        f"Parameter {name!r} is {value!r}{text}, where the parameters cell sets {name} = "
        f"{default.default} ({KINDS[expected]}).{_type_hint(name, value, expected)}"
    )


def _default_type(default) -> type | None:
    """The type a parameters cell gives a name: its annotation, else its literal's (None when
    the cell computes it)."""
    if default.inferred_type_name in SCALARS:
        return SCALARS[default.inferred_type_name]
    try:
        literal = ast.literal_eval(default.default)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return type(literal) if type(literal) in SCALARS.values() else None


def _fits(value, expected: type) -> bool:
    """Whether the notebook computes with ``value`` as with its default: a whole number where it
    sets a fraction, 0 or 1 for a flag, but not True for a count."""
    if expected is bool:
        return isinstance(value, int)
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) if expected is float else isinstance(value, expected)


def _type_hint(name: str, value, expected: type) -> str:
    several = value.replace(",", " ").split() if isinstance(value, str) and expected is not bool else []
    if len(several) > 1 and all(_is_number(part) for part in several):
        return f" For one job per value, submit with --sweep {name}={','.join(several)}."
    return f" Give {KINDS[expected]}."


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


IPYTHON_NAMES = ("get_ipython", "display")  # what IPython gives every kernel, on top of Python's builtins


def _cell_job_parameter_warnings(source: str, parameters: dict) -> list[str]:
    """A ``%%e31`` cell's job (resubmitted with parameters) has no parameters cell: a parameter
    takes the place of the value of that name captured from the kernel, so the names it can
    change are those the cell reads."""
    try:
        reads = [name for name in cell_names(source).reads if not hasattr(builtins, name) and name not in IPYTHON_NAMES]
    except (SyntaxError, ValueError):  # the job will say so when it runs
        return []
    return [
        f"Parameter {name!r} is not a name the cell reads{_did_you_mean(name, reads)} It is passed all "
        f"the same, but the cell may never read it; the cell reads {', '.join(reads) or 'nothing'}."
        for name in parameters
        if name not in reads
    ]


def _translator(notebook: nbformat.NotebookNode, kernel: str):
    """papermill's writer of parameters for the notebook's language."""
    from papermill.exceptions import PapermillException
    from papermill.translators import papermill_translators

    language = _language(notebook)
    if language is None:
        raise InvalidRequest(
            "The notebook does not say what language it is in (metadata language_info or "
            "kernelspec.language), which papermill needs to pass it parameters. Open and save it "
            "in Jupyter, or submit it without parameters."
        )
    try:
        return papermill_translators.find_translator(kernel, language)
    except PapermillException:
        raise InvalidRequest(
            f"papermill cannot pass parameters to a notebook in {language!r} (kernel {kernel!r}). "
            "Submit it without parameters, or set the values in the notebook."
        ) from None


def _did_you_mean(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    return f": did you mean {close[0]!r}?" if close else "."


def python_sources(notebook: nbformat.NotebookNode) -> list[str]:
    """The sources of a Python notebook's code cells; none for another language."""
    if _language(notebook) != "python":
        return []
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def left_behind_warnings(sources: list[str], folder: Path, parameters: dict, data: list[Path]) -> list[str]:
    """A warning naming files in ``folder`` that the Python code ``sources`` or the parameters
    name by a relative path but that the job will not have: it runs in a folder of its own,
    holding only its data (each copied in by name). Caught at submit, not hours later when the
    job starts and fails."""
    given = {path.name for path in data}
    missing = [
        name
        for name in dict.fromkeys(_relative_paths(sources, parameters))
        if Path(name).parts[0] not in given and _is_file(folder / name)
    ]
    if not missing:
        return []
    shown = ", ".join(repr(name) for name in missing[:5]) + (
        f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    )
    flags = " ".join(f"--data {shlex.quote(top)}" for top in dict.fromkeys(Path(name).parts[0] for name in missing))
    return [
        f"The job will not have {shown}, next to the notebook and named by it: give "
        f"{'it' if len(missing) == 1 else 'them'} as data ({flags}) if the notebook reads "
        f"{'it' if len(missing) == 1 else 'them'}. A job runs in a folder of its own, holding only its data."
    ]


def module_warnings(sources: list[str], folder: Path, data: list[Path], modules: Sequence[str] = ()) -> list[str]:
    """A warning naming modules in ``folder`` (``utils.py``, a package ``models/``) that the Python
    code ``sources`` imports, or that ``modules`` names (where a cell's captured values come
    from), but that the job will not have: the notebook's kernel imports them from its folder,
    and the job runs in a folder of its own. One that is installed too is not named."""
    given = {path.name for path in data}
    imported = [name for source in sources for tree in _syntax_trees(source) for name in _imported(tree)]
    names = dict.fromkeys([*imported, *modules])
    found = {name: where for name in names if (where := _module_file(folder, name)) and where.rstrip("/") not in given}
    installed = _installed(list(found))
    missing = {name: where for name, where in found.items() if name not in installed}
    if not missing:
        return []
    one = len(missing) == 1
    files = ", ".join(missing.values())
    flags = " ".join(f"--data {shlex.quote(where.rstrip('/'))}" for where in missing.values())
    return [
        f"The job will not have the module{'' if one else 's'} {', '.join(missing)} ({files}, next to the "
        f"notebook), which the code uses: give {'it' if one else 'them'} as data ({flags}), and the job "
        f"imports {'it' if one else 'them'} from its own folder. A job runs in a folder of its own, holding "
        "only its data."
    ]


def _imported(tree: ast.Module):
    """The top-level names of the modules that the code imports (not relative imports)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def _module_file(folder: Path, name: str) -> str | None:
    """What in ``folder`` Python would import as ``name``: ``name.py``, or a package ``name/``."""
    try:
        if (folder / f"{name}.py").is_file():
            return f"{name}.py"
        package = folder / name
        if package.is_dir() and any(package.glob("*.py")):
            return f"{name}/"
    except OSError:
        pass
    return None


def _installed(names: list[str]) -> set[str]:
    """Those of ``names`` that this Python imports from a folder holding nothing else: the
    installed ones (an editable install's too), which a job has wherever it runs. Asked of a
    new Python, since this one has its own folder on ``sys.path``."""
    if not names:
        return set()
    ask = "import sys, importlib.util as u\nfor n in sys.argv[1:]:\n    if u.find_spec(n): print(n)"
    with tempfile.TemporaryDirectory() as empty:
        try:
            found = subprocess.run(
                [sys.executable, "-c", ask, *names], cwd=empty, capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError):
            return set()  # unknown: name them all, it is only a warning
    return set(found.stdout.split())


def _relative_paths(sources: list[str], parameters: dict):
    """Strings in the code and in the parameters that could be relative paths of files the code
    reads (not ones it writes)."""
    trees = [tree for source in sources for tree in _syntax_trees(source)]
    written = {text for tree in trees for text in _written_strings(tree)}
    texts = [value for value in parameters.values() if isinstance(value, str)]
    texts += [text for tree in trees for text in _string_constants(tree) if text not in written]
    for text in texts:
        if 0 < len(text) <= 255 and "\n" not in text and "\0" not in text:
            path = Path(text)
            if path.parts and not path.is_absolute() and not text.startswith("~") and ".." not in path.parts:
                yield text


def _syntax_trees(source: str) -> list[ast.Module]:
    """The cell's syntax tree, and those of the code that its magics run (``%time x = f()``,
    ``%%timeit`` cells): IPython passes that code to the magic as a string."""
    trees = [parse_cell(source)]
    for tree in trees:  # grows as magics inside magics are found
        for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
            code = code_run_by_magic(call)
            if code is not None:
                trees.append(parse_cell(code))
    return trees


def _string_constants(tree: ast.Module) -> list[str]:
    strings = [
        (node.lineno, node.col_offset, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]
    return [value for _, _, value in sorted(strings, key=lambda found: found[:2])]


_WRITERS = ("to_", "save", "write", "dump", "mkdir", "makedirs", "imsave")


def _written_strings(tree: ast.Module):
    """Strings given to calls that write a file: ``open(name, "w")``, ``df.to_csv(name)``,
    ``fig.savefig(name)``, ``torch.save(model, name)``, ``Path(name).write_text(...)``."""
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
        if name == "open" and not set(_open_mode(call)) & set("wax"):
            continue
        if name == "open" or name.startswith(_WRITERS):
            yield from _string_arguments(call)
            if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
                yield from _string_arguments(call.func.value)  # Path("x").write_text(...)


def _open_mode(call: ast.Call) -> str:
    modes = call.args[1:2] + [k.value for k in call.keywords if k.arg == "mode"]
    return next((m.value for m in modes if isinstance(m, ast.Constant) and isinstance(m.value, str)), "r")


def _string_arguments(call: ast.Call):
    for argument in call.args + [k.value for k in call.keywords]:
        if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
            yield argument.value


def _language(notebook: nbformat.NotebookNode) -> str | None:
    from papermill.utils import nb_language

    try:
        return nb_language(notebook)
    except ValueError:
        return None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, say
        return False
