#!/usr/bin/env bash
# Compares two (or more) builds of the benchmark program on a shared, noisy machine: runs each in
# turn, pinned to one core, for ROUNDS rounds, and prints per benchmark and binary the median and the
# fewest of the rounds' CPU times, every round's, and the median's ratio to the first binary's.
# Alternating the binaries spreads the machine's slow and fast phases over all of them, which one run
# of each after the other does not (docs/performance.md: the speed of the development machine drifts
# by up to 2 x within minutes).
#
#   scripts/bench-ab.sh FILTER ROUNDS BENCH_A BENCH_B [BENCH ...]
#   CPU=1 MIN_TIME=3 scripts/bench-ab.sh 'BM_WideEpLayer/ep:1024/counts:0/sharing:2$' 6 \
#       old/tests/epsim_bench build/tests/epsim_bench
#
# MIN_TIME (default 2) is --benchmark_min_time in seconds for each run; CPU (default 1) the core.
set -euo pipefail
if [[ $# -lt 4 ]]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
filter=$1
rounds=$2
shift 2
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-ab.sh: ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
for b in "$@"; do
  [[ -x $b ]] || { echo "bench-ab.sh: $b is not an executable benchmark program" >&2; exit 2; }
done
times=$(mktemp)
trap 'rm -f "$times"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for b in "$@"; do
    # Each row: binary, benchmark, CPU time, unit (the console format: name, real time, unit, CPU
    # time, unit, ...).
    taskset -c "${CPU:-1}" "$b" --benchmark_filter="$filter" --benchmark_min_time="${MIN_TIME:-2}" 2>/dev/null |
      awk -v b="$b" '/^BM_/ { print b, $1, $4, $5 }' >> "$times"
  done
done
[[ -s $times ]] || { echo "bench-ab.sh: no benchmark matched '$filter'" >&2; exit 1; }
python3 - "$times" "$@" <<'PY'
import collections, statistics, sys
path, binaries = sys.argv[1], sys.argv[2:]
runs = collections.defaultdict(list)
units = {}
for line in open(path):
    binary, name, value, unit = line.split()
    runs[(name, binary)].append(float(value))
    units[name] = unit
for name in sorted({n for n, _ in runs}):
    first = statistics.median(runs[(name, binaries[0])]) if (name, binaries[0]) in runs else None
    print(name)
    for binary in binaries:
        values = runs.get((name, binary))
        if not values:
            continue
        median = statistics.median(values)
        ratio = f"{median / first:.3f}" if first else "-"
        print(f"  {binary}: median {median:g} {units[name]}, fewest {min(values):g}, ratio {ratio}; "
              f"rounds {' '.join(f'{v:g}' for v in values)}")
PY
