#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs the image pipeline feeding a GPU
# (pipetune_gpu_train) under `pipetune profile`, first as configured
# (under-configured: one worker per stage) and then tuned from its own trace,
# and prints GPU busy fraction, the input-stall share of GPU idle time and
# images/s for both; then the cost of profiling (steps/s with and without it,
# side by side) and the trace's kernel count and time against the program's
# own CUDA-event measurement.
#
# Usage, from the repository root, after building (scripts/build.sh):
#   bash examples/gpu_train/run.sh [SECONDS] [STEP_MS]    (defaults 20, 20)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
seconds="${1:-20}"
step_ms="${2:-20}"
pipetune=build/cli/pipetune
train=build/examples/gpu_train/pipetune_gpu_train
for f in "$pipetune" "$train"; do
  [[ -x "$f" ]] || { echo "run.sh: $f is missing: build first (bash scripts/build.sh build)" >&2; exit 2; }
done
mkdir -p out/gpu_train
build/examples/image/pipetune_make_images --out examples/image/data

run() {  # run NAME CONFIG: profiled run, its report as JSON
  local name="$1" config="$2"
  echo "== $name: $config, ${seconds} s under pipetune profile"
  "$pipetune" profile --trace "out/gpu_train/$name.trace" -- \
    "$train" "$config" --seconds "$seconds" --step-ms "$step_ms" | tee "out/gpu_train/$name.json"
  "$pipetune" report "out/gpu_train/$name.trace" --format json -o "out/gpu_train/$name.report.json"
  "$pipetune" report "out/gpu_train/$name.trace" | grep -E "^(gpu|consumer)" || true
}

run untuned examples/image/image_train.json
"$pipetune" tune out/gpu_train/untuned.trace -o out/gpu_train/tuned_config.json
run tuned out/gpu_train/tuned_config.json

echo "== the cost of profiling: the tuned config, ${seconds} s each, without and with pipetune profile"
"$train" out/gpu_train/tuned_config.json --seconds "$seconds" --step-ms "$step_ms" > out/gpu_train/bare.json
"$pipetune" profile --trace out/gpu_train/overhead.trace -- \
  "$train" out/gpu_train/tuned_config.json --seconds "$seconds" --step-ms "$step_ms" > out/gpu_train/profiled.json

/usr/bin/env python3 - out/gpu_train "$pipetune" <<'PY'
import json, subprocess, sys
d, pipetune = sys.argv[1], sys.argv[2]
def load(name):
    text = open(f"{d}/{name}.json").read().strip().splitlines()
    return json.loads([l for l in text if l.startswith("{")][-1])
for name in ("untuned", "tuned"):
    run, rep = load(name), json.load(open(f"{d}/{name}.report.json"))
    gpu = rep.get("gpu") or {}
    print(f"{name:8s} {run['images_per_second']:8.1f} images/s  GPU busy {100*gpu.get('busy_fraction', 0):5.1f}%  "
          f"input stalls {100*gpu.get('input_stall_share', 0):5.1f}% of GPU idle  verdict {gpu.get('verdict')}")
bare, prof = load("bare"), load("profiled")
print(f"steps/s without profiling {bare['steps_per_second']:.2f}, with {prof['steps_per_second']:.2f} "
      f"(ratio {prof['steps_per_second']/bare['steps_per_second']:.3f})")
# Kernel count and time: the trace against the program's CUDA events.
out = subprocess.run([pipetune, "export", f"{d}/tuned.trace", "--format", "chrome", "-o", f"{d}/tuned.chrome.json"],
                     capture_output=True, text=True)
events = json.load(open(f"{d}/tuned.chrome.json"))
events = events["traceEvents"] if isinstance(events, dict) else events
kernels = [e for e in events if e.get("cat") == "kernel"]
ktime = sum(e.get("dur", 0) for e in kernels) / 1e6
run = load("tuned")
print(f"kernels in trace {len(kernels)} (program launched {run['kernels']} GEMMs; cuBLAS may use more than one kernel each), "
      f"kernel time in trace {ktime:.3f} s vs CUDA events {run['kernel_seconds']:.3f} s "
      f"(ratio {ktime/max(run['kernel_seconds'],1e-9):.3f})")
PY
