#!/usr/bin/env bash
# Runs every libFuzzer target of a build folder (configured with EPSIM_FUZZ=ON): first it replays the
# committed seeds (tests/fuzz/corpus/TARGET/) and every regression input (tests/fuzz/regressions/TARGET/),
# then it fuzzes each target for a bounded time. Any crash, sanitizer report, leak, timeout or exception
# other than epsim::InputError fails the target. Prints one line per target and a closing count.
#
#   tests/fuzz/run_fuzz.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]
#
# New inputs found while fuzzing go to BUILD_DIR/fuzz/corpus/TARGET/ (kept between runs, never
# committed by this script); a failing input is saved as BUILD_DIR/fuzz/artifacts/TARGET/crash-* (or
# leak-*, timeout-*, oom-*) and its log is BUILD_DIR/fuzz/logs/TARGET.log.
set -uo pipefail
cd "$(dirname "$0")/../.."

build=${1:?usage: tests/fuzz/run_fuzz.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]}
seconds=${2:-15}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in tests/fuzz/*_fuzz.cpp; do
    name=$(basename "$src" .cpp)
    targets+=("${name%_fuzz}")
  done
fi

# Stop at the first sanitizer report, with a symbolized stack; leaks are findings too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:symbolize=1}

work="$build/fuzz"
mkdir -p "$work/logs"
passed=0
failed=0
failures=()
for target in "${targets[@]}"; do
  bin="$build/tests/fuzz/${target}_fuzz"
  log="$work/logs/$target.log"
  if [ ! -x "$bin" ]; then
    echo "fuzz: $target: no binary $bin (configure with -DEPSIM_FUZZ=ON and build epsim_fuzzers)"
    failed=$((failed + 1))
    failures+=("$target (not built)")
    continue
  fi
  seeds="tests/fuzz/corpus/$target"
  regressions="tests/fuzz/regressions/$target"
  mkdir -p "$work/corpus/$target" "$work/artifacts/$target"
  start=$(date +%s)

  # 1. Every committed input once: seeds and regressions, as single files.
  mapfile -t inputs < <(find "$seeds" "$regressions" -type f 2>/dev/null | sort)
  : > "$log"
  if [ ${#inputs[@]} -gt 0 ] &&
     ! "$bin" -timeout=20 -rss_limit_mb=2048 -artifact_prefix="$work/artifacts/$target/" "${inputs[@]}" >> "$log" 2>&1; then
    echo "fuzz: $target: FAILED replaying the committed inputs (log: $log)"
    grep -m1 -E 'Running: ' "$log" | tail -1
    grep -m1 -E 'ERROR: |epsim fuzz failure|runtime error' "$log"
    failed=$((failed + 1))
    failures+=("$target (replay)")
    continue
  fi

  # 2. Bounded fuzzing from the seeds, the regressions and what earlier runs found.
  dirs=("$work/corpus/$target")
  [ -d "$seeds" ] && dirs+=("$seeds")
  [ -d "$regressions" ] && dirs+=("$regressions")
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$work/artifacts/$target/" "${dirs[@]}" >> "$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    corpus=$(find "$work/corpus/$target" -type f | wc -l)
    echo "fuzz: $target: ok, ${#inputs[@]} committed inputs replayed, ${execs:-?} executions in $(( $(date +%s) - start )) s, $corpus inputs in $work/corpus/$target"
    passed=$((passed + 1))
  else
    artifact=$(grep -o "Test unit written to .*" "$log" | tail -1 | sed 's/Test unit written to //')
    echo "fuzz: $target: FAILED (input: ${artifact:-see log}; log: $log)"
    grep -m1 -E 'ERROR: |epsim fuzz failure|runtime error' "$log"
    failed=$((failed + 1))
    failures+=("$target")
  fi
done

for f in "${failures[@]+"${failures[@]}"}"; do echo "fuzz: failed: $f"; done
echo "fuzz targets: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
