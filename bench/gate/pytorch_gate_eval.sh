#!/usr/bin/env bash
# Measures the CI gate on a real PyTorch DataLoader (`pipetune check -- python3
# train.py`): false alarms on the unchanged script checked again and again
# against one baseline, and detection of one transform made 4x slower. The
# script is a small training loop (96 samples, batches of 8, one worker) whose
# two transforms do CPU work (Scale 0.5 ms, Blur 2 ms per sample). Prints one
# table row per case, as gate_eval.sh does.
#
# Needs jq, and a Python with torch and torchvision.
# Usage: bench/gate/pytorch_gate_eval.sh [PIPETUNE_BINARY] [FALSE_ALARM_CHECKS] [SLOW_CHECKS]
# Env: RUNS (default 5), TOLERANCE (percent, default 10), PYTHON (default /usr/bin/python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-$root/build/cli/pipetune}"
alarm_checks="${2:-20}"
slow_checks="${3:-1}"
runs="${RUNS:-5}"
tolerance="${TOLERANCE:-10}"
python="${PYTHON:-/usr/bin/python3}"
command -v jq >/dev/null || { echo "pytorch_gate_eval.sh needs jq" >&2; exit 2; }
"$python" -c "import torch, torchvision" 2>/dev/null || { echo "$python has no torch/torchvision" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

script() {  # NAME BLUR_FACTOR: the CI test's training script (tests/python/test_gate.py)
  "$python" "$root/tests/python/test_gate.py" write-script "$work" "$1.py" "$2"
}
script train 1
script slow 4

start=$(date +%s.%N)
"$bin" baseline --runs "$runs" -o "$work/base.json" -- "$python" "$work/train.py" >/dev/null
end=$(date +%s.%N)
printf 'baseline: %d runs in %.1f s\n\n' "$runs" "$(echo "$end - $start" | bc -l)"

echo "| case | checks | failed | verdicts | stages named | mean seconds per check |"
echo "|---|---:|---:|---|---|---:|"
evaluate() {  # LABEL SCRIPT CHECKS
  local label="$1" py="$2" n="$3" failed=0 verdicts="" named="" start end rc
  start=$(date +%s.%N)
  for ((i = 0; i < n; ++i)); do
    set +e
    "$bin" check --baseline "$work/base.json" --runs "$runs" --tolerance "$tolerance" --format json \
      -- "$python" "$work/$py.py" >"$work/out.json" 2>"$work/err.txt"
    rc=$?
    set -e
    if [[ $rc -eq 2 ]]; then cat "$work/err.txt" >&2; exit 2; fi
    [[ $rc -eq 1 ]] && failed=$((failed + 1))
    verdicts+="$(jq -r '.verdict' "$work/out.json") "
    named+="$(jq -r '[.stages[] | select(.regressed) | .name] + (if .throughput_regressed then ["throughput"] else [] end) | join("+") | if . == "" then "-" else . end' "$work/out.json") "
  done
  end=$(date +%s.%N)
  printf '| %s | %d | %d | %s | %s | %.1f |\n' "$label" "$n" "$failed" \
    "$(tr ' ' '\n' <<<"$verdicts" | grep -v '^$' | sort | uniq -c | awk '{printf "%s%s x%d", (NR>1?", ":""), $2, $1}')" \
    "$(tr ' ' '\n' <<<"$named" | grep -v '^$' | sort | uniq -c | awk '{printf "%s%s x%d", (NR>1?", ":""), $2, $1}')" \
    "$(echo "($end - $start) / $n" | bc -l)"
}
evaluate "unchanged script (false alarms)" train "$alarm_checks"
evaluate "transform[1]:Blur 4x slower" slow "$slow_checks"
