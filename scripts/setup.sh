#!/usr/bin/env bash
# Installs everything pipetune needs from Debian's packages. Idempotent; runs
# as root without prompts (or through sudo when not root).
#   scripts/setup.sh            build + test dependencies: Debian's packages
#                               (Debian's torch 1.13 for /usr/bin/python3;
#                               Clang 14's libraries for pipetune-rewrite),
#                               then the PyPI venv the Python tests run on:
#                               torch and torchvision 2.x, torchdata,
#                               webdataset and HF datasets, spdl and DALI
#                               (the peers bench/image/compare.sh measures;
#                               SPDL loads Debian's FFmpeg 5 libraries) and
#                               tensorflow-cpu (tf.data), outside the
#                               repository (PIPETUNE_VENV, by default
#                               ~/.local/share/pipetune/torch2), reused when it
#                               has them all already. About 4.9 GB to
#                               download, 8 GB on disk (README, "What setup
#                               costs").
#   scripts/setup.sh --minimal  what scripts/demo.sh builds and runs: the
#                               compiler, CMake and the libraries of the
#                               `pipetune` CLI and the image example (no PyTorch,
#                               no LLVM, no test frameworks, no venv)
#   scripts/setup.sh --bench    the default set, plus hyperfine, perf and the
#                               benchmark scripts' tools
#   scripts/setup.sh --no-venv  the default set without the PyPI venv (the
#                               Python tests then run on Debian's torch 1.13
#                               only, and tf.data's are skipped)
#   --torch2 is the default set (the name it had when the venv was opt-in).
set -euo pipefail

minimal=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libeigen3-dev libfmt-dev libcli11-dev
  libturbojpeg0-dev libjpeg62-turbo-dev
)
packages=("${minimal[@]}")
mode="${1:-}"
case "$mode" in
  --minimal) ;;
  ""|--bench|--torch2|--no-venv)
    packages+=(
      libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-torch python3-torchvision python3-pil python3-numpy
      clang-14 libclang-rt-14-dev llvm-14-dev libclang-cpp14-dev libclang-14-dev
      ccache clang-tidy-14 clang-format-14
    )
    if [[ "$mode" == "--bench" ]]; then packages+=(hyperfine linux-perf jq bc); fi
    # `python3 -m venv` needs ensurepip, which Debian packages apart.
    if [[ "$mode" != "--no-venv" ]]; then packages+=(python3-venv libavdevice59 libavfilter8); fi
    ;;
  *) echo "usage: scripts/setup.sh [--minimal | --bench | --no-venv]" >&2; exit 2 ;;
esac

sudo_cmd=()
if [[ "$(id -u)" != 0 ]]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "setup: all ${#packages[@]} packages already installed"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The venv belongs to the user who runs the tests (not root through sudo):
# tests/python/CMakeLists.txt looks for the same path.
if [[ "$mode" != "--minimal" && "$mode" != "--no-venv" ]]; then
  venv="${PIPETUNE_VENV:-${PIPETUNE_TORCH2_VENV:-$HOME/.local/share/pipetune/torch2}}"
  # Major versions held to what the tests were written on; pip picks the
  # newest within them.
  pypi=("torch>=2,<3" "torchvision<1" "torchdata>=0.11,<1" webdataset datasets spdl nvidia-dali-cuda130
        "tensorflow-cpu>=2.16,<3")
  modules=(torch torchvision torchdata webdataset datasets spdl nvidia.dali tensorflow)
  # find_spec only looks the packages up: importing TensorFlow and torch to
  # ask would cost several CPU-seconds at every setup.
  if [[ -x "$venv/bin/python3" ]] && "$venv/bin/python3" -c "
import importlib.util, sys
sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))" "${modules[@]}" 2>/dev/null; then
    echo "setup: the PyPI venv $venv has ${modules[*]} already"
  else
    echo "setup: installing ${pypi[*]} from PyPI into $venv (about 4.9 GB to download; several minutes)"
    start=$SECONDS
    [[ -x "$venv/bin/python3" ]] || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --progress-bar off "${pypi[@]}"
    echo "setup: the venv took $((SECONDS - start)) s"
  fi
fi
