#!/usr/bin/env bash
# Runs epsim's whole test suite, installing and building first when needed:
#   1. the doctest suite (CTest) of the normal build (build/);
#   2. the same suite built with clang under AddressSanitizer (LeakSanitizer on) and UBSan, in build-asan/
#      (EPSIM_SANITIZE=ON; no CUDA backend, no benchmarks);
#   3. determinism: two `epsim run`s of the default experiment in the sanitizer build, and one in the
#      normal build, give byte-identical outputs (and `epsim trace generate` identical traces);
#   4. every libFuzzer target (EPSIM_FUZZ=ON, built in build-asan/ too): the committed seeds and
#      regression inputs replayed, then EPSIM_FUZZ_SECONDS (default 15) of fuzzing each
#      (tests/fuzz/run_fuzz.sh).
# Every step runs even when an earlier one failed (unless what it needs could not be built); a summary
# with each step's time closes the output, and the exit status is non-zero if anything failed. Tests
# that read ../shared/traces-raw skip cleanly where it is absent. docs/reliability.md explains it all.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds=${EPSIM_FUZZ_SECONDS:-15}
jobs=$(nproc)
logs=build-asan/logs
steps=()
passed_total=0
failed_total=0
any_failed=0

# run_step NAME COMMAND...: runs the step, records its status and wall time.
run_step() {
  local name=$1
  shift
  local start=$SECONDS
  echo "==> $name"
  if "$@"; then
    steps+=("$(printf '%-44s %-6s %5d s' "$name" ok $((SECONDS - start)))")
    return 0
  fi
  steps+=("$(printf '%-44s %-6s %5d s' "$name" FAILED $((SECONDS - start)))")
  any_failed=1
  return 1
}

# count_ctest LOG: adds CTest's "N tests failed out of M" to the totals.
count_ctest() {
  local line failed total
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
  if [ -z "$line" ]; then
    failed_total=$((failed_total + 1))
    return
  fi
  failed=$(sed -E 's/.*, ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.*, ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  passed_total=$((passed_total + total - failed))
  failed_total=$((failed_total + failed))
}

ctest_in() {
  ctest --test-dir "$1" --output-on-failure --parallel "$jobs" --timeout 900 2>&1 | tee "$2"
  return "${PIPESTATUS[0]}"
}

configure_asan() {
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_BASEDIR="$PWD"
  fi
  if [ ! -f build-asan/CMakeCache.txt ]; then
    CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" -DEPSIM_SANITIZE=ON -DEPSIM_FUZZ=ON \
      -DEPSIM_BUILD_HW=OFF -DEPSIM_BUILD_BENCHMARKS=OFF || return 1
  fi
  # Only what the tests, the determinism check and the fuzzers need.
  cmake --build build-asan --parallel "$jobs" --target epsim epsim_tests epsim_fuzzers
}

fuzz() {
  tests/fuzz/run_fuzz.sh build-asan "$fuzz_seconds" 2>&1 | tee "$1"
  return "${PIPESTATUS[0]}"
}

# Same inputs and seed, byte-identical outputs: normal build once, sanitizer build twice, all written to
# the same output path (the summary names it) and moved aside before the next run.
determinism() {
  local dir=build-asan/determinism
  rm -rf "$dir"
  mkdir -p "$dir"
  local who bin
  for who in normal asan-1 asan-2; do
    bin=build/epsim
    [ "$who" = normal ] || bin=build-asan/epsim
    "$bin" run experiments/default.yaml -o "$dir/out" --write-plans -q || return 1
    mv "$dir/out" "$dir/$who"
    "$bin" trace generate --ranks 8 --experts 32 --top-k 4 --tokens-per-rank 256 --layers 2 \
      --micro-batches 2 --dist lognormal --rank-skew 0.2 --drift 0.05 --token-ids --seed 9 \
      -o "$dir/$who.eptrace" >/dev/null || return 1
  done
  diff -r "$dir/asan-1" "$dir/asan-2" && diff -r "$dir/normal" "$dir/asan-1" &&
    cmp "$dir/asan-1.eptrace" "$dir/asan-2.eptrace" && cmp "$dir/normal.eptrace" "$dir/asan-1.eptrace" || return 1
  echo "determinism: $(find "$dir/normal" -type f | wc -l) output files and the generated trace are byte-identical"
}

# Sanitizer reports stop the test at the first one, with a stack; LeakSanitizer is on.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:symbolize=1}

if run_step "install and build (build/)" scripts/setup.sh --with-sanitizers --with-test-tools; then
  mkdir -p "$logs"
  run_step "doctest suite (build/)" ctest_in build "$logs/ctest-normal.log"
  count_ctest "$logs/ctest-normal.log"
else
  failed_total=$((failed_total + 1))
fi

asan_built=0
mkdir -p "$logs"
if run_step "sanitizer + fuzz build (build-asan/)" configure_asan; then
  asan_built=1
  run_step "doctest suite, ASan+UBSan (build-asan/)" ctest_in build-asan "$logs/ctest-asan.log"
  count_ctest "$logs/ctest-asan.log"
  if [ -x build/epsim ] && run_step "determinism (normal vs sanitizer build)" determinism; then
    passed_total=$((passed_total + 1))
  else
    failed_total=$((failed_total + 1))
  fi
  run_step "fuzz targets, ${fuzz_seconds} s each" fuzz "$logs/fuzz.log"
  fuzz_line=$(grep -E '^fuzz targets: [0-9]+ passed, [0-9]+ failed' "$logs/fuzz.log" | tail -1)
  if [ -n "$fuzz_line" ]; then
    passed_total=$((passed_total + $(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$fuzz_line")))
    failed_total=$((failed_total + $(sed -E 's/.*, ([0-9]+) failed.*/\1/' <<<"$fuzz_line")))
  else
    failed_total=$((failed_total + 1))
  fi
else
  failed_total=$((failed_total + 1))
fi

echo
echo "summary (wall time of each step):"
printf '  %s\n' "${steps[@]}"
[ "$asan_built" -eq 1 ] || echo "  (the sanitizer build failed: its suite, the determinism check and the fuzzers did not run)"
echo "total: $passed_total passed, $failed_total failed"
exit $((any_failed || failed_total > 0))
