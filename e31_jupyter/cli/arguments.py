"""What the ``e31`` command line (and the magics, which share its options) turns into a request:
typed values, the submit body, the option groups."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
from pathlib import Path

import yaml

from e31_jupyter.core import sweep
from e31_jupyter.core.errors import InvalidRequest
from e31_jupyter.core.job import is_day_and_clock

JOB_HELP = "a job's id, or enough of it to be unique (its part after the dash will do), or `last`: your newest job"


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


def read_argv(argv: list[str]) -> list[str]:
    """A command line as the parsers take it: ``-p lr=0.5`` split (``split_assignments``) and
    ``--deadline tomorrow 8am`` typed without quotes made one value again."""
    return join_deadline_words(split_assignments(argv))


def join_deadline_words(argv: list[str]) -> list[str]:
    joined: list[str] = []
    for token in argv:
        if len(joined) >= 2 and joined[-2] == "--deadline" and is_day_and_clock(joined[-1], token):
            joined[-1] += " " + token
        else:
            joined.append(token)
    return joined


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


def split_assignments(argv: list[str]) -> list[str]:
    """``-p lr=0.5`` read as ``-p lr 0.5``: a parameter's name never holds "=", so the form
    people bring from other tools means only that."""
    split: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        split.append(token)
        if token in ("-p", "--parameters") and (following := next(tokens, None)) is not None:
            name, equals, value = following.partition("=")
            split.extend([name, value] if equals and name.isidentifier() else [following])
    return split


def duration(text: str) -> int | str:
    """A run time as given: whole seconds become a number, "90m" or "6h" go to the server as is."""
    return int(text) if text.isdigit() else text


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"a whole number of 1 or more, got {text!r}")
    return int(text)


def submit_body(args: argparse.Namespace) -> dict:
    """The submit request for ``e31 submit`` arguments; local paths made absolute."""
    body = {"path": os.path.abspath(args.notebook), **request_changes(args)}
    if args.data:
        body["data"] = [os.path.abspath(path) for path in args.data]
    container = {"image": args.image, "memory": args.memory, "cpus": args.cpus}
    body.update({key: value for key, value in container.items() if value is not None})
    return body


def submit_bodies(args: argparse.Namespace) -> list[dict]:
    """``submit_body`` once per point of the ``--sweep`` grid (once without one)."""
    body = submit_body(args)
    points = sweep.points(args.sweep or [], body.get("parameters", {}), parameter_value)
    return sweep.bodies(body, points, args.name or Path(args.notebook).stem)


def request_changes(args: argparse.Namespace) -> dict:
    """What ``request_options`` were given: for a submit, or the changes of a resubmit."""
    given = {
        "gpus": args.gpus,
        "max_runtime": args.max_runtime,
        "expected_runtime": args.expected_runtime,
        "deadline": args.deadline,
        "name": args.name,
        "team": args.team,
        "outputs": args.outputs,
        "reports": args.reports,
        "after": args.after,
    }
    parameters = given_parameters(args)
    if parameters:
        given["parameters"] = parameters
    return {key: value for key, value in given.items() if value is not None}


def given_parameters(args: argparse.Namespace) -> dict:
    """Parameters in papermill's order, a later one winning: -f files, -y YAML, -p typed, -r raw."""
    parameters: dict = {}
    for path in args.parameters_files or []:
        parameters.update(_parameters_file(path))
    for text in args.parameters_yaml or []:
        parameters.update(_yaml_parameters(text, "-y"))
    parameters.update({name: parameter_value(value) for name, value in args.parameters or []})
    parameters.update(dict(args.parameters_raw or []))
    return parameters


def _parameters_file(path: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"-f {path}: cannot read the parameters file ({error.strerror or error}).") from None
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


