#!/usr/bin/env bash
# The test suite on a fresh machine: system packages, the package with its test extras, pytest.
# Arguments go to pytest (e.g. scripts/test.sh tests/test_queue.py -x).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
bash scripts/install-system-packages.sh
pip install -q -e '.[test]'
exec python -m pytest "$@"
