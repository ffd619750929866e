"""The request options, declared once (e31_jupyter.request_options): e31 submit, resubmit,
update and %%e31 submit take them from there, spelled the same, and make the same request of them."""

import argparse
import ast
import os
from pathlib import Path

import pytest

import e31_jupyter
from e31_jupyter import request_options
from e31_jupyter.cli.parser import build_parser
from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.magics import _cell_parser, _request
from e31_jupyter.request_options import (
    CELL,
    CELL_OPTIONS,
    OPTION_LIST,
    OPTIONS,
    RESUBMIT,
    RESUBMIT_OPTIONS,
    SUBMIT,
    SUBMIT_OPTIONS,
    UPDATE,
    UPDATE_OPTIONS,
    read_argv,
    request_changes,
    submit_bodies,
    update_changes,
)

PACKAGE = Path(e31_jupyter.__file__).parent


def _subparser(name: str) -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def _declared_flags(option) -> set[str]:
    return {*option.flags, *([option.clear.flag] if option.clear else [])}


def test_each_option_is_declared_once():
    flags = [flag for option in OPTION_LIST for flag in _declared_flags(option)]
    assert len(flags) == len(set(flags))
    assert len(OPTIONS) == len(OPTION_LIST)
    for use in (SUBMIT_OPTIONS, RESUBMIT_OPTIONS, UPDATE_OPTIONS, CELL_OPTIONS):
        assert len(use) == len(set(use)) and set(use) <= set(OPTIONS)


