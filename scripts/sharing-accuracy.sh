#!/usr/bin/env bash
# per_link against exact bandwidth sharing on the same layers: one forward + backward layer of a
# GLM-5-like model with 1,024 experts, static EP (or BALANCER), 4,096 tokens per rank, H100 nodes of 8,
# for each EP degree and popularity (uniform, log-normal sigma 0.6 with rank skew 0.2, Zipf 1.2).
# Prints the layer time under each, the error of per_link, the worst error over every GPU's forward
# GEMM finish, and each run's CPU time (docs/performance.md, "per_link").
#
#   scripts/sharing-accuracy.sh [EP ...]          default: 16 32 64 128 256
#   BALANCER=fastermoe EXPERTS=256 scripts/sharing-accuracy.sh 64
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
epsim="${EPSIM:-$here/build/epsim}"
balancer="${BALANCER:-static_ep}"
experts="${EXPERTS:-1024}"
[[ $# -gt 0 ]] || set -- 16 32 64 128 256
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

sed "s/^num_experts: .*/num_experts: $experts/" "$here/models/glm5-like-256.yaml" > "$work/model.yaml"
printf '%-5s %-9s %14s %14s %10s %16s %9s %9s\n' EP traffic "exact (us)" "per_link (us)" error "worst GPU error" "exact s" "per_link s"
for ep in "$@"; do
  for dist in uniform lognormal zipf; do
    case $dist in
      uniform) shape=(--dist uniform) ;;
      lognormal) shape=(--dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2) ;;
      zipf) shape=(--dist zipf --zipf-alpha 1.2) ;;
    esac
    "$epsim" trace generate --ranks "$ep" --experts "$experts" --top-k 8 --tokens-per-rank 4096 --seed 1 \
      "${shape[@]}" -o "$work/t.eptrace" --force > /dev/null
    for sharing in exact per_link; do
      sed "s/^nodes: .*/nodes: $(( (ep + 7) / 8 ))/" "$here/models/h100-sxm-8.yaml" > "$work/hw-$sharing.yaml"
      printf 'engine:\n  bandwidth_sharing: %s\n' "$sharing" >> "$work/hw-$sharing.yaml"
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
    done
    # layer_time_us of the one record; per GPU, gemm_finish_fwd_us.
    col() { awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == name) c = i; next } { print $c }' "$1"; }
    exact=$(col "$work/out-exact/metrics.csv" layer_time_us)
    fast=$(col "$work/out-per_link/metrics.csv" layer_time_us)
    worst=$(paste -d, <(col "$work/out-exact/gpus.csv" gemm_finish_fwd_us) <(col "$work/out-per_link/gpus.csv" gemm_finish_fwd_us) |
            awk -F, '{ e = ($2 - $1) / $1; if (e < 0) e = -e; if (e > w) w = e } END { printf "%.3f%%", 100 * w }')
    printf '%-5s %-9s %14.1f %14.1f %+9.3f%% %16s %9s %9s\n' "$ep" "$dist" "$exact" "$fast" \
      "$(awk -v a="$exact" -v b="$fast" 'BEGIN { print 100 * (b - a) / a }')" "$worst" \
      "$(cat "$work/cpu-exact")" "$(cat "$work/cpu-per_link")"
  done
done
