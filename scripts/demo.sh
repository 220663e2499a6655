#!/usr/bin/env bash
# The main job, on a fresh machine: install dependencies, build, generate the
# image example's JPEGs, then run the example pipeline traced and print what
# it achieved. Usage: scripts/demo.sh [SECONDS]  (default 20)
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
