"""The options of a job's request, declared once: ``e31 submit``, ``e31 resubmit``, ``e31 update``
and the magics (``%%e31 submit``; ``%e31 submit-notebook``, ``resubmit`` and ``update`` take the
CLI's) add the ones they take to their parsers from here, and make their request from what was
given with the same declarations.

Each ``Option`` says its flags, how argparse reads it, its help, and the field of the submit (or
update) body it fills. Where a command says an option otherwise, the option says so too
(``helps``, ``defaults``): the words of each command's help are those it always had.

- ``add(parser, flags, use)``: those options, in that order, as ``use`` (one of ``SUBMIT``,
  ``RESUBMIT``, ``UPDATE``, ``RESUME``, ``CELL``) takes them.
- ``request_body(args, flags, use)``: the fields they were given; ``submit_body``,
  ``submit_bodies``, ``request_changes`` and ``update_changes`` for the commands' own.
- ``read_argv``: a command line as the parsers take it (``-p lr=0.1``, ``--deadline tomorrow 8am``).
"""

from __future__ import annotations

import argparse
import builtins
import dataclasses
import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e31_jupyter.core import sweep
from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.job import is_day_and_clock

# Who takes the options: each reads some of them its own way (its help, its defaults).
SUBMIT = "e31 submit"
RESUBMIT = "e31 resubmit"  # what is not given is the earlier job's
UPDATE = "e31 update"  # what is not given stays; some may be cleared (--no-deadline)
RESUME = "e31 resume"  # what is not given is the job's
CELL = "%%e31 submit"

JOB_HELP = "a job's id, or enough of it to be unique (its part after the dash will do), or `last`: your newest job"
PARAMETERS = "parameters"  # the field -p, -r, -y and -f fill together (``given_parameters``)


def parameter_value(text: str):
    """A ``-p NAME VALUE`` value typed as papermill's CLI types it: bool, None, int, float or str."""
    literals = {"True": True, "False": False, "None": None}
    if text in literals:
        return literals[text]
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def duration(text: str) -> int | str:
    """A run time as given: whole seconds become a number, "90m" or "6h" go to the server as is."""
    return int(text) if text.isdigit() else text


def _absolute(paths: list[str]) -> list[str]:
    return [os.path.abspath(path) for path in paths]


@dataclass(frozen=True)
class Clear:
    """``e31 update``'s way to take a value away: ``--no-deadline`` sets the field to ``value``."""

    flag: str
    help: str
    value: Any = None


@dataclass(frozen=True)
class Option:
    """One request option. ``help`` is as ``e31 submit`` says it; ``{default}`` in it is where
    the default is named ("; default: 0", "; default: the earlier job's" for a resubmit)."""

    flags: tuple[str, ...]
    help: str
    field: str | None = None  # the body field it fills; None: not one of its own (--sweep)
    usual: str = ""  # the default ``{default}`` names for a submit
    type: Callable[[str], Any] | None = None
    metavar: str | tuple[str, ...] | None = None
    nargs: int | str | None = None
    choices: tuple[str, ...] | None = None
    action: str | builtins.type[argparse.Action] | None = None  # a name, or a class (--x/--no-x)
    dest: str | None = None
    to_field: Callable[[Any], Any] | None = None  # the value as the body carries it, where not as given
    # Where a use says it otherwise (None: no help), or has a default of its own.
    helps: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    clear: Clear | None = None  # how ``e31 update`` takes it away, if it may

    @property
    def name(self) -> str:
        return self.flags[-1]

    @property
    def attribute(self) -> str:
        """Where argparse puts it."""
        return self.dest or self.name.lstrip("-").replace("-", "_")

    def help_for(self, use: str) -> str | None:
        if use in self.helps:
            return self.helps[use]
        if "{default}" not in self.help:
            return self.help
        named = {RESUBMIT: "the earlier job's", RESUME: "the job's", UPDATE: "", CELL: ""}.get(use, self.usual)
        return self.help.replace("{default}", f"; default: {named}" if named else "")


_DEADLINE_WORDS = "ISO 8601, +6h, 08:00, 8am or tomorrow 8am"

