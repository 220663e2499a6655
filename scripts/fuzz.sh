#!/usr/bin/env bash
# Builds the five libFuzzer targets (fuzz/CMakeLists.txt, clang-14 with ASan and
# UBSan), replays every seed and every regression input they found earlier,
# then fuzzes each target for SECONDS from its seed corpus. Fails, naming the
# target and the input it saved, when any input crashes, leaks or trips a
# sanitizer. scripts/test.sh runs it as CI's last step; run it longer by hand
# when a parser changes.
#
# usage: scripts/fuzz.sh [SECONDS]      (default 15; 0 replays only)
# environment: PIPETUNE_FUZZ_BUILD (default <repo>/build-fuzz), PIPETUNE_JOBS
# What it found goes to $PIPETUNE_FUZZ_BUILD/findings/<target>/; a crash
# becomes a regression test as the READMEs under tests/*/regressions/ say.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds="${1:-15}"
build="${PIPETUNE_FUZZ_BUILD:-$root/build-fuzz}"
if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: clang++-14 is missing (scripts/setup.sh installs it)" >&2
  exit 2
fi

CC=clang-14 CXX=clang++-14 PIPETUNE_TARGETS="trace_reader_fuzz config_parse_fuzz jpeg_decode_fuzz trace_analysis_fuzz tfdata_plan_fuzz" \
  bash "$root/scripts/build.sh" "$build" -DPIPETUNE_BUILD_FUZZ=ON \
  -DPIPETUNE_BUILD_TESTS=OFF -DPIPETUNE_BUILD_BENCH=OFF -DPIPETUNE_BUILD_EXAMPLES=OFF \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  >"$build.build.log" 2>&1 || { tail -40 "$build.build.log"; exit 1; }

# target, its options, then the directories whose inputs it replays (the
# first is its seed corpus).
targets=(
  "trace_reader_fuzz||fuzz/corpus/trace_reader tests/tracer/regressions"
  "config_parse_fuzz|-dict=$root/fuzz/config.dict|fuzz/corpus/config tests/models/regressions"
  "jpeg_decode_fuzz|-max_len=8192|fuzz/corpus/jpeg tests/runtime/regressions"
  "trace_analysis_fuzz||fuzz/corpus/trace_analysis tests/analyzer/regressions"
  "tfdata_plan_fuzz|-dict=$root/fuzz/tfdata_plan.dict|fuzz/corpus/tfdata_plan tests/workflow/regressions"
)
failed=0
for entry in "${targets[@]}"; do
  IFS='|' read -r name options dirs <<<"$entry"
  binary="$build/fuzz/$name"
  findings="$build/findings/$name"
  scratch="$build/corpus/$name"
  rm -rf "$findings" "$scratch"
  mkdir -p "$findings" "$scratch"
  inputs=()
  for d in $dirs; do
    [[ -d "$root/$d" ]] || continue
    while IFS= read -r -d '' f; do inputs+=("$f"); done \
      < <(find "$root/$d" -type f ! -name 'README*' -print0)
  done
  log="$build/$name.log"
  # Replay: each saved input run once (a file argument is run, not fuzzed).
  # shellcheck disable=SC2086  # options is empty or one flag
  if ! "$binary" $options -artifact_prefix="$findings/" "${inputs[@]}" >"$log" 2>&1; then
    echo "fuzz: $name fails on $(grep -E '^Running: ' "$log" | tail -1 | cut -d' ' -f2-); see $log"
    grep -E "ERROR:|runtime error:|SUMMARY" "$log" | tail -4
    failed=1
    continue
  fi
  if [[ "$seconds" -gt 0 ]]; then
    seed_dir="$root/${dirs%% *}"
    # The scratch directory first: libFuzzer adds what it finds to the first
    # corpus, and the seed corpus in the tree stays as it is.
    # shellcheck disable=SC2086
    if ! "$binary" $options -max_total_time="$seconds" -artifact_prefix="$findings/" \
        "$scratch" "$seed_dir" >"$log" 2>&1; then
      echo "fuzz: $name found a failing input in ${seconds} s: $(ls "$findings")"
      grep -E "ERROR:|runtime error:|SUMMARY" "$log" | tail -6
      failed=1
      continue
    fi
  fi
  runs="$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+' || echo "${#inputs[@]}")"
  echo "fuzz: $name: ${#inputs[@]} saved inputs replayed, $runs runs in ${seconds} s, nothing found"
done
exit "$failed"
