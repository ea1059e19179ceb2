#!/usr/bin/env bash
# The two synthetic GLM-5-like traces that experiments/all-balancers.yaml, laer-moe-glm5.yaml and
# micromoe.yaml share, made here once so that every script writes the same files (skipped when present):
#   glm5-lognormal-64r: log-normal popularity (sigma 0.6), the skew of an auxiliary-loss-free router;
#   glm5-zipf-64r: Zipf popularity (alpha 0.8).
# Both 64 ranks x 1,024 tokens, 128 experts, top-8, 1 layer x 16 micro-batches. EPSIM names the binary.
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
