#!/usr/bin/env bash
# Throughput of a pipeline traced over the same pipeline untraced, measured
# side by side in one run: ROUNDS pairs of runs, the order inside each pair
# alternating so that drift on a shared machine falls on both sides alike.
# Prints each pair's ratio, then the median ratio last.
#
# Usage: bench/tracer/traced_over_untraced.sh [CONFIG] [SECONDS] [ROUNDS] [BUILD_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
config="${1:-$root/examples/synthetic/fine_grained_cpu.json}"
seconds="${2:-5}"
rounds="${3:-5}"
build="${4:-$root/build}"
pipetune="$build/cli/pipetune"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

rate() {  # examples/s from a summary file
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["examples_per_second"])' "$1"
}
run_once() {  # $1: traced|untraced, $2: round
  local extra=()
  [[ "$1" == traced ]] && extra=(--trace "$work/$2.trace")
  "$pipetune" run "$config" --seconds "$seconds" --progress never \
    --summary "$work/$1.$2.json" "${extra[@]}" >/dev/null
  rate "$work/$1.$2.json"
}

ratios=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then u=$(run_once untraced "$r"); t=$(run_once traced "$r")
  else t=$(run_once traced "$r"); u=$(run_once untraced "$r"); fi
  ratio=$(/usr/bin/python3 -c "print(f'{$t / $u:.4f}')")
  ratios+=("$ratio")
  size=$(stat -c %s "$work/$r.trace")
  printf 'round %d: untraced %.0f/s  traced %.0f/s  ratio %s  trace %d bytes\n' "$r" "$u" "$t" "$ratio" "$size"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
echo "config: $config, ${seconds}s runs, $rounds rounds"
echo "traced/untraced throughput (median of $rounds pairs): $median"
