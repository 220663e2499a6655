#!/usr/bin/env bash
# Installs everything pipetune needs from Debian's packages. Idempotent; runs
# as root without prompts (or through sudo when not root).
#   scripts/setup.sh            build + test dependencies (PyTorch too: the
#                               DataLoader profiler's tests run real DataLoaders;
#                               Clang 14's libraries for pipetune-rewrite)
#   scripts/setup.sh --minimal  what scripts/demo.sh builds and runs: the
#                               compiler, CMake and the libraries of the
#                               `pipetune` CLI and the image example (no PyTorch,
#                               no LLVM, no test frameworks)
#   scripts/setup.sh --bench    the full set, plus hyperfine, perf and the
#                               benchmark scripts' tools
#   scripts/setup.sh --torch2   the full set, plus PyPI's current torch,
#                               torchvision, webdataset and HF datasets (the
#                               streaming datasets' tests), spdl and
#                               nvidia-dali-cuda130 (the peers that
#                               bench/image/compare.sh measures; SPDL loads
#                               Debian's FFmpeg 5 libraries) and tensorflow-cpu
#                               (tf.data, docs/tfdata.md: about 1.6 GB
#                               installed, 30 s) in a venv outside
#                               the repository
#                               (PIPETUNE_TORCH2_VENV, by default
#                               ~/.local/share/pipetune/torch2), reused when it
#                               imports them all already. Debian's torch 1.13
#                               stays the default python3's. About 3.3 GB to
#                               download (torch's wheel brings CUDA's
#                               libraries), 6.4 GB on disk, 7-8 minutes: why
#                               scripts/test.sh runs it only with
#                               PIPETUNE_TORCH2=1 (README).
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
  ""|--bench|--torch2)
    packages+=(
      libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-torch python3-torchvision python3-pil python3-numpy
      clang-14 libclang-rt-14-dev llvm-14-dev libclang-cpp14-dev libclang-14-dev
      ccache clang-tidy-14 clang-format-14
    )
    if [[ "$mode" == "--bench" ]]; then packages+=(hyperfine linux-perf jq bc); fi
    # `python3 -m venv` needs ensurepip, which Debian packages apart.
    if [[ "$mode" == "--torch2" ]]; then packages+=(python3-venv libavdevice59 libavfilter8); fi
    ;;
  *) echo "usage: scripts/setup.sh [--minimal | --bench | --torch2]" >&2; exit 2 ;;
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
if [[ "$mode" == "--torch2" ]]; then
  venv="${PIPETUNE_TORCH2_VENV:-$HOME/.local/share/pipetune/torch2}"
  pypi=(torch torchvision webdataset datasets spdl nvidia-dali-cuda130 tensorflow-cpu)
  if [[ -x "$venv/bin/python3" ]] &&
    "$venv/bin/python3" -c "import torch, torchvision, webdataset, datasets, spdl.io, nvidia.dali, tensorflow" 2>/dev/null; then
    echo "setup: torch $("$venv/bin/python3" -c "import torch; print(torch.__version__)") already in $venv"
  else
    echo "setup: installing ${pypi[*]} from PyPI into $venv (about 3.3 GB)"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --progress-bar off "${pypi[@]}"
  fi
fi
