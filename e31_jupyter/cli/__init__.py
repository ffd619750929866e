"""The ``e31`` command: submit notebooks as GPU jobs, follow them, collect their output.

``parser`` names the commands and their options (a job's request options are
``e31_jupyter.request_options``, which turns them into a request too),
``commands`` does each command through the client, ``listing`` formats what they print,
``launch`` starts Jupyter for ``e31 lab`` and ``e31 serve``.
"""

from __future__ import annotations

import sys

from e31_jupyter.cli.launch import LAUNCHERS, launch
from e31_jupyter.cli.parser import build_parser
from e31_jupyter.client import E31Client, read_token_file
from e31_jupyter.core.errors import E31Error
from e31_jupyter.request_options import read_argv


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(read_argv(sys.argv[1:] if argv is None else argv))
    if args.command in LAUNCHERS:
        return launch(args.command, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.token and sys.stderr.isatty():
        print(
            "e31: a --token on the command line is visible to every user of this machine (ps); "
            "use E31_TOKEN, E31_TOKEN_FILE or --token-file instead.",
            file=sys.stderr,
        )
    try:
        token = args.token or (read_token_file(args.token_file) if args.token_file else None)
        return args.run(E31Client(args.url, token), args)
    except E31Error as error:
        print(f"e31: {error.message}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. collect cannot write where it was told to
        print(f"e31: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\ne31: interrupted. Jobs already submitted go on: `e31 jobs` lists them, `e31 cancel JOB` stops one.",
            file=sys.stderr,
        )
        return 130
