#!/usr/bin/env bash
# What tracing costs a CPU-bound pipeline, counted rather than timed: runs
# CONFIG traced under `perf record` and reports the share of all CPU samples
# spent in the tracer (the sampler thread, "pipetune-trace", and every
# pipetune::tracer:: function on the pipeline's own threads). On a pipeline
# that keeps every core busy, traced over untraced throughput is at least
# 1 - that share. Timing the two side by side cannot resolve a fraction of a
# percent on a shared VM (runtime_bench's A/A control moves by +-2%); this
# can. Prints the implied ratio last.
#
# Usage: bench/tracer/tracing_share.sh [CONFIG] [SECONDS] [BUILD_DIR]
# Needs perf (Debian package linux-perf; scripts/setup.sh --bench installs it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
config="${1:-$root/examples/image/image_train_tuned.json}"
seconds="${2:-15}"
build="${3:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
command -v perf >/dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 2; }

perf record -q -F 2000 -o "$work/perf.data" "$build/cli/pipetune" run "$config" --seconds "$seconds" \
  --trace "$work/run.trace" --progress never >"$work/run.txt"
head -1 "$work/run.txt"
# One line per sample: the thread's name, then the function it was in.
perf script -i "$work/perf.data" -F comm,ip,sym 2>/dev/null >"$work/samples.txt"
/usr/bin/python3 - "$work/samples.txt" <<'PY'
import sys
total = sampler = api = 0
for line in open(sys.argv[1], errors="replace"):
    if not line.strip():
        continue
    total += 1
    if line.lstrip().startswith("pipetune-trace"):
        sampler += 1
    elif "pipetune::tracer::" in line:
        api += 1
share = (sampler + api) / max(total, 1)
print(f"{total} CPU samples: sampler thread {sampler} ({100 * sampler / max(total, 1):.3f}%), "
      f"tracer API on pipeline threads {api} ({100 * api / max(total, 1):.3f}%)")
print(f"traced/untraced throughput implied (CPU-bound pipeline): >= {1 - share:.4f}")
PY
