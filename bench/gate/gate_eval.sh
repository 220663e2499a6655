#!/usr/bin/env bash
# Measures the CI gate (`pipetune check`) on a synthetic CPU-bound pipeline:
# false alarms on the unchanged pipeline, detection of a 30% cost increase in
# the bottleneck stage and in a non-bottleneck stage, a uniform slowdown of
# every stage (machine drift), a lowered parallelism (config only, timed), and
# a 2% change within a 5% tolerance. Prints one table row per case; also the
# run-to-run spread of CPU per element, wall per element and throughput in the
# baseline's runs (the claim that CPU per element is the steady measure).
#
# Needs jq and bc (scripts/setup.sh --bench).
# Usage: bench/gate/gate_eval.sh [PIPETUNE_BINARY] [FALSE_ALARM_CHECKS] [CHECKS_PER_CASE]
# Env: RUNS (default 5), SECONDS_PER_RUN (default 1), TOLERANCE (percent, default 10).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-$root/build/cli/pipetune}"
alarm_checks="${2:-20}"
case_checks="${3:-5}"
runs="${RUNS:-5}"
seconds="${SECONDS_PER_RUN:-1}"
tolerance="${TOLERANCE:-10}"
command -v jq >/dev/null || { echo "gate_eval.sh needs jq" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# decode (400 us, 2 workers) and augment (100 us) on 2 cores: CPU-bound, and
# decode carries 80% of the CPU. Endless source: every run lasts its seconds.
config() {  # NAME DECODE_US AUGMENT_US DECODE_PARALLELISM
  cat >"$work/$1.json" <<JSON
{ "name": "gate_cpu",
  "stages": [
    { "name": "source", "op": "range", "args": { "count": 100000000 } },
    { "name": "decode", "op": "map", "fn": "cpu_work", "args": { "us": $2 }, "parallelism": $4 },
    { "name": "augment", "op": "map", "fn": "cpu_work", "args": { "us": $3 }, "parallelism": 1 },
    { "name": "batch", "op": "batch", "args": { "size": 16 } },
    { "name": "prefetch", "op": "prefetch", "buffer": 2 } ] }
JSON
}
config base 400 100 2
config decode30 520 100 2
config augment30 400 130 2
config uniform30 520 130 2
config lowered 400 100 1
config small2 408 102 2

"$bin" baseline "$work/base.json" --runs "$runs" --seconds "$seconds" -o "$work/base.baseline.json" >/dev/null

echo "baseline: $runs runs x ${seconds}s; spread over its runs (max/min - 1):"
jq -r '
  def spread(xs): (xs | max) / (xs | min) - 1;
  .runs as $r |
  "  throughput                 \(spread([$r[].throughput]) * 100 | floor)%",
  ( ["decode", "augment"][] as $s |
    "  \($s) cpu/element  \(spread([$r[].stages[] | select(.name == $s) | .cpu_seconds_per_element]) * 1000 | floor / 10)%",
    "  \($s) wall/element \(spread([$r[].stages[] | select(.name == $s) | .wall_seconds_per_element]) * 1000 | floor / 10)%" )
' "$work/base.baseline.json"

echo
echo "| case | checks | failed | verdicts | stages named | mean seconds per check |"
echo "|---|---:|---:|---|---|---:|"
evaluate() {  # LABEL CONFIG CHECKS TOLERANCE RUNS
  local label="$1" cfg="$2" n="$3" tol="$4" r="$5" failed=0 verdicts="" named="" start end
  start=$(date +%s.%N)
  for ((i = 0; i < n; ++i)); do
    set +e
    "$bin" check "$work/$cfg.json" --baseline "$work/base.baseline.json" --runs "$r" --seconds "$seconds" \
      --tolerance "$tol" --format json >"$work/out.json" 2>"$work/err.txt"
    rc=$?
    set -e
    if [[ $rc -eq 2 ]]; then cat "$work/err.txt" >&2; exit 2; fi
    [[ $rc -eq 1 ]] && failed=$((failed + 1))
    verdicts+="$(jq -r '.verdict' "$work/out.json") "
    named+="$(jq -r '[.stages[] | select(.regressed) | .name] + (if .throughput_regressed then ["throughput"] else [] end) + (if .config.regressed then ["config " + (.config.predicted_change * 100 | floor | tostring) + "%"] else [] end) | join("+") | if . == "" then "-" else . end' "$work/out.json") "
  done
  end=$(date +%s.%N)
  printf '| %s | %d | %d | %s | %s | %.2f |\n' "$label" "$n" "$failed" \
    "$(tr ' ' '\n' <<<"$verdicts" | grep -v '^$' | sort | uniq -c | awk '{printf "%s%s x%d", (NR>1?", ":""), $2, $1}')" \
    "$(tr ' ' '\n' <<<"$named" | grep -v '^$' | sort | uniq -c | awk '{printf "%s%s x%d", (NR>1?", ":""), $2, $1}')" \
    "$(echo "($end - $start) / $n" | bc -l)"
}
evaluate "unchanged (false alarms)" base "$alarm_checks" "$tolerance" "$runs"
evaluate "decode +30% (bottleneck)" decode30 "$case_checks" "$tolerance" "$runs"
evaluate "augment +30% (not the bottleneck)" augment30 "$case_checks" "$tolerance" "$runs"
evaluate "every stage +30% (machine drift)" uniform30 "$case_checks" "$tolerance" "$runs"
evaluate "decode parallelism 2 -> 1, --runs 0" lowered "$case_checks" "$tolerance" 0
evaluate "every stage +2%, 5% tolerance" small2 "$case_checks" 5 "$runs"
