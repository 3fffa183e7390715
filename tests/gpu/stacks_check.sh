#!/usr/bin/env bash
# The GPU check of call sites and NVTX ranges (issue #13), run on the GPU machine:
#   tests/gpu/stacks_check.sh [BUILD_DIR]     (default build/gpu; traces and logs go to $OUT or ./gpu-out)
# 1. workloads/callsites (tests/workloads/callsites.cu) recorded with --stacks native: the top
#    sites at the default pool's peak reserved must be its three allocating functions with their
#    exact bytes and counts, each frame naming callsites.cu, each with its NVTX path, and the
#    ranges table must hold exactly the ranges it pushed.
# 2. tests/workloads/gpt2_train.py --nvtx recorded with the default mode (auto): the top sites
#    must show Python frames of transformers' modeling_gpt2.py, and the ranges must be exactly
#    the step/forward/backward/optimizer ranges the script pushed (skipped without transformers).
# Build: cmake --build BUILD --target poolscope poolscope_collector workload_callsites
set -uo pipefail
BUILD=${1:-build/gpu}
OUTDIR=${OUT:-$PWD/gpu-out}
mkdir -p "$OUTDIR"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: no GPU"
    exit "${NO_GPU_EXIT:-0}"
fi
BUILD=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PS=$BUILD/bin/poolscope
WL=$BUILD/workloads
for f in "$PS" "$BUILD/bin/libpoolscope_collector.so" "$WL/callsites"; do
    [[ -e $f ]] || { echo "stacks_check.sh: missing $f"; exit 2; }
done
fail=0
run() { echo "+ $*" >&2; "$@"; }

T=$OUTDIR/callsites.poolscope
run "$PS" record -q --stacks native --stacks-at-free -o "$T" -- "$WL/callsites" > "$OUTDIR/callsites.truth.jsonl" || fail=1
run "$PS" report --top-sites 5 --json "$T" > "$OUTDIR/callsites.report.json" || fail=1
"$PS" report --top-sites 5 "$T" | tee "$OUTDIR/callsites.report.txt" | sed -n '/Call sites/,$p'
"$PS" dump --stacks "$T" > "$OUTDIR/callsites.stacks.jsonl" || fail=1
"$PS" dump "$T" > /tmp/callsites.events.jsonl || fail=1
python3 "$HERE/stacks_check.py" callsites "$OUTDIR/callsites.truth.jsonl" \
    "$OUTDIR/callsites.report.json" "$T" /tmp/callsites.events.jsonl "$OUTDIR/callsites.stacks.jsonl" || fail=1

G=$OUTDIR/gpt2_stacks.poolscope
GPT2_STEPS=${GPT2_STEPS:-4}
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync run "$PS" record -q -o "$G" -- \
    python3 "$HERE/../workloads/gpt2_train.py" "$GPT2_STEPS" --nvtx > "$OUTDIR/gpt2.truth.jsonl"
if grep -q '"type": "skip"' "$OUTDIR/gpt2.truth.jsonl"; then
    echo "gpt2: skipped ($(cat "$OUTDIR/gpt2.truth.jsonl"))"
else
    run "$PS" report --top-sites 8 --json "$G" > "$OUTDIR/gpt2.report.json" || fail=1
    "$PS" report --top-sites 8 "$G" | sed -n '/Call sites/,$p' | tee "$OUTDIR/gpt2.report.txt"
    python3 "$HERE/stacks_check.py" gpt2 "$OUTDIR/gpt2.truth.jsonl" "$OUTDIR/gpt2.report.json" \
        "$G" || fail=1
fi
[[ $fail == 0 ]] && echo "stacks_check: PASS" || echo "stacks_check: FAIL"
exit $fail
