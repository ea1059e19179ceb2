#!/usr/bin/env bash
# Compares two (or more) builds of the benchmark program on a shared, noisy machine: runs each in
# turn, pinned to one core, for ROUNDS rounds, and prints per benchmark and binary the median and the
# fewest of the rounds' CPU times, every round's, the median's ratio to the first binary's, and the
# median of the rounds' own ratios to it ("paired").
# Alternating the binaries spreads the machine's slow and fast phases over all of them, which one run
# of each after the other does not (docs/performance.md: the speed of the development machine drifts
# by up to 2 x within minutes). The order reverses every other round (A B, B A, A B, ...), so that
# neither binary always runs first, and a round's ratio compares runs a few seconds apart: when the
# machine's phases move the medians by more than the difference, the paired ratio still shows it.
#
#   scripts/bench-ab.sh FILTER ROUNDS BENCH_A BENCH_B [BENCH ...]
#   CPU=1 MIN_TIME=3 scripts/bench-ab.sh 'BM_WideEpLayer/ep:1024/counts:0/sharing:2$' 6 \
#       old/tests/epsim_bench build/tests/epsim_bench
#
# MIN_TIME (default 2) is --benchmark_min_time in seconds for each run; CPU (default 1) the core.
set -euo pipefail
if [[ $# -lt 4 ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
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
binaries=("$@")
for ((r = 1; r <= rounds; ++r)); do
  order=("${binaries[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#binaries[@]} - 1; i >= 0; --i)); do order+=("${binaries[i]}"); done
  fi
  for b in "${order[@]}"; do
    # Each row: round, binary, benchmark, CPU time, unit (the console format: name, real time, unit,
    # CPU time, unit, ...).
    taskset -c "${CPU:-1}" "$b" --benchmark_filter="$filter" --benchmark_min_time="${MIN_TIME:-2}" 2>/dev/null |
      awk -v r="$r" -v b="$b" '/^BM_/ { print r, b, $1, $4, $5 }' >> "$times"
  done
done
[[ -s $times ]] || { echo "bench-ab.sh: no benchmark matched '$filter'" >&2; exit 1; }
python3 - "$times" "$@" <<'PY'
import collections, statistics, sys
path, binaries = sys.argv[1], sys.argv[2:]
runs = collections.defaultdict(list)
by_round = {}  # (name, binary, round) -> CPU time
units = {}
for line in open(path):
    round_, binary, name, value, unit = line.split()
    runs[(name, binary)].append(float(value))
    by_round[(name, binary, round_)] = float(value)
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
        # Each round's time over the first binary's in the same round.
        paired = [v / by_round[(name, binaries[0], r)] for (n, b, r), v in by_round.items()
                  if n == name and b == binary and (name, binaries[0], r) in by_round]
        paired_text = f", paired {statistics.median(paired):.3f}" if paired else ""
        print(f"  {binary}: median {median:g} {units[name]}, fewest {min(values):g}, ratio {ratio}{paired_text}; "
              f"rounds {' '.join(f'{v:g}' for v in values)}")
PY