OPTION_LIST: tuple[Option, ...] = (
    Option(
        ("-p", "--parameters"),
        "a papermill parameter (-p lr 0.1, or -p lr=0.1); VALUE typed as papermill does (int, float, True/False/None, str)",
        field=PARAMETERS, nargs=2, action="append", metavar=("NAME", "VALUE"),
    ),
    Option(
        ("-r", "--parameters-raw"),
        "a parameter whose VALUE is passed as text, untyped (-r tag 001)",
        field=PARAMETERS, nargs=2, action="append", metavar=("NAME", "VALUE"),
    ),
    Option(
        ("-y", "--parameters-yaml"),
        "parameters as YAML, for lists and mappings: -y '{layers: [64, 128]}'",
        field=PARAMETERS, action="append", metavar="YAML",
    ),
    Option(
        ("-f", "--parameters-file"),
        "parameters from a YAML or JSON file; -f, -y, -p, -r may be mixed, a later kind winning, as in papermill",
        field=PARAMETERS, action="append", metavar="FILE", dest="parameters_files",
    ),
    Option(
        ("--gpus",), "GPUs to hold{default}", field="gpus", usual="0", type=int,
        helps={CELL: None}, defaults={CELL: 0},
    ),
    Option(
        ("--max-runtime",), "stop it after this: 90m, 6h, 1d or seconds{default}", field="max_runtime",
        type=duration, metavar="DUR", helps={CELL: None},
    ),
    Option(
        ("--expected-runtime",), "how long it should take{default}", field="expected_runtime",
        type=duration, metavar="DUR", helps={CELL: None},
        clear=Clear("--no-expected-runtime", "it declares no expected run time any more"),
    ),
    Option(
        ("--deadline",), f"finish by: {_DEADLINE_WORDS}", field="deadline", metavar="WHEN",
        helps={CELL: _DEADLINE_WORDS}, clear=Clear("--no-deadline", "it has no deadline any more"),
    ),
    Option(
        ("--after",),
        "start only once this job has succeeded (repeatable: all of them); `last` is your newest job",
        field="after", action="append", metavar="JOB",
        helps={
            UPDATE: "start only once this job has succeeded, instead of the jobs it was to run after "
            "(repeatable: all of them)",
            CELL: "start only once this job has succeeded",
        },
        clear=Clear("--no-after", "it waits for no other job any more", value=[]),
    ),
    Option(("--name",), "a name for the job{default}", field="name", helps={UPDATE: "a new name", CELL: None}),
    Option(("--team",), "the team to charge{default}", field="team", helps={CELL: None}),
    Option(
        ("-k", "--kernel"), "the kernel to run it on (papermill's -k){default}", field="kernel", metavar="NAME",
        usual="the one the notebook names", helps={CELL: "the kernel to run it on (default: this one's)"},
    ),
    Option(
        ("--checkpoint",),
        "save the kernel's variables at cell ends (when cheap enough), so that a job that runs out of time, "
        "fails or is lost can be resumed from its last finished cell: e31 resume JOB{default}",
        field="checkpoint", action=argparse.BooleanOptionalAction, usual="the queue's, c.E31.checkpoint_default",
        helps={CELL: "save the kernel's variables at cell ends, so that the job can be resumed (e31 resume)"},
    ),
    Option(
        ("--on-timeout",),
        "when --max-runtime is up: fail, or suspend (end the running cell, keep a checkpoint, wait for "
        "e31 resume; needs --checkpoint){default}",
        field="on_timeout", choices=("fail", "suspend"), usual="fail",
    ),
    Option(
        ("--output",), "files to collect (repeatable{default})", field="outputs", usual="all it wrote",
        action="append", metavar="GLOB", dest="outputs", helps={CELL: "files to collect"},
    ),
    Option(
        ("--report",), "report format, or `none` for no report (repeatable{default})", field="reports",
        usual="html", action="append", metavar="FORMAT", dest="reports",
        helps={CELL: "report format, or `none` for no report (default: html)"},
    ),
    Option(
        ("--sweep",),
        "submit one job per value of parameter NAME: --sweep lr 0.1 0.2, or --sweep lr=0.1,0.2 "
        "(repeatable: one job per combination)",
        nargs="+", action="append", metavar=("NAME", "VALUE"),
    ),
    Option(
        ("--data",), "a file or folder to copy into the job (repeatable)", field="data", action="append",
        metavar="PATH", to_field=_absolute, helps={CELL: "a file or folder to copy in"},
    ),
    Option(("--image",), "the container image to run in (default: the queue's)", field="image"),
    Option(("--memory",), "the container's memory limit, e.g. 16g", field="memory", metavar="SIZE"),
    Option(("--cpus",), "the container's CPU limit, e.g. 8 or 0.5", field="cpus", type=float),
)  # fmt: skip

