"""What only the ``e31`` command line has of its options: typed values and the option groups
that are not part of a job's request. The request options themselves (``--gpus``, ``-p``,
``--deadline``, ...) and how they become a request are ``e31_jupyter.request_options``, shared
with the magics; the names below from there are kept for those who import them from here."""

from __future__ import annotations

import argparse

from e31_jupyter.request_options import (
    JOB_HELP,
    as_typed_here,
    parameter_value,
    read_argv,
    request_changes,
    split_assignments,
    submit_bodies,
    submit_body,
    update_changes,
)

__all__ = [
    "JOB_HELP",
    "as_typed_here",
    "parameter_value",
    "positive_int",
    "read_argv",
    "request_changes",
    "split_assignments",
    "submit_bodies",
    "submit_body",
    "update_changes",
    "wait_or_check",
]


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"a whole number of 1 or more, got {text!r}")
    return int(text)


def wait_or_check(parser: argparse.ArgumentParser) -> None:
    after = parser.add_mutually_exclusive_group()
    after.add_argument("--wait", action="store_true", help="wait for the end; exit 0 only if it succeeded")
    after.add_argument(
        "--check",
        action="store_true",
        help="submit nothing: say what the submit would refuse or warn of, and where the job would wait",
    )
