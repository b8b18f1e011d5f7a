#!/usr/bin/env bash
# The whole test job on a fresh machine: system packages, a venv with dev deps, lint, types, tests.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
for tool in bash dash zsh fish tcsh shellcheck git; do
    command -v "$tool" >/dev/null 2>&1 || need+=("$tool")
done
if [ "${#need[@]}" -gt 0 ]; then
    echo "installing from Debian: ${need[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zsh fish tcsh dash shellcheck git >/dev/null
fi

PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev]"

.venv/bin/ruff check envkit tests bench tools
.venv/bin/ruff format --check envkit tests bench
.venv/bin/mypy
.venv/bin/mypy bench/run.py bench/stress_exit.py
# pytest exits 5 when it collects nothing: that must fail here too, and it does (set -e).
.venv/bin/python -m pytest "$@"
