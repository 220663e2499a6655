#!/usr/bin/env bash
# Sets up, builds and runs every test: the normal build, then the same tests
# under AddressSanitizer + UndefinedBehaviorSanitizer. Prints CTest's result
# line for each. What .ci/run calls.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
jobs="${PIPETUNE_JOBS:-$(nproc)}"

run_suite() {
  local name="$1" dir="$2"; shift 2
  echo "== $name: build"
  bash scripts/build.sh "$dir" "$@"
  echo "== $name: test"
  local log="$dir.ctest.log"
  set +e
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300 >"$log" 2>&1
  local rc=$?
  set -e
  grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Exception" "$log" || true
  if [[ $rc -ne 0 ]]; then
    echo "== $name: FAILED; the failing tests' output:"
    sed -n '/The following tests FAILED/,$p' "$log"
    grep -B5 -A40 -E "\[  FAILED  \]|\*\*\*Failed|ERROR: AddressSanitizer|runtime error:" "$log" | head -400
    return $rc
  fi
}

run_suite "release" build -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_suite "asan+ubsan" build-asan -DCMAKE_BUILD_TYPE=Debug -DPIPETUNE_SANITIZE=ON -DPIPETUNE_BUILD_BENCH=OFF
echo "== all tests passed (release and asan+ubsan)"