OPTIONS: dict[str, Option] = {option.name: option for option in OPTION_LIST}  # by its long flag

# What each takes, in the order its help lists them.
REQUEST = (
    "--parameters", "--parameters-raw", "--parameters-yaml", "--parameters-file", "--gpus", "--max-runtime",
    "--expected-runtime", "--deadline", "--after", "--name", "--team", "--kernel", "--checkpoint", "--on-timeout",
    "--output", "--report",
)  # fmt: skip
CONTAINER = ("--image", "--memory", "--cpus")  # for queues that run jobs in containers (c.E31.backend = 'docker')
SUBMIT_OPTIONS = (*REQUEST, "--sweep", "--data", *CONTAINER)
RESUBMIT_OPTIONS = REQUEST
UPDATE_OPTIONS = ("--gpus", "--max-runtime", "--expected-runtime", "--deadline", "--name", "--team", "--after")
RESUME_OPTIONS = ("--gpus", "--max-runtime", "--expected-runtime", "--deadline")
CELL_OPTIONS = (
    "--gpus", "--max-runtime", "--expected-runtime", "--deadline", "--after", "--name", "--team",
    "--kernel", "--checkpoint", "--on-timeout", "--output", "--report", "--data", *CONTAINER,
)  # fmt: skip


def add(parser: argparse.ArgumentParser, flags: Iterable[str], use: str = SUBMIT) -> None:
    """The options named by ``flags`` (their long flags), in that order, as ``use`` takes them.
    For ``UPDATE`` an option that may be cleared comes with its ``--no-...``, either one given."""
    for name in flags:
        option = OPTIONS[name]
        spec: dict[str, Any] = {
            key: value
            for key, value in (
                ("type", option.type), ("metavar", option.metavar), ("nargs", option.nargs),
                ("action", option.action), ("dest", option.dest), ("help", option.help_for(use)),
                ("choices", option.choices),
            )
            if value is not None
        }  # fmt: skip
        if use in option.defaults:
            spec["default"] = option.defaults[use]
        if use == UPDATE and option.clear is not None:  # absent unless given: what is not given stays
            group = parser.add_mutually_exclusive_group()
            group.add_argument(*option.flags, **spec, default=argparse.SUPPRESS)
            group.add_argument(
                option.clear.flag, dest=option.attribute, action="store_const", const=option.clear.value,
                default=argparse.SUPPRESS, help=option.clear.help,
            )  # fmt: skip
        else:
            parser.add_argument(*option.flags, **spec)


def request_body(args: argparse.Namespace, flags: Iterable[str], use: str = SUBMIT) -> dict:
    """The body fields of the options named by ``flags`` that were given. For ``UPDATE``, one
    cleared (``--no-deadline``) is there too, as None or []."""
    body: dict = {}
    chosen = [OPTIONS[name] for name in flags]
    for option in chosen:
        if option.field is None or option.field == PARAMETERS:
            continue
        value = getattr(args, option.attribute, None)
        cleared = use == UPDATE and option.clear is not None and option.attribute in args
        if value is not None:
            body[option.field] = option.to_field(value) if option.to_field else value
        elif cleared:
            body[option.field] = value
    if any(option.field == PARAMETERS for option in chosen):
        parameters = given_parameters(args)
        if parameters:
            body[PARAMETERS] = parameters
    return body


def request_changes(args: argparse.Namespace) -> dict:
    """What the request options were given: for a submit, or the changes of a resubmit."""
    return request_body(args, REQUEST)


def submit_body(args: argparse.Namespace) -> dict:
    """The submit request for ``e31 submit`` arguments; local paths made absolute."""
    return {"path": os.path.abspath(args.notebook), **request_body(args, SUBMIT_OPTIONS)}


def submit_bodies(args: argparse.Namespace) -> list[dict]:
    """``submit_body`` once per point of the ``--sweep`` grid (once without one)."""
    body = submit_body(args)
    points = sweep.points(args.sweep or [], body.get(PARAMETERS, {}), parameter_value)
    return sweep.bodies(body, points, args.name or Path(args.notebook).stem)


def update_changes(args: argparse.Namespace) -> dict:
    """The changes ``e31 update`` was given: a value, or None (or []) where --no-... clears one."""
    changes = request_body(args, UPDATE_OPTIONS, UPDATE)
    if not changes:
        raise InvalidRequest(
            "Say what to change: --gpus, --max-runtime, --expected-runtime, --deadline, --no-deadline, "
            "--no-expected-runtime, --name, --team, --after or --no-after."
        )
    return changes


