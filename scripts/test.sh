#!/usr/bin/env bash
# Quick start command 2: installs what is missing, builds, and runs every test (ctest).
# Window tests run on Qt's offscreen platform and under Xvfb; GPU tests say "skipped: no GPU"
# where there is none. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-default}
scripts/setup.sh "$preset"
echo "== running tests"
rc=0
ctest --preset "$preset" -j "$(nproc 2>/dev/null || echo 2)" --timeout 600 || rc=$?
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "== GPU tests (gpu.*): skipped: no GPU (they record the CUDA workloads; run them on a GPU"
    echo "   machine with tests/gpu/run.sh and tests/gpu/live_check.sh, see README)"
fi
exit "$rc"
