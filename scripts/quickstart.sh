#!/usr/bin/env bash
# From a fresh Debian machine to epsim's main result: installs and builds (scripts/setup.sh), then
# replays the bundled default trace (experiments/default.yaml: a GLM-5-like MoE layer, 128 experts,
# EP=16 over two H100 nodes, static EP) and prints the straggler summary. Results go to out/default,
# replaced on every run of this script. It builds only the simulator (the test suite, benchmarks and
# the CUDA backend are built by scripts/test.sh or scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --target epsim
build/epsim run experiments/default.yaml --overwrite
