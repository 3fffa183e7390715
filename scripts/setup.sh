#!/usr/bin/env bash
# Installs the Debian packages PoolScope needs (skipping what is present), then configures and
# builds the given preset. Usage: scripts/setup.sh [preset]   (default: default)
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}

packages=(build-essential cmake pkg-config qt6-base-dev libqcustomplot-dev libsqlite3-dev
          googletest libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev xvfb xauth
          help2man libdw-dev libunwind-dev python3-dev libzstd1)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing missing packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq || true
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "== all required packages are present"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "== note: no CUDA Toolkit found: building the GUI and trace tools only; recording needs" \
       "the CUDA Toolkit (/usr/local/cuda)."
fi
export PATH="/usr/local/cuda/bin:$PATH"
jobs=$(nproc 2>/dev/null || echo 2)
echo "== configuring and building (preset '$preset', $jobs jobs)"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
