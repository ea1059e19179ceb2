#!/usr/bin/env bash
# experiments/micromoe.yaml: makes the GLM-5-like traces of experiments/all-balancers.sh when they are
# missing, then runs `epsim compare`. Extra arguments go to `epsim compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
epsim=${EPSIM:-build/epsim}
mkdir -p out/traces
common=(--ranks 64 --experts 128 --top-k 8 --layers 1 --micro-batches 16 --steps 1 --tokens-per-rank 1024
        --rank-skew 0.2 --drift 0.05)
[ -f out/traces/glm5-lognormal-64r.eptrace ] ||
  "$epsim" trace generate "${common[@]}" --dist lognormal --lognormal-sigma 0.6 --seed 2 \
      -o out/traces/glm5-lognormal-64r.eptrace
[ -f out/traces/glm5-zipf-64r.eptrace ] ||
  "$epsim" trace generate "${common[@]}" --dist zipf --zipf-alpha 0.8 --seed 3 -o out/traces/glm5-zipf-64r.eptrace
"$epsim" compare experiments/micromoe.yaml --overwrite "$@"
