#!/usr/bin/env bash
# Debian packages the test suite needs (Chromium, Slurm, dockerd, ...), one list per feature in
# scripts/system-packages/*.txt. Installs only what is missing; needs root (or sudo).
# Then a Python with ipykernel 6 (see ipykernel6_venv below).
set -euo pipefail
cd "$(dirname "$0")"

# A venv whose kernel is ipykernel 6, the other major version pyproject allows (ipykernel>=6.20),
# with the package's dependencies but not the package: tests/ui/test_cell_widget_outputs.py runs a
# notebook on it with the clone on its PYTHONPATH. Made here, as nothing is downloaded during tests.
ipykernel6_venv() {
    local venv="${E31_IPYKERNEL6_VENV:-/opt/e31-ipykernel6}" python sudo=""
    python="$(command -v python || command -v python3)"
    [ -w "$(dirname "$venv")" ] || [ "$(id -u)" -eq 0 ] || sudo="sudo"
    [ -x "$venv/bin/python" ] || $sudo "$python" -m venv "$venv"
    # the [project] dependencies of ../pyproject.toml (tomllib: Python 3.11; pip's own tomli before)
    "$venv/bin/python" -c 'try:
    import tomllib
except ImportError:
    from pip._vendor import tomli as tomllib
print("\n".join(tomllib.load(open("../pyproject.toml", "rb"))["project"]["dependencies"]))' |
        $sudo "$venv/bin/python" -m pip install -q --disable-pip-version-check -r /dev/stdin \
            'ipykernel>=6.20,<7' 'matplotlib>=3.5'
}

missing=()
for list in system-packages/*.txt; do
    [ -e "$list" ] || continue
    while read -r package _; do
        case "$package" in ""|\#*) continue ;; esac
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done < "$list"
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
ipykernel6_venv
