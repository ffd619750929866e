#!/usr/bin/env bash
# The documentation: Sphinx + MyST, from docs/ into docs/_build/html, warnings as errors.
# Needs no network beyond the pip install (the API page is built from the local openapi.yaml).
# Arguments go to sphinx-build (e.g. scripts/build-docs.sh -E to rebuild every page).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
pip install -q 'sphinx>=7' 'myst-parser>=2' 'pyyaml>=6'
exec python -m sphinx -W --keep-going -b html "$@" docs docs/_build/html
