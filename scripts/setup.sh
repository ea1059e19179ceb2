#!/usr/bin/env bash
# Installs epsim's build dependencies from Debian's packages (only those missing), then configures and
# builds into build/. Safe to run again: it installs nothing twice and rebuilds only what changed.
#
#   scripts/setup.sh                    the simulator, its tests and benchmarks (build/)
#   scripts/setup.sh --target epsim     only the named build targets (repeatable): the quickstart builds
#                                       just the simulator it runs
#   scripts/setup.sh --with-sanitizers  also clang and its sanitizer and libFuzzer runtimes, for the
#                                       sanitizer and fuzzing build that scripts/test.sh makes in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build ccache libboost-program-options-dev libboost-graph-dev
          libyaml-cpp-dev libeigen3-dev nlohmann-json3-dev doctest-dev libbenchmark-dev libglpk-dev)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with-sanitizers)
      # clang's AddressSanitizer, UBSan and libFuzzer runtimes are in libclang-rt-dev.
      packages+=(clang libclang-rt-dev)
      shift ;;
    --with-test-tools)
      # The recorder's tests need PyTorch (Debian's, for /usr/bin/python3); the sweep's MPI test mpirun;
      # the plotting scripts' drawing tests matplotlib.
      packages+=(python3-torch openmpi-bin python3-matplotlib)
      shift ;;
    --target)
      [ $# -ge 2 ] || { echo "setup: --target needs a target name" >&2; exit 2; }
      targets+=(--target "$2")
      shift 2 ;;
    *)
      echo "setup: unknown option '$1' (--target NAME, --with-sanitizers, --with-test-tools)" >&2
      exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ccache keeps rebuilds of unchanged files cheap, also across checkouts in other folders.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD"
fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}"
fi
cmake --build build --parallel "$(nproc)" "${targets[@]}"