def request_options(parser: argparse.ArgumentParser, defaults: str = "") -> None:
    """-p, --gpus, run times, --deadline, --name, --team, --output, --report; ``defaults`` says
    where what is not given comes from, when not from the usual defaults."""

    def default(usual: str = "") -> str:
        return f"; default: {defaults or usual}" if defaults or usual else ""

    parser.add_argument(
        "-p",
        "--parameters",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="a papermill parameter (-p lr 0.1, or -p lr=0.1); VALUE typed as papermill does "
        "(int, float, True/False/None, str)",
    )
    parser.add_argument(
        "-r",
        "--parameters-raw",
        nargs=2,
        action="append",
        metavar=("NAME", "VALUE"),
        help="a parameter whose VALUE is passed as text, untyped (-r tag 001)",
    )
    parser.add_argument(
        "-y",
        "--parameters-yaml",
        action="append",
        metavar="YAML",
        help="parameters as YAML, for lists and mappings: -y '{layers: [64, 128]}'",
    )
    parser.add_argument(
        "-f",
        "--parameters-file",
        dest="parameters_files",
        action="append",
        metavar="FILE",
        help="parameters from a YAML or JSON file; -f, -y, -p, -r may be mixed, a later kind winning, as in papermill",
    )
    parser.add_argument("--gpus", type=int, help=f"GPUs to hold{default('0')}")
    parser.add_argument(
        "--max-runtime", type=duration, metavar="DUR", help=f"stop it after this: 90m, 6h, 1d or seconds{default()}"
    )
    parser.add_argument("--expected-runtime", type=duration, metavar="DUR", help=f"how long it should take{default()}")
    parser.add_argument("--deadline", metavar="WHEN", help="finish by: ISO 8601, +6h, 08:00, 8am or tomorrow 8am")
    parser.add_argument(
        "--after",
        action="append",
        metavar="JOB",
        help="start only once this job has succeeded (repeatable: all of them); `last` is your newest job",
    )
    parser.add_argument("--name", help=f"a name for the job{default()}")
    parser.add_argument("--team", help=f"the team to charge{default()}")
    parser.add_argument(
        "--output",
        dest="outputs",
        action="append",
        metavar="GLOB",
        help=f"files to collect (repeatable{default('all it wrote')})",
    )
    parser.add_argument(
        "--report",
        dest="reports",
        action="append",
        metavar="FORMAT",
        help=f"report format, or `none` for no report (repeatable{default('html')})",
    )


def wait_or_check(parser: argparse.ArgumentParser) -> None:
    after = parser.add_mutually_exclusive_group()
    after.add_argument("--wait", action="store_true", help="wait for the end; exit 0 only if it succeeded")
    after.add_argument(
        "--check",
        action="store_true",
        help="submit nothing: say what the submit would refuse or warn of, and where the job would wait",
    )


def container_options(parser: argparse.ArgumentParser) -> None:
    """--image, --memory, --cpus: for queues that run jobs in containers (c.E31.backend = 'docker')."""
    parser.add_argument("--image", help="the container image to run in (default: the queue's)")
    parser.add_argument("--memory", metavar="SIZE", help="the container's memory limit, e.g. 16g")
    parser.add_argument("--cpus", type=float, help="the container's CPU limit, e.g. 8 or 0.5")


def update_options(parser: argparse.ArgumentParser) -> None:
    """What ``e31 update`` may change of a queued job; what is not given stays."""
    parser.add_argument("--gpus", type=int, help="GPUs to hold")
    parser.add_argument(
        "--max-runtime", type=duration, metavar="DUR", help="stop it after this: 90m, 6h, 1d or seconds"
    )
    expected = parser.add_mutually_exclusive_group()
    expected.add_argument(
        "--expected-runtime", type=duration, metavar="DUR", default=argparse.SUPPRESS, help="how long it should take"
    )
    expected.add_argument(
        "--no-expected-runtime",
        dest="expected_runtime",
        action="store_const",
        const=None,
        default=argparse.SUPPRESS,
        help="it declares no expected run time any more",
    )
    deadline = parser.add_mutually_exclusive_group()
    deadline.add_argument(
        "--deadline",
        metavar="WHEN",
        default=argparse.SUPPRESS,
        help="finish by: ISO 8601, +6h, 08:00, 8am or tomorrow 8am",
    )
    deadline.add_argument(
        "--no-deadline",
        dest="deadline",
        action="store_const",
        const=None,
        default=argparse.SUPPRESS,
        help="it has no deadline any more",
    )
    parser.add_argument("--name", help="a new name")
    parser.add_argument("--team", help="the team to charge")
    after = parser.add_mutually_exclusive_group()
    after.add_argument(
        "--after",
        action="append",
        metavar="JOB",
        default=argparse.SUPPRESS,
        help="start only once this job has succeeded, instead of the jobs it was to run after "
        "(repeatable: all of them)",
    )
    after.add_argument(
        "--no-after",
        dest="after",
        action="store_const",
        const=[],
        default=argparse.SUPPRESS,
        help="it waits for no other job any more",
    )


def update_changes(args: argparse.Namespace) -> dict:
    """The changes ``update_options`` were given: a value, or None where --no-... clears one."""
    given = {
        "gpus": args.gpus, "max_runtime": args.max_runtime, "name": args.name, "team": args.team,
    }  # fmt: skip
    changes = {key: value for key, value in given.items() if value is not None}
    for cleared in ("expected_runtime", "deadline", "after"):  # absent unless given; None or [] when cleared
        if cleared in args:
            changes[cleared] = getattr(args, cleared)
    if not changes:
        raise InvalidRequest(
            "Say what to change: --gpus, --max-runtime, --expected-runtime, --deadline, --no-deadline, "
            "--no-expected-runtime, --name, --team, --after or --no-after."
        )
    return changes
