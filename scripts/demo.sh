#!/usr/bin/env bash
# The main job, fast: install what the demo needs (scripts/setup.sh --minimal),
# build only the `pipetune` CLI and the image example's generator, generate the
# example's JPEG files, run the example pipeline traced and print what it
# achieved, report what limits it, tune it from the trace and run the tuned
# config; then print before and after (steady-state rates: warm-up excluded)
# and the tuned run's measured throughput against the plan's prediction.
#
# Usage: scripts/demo.sh [SECONDS]   (default 20: each run's length)
# Environment: IMAGES=1000 (JPEG files generated; the example repeats them, so
# the rates do not depend on how many), BUILD_DIR=build.
# A build directory configured before (by scripts/build.sh, with tests) is
# reused as it is; a new one is configured without tests and benchmarks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-20}"
images="${IMAGES:-1000}"
build="${BUILD_DIR:-build}"
start=$SECONDS

bash scripts/setup.sh --minimal
configure=()
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  # -O2 without debug info, and a unity build (each library's sources
  # compiled as one file): the quickest build of fast code.
  configure=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG"
             -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=0
             -DPIPETUNE_BUILD_TESTS=OFF -DPIPETUNE_BUILD_BENCH=OFF -DPIPETUNE_WITH_CLANG=OFF)
fi
echo "== building pipetune and pipetune_make_images in $build/"
PIPETUNE_TARGETS="pipetune pipetune_make_images" bash scripts/build.sh "$build" "${configure[@]}"
pipetune="$build/cli/pipetune"
mkdir -p out

echo "== generating $images JPEG files for the image example (skipped when present)"
"$build/examples/image/pipetune_make_images" --out examples/image/data --count "$images" --quiet

echo "== running examples/image/image_train.json for ${seconds} s, traced"
"$pipetune" run examples/image/image_train.json --seconds "$seconds" \
  --trace out/image_train.trace --summary out/image_train.summary.json

echo "== report: what limits the pipeline (also out/image_train.report.html)"
"$pipetune" report out/image_train.trace
"$pipetune" report out/image_train.trace --format html -o out/image_train.report.html

# The tuned config's relative `list_files` pattern is rewritten to name the
# same files from out/. The second call writes the same config and keeps the
# plan as JSON, for the prediction below.
echo "== tuning from the trace (budgets: the config's resources)"
"$pipetune" tune out/image_train.trace -o out/image_train.tuned.json --diff
"$pipetune" tune out/image_train.trace -o out/image_train.tuned.json --format json >out/image_train.plan.json

echo "== running the tuned config for ${seconds} s"
"$pipetune" run out/image_train.tuned.json --seconds "$seconds" --summary out/image_train.tuned.summary.json

# The first number after "KEY": in a JSON file (pipetune writes one key per line).
number() { sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1; }
before="$(number out/image_train.summary.json steady_examples_per_second)"
after="$(number out/image_train.tuned.summary.json steady_examples_per_second)"
examples="$(number out/image_train.tuned.summary.json source_elements)"
outputs="$(number out/image_train.tuned.summary.json elements)"
predicted="$(number out/image_train.plan.json predicted_throughput)"
echo "== before and after (steady state: each run's warm-up excluded)"
awk -v b="$before" -v a="$after" -v p="$predicted" -v e="$examples" -v o="$outputs" 'BEGIN {
  per_output = (o > 0) ? e / o : 1  # images per batch
  printf "before: %.0f images/s (examples/image/image_train.json)\n", b
  printf "after:  %.0f images/s (out/image_train.tuned.json), %.2fx\n", a, (b > 0) ? a / b : 0
  printf "tuned run: measured %.0f images/s, the plan predicted %.0f images/s (measured/predicted %.2f)\n",
         a, p * per_output, (p > 0) ? a / (p * per_output) : 0
}'
echo "== demo took $((SECONDS - start)) s"
