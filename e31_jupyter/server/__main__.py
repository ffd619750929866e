"""``python -m e31_jupyter.server``: jupyter_server, as ``e31 serve`` starts it (cli/launch.py),
without the import that costs every start seconds (execution/quick_imports.py)."""

import sys

from e31_jupyter.execution.quick_imports import skip_iri_parsers

skip_iri_parsers()

from jupyter_server.serverapp import main  # noqa: E402  (after the skip, which must come first)

sys.exit(main())
