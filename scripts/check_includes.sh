#!/usr/bin/env bash
# Compiles every C and C++ source of the tree on its own, as a user's build
# does (scripts/build.sh without CMAKE_UNITY_BUILD), but with -fsyntax-only:
# a source that leans on a header its unity neighbour included (a missing
# #include) fails here, where CI's unity builds compile it without a word.
# Usage: scripts/check_includes.sh [BUILD_DIR] [cmake args...]
#   BUILD_DIR (default build-includes/) holds only the configure step and
#   compile_commands.json: nothing is linked or written beside the sources.
# Prints each failing source and its first errors; exits 1 if any
# failed. Costs about a third of a full build's compile CPU (no code
# generation, no linking); PIPETUNE_JOBS sets the parallelism.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$root/build-includes}"
build_dir="${build_dir%/}"
shift || true
jobs="${PIPETUNE_JOBS:-$(nproc)}"
# The same options as CI's release suite, less what would join sources
# (unity) or pre-include headers (PCH).
cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_UNITY_BUILD=OFF -DPIPETUNE_UNITY_TESTS=OFF -DPIPETUNE_PCH=OFF -DPIPETUNE_WERROR=ON "$@" \
  >"$build_dir.configure.log" 2>&1 || { cat "$build_dir.configure.log"; exit 1; }
# The python/ copies and any other generated step are not sources; the CUDA
# example (.cu) goes through nvcc, which has no syntax-only mode.
exec /usr/bin/python3 - "$build_dir/compile_commands.json" "$root" "$jobs" <<'PY'
import concurrent.futures, json, shlex, subprocess, sys

entries = json.load(open(sys.argv[1]))
root = sys.argv[2].rstrip("/") + "/"
jobs = int(sys.argv[3])


def syntax_only(entry):
    """The entry's compile command with -fsyntax-only for -c and no -o."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            kept.append(a)
    return kept + ["-fsyntax-only"]


def check(entry):
    done = subprocess.run(syntax_only(entry), cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"][len(root):], done.returncode, done.stderr


sources = [e for e in entries if e["file"].startswith(root) and e["file"].endswith((".cc", ".cpp", ".c"))]
print(f"check_includes: {len(sources)} sources, each compiled on its own (-fsyntax-only, {jobs} jobs)", flush=True)
failed = []
with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    for done, (source, rc, stderr) in enumerate(pool.map(check, sources), 1):
        if done % 50 == 0:
            print(f"check_includes: {done}/{len(sources)} compiled", flush=True)
        if rc != 0:
            failed.append(source)
            errors = [line for line in stderr.splitlines() if "error" in line][:3]
            print(f"FAILED {source}:\n  " + "\n  ".join(errors or stderr.splitlines()[:3]), flush=True)
if failed:
    print(f"check_includes: {len(failed)} of {len(sources)} sources do not compile on their own (a missing #include?)")
    sys.exit(1)
print(f"check_includes: all {len(sources)} sources compile on their own")
PY
