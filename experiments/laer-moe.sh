#!/usr/bin/env bash
# LAER-MoE against static EP on Mixtral-8x7B e8k2 (EP 8) and e16k4 (EP 16) (experiments/laer-moe-e8k2.yaml, laer-moe-e16k4.yaml):
# makes the traces when they are missing, then runs `epsim compare`. Extra arguments go to `epsim compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
epsim=${EPSIM:-build/epsim}
mkdir -p out/traces
common=(--tokens-per-rank 16384 --layers 1 --micro-batches 2 --steps 4 --dist lognormal --lognormal-sigma 0.6
        --rank-skew 0.2 --drift 0.05 --seed 7)
[ -f out/traces/laer-mixtral-e8k2-8r.eptrace ] ||
  "$epsim" trace generate --ranks 8 --experts 8 --top-k 2 "${common[@]}" -o out/traces/laer-mixtral-e8k2-8r.eptrace
[ -f out/traces/laer-mixtral-e16k4-16r.eptrace ] ||
  "$epsim" trace generate --ranks 16 --experts 16 --top-k 4 "${common[@]}" -o out/traces/laer-mixtral-e16k4-16r.eptrace
"$epsim" compare experiments/laer-moe-e8k2.yaml --overwrite "$@"
"$epsim" compare experiments/laer-moe-e16k4.yaml --overwrite "$@"
