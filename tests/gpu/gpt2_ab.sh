#!/usr/bin/env bash
# The GPT-2 step's recording overhead measured inside one process (issues #11 and #13): under the
# diagnostic collector, gpt2_train.py --ab alternates whole cycles (8 steps, one of each sequence
# length) with the collector's callbacks on and off, in pairs whose order flips every pair, and
# reports the median of the pairs' on/off ratios. Runs of separate processes on the GPU machine
# spread 11-25 % (docs/PERFORMANCE.md), far more than the 2-5 % targets; pairs of neighbouring
# cycles in one process share its clocks, allocator state and neighbours.
#   tests/gpu/gpt2_ab.sh BUILD_DIR [STEPS]    (default 328 steps = 1 warm-up + 40 cycles = 20 pairs)
# GPT2_AB_MODES (default "auto python native off"): the --stacks modes, one process each;
# GPT2_AB_REPEAT (default 1): processes per mode. "Off" keeps the module loaded, its NVTX
# callbacks and idle threads: what is measured is the cost of the driver callbacks, which is what
# recording adds per allocation. Mode "floor": CUPTI calls an empty callback on the same ids
# (POOLSCOPE_BENCH_EMPTY=1), the part of that cost no callback-based recorder can avoid.
# Results: $OUT/gpt2_ab.txt and .jsonl.
set -u
BUILD=$(cd "${1:?BUILD_DIR}" && pwd)
STEPS=${2:-328}
PS=$BUILD/bin/poolscope
DIAG=$BUILD/bin/libpoolscope_collector_diag.so
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${OUT:-./gpu-out}
mkdir -p "$OUTDIR"
for f in "$PS" "$DIAG"; do
    [[ -e $f ]] || { echo "gpt2_ab.sh: missing $f (build poolscope and poolscope_collector_diag)"; exit 2; }
done
: > "$OUTDIR/gpt2_ab.jsonl"
printf '%-8s %3s %6s %14s %15s %10s %16s\n' mode run pairs "on ms/cycle" "off ms/cycle" overhead "pairs q1..q3" |
    tee "$OUTDIR/gpt2_ab.txt"
for rep in $(seq "${GPT2_AB_REPEAT:-1}"); do
    for mode in ${GPT2_AB_MODES:-auto python native off}; do
        stacks=$mode empty=0
        [[ $mode == floor ]] && stacks=off empty=1
        POOLSCOPE_BENCH_EMPTY=$empty PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
            "$PS" record -q --collector "$DIAG" --stacks "$stacks" -o "/tmp/gpt2_ab_$mode.poolscope" -- \
            python3 "$HERE/../workloads/gpt2_train.py" "$STEPS" --ab > "/tmp/gpt2_ab_$mode.jsonl"
        MODE=$mode REP=$rep python3 - "/tmp/gpt2_ab_$mode.jsonl" "$OUTDIR/gpt2_ab.jsonl" <<'PY' | tee -a "$OUTDIR/gpt2_ab.txt"
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
ab = next((r for r in rows if r.get("type") == "ab"), None)
skip = next((r for r in rows if r.get("type") == "skip"), None)
mode, rep = os.environ["MODE"], os.environ["REP"]
if not ab:
    print(f"{mode:<8} {rep:>3}  no result: {skip or rows}")
    sys.exit(0)
ab.update(mode=mode, run=int(rep))
with open(sys.argv[2], "a") as f:
    f.write(json.dumps(ab) + "\n")
q = ab["overhead_pct_q1_q3"]
print(f"{mode:<8} {rep:>3} {ab['pairs']:>6} {ab['median_on_ms']:>14.2f} {ab['median_off_ms']:>15.2f} "
      f"{ab['overhead_pct']:>+9.2f}% {(f'{q[0]:+.1f}..{q[1]:+.1f}%' if q else '-'):>16}")
PY
    done
done
