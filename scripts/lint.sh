#!/usr/bin/env bash
# The linters, as CI runs them before the tests: ruff (lint and format), mypy, the labextension's
# ESLint and Prettier, and the docs build with warnings as errors. Needs `pip install -e '.[test,docs]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
ruff check .
ruff format --check .
mypy
(cd labextension && jlpm install --silent && jlpm lint:check)
python -m sphinx -W --keep-going -q -b html docs docs/_build/html
echo "lint: clean"
