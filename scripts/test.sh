#!/usr/bin/env bash
# Runs epsim's whole test suite (doctest cases registered with CTest), installing and building first
# when needed. Tests that read ../shared/traces-raw skip cleanly where it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure --parallel "$(nproc)"
