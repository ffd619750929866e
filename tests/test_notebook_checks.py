"""What a submit warns about: parameters the notebook does not set (and ones papermill cannot
pass), and files and modules next to it that its code reads or imports but the job will not have."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.notebook.checks import (
    left_behind_warnings,
    module_warnings,
    parameter_warnings,
    python_sources,
    syntax_warnings,
)
from e31_jupyter.notebook.job_notebook import cell_notebook


def _notebook(language: str, parameters_cell: str) -> nbformat.NotebookNode:
    cell = new_code_cell(parameters_cell, metadata={"tags": ["parameters"]})
    return new_notebook(cells=[cell], metadata={"language_info": {"name": language}})


def test_parameters_the_cell_declares_are_not_warned_about():
    nb = _notebook("python", "epochs = 10  # how long\nlr: float = 0.1")
    assert parameter_warnings(nb, "python3", {"epochs": 3, "lr": 0.5}) == []
    assert parameter_warnings(nb, "python3", {}) == []


def test_an_unknown_name_is_warned_about_with_the_closest_declared_one():
    nb = _notebook("python", "learning_rate = 0.1\nbatch = 8")
    (warning,) = parameter_warnings(nb, "python3", {"learning_rte": 0.5})
    assert "'learning_rte'" in warning and warning.endswith("the cell sets learning_rate, batch.")
    assert ": did you mean 'learning_rate'?" in warning


def test_a_value_of_another_type_than_its_default_is_warned_about_with_what_to_give():
    nb = _notebook(
        "python", "lr = 0.1\nepochs = 10\nverbose = False\nname = 'run'\nsteps: int = total // 8\nlimit = None"
    )
    fine = {"lr": 1, "epochs": 3, "verbose": 1, "name": 5, "steps": 4, "limit": "anything"}
    assert parameter_warnings(nb, "python3", fine) == []
    assert parameter_warnings(nb, "python3", {"lr": None}) == []
    warnings = parameter_warnings(nb, "python3", {"lr": "0.1,0.01", "epochs": 2.5, "verbose": "yes", "steps": "x"})
    assert warnings == [
        "Parameter 'lr' is '0.1,0.01' (text), where the parameters cell sets lr = 0.1 (a number). "
        "For one job per value, submit with --sweep lr=0.1,0.01.",
        "Parameter 'epochs' is 2.5, where the parameters cell sets epochs = 10 (a whole number). Give a whole number.",
        "Parameter 'verbose' is 'yes' (text), where the parameters cell sets verbose = False (True or False). "
        "Give True or False.",
        "Parameter 'steps' is 'x' (text), where the parameters cell sets steps = total // 8 (a whole number). "
        "Give a whole number.",
    ]
    (warning,) = parameter_warnings(nb, "python3", {"lr": "fast"})
    assert warning.endswith("Give a number.")
    (warning,) = parameter_warnings(nb, "python3", {"epochs": True})
    assert warning.startswith("Parameter 'epochs' is True,")


def test_a_language_whose_parameters_cell_papermill_cannot_read_gets_no_warnings():
    assert parameter_warnings(_notebook("R", "epochs <- 10"), "ir", {"anything": 1}) == []


def test_parameters_papermill_could_not_pass_are_refused():
    with pytest.raises(InvalidRequest, match="cannot pass parameters to a notebook in 'cobol'"):
        parameter_warnings(_notebook("cobol", "01 EPOCHS PIC 9."), "gnucobol", {"epochs": 3})
    assert parameter_warnings(_notebook("cobol", "01 EPOCHS PIC 9."), "gnucobol", {}) == []


def test_parameters_for_a_notebook_that_names_no_language_are_refused():
    nb = new_notebook(cells=[new_code_cell("x = 1", metadata={"tags": ["parameters"]})])
    with pytest.raises(InvalidRequest, match="does not say what language"):
        parameter_warnings(nb, "python3", {"x": 2})


def _reader(folder, source: str) -> nbformat.NotebookNode:
    (folder / "data").mkdir()
    (folder / "data" / "train.csv").write_text("a,b\n")
    (folder / "labels.txt").write_text("cat\n")
    (folder / "outputs").mkdir()  # a folder is not taken for a file the notebook reads
    return new_notebook(cells=[new_code_cell(source)], metadata={"language_info": {"name": "python"}})


def test_files_beside_the_notebook_that_the_job_will_not_have_are_named(tmp_path):
    nb = _reader(
        tmp_path, "%matplotlib inline\nrows = open('data/train.csv').read()\nlabels = 'labels.txt'\nout = 'outputs'"
    )
    (warning,) = left_behind_warnings(python_sources(nb), tmp_path, {}, [])
    assert warning.startswith("The job will not have 'data/train.csv', 'labels.txt', next to the notebook")
    assert "give them as data (--data data --data labels.txt)" in warning
    (warning,) = left_behind_warnings(python_sources(nb), tmp_path, {}, [tmp_path / "data"])
    assert "'labels.txt'," in warning and "train.csv" not in warning and "as data (--data labels.txt)" in warning
    assert left_behind_warnings(python_sources(nb), tmp_path, {}, [tmp_path / "data", tmp_path / "labels.txt"]) == []


def test_a_name_the_shell_would_split_is_quoted_in_the_data_it_suggests(tmp_path):
    (tmp_path / "my rows.csv").write_text("a\n")
    nb = new_notebook(cells=[new_code_cell("open('my rows.csv')")], metadata={"language_info": {"name": "python"}})
    (warning,) = left_behind_warnings(python_sources(nb), tmp_path, {}, [])
    assert "give it as data (--data 'my rows.csv')" in warning


def test_parameters_naming_files_left_behind_are_warned_about_too(tmp_path):
    nb = _reader(tmp_path, "print('no paths here', '/etc/hostname', '../labels.txt', '.', './', '', '~/x')")
    assert left_behind_warnings(python_sources(nb), tmp_path, {}, []) == []
    (warning,) = left_behind_warnings(python_sources(nb), tmp_path, {"table": "data/train.csv", "n": 3}, [])
    assert "'data/train.csv'" in warning


def test_only_python_code_is_read_for_paths():
    assert python_sources(_notebook("R", "rows <- read.csv('labels.txt')")) == []
    assert python_sources(_notebook("python", "rows = open('labels.txt')")) == ["rows = open('labels.txt')"]


def test_code_that_does_not_parse_names_nothing(tmp_path):
    assert (
        left_behind_warnings(python_sources(_reader(tmp_path, "def broken(:\n  'labels.txt'")), tmp_path, {}, []) == []
    )


def test_files_the_notebook_writes_are_not_taken_for_inputs(tmp_path):
    written = "\n".join([
        "open('data/train.csv', 'w').write('a')", "df.to_csv('labels.txt')", "fig.savefig(fname='data/train.csv')",
        "torch.save(model, 'labels.txt')", "Path('labels.txt').write_text('x')", "open('labels.txt', mode='a')",
    ])  # fmt: skip
    assert left_behind_warnings(python_sources(_reader(tmp_path, written)), tmp_path, {}, []) == []
    (tmp_path / "other").mkdir()
    nb = _reader(tmp_path / "other", "open('labels.txt', 'r+').read()\nopen('data/train.csv').read()")
    (warning,) = left_behind_warnings(python_sources(nb), tmp_path / "other", {}, [])
    assert "have 'labels.txt', 'data/train.csv'," in warning


def test_code_that_magics_run_is_read_too(tmp_path):
    timed = "%time rows = open('data/train.csv').read()\n%time df.to_csv('labels.txt')"
    (warning,) = left_behind_warnings(python_sources(_reader(tmp_path, timed)), tmp_path, {}, [])
    assert "have 'data/train.csv', next to" in warning  # and not labels.txt, which it writes
    cell = "%%timeit\nlabels = open('labels.txt').read()"
    (warning,) = left_behind_warnings(python_sources(_notebook("python", cell)), tmp_path, {}, [])
    assert "have 'labels.txt', next to" in warning
    not_code = "%pip install -q 'labels.txt >= 1'\n%config Application.log_level = 'labels.txt'"
    assert left_behind_warnings(python_sources(_notebook("python", not_code)), tmp_path, {}, []) == []


def test_a_cell_jobs_parameters_are_the_names_the_cell_reads():
    nb = nbformat.from_dict(
        cell_notebook(
            "%time result = model(learning_rate) * scale", [], ["learning_rate", "scale"], ["result"], "python3"
        )
    )
    nbformat.validate(nb)  # written by hand as nbformat 4.5 JSON (job_notebook.py): a valid notebook
    assert [c.metadata.tags for c in nb.cells] == [["e31-setup"], ["e31-cell"], ["e31-results"]]
    assert len({c.id for c in nb.cells}) == 3
    assert parameter_warnings(nb, "python3", {"learning_rate": 0.5, "scale": 2}) == []  # no parameters cell needed
    (warning,) = parameter_warnings(nb, "python3", {"learning_rte": 0.5})
    assert warning.startswith("Parameter 'learning_rte' is not a name the cell reads: did you mean 'learning_rate'?")
    assert warning.endswith("the cell reads model, learning_rate, scale.") and "tagged" not in warning


def _modules_beside(folder):
    (folder / "mylib.py").write_text("def double(x):\n    return 2 * x\n")
    (folder / "models").mkdir()
    (folder / "models" / "net.py").write_text("SIZE = 3\n")  # a package without __init__.py imports too
    (folder / "json.py").write_text("")  # installed too: the job has one wherever it runs
    (folder / "notes").mkdir()  # a folder without Python files is not a package
    (folder / "notes" / "todo.txt").write_text("x")


def test_modules_beside_the_notebook_that_the_job_will_not_have_are_named(tmp_path):
    _modules_beside(tmp_path)
    code = "import mylib as m, os.path\nfrom models.net import SIZE\nimport json\nfrom . import notes\nimport notes"
    (warning,) = module_warnings(python_sources(_notebook("python", code)), tmp_path, [])
    assert warning.startswith(
        "The job will not have the modules mylib, models (mylib.py, models/, next to the notebook)"
    )
    assert "give them as data (--data mylib.py --data models)" in warning
    (warning,) = module_warnings(python_sources(_notebook("python", code)), tmp_path, [tmp_path / "models"])
    assert "the module mylib (mylib.py, next" in warning and "give it as data (--data mylib.py)" in warning
    assert (
        module_warnings(
            python_sources(_notebook("python", code)), tmp_path, [tmp_path / "models", tmp_path / "mylib.py"]
        )
        == []
    )
    assert module_warnings(python_sources(_notebook("python", "import mylib")), tmp_path / "notes", []) == []


def test_a_module_a_cells_values_come_from_is_named_though_the_cell_does_not_import_it(tmp_path):
    _modules_beside(tmp_path)
    (warning,) = module_warnings(["y = double(3)"], tmp_path, [], ["mylib", "numpy", "builtins"])
    assert "the module mylib (mylib.py, next to the notebook)" in warning
    assert module_warnings(["y = double(3)"], tmp_path, [], ["numpy", "builtins"]) == []


def test_the_first_code_cell_that_does_not_parse_is_named():
    cells = [
        new_code_cell("%matplotlib inline\n!pip list\nimport os"),  # IPython's syntax parses
        nbformat.v4.new_markdown_cell("x = [1, 2"),  # not code
        new_code_cell("1 / 0 (", metadata={"tags": ["raises-exception"]}),  # papermill goes on past it
        new_code_cell("%%bash\nls (("),  # the bash cell's body is not Python
        new_code_cell("-" * 100_000 + "1"),  # too deep for the parser to tell: the job will say
        new_code_cell("# train\nx = [1, 2\nprint(x)"),
        new_code_cell("def f(:\n    pass"),
    ]
    nb = new_notebook(cells=cells, metadata={"language_info": {"name": "python"}})
    (warning,) = syntax_warnings(nb)
    assert warning.startswith(
        "Cell 6 ('# train') is not valid Python (line 2: '[' was never closed): the job would stop"
    )
    assert syntax_warnings(new_notebook(cells=cells[:5], metadata={"language_info": {"name": "python"}})) == []
    assert syntax_warnings(new_notebook(cells=cells, metadata={"language_info": {"name": "R"}})) == []