def test_no_interface_declares_a_request_option_of_its_own():
    """The CLI and the magics add no request option with add_argument: they take them from
    request_options, and the magics nothing from the CLI's arguments. (Short flags are not
    compared: e31 logs -f is --follow.)"""
    request_flags = {flag for option in OPTION_LIST for flag in _declared_flags(option) if flag.startswith("--")}
    for path in [*sorted((PACKAGE / "cli").glob("*.py")), PACKAGE / "magics.py"]:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                given = {arg.value for arg in node.args if isinstance(arg, ast.Constant)}
                if given == {"--name"} and any(k.arg == "metavar" and k.value.value == "GLOB" for k in node.keywords):
                    continue  # e31 jobs --name GLOB: which jobs to list, not a request's
                assert not given & request_flags, f"{path.name}:{node.lineno} declares {given & request_flags}"
    magics = ast.parse((PACKAGE / "magics.py").read_text())
    imported = {
        f"{node.module}.{alias.name}"
        for node in ast.walk(magics)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert not {
        name for name in imported if name.startswith("e31_jupyter.cli.arguments") or name.endswith(".arguments")
    }


@pytest.mark.parametrize(
    "parser, flags, use",
    [
        (lambda: _subparser("submit"), SUBMIT_OPTIONS, SUBMIT),
        (lambda: _subparser("resubmit"), RESUBMIT_OPTIONS, RESUBMIT),
        (lambda: _subparser("update"), UPDATE_OPTIONS, UPDATE),
        (_cell_parser, CELL_OPTIONS, CELL),
    ],
    ids=["submit", "resubmit", "update", "cell"],
)
def test_each_parser_takes_its_options_spelled_as_declared(parser, flags, use):
    taken = _flags(parser())
    for name in flags:
        option = OPTIONS[name]
        assert set(option.flags) <= taken
        if use == UPDATE and option.clear:
            assert option.clear.flag in taken
    other_request_flags = {flag for o in OPTION_LIST if o.name not in flags for flag in _declared_flags(o)}
    if use != UPDATE:
        other_request_flags |= {o.clear.flag for o in OPTION_LIST if o.clear}
    assert not taken & other_request_flags


def test_the_shared_options_read_the_same_in_every_parser():
    """--gpus, run times, --deadline, --after, --team: the same field and value in each."""
    argv = ["--gpus", "2", "--max-runtime", "6h", "--expected-runtime", "90", "--deadline", "tomorrow", "8am",
            "--team", "t", "--after", "a", "--after", "b"]  # fmt: skip
    fields = {"gpus": 2, "max_runtime": "6h", "expected_runtime": 90, "deadline": "tomorrow 8am", "team": "t",
              "after": ["a", "b"]}  # fmt: skip
    submit = submit_bodies(build_parser().parse_args(read_argv(["submit", "/nb/train.ipynb", *argv])))
    assert submit == [{"path": "/nb/train.ipynb", **fields}]
    assert request_changes(build_parser().parse_args(read_argv(["resubmit", "last", *argv]))) == fields
    assert update_changes(build_parser().parse_args(read_argv(["update", "j", *argv]))) == fields
    assert _request(_cell_parser().parse_args(read_argv(argv))) == fields


def test_the_kernel_is_named_with_k_or_kernel_as_papermill_does_and_is_no_update():
    submit = submit_bodies(build_parser().parse_args(["submit", "/nb/r.ipynb", "-k", "ir"]))
    assert submit == [{"path": "/nb/r.ipynb", "kernel": "ir"}]
    assert request_changes(build_parser().parse_args(["resubmit", "last", "--kernel", "python3"])) == {
        "kernel": "python3"
    }
    assert _request(_cell_parser().parse_args(["--kernel", "py311"])) == {"gpus": 0, "kernel": "py311"}
    with pytest.raises(SystemExit):  # a queued job's kernel is not changed in place: resubmit it
        build_parser().parse_args(["update", "j", "--kernel", "python3"])


def test_a_full_submit_line_makes_the_body_it_always_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["submit", "nb.ipynb", "--gpus", "2", "--max-runtime", "6h", "--expected-runtime", "90", "--deadline",
            "tomorrow", "8am", "--name", "n", "--team", "t", "--after", "a", "--after", "b", "--output", "*.pt",
            "--report", "pdf", "-p", "lr=0.1", "-p", "e", "3", "-r", "tag", "001", "-y", "{a: [1]}", "--data", "d1",
            "--image", "img", "--memory", "1g", "--cpus", "0.5"]  # fmt: skip
    assert submit_bodies(build_parser().parse_args(read_argv(argv))) == [
        {
            "path": os.path.join(tmp_path, "nb.ipynb"), "gpus": 2, "max_runtime": "6h", "expected_runtime": 90,
            "deadline": "tomorrow 8am", "name": "n", "team": "t", "after": ["a", "b"], "outputs": ["*.pt"],
            "reports": ["pdf"], "parameters": {"a": [1], "e": 3, "lr": 0.1, "tag": "001"},
            "data": [os.path.join(tmp_path, "d1")], "image": "img", "memory": "1g", "cpus": 0.5,
        }
    ]  # fmt: skip


def test_a_resubmit_takes_only_what_is_given():
    parser = build_parser()
    assert request_changes(parser.parse_args(["resubmit", "last"])) == {}
    argv = ["resubmit", "last", "--gpus", "1", "-p", "x", "1", "--deadline", "+6h", "--report", "none", "--output", "a",
            "--after", "j"]  # fmt: skip
    assert request_changes(parser.parse_args(argv)) == {
        "gpus": 1, "parameters": {"x": 1}, "deadline": "+6h", "reports": ["none"], "outputs": ["a"], "after": ["j"],
    }  # fmt: skip
    with pytest.raises(SystemExit):  # not a resubmit's
        parser.parse_args(["resubmit", "last", "--data", "x"])


def test_an_update_changes_what_is_given_and_clears_with_no():
    parser = build_parser()
    argv = ["update", "j", "--gpus", "2", "--max-runtime", "1h", "--no-deadline", "--no-after", "--name", "n",
            "--team", "t", "--expected-runtime", "5"]  # fmt: skip
    assert update_changes(parser.parse_args(argv)) == {
        "gpus": 2, "max_runtime": "1h", "expected_runtime": 5, "deadline": None, "name": "n", "team": "t", "after": [],
    }  # fmt: skip
    argv = ["update", "j", "k", "--deadline", "tomorrow", "8am", "--after", "a", "--no-expected-runtime"]
    assert update_changes(parser.parse_args(read_argv(argv))) == {
        "deadline": "tomorrow 8am", "after": ["a"], "expected_runtime": None,
    }  # fmt: skip
    with pytest.raises(InvalidRequest, match="Say what to change"):
        update_changes(parser.parse_args(["update", "j"]))
    with pytest.raises(SystemExit):  # either one, not both
        parser.parse_args(["update", "j", "--deadline", "+1h", "--no-deadline"])


def test_a_cell_asks_for_no_gpu_unless_told_and_its_name_is_chosen_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _request(_cell_parser().parse_args([])) == {"gpus": 0}
    argv = ["--gpus", "1", "--max-runtime", "2h", "--expected-runtime", "60", "--deadline", "08:00", "--after", "a",
            "--name", "n", "--team", "t", "--in", "a,b", "--out", "c", "--output", "*.csv", "--report", "html",
            "--data", "dd", "--image", "i", "--memory", "2g", "--cpus", "3", "--new", "--wait"]  # fmt: skip
    args = _cell_parser().parse_args(argv)
    assert _request(args) == {
        "gpus": 1, "max_runtime": "2h", "expected_runtime": 60, "deadline": "08:00", "after": ["a"], "team": "t",
        "outputs": ["*.csv"], "reports": ["html"], "data": [os.path.join(tmp_path, "dd")], "image": "i",
        "memory": "2g", "cpus": 3.0,
    }  # fmt: skip
    assert (args.name, args.inputs, args.returns, args.new, args.wait) == ("n", "a,b", "c", True, True)


def test_each_use_names_its_default_in_the_help():
    gpus = OPTIONS["--gpus"]
    assert gpus.help_for(SUBMIT) == "GPUs to hold; default: 0"
    assert gpus.help_for(RESUBMIT) == "GPUs to hold; default: the earlier job's"
    assert gpus.help_for(UPDATE) == "GPUs to hold"
    assert gpus.help_for(CELL) is None
    assert OPTIONS["--output"].help_for(SUBMIT) == "files to collect (repeatable; default: all it wrote)"
    assert OPTIONS["--parameters-yaml"].help_for(RESUBMIT) == (
        "parameters as YAML, for lists and mappings: -y '{layers: [64, 128]}'"
    )
    resubmit_help = " ".join(_subparser("resubmit").format_help().split())
    assert "--max-runtime DUR stop it after this: 90m, 6h, 1d or seconds; default: the earlier job's" in resubmit_help
    assert request_options.JOB_HELP in " ".join(_subparser("status").format_help().split())
