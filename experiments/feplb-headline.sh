#!/usr/bin/env bash
# The FEPLB headline comparison in one command (experiments/feplb-headline.yaml at EP 8 and
# experiments/feplb-headline-ep16.yaml at EP 16, 4,096 tokens per GPU in both): builds epsim if
# needed, makes the traces when they are missing, runs `epsim compare` on both and draws the figures.
#   experiments/feplb-headline.sh                    # everything; out/feplb-headline{,-ep16}/
#   experiments/feplb-headline.sh --max-records 8    # extra arguments go to `epsim compare`
# The FLAME-MoE recording is read from ../shared/traces-raw (outside the repository); without it that
# case is skipped (it is `optional: true`) and the synthetic case still runs.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

mkdir -p out/traces
flame_raw=../shared/traces-raw/flame-moe-290m/Encoder_Batch_0-32
flame_trace=out/traces/flame-encoder-ep16.eptrace
if [ ! -f "$flame_trace" ]; then
  if [ -d "$flame_raw" ]; then
    build/epsim trace import flame-csv "$flame_raw" --ranks 16 -o "$flame_trace"
  else
    echo "feplb-headline: $flame_raw not found; the flame-moe-290m case will be skipped"
  fi
fi

# The bundled sample's settings (traces/samples/README.md) with 16 micro-batches instead of 4, one
# trace per EP degree so that both have 4,096 tokens per GPU.
for ranks in 8 16; do
  if [ "$ranks" -eq 8 ]; then
    synthetic_trace=out/traces/glm5-auxfree-ep8.eptrace
  else
    synthetic_trace=out/traces/glm5-auxfree.eptrace
  fi
  if [ ! -f "$synthetic_trace" ]; then
    build/epsim trace generate --ranks "$ranks" --experts 128 --top-k 8 --layers 4 --micro-batches 16 --steps 1 \
        --tokens-per-rank 4096 --dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2 --drift 0.05 \
        --seed 1 -o "$synthetic_trace"
  fi
done

build/epsim compare experiments/feplb-headline.yaml --overwrite "$@"
build/epsim compare experiments/feplb-headline-ep16.yaml --overwrite "$@"

# The figure needs matplotlib: Debian's python3-matplotlib, installed the way scripts/setup.sh installs
# its packages. It belongs to the system interpreter, which may not be the first python3 on PATH (pyenv,
# a virtualenv), so both are tried. Without matplotlib the table and CSV are still complete.
find_python() {
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import matplotlib" 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
if ! python=$(find_python); then
  echo "feplb-headline: installing python3-matplotlib for the figure"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  { "${sudo_cmd[@]}" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends python3-matplotlib; } ||
    echo "feplb-headline: could not install python3-matplotlib"
fi
if python=$(find_python); then
  for out in out/feplb-headline out/feplb-headline-ep16; do
    "$python" experiments/plot_comparison.py "$out/comparison.csv" -o "$out/comparison.png"
  done
else
  echo "feplb-headline: no matplotlib, no figure (comparison.csv and comparison.md are written)"
fi
