#!/usr/bin/env bash
# experiments/micromoe.yaml: makes the GLM-5-like traces (experiments/glm5-traces.sh) when they are
# missing, then runs `epsim compare`. Extra arguments go to `epsim compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
epsim=${EPSIM:-build/epsim}
EPSIM="$epsim" experiments/glm5-traces.sh
"$epsim" compare experiments/micromoe.yaml --overwrite "$@"
