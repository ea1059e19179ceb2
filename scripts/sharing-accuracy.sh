#!/usr/bin/env bash
# The fast sharing models (per_link, local, or those FAST names) against exact bandwidth sharing on the
# same layers: one forward + backward layer of a GLM-5-like model with 1,024 experts, static EP (or
# BALANCER), 4,096 tokens per rank, H100 nodes of 8, for each EP degree and popularity (uniform,
# log-normal sigma 0.6 with rank skew 0.2, Zipf 1.2, or those DISTS names). Prints, for each fast
# model, the layer time under exact and under it, its error, the worst error over every GPU's forward
# GEMM finish, the range of those errors (earliest to latest), each run's CPU time, and the GPU that
# finishes its forward GEMMs last under exact and under the model (where they differ, how far before
# exact's last GPU the model's pick finishes under exact) (docs/performance.md, "per_link", "local",
# "Per GPU at EP 1,024" and "Which GPU is last").
#
#   scripts/sharing-accuracy.sh [EP ...]          default: 16 32 64 128 256
#   BALANCER=fastermoe EXPERTS=256 scripts/sharing-accuracy.sh 64
#   FAST=local scripts/sharing-accuracy.sh 16 64
#   FAST=coupled COUPLED_GPUS=0.25 scripts/sharing-accuracy.sh 128   (engine.coupled_gpus)
#   DISTS=lognormal BALANCER=ultraep FAST="local coupled" scripts/sharing-accuracy.sh 1024
#     (the wide sweep's EP 1,024 record: experiments/sweep-ep-1024.yaml draws the same trace)
#   EXACT_KEEP=DIR ...   keeps each exact run in DIR and reuses it in later calls (exact takes minutes
#     at EP 1,024; the runs are named by balancer, experts, EP and traffic, so a changed model,
#     hardware file or exact solver needs a fresh DIR)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
epsim="${EPSIM:-$here/build/epsim}"
balancer="${BALANCER:-static_ep}"
experts="${EXPERTS:-1024}"
read -r -a fast_models <<< "${FAST:-per_link local}"
read -r -a dists <<< "${DISTS:-uniform lognormal zipf}"
[[ $# -gt 0 ]] || set -- 16 32 64 128 256
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

sed "s/^num_experts: .*/num_experts: $experts/" "$here/models/glm5-like-256.yaml" > "$work/model.yaml"
printf '%-5s %-9s %-8s %12s %12s %10s %16s %18s %9s %9s  %s\n' EP traffic model "exact (us)" "model (us)" error "worst GPU error" "GPU errors" "exact s" "model s" "last GPU"
for ep in "$@"; do
  for dist in "${dists[@]}"; do
    case $dist in
      uniform) shape=(--dist uniform) ;;
      lognormal) shape=(--dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2) ;;
      zipf) shape=(--dist zipf --zipf-alpha 1.2) ;;
      *) echo "sharing-accuracy.sh: DISTS names uniform, lognormal or zipf, got '$dist'" >&2; exit 2 ;;
    esac
    "$epsim" trace generate --ranks "$ep" --experts "$experts" --top-k 8 --tokens-per-rank 4096 --seed 1 \
      "${shape[@]}" -o "$work/t.eptrace" --force > /dev/null
    exact_dir="$work/out-exact"
    runs=(exact "${fast_models[@]}")
    if [[ -n ${EXACT_KEEP:-} ]]; then
      exact_dir="$EXACT_KEEP/$balancer-$experts-$ep-$dist"
      [[ -f $exact_dir/metrics.csv && -f $exact_dir/cpu-exact ]] && runs=("${fast_models[@]}")
    fi
    for sharing in "${runs[@]}"; do
      sed "s/^nodes: .*/nodes: $(( (ep + 7) / 8 ))/" "$here/models/h100-sxm-8.yaml" > "$work/hw-$sharing.yaml"
      printf 'engine:\n  bandwidth_sharing: %s\n' "$sharing" >> "$work/hw-$sharing.yaml"
      if [[ $sharing == coupled && -n ${COUPLED_GPUS:-} ]]; then
        printf '  coupled_gpus: %s\n' "$COUPLED_GPUS" >> "$work/hw-$sharing.yaml"
      fi
      cat > "$work/x-$sharing.yaml" <<EOF
kind: experiment
name: sharing-$sharing
trace: $work/t.eptrace
model: $work/model.yaml
hardware: $work/hw-$sharing.yaml
ep_degree: $ep
balancer:
  name: $balancer
output: $work/out-$sharing
backward: true
timeline_records: 0
EOF
      rm -rf "$work/out-$sharing"
      /usr/bin/time -f %U -o "$work/cpu-$sharing" "$epsim" run "$work/x-$sharing.yaml" --threads 1 > /dev/null
      if [[ $sharing == exact && -n ${EXACT_KEEP:-} ]]; then
        mkdir -p "$EXACT_KEEP"
        rm -rf "$exact_dir"
        cp -r "$work/out-exact" "$exact_dir"
        cp "$work/cpu-exact" "$exact_dir/cpu-exact"
      fi
    done
    if [[ -n ${EXACT_KEEP:-} ]]; then cp "$exact_dir/cpu-exact" "$work/cpu-exact"; fi
    # layer_time_us of the one record; per GPU, gemm_finish_fwd_us.
    col() { awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == name) c = i; next } { print $c }' "$1"; }
    exact=$(col "$exact_dir/metrics.csv" layer_time_us)
    for fast in "${fast_models[@]}"; do
      fast_us=$(col "$work/out-$fast/metrics.csv" layer_time_us)
      gpu_errors() {
        paste -d, <(col "$exact_dir/gpus.csv" gemm_finish_fwd_us) <(col "$work/out-$fast/gpus.csv" gemm_finish_fwd_us)
      }
      worst=$(gpu_errors | awk -F, '{ e = ($2 - $1) / $1; if (e < 0) e = -e; if (e > w) w = e } END { printf "%.3f%%", 100 * w }')
      range=$(gpu_errors | awk -F, 'NR == 1 { lo = hi = ($2 - $1) / $1 } { e = ($2 - $1) / $1; if (e < lo) lo = e; if (e > hi) hi = e }
                                  END { printf "%+.2f..%+.2f%%", 100 * lo, 100 * hi }')
      # Which GPU finishes its forward GEMMs last under each (metrics.csv's last_gpu), and, where they
      # differ, how far before exact's last GPU the model's pick finishes under exact.
      last_exact=$(col "$exact_dir/metrics.csv" last_gpu)
      last_fast=$(col "$work/out-$fast/metrics.csv" last_gpu)
      last=$(col "$exact_dir/gpus.csv" gemm_finish_fwd_us |
               awk -v a="$last_exact" -v b="$last_fast" 'NR - 1 == a { fa = $1 } NR - 1 == b { fb = $1 }
                 END { if (a == b) printf "%d, the same", a; else printf "%d / %d, %.3f%% before", a, b, 100 * (fa - fb) / fa }')
      printf '%-5s %-9s %-8s %12.1f %12.1f %+9.3f%% %16s %18s %9s %9s  %s\n' "$ep" "$dist" "$fast" "$exact" "$fast_us" \
        "$(awk -v a="$exact" -v b="$fast_us" 'BEGIN { print 100 * (b - a) / a }')" "$worst" "$range" \
        "$(cat "$work/cpu-exact")" "$(cat "$work/cpu-$fast")" "$last"
    done
  done
done
