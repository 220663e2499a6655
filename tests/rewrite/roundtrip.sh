#!/usr/bin/env bash
# The source round trip (docs/rewrite.md), as CTest runs it:
#   build the example (a copy of examples/builder/image_builder.cc)
#   -> pipetune profile -- ./image_builder
#   -> pipetune tune TRACE --source image_builder.cc   (rewrites the copy)
#   -> rebuild the rewritten copy -> re-run it
# and holds the measured throughput to the plan's prediction.
#
#   roundtrip.sh BUILD_DIR ORIGINAL_SOURCE WORK_DIR
# Environment: ROUNDTRIP_SECONDS (per run, default 5), ROUNDTRIP_IMAGES
# (default 3000, generated once into WORK_DIR/data), ROUNDTRIP_MIN_RATIO and
# ROUNDTRIP_MAX_RATIO (measured/predicted, default 0.75 and 1.15; see
# docs/benchmarks-rewrite.md for why not the synthetic 0.9-1.1).
set -euo pipefail
build=$(cd "$1" && pwd)
original=$2
dir=$(cd "$3" && pwd)
seconds=${ROUNDTRIP_SECONDS:-5}
images=${ROUNDTRIP_IMAGES:-3000}
min_ratio=${ROUNDTRIP_MIN_RATIO:-0.75}
max_ratio=${ROUNDTRIP_MAX_RATIO:-1.15}
pipetune=$build/cli/pipetune
program=$build/tests/rewrite/pipetune_roundtrip_image_builder
source=$dir/image_builder.cc
work=$dir/work
start=$(date +%s%N)
step() { echo "[$(( ($(date +%s%N) - start) / 1000000 )) ms] $*"; }

rm -rf "$work" && mkdir -p "$work"
step "images: $images into $dir/data"
"$build/examples/image/pipetune_make_images" --count "$images" --out "$dir/data" --quiet

step "build the untuned copy"
cp "$original" "$source"
cmake --build "$build" --target pipetune_roundtrip_image_builder >"$work/build1.log" 2>&1 ||
  { cat "$work/build1.log"; exit 1; }

step "profile: pipetune profile -- image_builder --seconds $seconds"
(cd "$work" && "$pipetune" profile --trace "$work/untuned.trace" -- "$program" --dir "$dir" --seconds "$seconds")

step "tune: pipetune tune untuned.trace --source image_builder.cc"
(cd "$work" && "$pipetune" tune "$work/untuned.trace" --source "$source" --format json \
   -o "$work/tuned.json" >"$work/plan.json" 2>"$work/rewrite.log") ||
  { cat "$work/rewrite.log"; exit 1; }
cat "$work/rewrite.log"
diff -u "$original" "$source" >"$work/source.diff" || true
cat "$work/source.diff"
if [ ! -s "$work/source.diff" ]; then
  echo "FAIL: the plan changed nothing in the source"; exit 1
fi
predicted=$(sed -n 's/^  "predicted_throughput": \([0-9.e+-]*\),$/\1/p' "$work/plan.json")

step "rebuild the rewritten copy"
cmake --build "$build" --target pipetune_roundtrip_image_builder >"$work/build2.log" 2>&1 ||
  { cat "$work/build2.log"; exit 1; }

step "re-run the tuned program"
"$program" --dir "$dir" --seconds "$seconds" | tee "$work/tuned.out"
measured=$(sed -n 's/^throughput: \([0-9.]*\) outputs.*/\1/p' "$work/tuned.out")
ratio=$(awk -v m="$measured" -v p="$predicted" 'BEGIN { printf "%.3f", m / p }')
step "measured $measured outputs/s, predicted $predicted: measured/predicted $ratio (bounds $min_ratio-$max_ratio)"
awk -v r="$ratio" -v lo="$min_ratio" -v hi="$max_ratio" 'BEGIN { exit !(r >= lo && r <= hi) }' ||
  { echo "FAIL: measured/predicted $ratio is outside $min_ratio-$max_ratio"; exit 1; }
