"""An optional import that e31's own processes leave out: it costs seconds of CPU in each."""

from __future__ import annotations

import sys


def skip_iri_parsers() -> None:
    """Call before anything imports jsonschema.

    jsonschema (which nbformat and jupyter_events validate with) imports ``rfc3987_syntax``, when
    it is installed, to check the "iri" and "iri-reference" formats, and that package compiles
    its grammar's Earley parsers on import: about 2 s of CPU in every job's worker and every
    server start (python-jsonschema/jsonschema#1428). No notebook or Jupyter event schema uses
    those formats; without the package, jsonschema leaves them unchecked and checks the rest.
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: its import fails at once
