#!/usr/bin/env bash
# Sets up, builds and runs every test: each source compiled on its own (the
# way users build: a missing #include fails here), the normal build and its
# tests, then the same tests under AddressSanitizer +
# UndefinedBehaviorSanitizer, then the fuzz targets. Prints CTest's result
# line for each. What .ci/run calls.
set -euo pipefail
# The clang-format check (scripts/lint.sh) runs only when this is 1 (or
# PIPETUNE_LINT_FORMAT=1): set it once the tree has been formatted with
# scripts/lint.sh --fix-format.
lint_format=1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Debian's packages and the PyPI venv (torch 2.x, tensorflow-cpu, ...): the
# Python tests run on both Debian's torch 1.13 and the venv's torch 2.x.
# PIPETUNE_NO_VENV=1 leaves the venv out (the tests then run on torch 1.13
# only, and tf.data's are skipped).
if [[ "${PIPETUNE_NO_VENV:-}" == 1 ]]; then
  bash scripts/setup.sh --no-venv
else
  bash scripts/setup.sh
  venv="${PIPETUNE_VENV:-${PIPETUNE_TORCH2_VENV:-$HOME/.local/share/pipetune/torch2}}"
  [[ -x "$venv/bin/python3" ]] || { echo "test: no venv at $venv after setup" >&2; exit 1; }
fi
ctest_release_args=()
jobs="${PIPETUNE_JOBS:-$(nproc)}"

if [[ "${PIPETUNE_LINT_FORMAT:-$lint_format}" == 1 ]]; then
  echo "== format"
  bash scripts/lint.sh
fi

# run_suite NAME DIR CTEST_ARGS_ARRAY CMAKE_ARGS...
run_suite() {
  local name="$1" dir="$2"
  local -n ctest_args="$3"
  shift 3
  echo "== $name: build"
  bash scripts/build.sh "$dir" "$@"
  echo "== $name: test"
  local log="$dir.ctest.log"
  set +e
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 300 "${ctest_args[@]}" >"$log" 2>&1
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

# What keeps CI cheap (measured in docs/benchmarks-ci.md): no debug info in
# the optimized build (-g0) and -O1 (15% less compile time than -O2 on the
# heaviest unit; the tests judge ratios measured on the same binary, not
# speed), line tables only in the sanitized one (enough for symbolized
# ASan/UBSan stacks), each test binary built as one translation unit
# (PIPETUNE_UNITY_TESTS), every library and program too (CMAKE_UNITY_BUILD
# with no batch limit: one unit per target parses the heavy headers once,
# about 30% less compile CPU than batches of 8; the few sources whose
# private helpers clash are kept apart in the top CMakeLists.txt), and the
# sanitized build builds no benchmarks. It keeps the examples: the builder
# and rewrite tests run their programs.
# Every source compiled on its own first (scripts/check_includes.sh): the
# suites below build as unity units, which hide a missing #include that a
# user's build (scripts/build.sh, no unity) stops on. Syntax only: about a
# third of a build's compile CPU.
echo "== includes: each source on its own"
bash scripts/check_includes.sh build-includes
no_ctest_args=()
run_suite "release" build ctest_release_args -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPETUNE_WERROR=ON -DPIPETUNE_UNITY_TESTS=ON -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG"
run_suite "asan+ubsan" build-asan no_ctest_args -DCMAKE_BUILD_TYPE=Debug -DPIPETUNE_SANITIZE=ON -DPIPETUNE_WERROR=ON -DPIPETUNE_UNITY_TESTS=ON -DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 -DPIPETUNE_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1
# The fuzz targets (fuzz/): every saved input replayed, then a short run of
# each from its seeds (PIPETUNE_FUZZ_SECONDS, 5 by default): about 45 s with
# the clang build on the faster machine CI has run on, 75 s on the slower.
# CI allows 90 minutes and the project keeps it within 40
# (docs/benchmarks-ci.md); the step gives way only if the suites took over
# 30 (PIPETUNE_FUZZ=1 runs it whatever the time, 0 never).
fuzz_budget_seconds=1800
if [[ "${PIPETUNE_FUZZ:-}" == 1 || ( "${PIPETUNE_FUZZ:-}" != 0 && $SECONDS -le $fuzz_budget_seconds ) ]]; then
  echo "== fuzz (after ${SECONDS} s)"
  bash scripts/fuzz.sh "${PIPETUNE_FUZZ_SECONDS:-5}"
  echo "== all tests passed (release, asan+ubsan and fuzz) in ${SECONDS} s"
else
  echo "== fuzz: skipped (the suites took ${SECONDS} s, over ${fuzz_budget_seconds}: no room left in CI's 40 minutes; run scripts/fuzz.sh)"
  echo "== all tests passed (release and asan+ubsan) in ${SECONDS} s"
fi
