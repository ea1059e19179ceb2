#!/usr/bin/env bash
# DeepSeek-V3 step predictions (docs/step.md): makes the two synthetic traces when they are missing
# and runs the training and decode experiments (each prints its balanced reference beside it).
#   experiments/deepseek-v3-step.sh    # results in out/deepseek-v3-{train,decode}-step/
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh --target epsim

mkdir -p out/traces
# Group-limited routing from the model file (top-8 within 4 of 8 groups); lognormal expert popularity
# and rank skew as in the bundled GLM-5-like sample (traces/samples/README.md).
make_trace() {  # OUT TOKENS_PER_RANK LAYERS MICRO_BATCHES
  [ -f "$1" ] || build/epsim trace generate --ranks 64 --model models/deepseek-v3.yaml --tokens-per-rank "$2" \
      --layers "$3" --micro-batches "$4" --steps 1 --dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2 \
      --seed 1 -o "$1"
}
make_trace out/traces/deepseek-v3-ep64-train.eptrace 4096 2 2
make_trace out/traces/deepseek-v3-ep64-decode.eptrace 128 4 4

for x in train decode; do
  build/epsim run "experiments/deepseek-v3-$x-step.yaml" --overwrite
done
