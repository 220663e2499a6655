#!/usr/bin/env bash
# Issue 29, "What it must do" 2: an untuned config under `pipetune autotune`
# for AUTOTUNE_SECONDS (20) writes a config that runs at least 0.95 of what
# the offline `tune` config measures, with no restart.
#
# For each untuned config (parallelism 1 everywhere, prefetch buffer 1):
#   - offline: `pipetune run` traced for TRACE_SECONDS, then `pipetune tune`;
#   - online: `pipetune autotune` for AUTOTUNE_SECONDS (one run, retuned live);
#   - the two written configs run alternately (autotuned, tuned, ...) ROUNDS
#     times each, RUN_SECONDS each, untraced. The ratio is the median of the
#     rounds' autotuned / tuned (each pair run back to back, so a burst of
#     other load hits both alike); the best of each side is printed too.
# Prints per config: the ratio, both best rates, each round, both configs'
# knobs, and autotune's decisions, refit cost and time to settle.
#
# usage: bench/autotune/autotune_vs_tune.sh [BUILD_DIR]      (default: <repo>/build)
# environment: ROUNDS=5 TRACE_SECONDS=8 AUTOTUNE_SECONDS=20 RUN_SECONDS=5 CORES=0,1
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
rounds="${ROUNDS:-5}"
trace_seconds="${TRACE_SECONDS:-8}"
autotune_seconds="${AUTOTUNE_SECONDS:-20}"
run_seconds="${RUN_SECONDS:-5}"
cores="${CORES:-0,1}"
out="$root/out/autotune"
mkdir -p "$out"
pipetune="$build/cli/pipetune"
[[ -x "$pipetune" ]] || { echo "build pipetune first: $pipetune" >&2; exit 2; }
pin=(taskset -c "$cores")

# The first number after "KEY": in a JSON file (pipetune writes one key per line).
number() { sed -n "s/^ *\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -n 1; }

# Latency-bound fetches before a cheap parse (needs workers, not cores), and
# a CPU-bound decode beside a latency-bound label fetch (needs both, within
# the cores). Endless sources: the runs are timed.
cat >"$out/remote.json" <<'JSON'
{
  "name": "remote",
  "stages": [
    { "name": "objects", "op": "range", "args": { "bytes": "100KiB" } },
    { "name": "fetch", "op": "map", "fn": "io_wait", "args": { "ms": 5, "jitter": 0.5 }, "parallelism": 1 },
    { "name": "parse", "op": "map", "fn": "cpu_work", "args": { "us": 200 }, "parallelism": 1 },
    { "name": "batch", "op": "batch", "args": { "size": 16 } },
    { "name": "prefetch", "op": "prefetch", "buffer": 1 }
  ]
}
JSON
cat >"$out/mixed.json" <<'JSON'
{
  "name": "mixed",
  "stages": [
    { "name": "source", "op": "range" },
    { "name": "decode", "op": "map", "fn": "cpu_work", "args": { "us": 1000, "jitter": 0.3 }, "parallelism": 1 },
    { "name": "fetch_labels", "op": "map", "fn": "io_wait", "args": { "ms": 2 }, "parallelism": 1 },
    { "name": "batch", "op": "batch", "args": { "size": 8 } },
    { "name": "prefetch", "op": "prefetch", "buffer": 1 }
  ]
}
JSON

# "fetch 64, parse 6, prefetch 2": each stage's parallelism or buffer as written.
knobs() {
  python3 -c 'import json,sys
c = json.load(open(sys.argv[1]))
print(", ".join("%s %s" % (s["name"], s.get("parallelism", s.get("buffer"))) for s in c["stages"]
                if "parallelism" in s or "buffer" in s))' "$1"
}

best() { printf '%s\n' "$@" | sort -g | tail -n 1; }

for name in remote mixed; do
  cfg="$out/$name.json"
  "${pin[@]}" "$pipetune" run "$cfg" --seconds "$trace_seconds" --trace "$out/$name.ptrace" --progress never >/dev/null
  "${pin[@]}" "$pipetune" tune "$out/$name.ptrace" -o "$out/$name.tuned.json" >"$out/$name.tune.log"
  "${pin[@]}" "$pipetune" autotune "$cfg" --seconds "$autotune_seconds" -o "$out/$name.autotuned.json" \
    --trace "$out/$name.autotune.ptrace" >"$out/$name.autotune.log"
  auto=() tuned=()
  for ((r = 0; r < rounds; r++)); do
    "${pin[@]}" "$pipetune" run "$out/$name.autotuned.json" --seconds "$run_seconds" --progress never \
      --summary "$out/$name.a.json" >/dev/null
    auto+=("$(number "$out/$name.a.json" steady_examples_per_second)")
    "${pin[@]}" "$pipetune" run "$out/$name.tuned.json" --seconds "$run_seconds" --progress never \
      --summary "$out/$name.t.json" >/dev/null
    tuned+=("$(number "$out/$name.t.json" steady_examples_per_second)")
  done
  a="$(best "${auto[@]}")" t="$(best "${tuned[@]}")"
  ratios=()
  for ((r = 0; r < rounds; r++)); do ratios+=("$(echo "${auto[r]} / ${tuned[r]}" | bc -l)"); done
  median="$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')"
  refit="$(sed -n 's/.* refits, \([0-9.]*\) ms each on average.*/\1/p' "$out/$name.autotune.log")"
  settled="$(sed -n 's/^settled at \([0-9.]*\) s/\1/p' "$out/$name.autotune.log")"
  printf '%-7s autotuned/tuned %.3f (median of %d rounds; best %.1f against %.1f ex/s)  refit %s ms  settled at %s s\n' \
    "$name" "$median" "$rounds" "$a" "$t" "${refit:-?}" "${settled:-never}"
  echo "        each round (ex/s): autotuned $(printf '%.0f ' "${auto[@]}"); tuned $(printf '%.0f ' "${tuned[@]}")"
  echo "        knobs: autotuned $(knobs "$out/$name.autotuned.json"); tuned $(knobs "$out/$name.tuned.json")"
  echo "        autotune's decisions:"; grep -E "change|kept|rolled|settled|declined" "$out/$name.autotune.log" \
    | grep -v '^settled config' | sed 's/^/          /'
done
