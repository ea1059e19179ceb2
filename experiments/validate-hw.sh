#!/usr/bin/env bash
# Compares epsim with epsim's own plan runs on real GPUs (models/measurements/timelines/README.md):
# writes the plans that were run (FEPLB at EP 8, plan GPU 0; the default static-EP experiment at EP 16,
# plan GPU 1), then runs `epsim validate` for each measured timeline against its GPU's preset and prints
# the summary's verdict line. Outputs: out/validate-hw/<timeline>/ (summary.md, tasks.csv, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
epsim=${EPSIM:-build/epsim}
trace=out/traces/glm5-auxfree-ep8-validate.eptrace
if [ ! -f "$trace" ]; then
  mkdir -p out/traces
  "$epsim" trace generate --ranks 8 --experts 128 --top-k 8 --layers 2 --micro-batches 2 --steps 1 \
      --tokens-per-rank 4096 --dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2 --drift 0.05 \
      --seed 1 -o "$trace"
fi
"$epsim" run experiments/validate-feplb-ep8.yaml --write-plans -o out/validate-hw/plans-feplb-ep8 --overwrite -q
"$epsim" run experiments/default.yaml --write-plans -o out/validate-hw/plans-default --overwrite -q
for measured in models/measurements/timelines/*.json; do
  name=$(basename "$measured" .json)          # GPU-EXPERIMENT-IMPLEMENTATION
  case "$name" in
    h100-sxm-*) hardware=models/h100-sxm-8.yaml ;;
    h200-*) hardware=models/h200.yaml ;;
  esac
  case "$name" in
    *feplb-ep8*) plans=out/validate-hw/plans-feplb-ep8/plans.jsonl ;;
    *default*) plans=out/validate-hw/plans-default/plans.jsonl ;;
  esac
  "$epsim" validate --plans "$plans" --measured "$measured" --hardware "$hardware" \
      --model models/glm5-like-128.yaml --backward -o "out/validate-hw/$name" --overwrite -q
  printf '%-28s %s\n' "$name" "$(grep -m1 'Goals' "out/validate-hw/$name/summary.md")"
done
