#!/usr/bin/env bash
# The main job, on a fresh machine: install dependencies, build, generate the
# image example's JPEGs, then run the example pipeline traced and print what
# it achieved, report what limits it, tune it from the trace and run the tuned
# config, printing before and after. Usage: scripts/demo.sh [SECONDS]  (default 20)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-20}"
bash scripts/setup.sh
bash scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo
pipetune=build/cli/pipetune
mkdir -p out

echo "== generating the image example's JPEG files (skipped when present)"
build/examples/image/pipetune_make_images --out examples/image/data

echo "== running examples/image/image_train.json for ${seconds} s, traced"
"$pipetune" run examples/image/image_train.json --seconds "$seconds" \
  --trace out/image_train.trace --summary out/image_train.summary.json

echo "== report: what limits the pipeline (also out/image_train.report.html)"
"$pipetune" report out/image_train.trace
"$pipetune" report out/image_train.trace --format html -o out/image_train.report.html

# The tuned config's relative `list_files` pattern is rewritten to name the
# same files from out/.
echo "== tuning from the trace (budgets: the config's resources)"
"$pipetune" tune out/image_train.trace -o out/image_train.tuned.json --diff

echo "== running the tuned config for ${seconds} s"
"$pipetune" run out/image_train.tuned.json --seconds "$seconds" \
  --summary out/image_train.tuned.summary.json
/usr/bin/env python3 - out/image_train.summary.json out/image_train.tuned.summary.json <<'PY'
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:3])
print(f"before: {before['examples_per_second']:.0f} images/s, stall {100*before['stall_fraction']:.0f}%")
print(f"after:  {after['examples_per_second']:.0f} images/s, stall {100*after['stall_fraction']:.0f}%")
print(f"tuned over untuned: {after['examples_per_second']/before['examples_per_second']:.2f}x")
PY