def resume_changes(args: argparse.Namespace) -> dict:
    """What ``e31 resume`` was asked to change of the job's request (nothing: run it as it was),
    and the corrected notebook it was given, read here (the server may not read the file)."""
    changes = request_body(args, RESUME_OPTIONS, RESUME)
    if getattr(args, "notebook", None):
        try:
            changes["notebook"] = json.loads(Path(args.notebook).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise InvalidRequest(f"--notebook {args.notebook}: cannot read it as a notebook ({error}).") from None
    return changes


def given_parameters(args: argparse.Namespace) -> dict:
    """Parameters in papermill's order, a later one winning: -f files, -y YAML, -p typed, -r raw."""
    parameters: dict = {}
    for path in getattr(args, "parameters_files", None) or []:
        parameters.update(_parameters_file(path))
    for text in getattr(args, "parameters_yaml", None) or []:
        parameters.update(_yaml_parameters(text, "-y"))
    parameters.update({name: parameter_value(value) for name, value in getattr(args, "parameters", None) or []})
    parameters.update(dict(getattr(args, "parameters_raw", None) or []))
    return parameters


def _parameters_file(path: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = (error.strerror if isinstance(error, OSError) else None) or error  # UnicodeDecodeError has none
        raise InvalidRequest(f"-f {path}: cannot read the parameters file ({reason}).") from None
    return _yaml_parameters(text, f"-f {path}")


def _yaml_parameters(text: str, given_as: str) -> dict:
    """A YAML (or JSON) mapping of parameter names to values that a job's parameters can carry."""
    example = "Give a mapping of names to values, e.g. -y '{layers: [64, 128], opt: adam}'."
    try:
        parameters = yaml.safe_load(text)
    except yaml.YAMLError as error:
        problem = str(getattr(error, "problem", None) or error).splitlines()[0]
        raise InvalidRequest(f"{given_as}: cannot read it as YAML ({problem}). {example}") from None
    if parameters is None:
        return {}
    if not isinstance(parameters, dict):
        raise InvalidRequest(f"{given_as}: it holds a {type(parameters).__name__}, not names and values. {example}")
    for name, value in parameters.items():
        try:
            json.dumps(value, allow_nan=True)
        except (TypeError, ValueError):
            raise InvalidRequest(
                f"{given_as}: the value of {name!r} ({value!r}) is a {type(value).__name__}, which a job's parameters "
                "cannot carry: numbers, text, true/false, null, lists and mappings of them can. Quote it to pass text."
            ) from None
    return parameters


# --- the command line as typed --------------------------------------------------------------------


def read_argv(argv: list[str]) -> list[str]:
    """A command line as the parsers take it: ``-p lr=0.5`` split (``split_assignments``) and
    ``--deadline tomorrow 8am`` typed without quotes made one value again."""
    return join_deadline_words(split_assignments(argv))


def join_deadline_words(argv: list[str]) -> list[str]:
    joined: list[str] = []
    for token in argv:
        if len(joined) >= 2 and joined[-2] in OPTIONS["--deadline"].flags and is_day_and_clock(joined[-1], token):
            joined[-1] += " " + token
        else:
            joined.append(token)
    return joined


def split_assignments(argv: list[str]) -> list[str]:
    """``-p lr=0.5`` read as ``-p lr 0.5``: a parameter's name never holds "=", so the form
    people bring from other tools means only that."""
    split: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        split.append(token)
        if token in OPTIONS["--parameters"].flags and (following := next(tokens, None)) is not None:
            name, equals, value = following.partition("=")
            split.extend([name, value] if equals and name.isidentifier() else [following])
    return split


_DATA_FLAG = re.compile(r"--data ('[^']*'|[^\s')]+)")  # as notebook_checks writes it: a name, quoted if need be


def as_typed_here(answer: dict, notebook: str) -> dict:
    """A submit's (or check's) answer for the notebook at ``notebook``, with the ``--data`` its
    warnings suggest written from the current folder: the server names a file by its path from
    the notebook's folder, and ``e31 submit exp/train.ipynb`` is typed from elsewhere."""
    folder = Path(notebook).parent
    if folder == Path.cwd() or not answer.get("warnings"):
        return answer

    def from_here(flag: re.Match) -> str:
        return "--data " + shlex.quote(os.path.relpath(folder / shlex.split(flag[1])[0]))

    return {**answer, "warnings": [_DATA_FLAG.sub(from_here, warning) for warning in answer["warnings"]]}
