#!/usr/bin/env bash
# Where the GPT-2 step's recording cost goes (issues #11 and #13), inside each process: under the
# diagnostic collector with POOLSCOPE_BENCH_LEVELS=1, gpt2_train.py --levels runs blocks of whole
# cycles (8 steps, one per sequence length), one cycle with the callbacks off and one at each
# level, in an order that rotates and reverses from block to block:
#   1 empty   CUPTI calls a callback that returns at once (the floor of any callback recorder)
#   2 minimal a timestamp and a 32-byte record into a per-thread buffer (what any recorder does)
#   3 nowm    the collector without its watermark reads or call sites
#   4 full    the collector without call sites (--stacks off)
#   5 full+stacks  the collector with the call sites of GPT2_STACKS (default auto)
#   6 full+python  the collector with Python frames only (when GPT2_STACKS is not off)
# Each level's cost is the median, over the blocks of all processes pooled, of its cycle time
# over the same block's "off" cycle; the 95 % interval of that median comes from order
# statistics. Neighbouring cycles differ by about +-10 %, so only pooled medians say anything.
#   tests/gpu/gpt2_levels.sh BUILD_DIR [BLOCKS] [PROCESSES]   (defaults 30 blocks, 3 processes)
# Results: $OUT/gpt2_levels.txt and $OUT/gpt2_levels.jsonl (one line per process).
set -u
BUILD=$(cd "${1:?BUILD_DIR}" && pwd)
BLOCKS=${2:-30}
PROCS=${3:-3}
LEVELS=${GPT2_LEVELS:-1,2,3,4,5}
STACKS=${GPT2_STACKS:-auto}
PS=$BUILD/bin/poolscope
DIAG=$BUILD/bin/libpoolscope_collector_diag.so
HERE=$(cd "$(dirname "$0")" && pwd)
OUTDIR=${OUT:-./gpu-out}
mkdir -p "$OUTDIR"
for f in "$PS" "$DIAG"; do
    [[ -e $f ]] || { echo "gpt2_levels.sh: missing $f (build poolscope and poolscope_collector_diag)"; exit 2; }
done
nlev=$(( $(tr ',' '\n' <<<"$LEVELS" | wc -l) + 1 ))
STEPS=$(( 8 * (1 + nlev * BLOCKS) ))
: > "$OUTDIR/gpt2_levels.jsonl"
for p in $(seq "$PROCS"); do
    POOLSCOPE_BENCH_LEVELS=1 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
        "$PS" record -q --collector "$DIAG" --stacks "$STACKS" -o /tmp/gpt2_levels.poolscope -- \
        python3 "$HERE/../workloads/gpt2_train.py" "$STEPS" "--levels=$LEVELS" > /tmp/gpt2_levels.out
    grep '"type": "levels"' /tmp/gpt2_levels.out >> "$OUTDIR/gpt2_levels.jsonl" ||
        { echo "process $p: no levels line:"; cat /tmp/gpt2_levels.out; }
done
python3 "$HERE/gpt2_levels_table.py" "$OUTDIR/gpt2_levels.jsonl" | tee "$OUTDIR/gpt2_levels.txt"
