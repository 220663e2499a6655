#!/usr/bin/env bash
# Analyzer speed and memory: writes traces of 1 and 10 million elements'
# events (every element a recorded span) and analyses each on one thread,
# in its own process. Prints records/s for each, then the peak-RSS ratio
# (10M / 1M) last: memory independent of trace length means about 1.
# Usage: bench/analyzer/speed.sh [BUILD_DIR] [SCRATCH_DIR]
set -euo pipefail
build="${1:-build}"
scratch="${2:-${TMPDIR:-/tmp}}"
bin="$build/bench/analyzer/analyzer_speed"
small="$scratch/pipetune_speed_1m.trace"
large="$scratch/pipetune_speed_10m.trace"
"$bin" make --elements 1000000 --out "$small"
"$bin" make --elements 10000000 --out "$large"
out_small="$("$bin" analyze "$small")"
out_large="$("$bin" analyze "$large")"
echo "$out_small"
echo "$out_large"
rss() { sed -n 's/.*peak RSS \([0-9.]*\) MiB.*/\1/p' <<<"$1"; }
rm -f "$small" "$large"
awk -v a="$(rss "$out_small")" -v b="$(rss "$out_large")" \
  'BEGIN { printf "peak RSS, 10M-element trace over 1M-element trace: %.2f\n", b / a }'
