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
# (default 400, generated once into WORK_DIR/data; the example repeats them), ROUNDTRIP_MIN_RATIO and
# ROUNDTRIP_MAX_RATIO (measured/predicted, default 0.75 and 1.25 (a fresh-clone CI run measured 1.122: the model under-predicts a plan that adds a worker): the model's
# accuracy on the image pipeline in docs/benchmarks.md, 0.77 on a quiet
# machine, and the analyzer's upper 1.1; docs/benchmarks-rewrite.md).
#
# Exit 0: the round trip worked and the throughput is within the bounds.
# Exit 77 (CTest: skipped): it worked, but other programs took more than
# ROUNDTRIP_MAX_OTHERS (default 0.15) of the machine's CPU during the tuned
# run (/proc/stat less this script's children), so the throughput cannot be
# held to the prediction (pipetune report says
# "predictions with more workers or cores are optimistic"). Exit 1: a step
# failed, or a quiet machine missed the bounds.
set -euo pipefail
build=$(cd "$1" && pwd)
original=$2
dir=$(cd "$3" && pwd)
seconds=${ROUNDTRIP_SECONDS:-5}
images=${ROUNDTRIP_IMAGES:-400}
min_ratio=${ROUNDTRIP_MIN_RATIO:-0.75}
max_ratio=${ROUNDTRIP_MAX_RATIO:-1.25}
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
(cd "$work" && "$pipetune" profile --trace "$work/untuned.trace" -- "$program" --dir "$dir" --seconds "$seconds") |
  tee "$work/untuned.out"

step "a source the plan cannot be put into: tune --source exits 2, naming the knob, writing nothing"
# Every knob literal becomes a macro, so whichever knobs the plan changes
# (it differs with the machine: under a sanitizer decode may stay at 1),
# the first it meets cannot be rewritten. --no-cache: a plan that inserts a
# cache (where the sanitizer's slow consumer makes one pay) is refused
# before any knob is met, for the stage it adds, which is not this case.
sed -e 's/^constexpr int kDecodeWorkers = 1;/#define kDecodeWorkers 1\n#define KNOB_ONE 1/' \
    -e 's/\.Parallelism(1)/.Parallelism(KNOB_ONE)/g' -e 's/\.Buffer(1)/.Buffer(KNOB_ONE)/g' \
    "$original" >"$work/macro.cc"
cp "$work/macro.cc" "$work/macro.orig.cc"
set +e
(cd "$work" && "$pipetune" tune "$work/untuned.trace" --no-cache --source "$work/macro.cc" -o "$work/tuned.json" \
   --source-build-dir "$build" >"$work/macro.log" 2>&1)
rc=$?
set -e
cat "$work/macro.log"
if [ "$rc" != 2 ] || ! grep -Eq 'stage "[a-z]+": knob (parallelism|buffer)' "$work/macro.log" ||
   ! grep -Eq 'macro (kDecodeWorkers|KNOB_ONE)' "$work/macro.log" || ! cmp -s "$work/macro.cc" "$work/macro.orig.cc"; then
  echo "FAIL: tune --source on a macro-valued knob: exit $rc (want 2, the knob named, the file unchanged)"; exit 1
fi

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

# CPU the whole machine spent (/proc/stat, in clock ticks) and CPU this
# shell's children spent (seconds): their difference over the run is what
# other programs took.
machine_cpu() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
# `times` must run in this shell (not a subshell) to see its children.
children_cpu() {
  awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] } print n }' "$1"
}
load_before=$(cut -d' ' -f1 /proc/loadavg)
read -r busy0 total0 < <(machine_cpu)
times >"$work/times0"
own0=$(children_cpu "$work/times0")
step "re-run the tuned program"
"$program" --dir "$dir" --seconds "$seconds" | tee "$work/tuned.out"
read -r busy1 total1 < <(machine_cpu)
times >"$work/times1"
own1=$(children_cpu "$work/times1")
others=$(awk -v b="$((busy1 - busy0))" -v t="$((total1 - total0))" -v o="$own0" -v p="$own1" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { x = (b - (p - o) * hz) / t; if (x < 0) x = 0; printf "%.2f", x }')
measured=$(sed -n 's/^throughput: \([0-9.]*\) outputs.*/\1/p' "$work/tuned.out")
ratio=$(awk -v m="$measured" -v p="$predicted" 'BEGIN { printf "%.3f", m / p }')
load_after=$(cut -d' ' -f1 /proc/loadavg)
untuned=$(sed -n 's/^throughput: \([0-9.]*\) outputs.*/\1/p' "$work/untuned.out")
step "untuned $untuned outputs/s; tuned: measured $measured outputs/s, predicted $predicted: measured/predicted $ratio (bounds $min_ratio-$max_ratio); other programs took $others of the machine's CPU during the tuned run (load average $load_before / $load_after on $(nproc) cores)"
if [ -z "$measured" ] || [ "$(grep -c '^+' "$work/source.diff")" -lt 2 ]; then
  echo "FAIL: the tuned program printed no throughput, or the source diff is empty"; exit 1
fi
if [ "${ROUNDTRIP_SANITIZED:-0}" = 1 ]; then
  echo "SKIP: the round trip worked; under AddressSanitizer timings drift (docs/benchmarks.md), so the"
  echo "      throughput is not held to the prediction"
  exit 77
fi
if awk -v x="$others" -v max="${ROUNDTRIP_MAX_OTHERS:-0.15}" 'BEGIN { exit !(x > max) }'; then
  echo "SKIP: the round trip worked, but other programs took $others of the CPU (more than ${ROUNDTRIP_MAX_OTHERS:-0.15}):"
  echo "      throughput cannot be held to the plan's prediction here"
  exit 77
fi
awk -v r="$ratio" -v lo="$min_ratio" -v hi="$max_ratio" 'BEGIN { exit !(r >= lo && r <= hi) }' ||
  { echo "FAIL: measured/predicted $ratio is outside $min_ratio-$max_ratio"; exit 1; }
