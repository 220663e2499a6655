#!/usr/bin/env bash
# Lints the code: the format of every tracked C/C++ file (the libraries,
# rewrite/, tests/, bench/, fuzz/, examples/), clang-tidy on the libraries'
# (*/src and */include of the parts):
#   scripts/lint.sh                 clang-format-14 check (--dry-run -Werror), no changes
#   scripts/lint.sh --fix-format    rewrites the files clang-format-14 would change
#   scripts/lint.sh --tidy          also clang-tidy-14 with the checks .clang-tidy names (slow:
#                                   minutes per part on 2 cores); needs BUILD_DIR/compile_commands.json
#   scripts/lint.sh --changed [REF] only the files changed against REF (default: main), for
#                                   both checks; combine with --tidy for a fast tidy run
#   scripts/lint.sh --tidy --no-format   clang-tidy only
#   BUILD_DIR=build-x scripts/lint.sh --tidy   compile_commands.json from another build
# Exit 1 when a check fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${BUILD_DIR:-build}"
jobs="${PIPETUNE_JOBS:-$(nproc)}"
tidy=0 fix=0 changed=0 format=1 ref=main
while (( $# )); do
  case "$1" in
    --tidy) tidy=1 ;;
    --fix-format) fix=1 ;;
    --no-format) format=0 ;;
    --changed)
      changed=1
      if [[ $# -gt 1 && "$2" != --* ]]; then ref="$2"; shift; fi ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "lint.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# clang-tidy reads the libraries' code: every part's src/ and include/. The
# format check reads every tracked file (no list to forget a folder in: a
# benchmark, an example or a fuzz target is read and changed beside the code
# it calls, in the same layout; CI's scripts/test.sh runs this check).
parts=(base models tracer cupti runtime analyzer tuner workflow loader cli)
list_files() {  # PATTERN [DIR...]: tracked files of DIRs (none: of the parts), or only the changed ones
  local pattern="$1"; shift
  local dirs=("$@")
  if (( ! ${#dirs[@]} )); then
    for p in "${parts[@]}"; do
      [[ -d "$p/src" ]] && dirs+=("$p/src")
      [[ -d "$p/include" ]] && dirs+=("$p/include")
    done
  fi
  if (( changed )); then
    git diff --name-only --diff-filter=ACMR "$ref" -- "${dirs[@]}"
    git ls-files --others --exclude-standard -- "${dirs[@]}"
  else
    git ls-files -- "${dirs[@]}"
  fi | grep -E "$pattern" | sort -u || true
}

status=0
mapfile -t format_files < <(list_files '\.(h|cc|c)$' .)
if (( fix )); then
  if (( ${#format_files[@]} )); then clang-format-14 -i "${format_files[@]}"; fi
  echo "lint: clang-format-14 rewrote ${#format_files[@]} files where needed"
elif (( format && ${#format_files[@]} )); then
  if clang-format-14 --dry-run -Werror "${format_files[@]}" 2>"$build_dir.format.log"; then
    echo "lint: clang-format-14: ${#format_files[@]} files formatted"
  else
    n="$(grep -c "error:" "$build_dir.format.log" || true)"
    echo "lint: clang-format-14: $n places differ (scripts/lint.sh --fix-format rewrites them); first ones:"
    grep "error:" "$build_dir.format.log" | cut -d: -f1 | sort | uniq -c | sort -rn | head -20
    status=1
  fi
fi

if (( tidy )); then
  if [[ ! -f "$build_dir/compile_commands.json" ]]; then
    echo "lint: no $build_dir/compile_commands.json: run scripts/build.sh $build_dir first" >&2
    exit 2
  fi
  mapfile -t tidy_files < <(list_files '\.(cc|c)$')
  # Only files the build compiles (a part built elsewhere, e.g. cupti without CUDA, is skipped).
  keep=()
  for f in "${tidy_files[@]}"; do
    grep -q "\"file\": \"$root/$f\"" "$build_dir/compile_commands.json" && keep+=("$f")
  done
  if (( ${#keep[@]} )); then
    log="$build_dir.tidy.log"
    # -quiet: only findings; one process per file, $jobs at a time.
    if printf '%s\n' "${keep[@]}" |
        xargs -P "$jobs" -n 1 clang-tidy-14 -p "$build_dir" --quiet --warnings-as-errors='*' >"$log" 2>&1; then
      echo "lint: clang-tidy-14: ${#keep[@]} files clean"
    else
      echo "lint: clang-tidy-14 findings (full log $log):"
      grep -E "(warning|error):" "$log" | sort -u | head -50
      status=1
    fi
  else
    echo "lint: clang-tidy-14: no files to check"
  fi
fi
exit $status
