#!/usr/bin/env bash
# The DataLoader benchmark (docs/benchmarks-pytorch.md), from the repository root:
#   [CORES=N] bash examples/pytorch/bench.sh [BUILD_DIR] [IMAGES] [REPEATS]
# 1. profiles train.py as written (num_workers=0) and tunes it for CORES cores
#    (default 2; on a shared machine, the share actually available);
# 2. runs the grid num_workers 0..4 x prefetch_factor {2,4} and the tuned
#    setting, each applied through the bootstrap without tracing, side by side
#    in one run, REPEATS rounds interleaved; prints images/s and each one's
#    ratio to the tuned setting (median of the rounds);
# 3. runs num_workers=2 traced and untraced, interleaved, and prints the ratio.
set -euo pipefail
build=${1:-build}
images=${2:-384}
repeats=${3:-3}
python=${PIPETUNE_PYTHON:-/usr/bin/python3}
pipetune=$build/cli/pipetune
out=${OUT_DIR:-out/pytorch-bench}
mkdir -p "$out"
"$build/examples/image/pipetune_make_images" --out examples/image/data --count "$images" --quiet
train=(examples/pytorch/train.py --images "$images" --step-ms 20)

"$pipetune" profile --trace "$out/train.trace" -- "$python" "${train[@]}" >/dev/null
"$pipetune" tune "$out/train.trace" --cores "${CORES:-2}" -o "$out/tuned.json" | tee "$out/tune.txt"

configs=()
for w in 0 1 2 3 4; do
  for p in 2 4; do
    if (( w == 0 && p == 4 )); then continue; fi
    name="w${w}p${p}"
    if (( w == 0 )); then
      echo '{"num_workers": 0}' >"$out/$name.json"
    else
      echo "{\"num_workers\": $w, \"prefetch_factor\": $p}" >"$out/$name.json"
    fi
    configs+=("$name")
  done
done
cp "$out/tuned.json" "$out/tuned-setting.json"
configs+=(tuned-setting)

# An untraced run with kwargs applied: the bootstrap alone, no PIPETUNE_TRACE.
rate() {  # rate KWARGS.json -> images/s
  PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" PIPETUNE_DATALOADER_APPLY="$1" \
    "$python" "${train[@]}" | sed -n 's/^images\/s: \([0-9.]*\).*/\1/p'
}
traced_rate() {  # traced_rate KWARGS.json -> images/s
  "$pipetune" profile --trace "$out/traced.trace" --apply "$1" -- "$python" "${train[@]}" |
    sed -n 's/^images\/s: \([0-9.]*\).*/\1/p'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

: >"$out/grid.txt"
for ((r = 1; r <= repeats; r++)); do
  for c in "${configs[@]}"; do
    echo "$c $(rate "$out/$c.json")" >>"$out/grid.txt"
  done
done
tuned=$(awk '$1 == "tuned-setting" {print $2}' "$out/grid.txt" | median)
echo "setting            images/s (median of $repeats)   ratio to tuned"
for c in "${configs[@]}"; do
  m=$(awk -v c="$c" '$1 == c {print $2}' "$out/grid.txt" | median)
  printf '%-18s %10.1f   %6.3f\n' "$c" "$m" "$(awk -v a="$m" -v b="$tuned" 'BEGIN {print a / b}')"
done
echo "tuned kwargs: $(tr -d '\n ' <"$out/tuned.json")"

echo '{"num_workers": 2, "prefetch_factor": 2}' >"$out/two.json"
: >"$out/overhead.txt"
for ((r = 1; r <= repeats; r++)); do
  echo "untraced $(rate "$out/two.json")" >>"$out/overhead.txt"
  echo "traced $(traced_rate "$out/two.json")" >>"$out/overhead.txt"
done
u=$(awk '$1 == "untraced" {print $2}' "$out/overhead.txt" | median)
t=$(awk '$1 == "traced" {print $2}' "$out/overhead.txt" | median)
printf 'num_workers=2: untraced %.1f images/s, traced %.1f images/s, traced/untraced %.3f\n' "$u" "$t" \
  "$(awk -v a="$t" -v b="$u" 'BEGIN {print a / b}')"
