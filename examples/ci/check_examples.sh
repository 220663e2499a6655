#!/usr/bin/env bash
# pipetune's own CI gate: checks two example pipelines against the baselines
# committed in examples/ci/baselines/, as a user's CI job would (see
# docs/ci-gate.md). The tolerance (30%) is what a loaded 2-core CI machine
# keeps green: CPU per element there moves a few percent between runs, and a
# uniformly slower or busier machine is the `machine` verdict, which passes.
# Writes the Markdown and JUnit reports into OUT_DIR when one is given.
#
# Usage: examples/ci/check_examples.sh PIPETUNE_BINARY [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$1"
out="${2:-$(mktemp -d)}"
mkdir -p "$out"
status=0
for pipeline in two_stage_cpu per_batch; do
  "$bin" check "$here/../synthetic/$pipeline.json" --baseline "$here/baselines/$pipeline.baseline.json" \
    --runs 3 --seconds 1 --tolerance 30 \
    --markdown "$out/$pipeline.md" --junit "$out/$pipeline.junit.xml" || status=$?
  [[ $status -eq 0 ]] || { echo "pipetune check failed on $pipeline (exit $status)"; exit "$status"; }
done
