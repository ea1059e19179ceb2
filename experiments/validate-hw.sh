#!/usr/bin/env bash
# Compares epsim with epsim's own plan runs on real GPUs (models/measurements/timelines/README.md):
# writes the plans that were run (FEPLB at EP 8, plan GPU 0; the default static-EP experiment at EP 16,
# plan GPU 1), then runs `epsim validate` for each measured timeline against its GPU's preset and prints
# the summary's verdict line. Outputs: out/validate-hw/<timeline>/ (summary.md, tasks.csv, ...).
#
#   experiments/validate-hw.sh               against each GPU's preset as shipped
#   experiments/validate-hw.sh --calibrated  against the preset calibrated from that GPU's own suite run
#       (`epsim calibrate`: epsim-suite-h100-sxm.yaml for the H100, epsim-suite-h200.yaml for the H200
#       runs of 2026-11-27, epsim-suite-h200-20261129.yaml for those of 2026-11-29), the GEMM curve
#       fitted to the measured expert shape nearest the plans' 6144 x 2048 (GEMM_SHAPES, default
#       7168x2048; GEMM_SHAPES=all pools every shape), written to out/validate-hw/calibrated/GPU.yaml;
#       outputs in out/validate-hw/calibrated/<timeline>/ (docs/validation.md, "Calibrated from epsim's
#       own suite")
set -euo pipefail
cd "$(dirname "$0")/.."
epsim=${EPSIM:-build/epsim}
calibrated=false
case "${1:-}" in
  "") ;;
  --calibrated) calibrated=true ;;
  *) echo "validate-hw.sh: unknown argument '$1' (--calibrated, or nothing)" >&2; exit 2 ;;
esac
out=out/validate-hw
if $calibrated; then
  out=out/validate-hw/calibrated
  mkdir -p "$out"
  m=models/measurements
  shapes=(--gemm-shapes "${GEMM_SHAPES:-7168x2048}")
  [ "${GEMM_SHAPES:-}" = all ] && shapes=()
  "$epsim" calibrate $m/epsim-suite-h100-sxm.yaml --base models/h100-sxm-8.yaml -o "$out/h100-sxm.yaml" --force -q "${shapes[@]}"
  "$epsim" calibrate $m/epsim-suite-h200.yaml --base models/h200.yaml -o "$out/h200.yaml" --force -q "${shapes[@]}"
  "$epsim" calibrate $m/epsim-suite-h200-20261129.yaml --base models/h200.yaml -o "$out/h200-20261129.yaml" \
      --force -q "${shapes[@]}"
fi
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
    h100-sxm-*) hardware=models/h100-sxm-8.yaml; suite=h100-sxm ;;
    h200-*-20261129-*) hardware=models/h200.yaml; suite=h200-20261129 ;;
    h200-*) hardware=models/h200.yaml; suite=h200 ;;
  esac
  if $calibrated; then hardware="$out/$suite.yaml"; fi
  case "$name" in
    *feplb-ep8*) plans=out/validate-hw/plans-feplb-ep8/plans.jsonl ;;
    *default*) plans=out/validate-hw/plans-default/plans.jsonl ;;
  esac
  "$epsim" validate --plans "$plans" --measured "$measured" --hardware "$hardware" \
      --model models/glm5-like-128.yaml --backward -o "$out/$name" --overwrite -q
  printf '%-30s %s\n' "$name" "$(grep -m1 'Goals' "$out/$name/summary.md")"
done
