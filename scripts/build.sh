#!/usr/bin/env bash
# Configures and builds pipetune. Usage: scripts/build.sh [BUILD_DIR] [cmake args...]
# BUILD_DIR defaults to build/. Set PIPETUNE_JOBS to limit parallel jobs, and
# PIPETUNE_TARGETS (space-separated) to build only those targets and what they
# need (scripts/demo.sh: "pipetune pipetune_make_images").
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$root/build}"
build_dir="${build_dir%/}"  # the logs go beside it: build.configure.log, not build/.configure.log
shift || true
jobs="${PIPETUNE_JOBS:-$(nproc)}"
cmake -S "$root" -B "$build_dir" -G Ninja "$@" >"$build_dir.configure.log" 2>&1 || {
  cat "$build_dir.configure.log"; exit 1; }
# The "-- pipetune: ..." lines: what was found and how it is built (at least
# the build-type line from the top CMakeLists.txt; CUPTI; skipped parts).
grep -E "^-- pipetune:" "$build_dir.configure.log" || true
targets=()
if [[ -n "${PIPETUNE_TARGETS:-}" ]]; then
  read -r -a names <<<"$PIPETUNE_TARGETS"
  targets=(--target "${names[@]}")
fi
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
