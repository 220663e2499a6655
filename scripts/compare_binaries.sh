#!/usr/bin/env bash
# Proves a refactor kept every result: the same traces through two pipetune
# binaries (before and after), every output compared byte for byte.
# Usage: scripts/compare_binaries.sh OLD_PIPETUNE NEW_PIPETUNE [TRACE...]
# Without traces: the CLI goldens' traces, the DataLoader goldens' main
# traces (their workers' files beside them), and one fresh 3-second run of
# each synthetic example (recorded by NEW). For each trace: report in every format,
# report with what-if questions, the gate's baseline file and its check of
# the trace (text and JSON), the exported timeline, tune's JSON plan and its
# tuned config.
# Prints one line per difference and the count; exits 1 when any differ.
# COMPARE_KEEP=DIR keeps both sides of each difference there (old.F, new.F).
# COMPARE_HANDOFF_NS=N: the hand-off cost both give `tune` when both take
# --handoff-ns (default 8000), in place of the host's probe.
set -euo pipefail
old="$(realpath "$1")"; new="$(realpath "$2")"; shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
traces=("$@")
if (( ${#traces[@]} == 0 )); then
  traces=("$root"/tests/cli/golden/*.trace "$root"/tests/analyzer/dataloader_golden/*/trace)
  for config in "$root"/examples/synthetic/*.json; do
    name="$(basename "$config" .json)"
    "$new" run "$config" --seconds 3 --trace "$work/$name.trace" >/dev/null 2>&1 || continue
    traces+=("$work/$name.trace")
  done
fi
# The hand-off probe (workflow/handoff_probe.h) measures this host afresh at
# every tune of a config with adjacent maps: its figure moves between two
# runs of one binary, and with it every throughput and gain the plan
# derives from it. When both binaries take `tune --handoff-ns`, both are
# given one figure (COMPARE_HANDOFF_NS, default 8000: within what the probe
# measures here) and their plans are compared exactly. Otherwise (a
# baseline from before the flag) every decimal number of such a plan is
# masked; what it decides (the options, the chosen one, each stage's knobs
# as integers, the notes' words) and the tuned config are still compared
# exactly.
handoff_args=()
if "$old" tune --help 2>&1 | grep -q -- --handoff-ns && "$new" tune --help 2>&1 | grep -q -- --handoff-ns; then
  handoff_args=(--handoff-ns "${COMPARE_HANDOFF_NS:-8000}")
fi
mask_handoff_probe() {
  (( ${#handoff_args[@]} == 0 )) || return 0
  python3 - "$1" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
if "hand-off" in text:
    text = re.sub(r"-?[0-9]+\.[0-9]+(e[-+]?[0-9]+)?", "N", text)
open(path, "w").write(text)
PY
}
# Each output of one binary for one trace goes to DIR/NAME.*; exit codes too
# (a refused trace is an output like any other, so errors do not stop this).
outputs() {
  set +e
  local bin="$1" trace="$2" dir="$3"
  mkdir -p "$dir"
  for format in text json markdown html; do
    "$bin" report "$trace" --format "$format" >"$dir/report.$format" 2>&1; echo "rc=$?" >>"$dir/report.$format"
  done
  "$bin" report "$trace" --format json --what-if cores=+2 --what-if cache=none >"$dir/what_if" 2>&1
  echo "rc=$?" >>"$dir/what_if"
  # The CI gate: the baseline file each binary records from the trace, and
  # its check of the trace against that baseline.
  "$bin" baseline -o "$dir/baseline.json" "$trace" >"$dir/baseline" 2>&1; echo "rc=$?" >>"$dir/baseline"
  for format in text json; do
    "$bin" check --baseline "$dir/baseline.json" --format "$format" "$trace" >"$dir/check.$format" 2>&1
    echo "rc=$?" >>"$dir/check.$format"
  done
  # The timeline `export` writes (a DataLoader's processes on one, or the trace alone).
  "$bin" export "$trace" -o "$dir/export.json" >"$dir/export" 2>&1; echo "rc=$?" >>"$dir/export"
  sed -i "s#$dir#DIR#g" "$dir"/*
  set -e
  tune_outputs "$bin" "$trace" "$dir"
}
tune_outputs() {
  set +e
  local bin="$1" trace="$2" dir="$3"
  rm -f "$dir/tuned.json"
  "$bin" tune "$trace" --format json "${handoff_args[@]}" -o "$dir/tuned.json" >"$dir/plan" 2>&1
  echo "rc=$?" >>"$dir/plan"
  sed -i "s#$dir#DIR#g" "$dir/plan" "$dir/tuned.json" 2>/dev/null
  mask_handoff_probe "$dir/plan"
  set -e
}
same() { cmp -s "$work/old/$1/$2" "$work/new/$1/$2"; }
differences=0; compared=0
for trace in "${traces[@]}"; do
  # Named by the path, so that traces named alike (DIR/trace) stay apart.
  name="$(printf '%s' "$trace" | tr -c 'A-Za-z0-9._-' '_')"
  outputs "$old" "$trace" "$work/old/$name"
  outputs "$new" "$trace" "$work/new/$name"
  # Where the probe's figure decides between two plans (a fusion chosen or
  # not), tune runs again, twice at most: a change the refactor made stays.
  # With the figure given, a plan that differs differs every time.
  for attempt in 1 2; do
    (( ${#handoff_args[@]} == 0 )) || break
    { same "$name" plan && same "$name" tuned.json; } && break
    tune_outputs "$old" "$trace" "$work/old/$name"; tune_outputs "$new" "$trace" "$work/new/$name"
  done
  for f in "$work/old/$name"/*; do
    compared=$((compared + 1))
    if ! same "$name" "$(basename "$f")"; then
      echo "differs: $name $(basename "$f")"; differences=$((differences + 1))
      if [[ -n "${COMPARE_KEEP:-}" ]]; then
        mkdir -p "$COMPARE_KEEP/$name"; cp "$f" "$COMPARE_KEEP/$name/old.$(basename "$f")"
        cp "$work/new/$name/$(basename "$f")" "$COMPARE_KEEP/$name/new.$(basename "$f")"
      fi
    fi
  done
done
echo "compared $compared outputs of ${#traces[@]} traces: $differences differ"
(( differences == 0 ))
