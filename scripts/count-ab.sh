#!/usr/bin/env bash
# Compares two (or more) builds of the benchmark program by what they do rather than how long they
# take: runs one iteration of the benchmarks FILTER selects under valgrind's cachegrind, once per
# binary, and prints each binary's instructions (and, with CACHE=1, its first-level and last-level
# data misses in a simulated cache), with its ratio to the first binary's.
#
# Why: a change of a few percent in CPU time is within the development machine's noise (its speed
# drifts by up to 2 x within minutes; scripts/bench-ab.sh alternates the binaries to see through
# it), while these counts are the same on every run. A refactor of a hot path that should cost
# nothing is checked here first: one that put two helpers out of line showed +3% instructions, where
# four paired rounds of CPU time could not tell (docs/performance.md, "A following group's clocks").
# The counts are the whole process's, the benchmark's set-up outside its timed loop included; what
# a cache miss costs is not in them, so a change that moves misses still needs CPU time to judge.
#
#   scripts/count-ab.sh FILTER BENCH_A BENCH_B [BENCH ...]
#   scripts/count-ab.sh 'BM_WideEpLayer/ep:512/counts:0/sharing:3$' old/tests/epsim_bench build/tests/epsim_bench
#   CACHE=1 scripts/count-ab.sh 'BM_WideEpLayer/ep:512/counts:0/sharing:2$' A B
#
# CACHE=1 simulates a 1 MiB last-level cache (--LL=1048576,16,64, the size of one core's L2 on the
# AMD EPYC development machine) and takes about three times as long; LL_BYTES sets another size (the
# Intel Xeon one's L2 is 2 MiB: LL_BYTES=2097152). Needs valgrind (Debian: apt install valgrind).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
command -v valgrind > /dev/null || { echo "count-ab.sh: valgrind is not installed (Debian: apt install valgrind)" >&2; exit 2; }
filter=$1
shift
for b in "$@"; do
  [[ -x $b ]] || { echo "count-ab.sh: $b is not an executable benchmark program" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sim=(--cache-sim=no)
ll_bytes=${LL_BYTES:-1048576}
[[ $ll_bytes =~ ^[1-9][0-9]*$ ]] || { echo "count-ab.sh: LL_BYTES must be a positive integer (bytes), got '$ll_bytes'" >&2; exit 2; }
[[ ${CACHE:-0} == 1 ]] && sim=(--cache-sim=yes "--LL=$ll_bytes,16,64")
first=()
i=0
for b in "$@"; do
  log="$work/log-$i"
  if ! valgrind --tool=cachegrind "${sim[@]}" --cachegrind-out-file="$work/out-$i" "$b" \
      --benchmark_filter="$filter" --benchmark_min_time=0 > "$work/stdout-$i" 2> "$log"; then
    echo "count-ab.sh: $b failed under valgrind (its output: $log kept in $work)" >&2
    trap - EXIT
    exit 1
  fi
  grep -q '^BM_' "$work/stdout-$i" || { echo "count-ab.sh: no benchmark matches '$filter' in $b" >&2; exit 2; }
  # "==pid== I   refs:      2,098,310,137", and with the cache simulated "D1  misses:" and "LL misses:".
  counts=()
  for what in 'I *refs' 'D1  misses' 'LL misses'; do
    value=$(sed -n "s/^==[0-9]*== $what: *\([0-9,]*\).*/\1/p" "$log" | tr -d ,)
    [[ -n $value ]] && counts+=("$value")
  done
  line="$b:"
  names=(instructions "D1 misses" "LL misses")
  for k in "${!counts[@]}"; do
    if ((i == 0)); then first[k]=${counts[k]}; fi
    ratio=$(awk -v a="${counts[k]}" -v b="${first[k]}" 'BEGIN { printf "%.4f", a / b }')
    line+=" ${names[k]} ${counts[k]} ($ratio)"
  done
  echo "$line"
  i=$((i + 1))
done
