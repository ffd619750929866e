#!/usr/bin/env bash
# Debian packages the test suite needs (Chromium, Slurm, dockerd, ...), one list per feature in
# scripts/system-packages/*.txt. Installs only what is missing; needs root (or sudo).
set -euo pipefail
cd "$(dirname "$0")"

missing=()
for list in system-packages/*.txt; do
    [ -e "$list" ] || continue
    while read -r package _; do
        case "$package" in ""|\#*) continue ;; esac
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done < "$list"
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
