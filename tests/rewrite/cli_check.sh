#!/usr/bin/env bash
# pipetune-rewrite through its command line:
#   cli_check.sh REWRITE SOURCE_DIR BUILD_DIR PIPETUNE
set -euo pipefail
rewrite=$1 src=$2 build=$3 pipetune=$4
example=$src/examples/builder/image_builder.cc
before=$(cksum <"$example")

# apply without -i: a unified diff on stdout, the file untouched.
out=$("$rewrite" apply "$example" --plan "$src/tests/rewrite/plans/image_builder_decode3.json" -p "$build" 2>&1)
grep -q '^+constexpr int kDecodeWorkers = 3;' <<<"$out" || { echo "no diff line in:"; echo "$out"; exit 1; }
grep -q '^-constexpr int kDecodeWorkers = 1;' <<<"$out" || { echo "no diff line in:"; echo "$out"; exit 1; }

# A stage the source does not have: exit 2, the stage named.
set +e
out=$("$rewrite" apply "$example" --plan "$src/tests/rewrite/plans/image_builder_unknown_stage.json" -i -p "$build" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || { echo "exit $rc, want 2: $out"; exit 1; }
grep -q 'stage "resize" of the plan' <<<"$out" || { echo "unnamed stage in: $out"; exit 1; }
[ "$(cksum <"$example")" = "$before" ] || { echo "the example changed"; exit 1; }

# Flags after --, instead of a compilation database.
out=$("$rewrite" extract "$src/examples/builder/synthetic_builder.cc" -- -std=c++20 -I"$src/runtime/include" \
      -I"$src/base/include" -I"$src/models/include" -I"$src/tracer/include")
grep -q 'stage "augment": op map, fn spin, parallelism 1' <<<"$out" || { echo "$out"; exit 1; }

# Usage errors are exit 2.
set +e
"$rewrite" frobnicate x.cc >/dev/null 2>&1; rc=$?
set -e
[ "$rc" = 2 ] || { echo "unknown command: exit $rc"; exit 1; }

# pipetune itself never links LLVM.
if ldd "$pipetune" | grep -E 'libclang|libLLVM'; then echo "pipetune links LLVM"; exit 1; fi
echo "ok"
