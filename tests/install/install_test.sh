#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds two programs outside
# the tree against the installed copy: a C one through pkg-config (the
# tracer's C API, shared library) and a C++ one through find_package(pipetune)
# (the static libraries), profiles each with the installed `pipetune profile`
# and checks with `pipetune trace-info` that the trace holds their stages and
# element counts. Exit 77 (skipped) where it cannot run.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR CC CMAKE SANITIZE
set -euo pipefail
build_dir="$1" here="$2" cc="$3" cmake="$4" sanitize="$5"

if [[ "$sanitize" == ON || "$sanitize" == 1 || "$sanitize" == TRUE ]]; then
  echo "skipped: a sanitized build's libraries need the sanitizer runtimes in every consumer"
  exit 77
fi
for tool in pkg-config ninja "$cc"; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool not found"; exit 77; }
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/pipetune_install_test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" >"$tmp/install.log"
pipetune="$prefix/bin/pipetune"
libdir="$(dirname "$(find "$prefix" -name 'pipetune-tracer.pc' | head -1)")/.."
for f in "$pipetune" "$prefix/include/pipetune/tracer/tracer_c.h" "$libdir/libpipetune_tracer.a" \
         "$libdir/cmake/pipetune/pipetuneConfig.cmake" "$libdir/cmake/pipetune/pipetuneConfigVersion.cmake"; do
  [[ -e "$f" ]] || { echo "FAIL: not installed: $f"; exit 1; }
done
soname="$(objdump -p "$libdir/libpipetune_tracer.so" | awk '/SONAME/ {print $2}')"
[[ "$soname" =~ ^libpipetune_tracer\.so\.[0-9] ]] || { echo "FAIL: SONAME '$soname' is not versioned"; exit 1; }

check_trace() {  # TRACE NAME STAGE ELEMENTS
  local info
  info="$("$pipetune" trace-info "$1")"
  echo "$info" >"$tmp/$2.info"
  grep -q "$3" <<<"$info" || { echo "FAIL: $2: stage $3 not in the trace:"; echo "$info"; exit 1; }
  grep -Eq "^ *$3 \([a-z_]+\): $4 elements" <<<"$info" || { echo "FAIL: $2: stage $3 without $4 elements:"; echo "$info"; exit 1; }
}

# C, pkg-config, the shared library.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
# shellcheck disable=SC2046
"$cc" -std=c99 -Wall -Werror -o "$tmp/c_program" "$here/c_program/main.c" $(pkg-config --cflags --libs pipetune-tracer) \
  -Wl,-rpath,"$(cd "$libdir" && pwd)"
# ldd's output is read whole: `ldd | grep -q` under pipefail fails when grep
# exits at its match before ldd has finished writing (SIGPIPE).
libs="$(ldd "$tmp/c_program")"
grep -q "libpipetune_tracer.so.[0-9]" <<<"$libs" || { echo "FAIL: c_program does not load the shared tracer:"; echo "$libs"; exit 1; }
(cd "$tmp" && "$pipetune" profile --trace "$tmp/c.trace" -- ./c_program)
check_trace "$tmp/c.trace" c c_stage 20000

# C++, find_package(pipetune 0.1), the static libraries.
"$cmake" -S "$here/cxx_program" -B "$tmp/cxx_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cxx_configure.log" 2>&1 || { cat "$tmp/cxx_configure.log"; exit 1; }
"$cmake" --build "$tmp/cxx_build" >"$tmp/cxx_build.log" 2>&1 || { cat "$tmp/cxx_build.log"; exit 1; }
(cd "$tmp" && "$pipetune" profile --trace "$tmp/cxx.trace" -- "$tmp/cxx_build/cxx_program")
check_trace "$tmp/cxx.trace" cxx cxx_work 3000
# Python: the installed package, as Debian's python3 would import it from
# dist-packages, finds the installed loader library and gives batches.
python_site="$(find "$prefix" -path '*dist-packages/pipetune/__init__.py' | head -1)"
[[ -n "$python_site" ]] || { echo "FAIL: the pipetune Python package is not installed"; exit 1; }
grep -q "LIBRARY_DIR = \"$libdir" "$(dirname "$python_site")/_paths.py" ||
  grep -q "LIBRARY_DIR = \"$(cd "$libdir" && pwd)" "$(dirname "$python_site")/_paths.py" ||
  { echo "FAIL: _paths.py does not name the install's libraries:"; cat "$(dirname "$python_site")/_paths.py"; exit 1; }
make_images="$build_dir/examples/image/pipetune_make_images"
if /usr/bin/python3 -c "import torch" 2>/dev/null && [[ -x "$make_images" ]]; then
  "$make_images" --count 4 --out "$tmp/images" --quiet
  (cd "$tmp" && PYTHONPATH="$(dirname "$(dirname "$python_site")")" /usr/bin/python3 - "$tmp/images" <<'PY'
import sys
import pipetune
assert "dist-packages" in pipetune.__file__, pipetune.__file__
loader = pipetune.Loader({"name": "installed", "stages": [
    {"name": "files", "op": "list_files", "args": {"pattern": sys.argv[1] + "/*.jpg"}},
    {"name": "read", "op": "read_file"},
    {"name": "decode", "op": "map", "fn": "jpeg_decode"},
    {"name": "resize", "op": "map", "fn": "resize", "args": {"height": 16, "width": 16}},
    {"name": "normalize", "op": "map", "fn": "normalize"},
    {"name": "batch", "op": "batch", "args": {"size": 4}}]})
batches = list(loader)
assert len(batches) == 1 == len(loader), (len(batches), len(loader))
assert tuple(batches[0][0].shape) == (4, 3, 16, 16), batches[0][0].shape
print("installed pipetune.Loader: %d batch %s from %s" % (len(batches), tuple(batches[0][0].shape), pipetune.__file__))
PY
  ) || { echo "FAIL: the installed pipetune.Loader"; exit 1; }
fi
echo "installed copy: C (pkg-config, shared) and C++ (find_package, static) programs traced"
