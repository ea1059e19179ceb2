#!/usr/bin/env bash
# Every balancer on one table (experiments/all-balancers.yaml): builds epsim if needed, makes the
# traces when they are missing, runs `epsim compare` and draws the figure.
#   experiments/all-balancers.sh                    # results in out/all-balancers/
#   experiments/all-balancers.sh --max-records 4    # extra arguments go to `epsim compare`
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
mkdir -p out/traces
flame_raw=../shared/traces-raw/flame-moe-290m/Encoder_Batch_0-32
if [ ! -f out/traces/flame-encoder-ep16.eptrace ]; then
  if [ -d "$flame_raw" ]; then
    build/epsim trace import flame-csv "$flame_raw" --ranks 16 -o out/traces/flame-encoder-ep16.eptrace
  else
    echo "all-balancers: $flame_raw not found; the flame-moe-290m case will be skipped"
  fi
fi
experiments/glm5-traces.sh

build/epsim compare experiments/all-balancers.yaml --overwrite "$@"

# The figure needs Debian's python3-matplotlib, which belongs to the system interpreter.
for python in python3 /usr/bin/python3; do
  if command -v "$python" >/dev/null && "$python" -c "import matplotlib" 2>/dev/null; then
    exec "$python" experiments/plot_comparison.py out/all-balancers/comparison.csv -o out/all-balancers/comparison.png
  fi
done
echo "all-balancers: no matplotlib (apt-get install python3-matplotlib); table in out/all-balancers/comparison.md"
