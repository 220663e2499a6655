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
set -euo pipefail

minimal=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libeigen3-dev libfmt-dev libcli11-dev
  libturbojpeg0-dev libjpeg62-turbo-dev
)
packages=("${minimal[@]}")
case "${1:-}" in
  --minimal) ;;
  ""|--bench)
    packages+=(
      libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-torch python3-torchvision python3-pil python3-numpy
      clang-14 libclang-rt-14-dev llvm-14-dev libclang-cpp14-dev libclang-14-dev
      ccache clang-tidy-14 clang-format-14
    )
    if [[ "${1:-}" == "--bench" ]]; then packages+=(hyperfine linux-perf jq bc); fi
    ;;
  *) echo "usage: scripts/setup.sh [--minimal | --bench]" >&2; exit 2 ;;
esac

sudo_cmd=()
if [[ "$(id -u)" != 0 ]]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
