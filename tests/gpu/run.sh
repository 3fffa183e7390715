#!/usr/bin/env bash
# The GPU check of the collector (issue #3), run on the GPU machine with a build made elsewhere:
#   tests/gpu/run.sh [BUILD_DIR]      (default build/gpu; results and traces go to $OUT or ./gpu-out)
# Records every workload in tests/workloads with `poolscope record`, checks each trace against the
# ground truth the workload printed (tests/gpu/check_trace.py), runs the overhead benchmark (bare /
# empty-callback floor / collector, alternating, medians) and leaves small traces and logs in $OUT.
# Knobs: BENCH_SKIP=1 (checks only), BENCH_ONLY=1 (benchmark only), BENCH_ITER, BENCH_ROUNDS,
# GPT2_ROUNDS=N (GPT-2 step overhead, N alternating bare/recorded rounds; GPT2_MODES="bare recorded
# nostacks" adds recording with --stacks off), GPT2_STEPS,
# BENCH_CPUS (taskset list, default 2-5), BENCH_PIN (pin only the measuring thread), BENCH_CONFIGS (bare floor collector collector_full
# collector_nowm collector_mono collector_ring4k collector_noact collector_nosamp collector_nostacks; with the
# diagnostic module: collector_discard collector_nodrain collector_memory2 collector_selftime).
# Build (on any x86-64 Linux with CUDA 13, then carry build/gpu):
#   cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DPOOLSCOPE_BUILD_GUI=OFF -DPOOLSCOPE_BUILD_BENCH=OFF
#   cmake --build build/gpu -j2 --target poolscope poolscope_collector poolscope_floor_injection \
#     workload_churn workload_pools workload_trims_oom workload_threads workload_ipc workload_fork_after_init \
#     workload_crash workload_thread_first workload_threads_race workload_beyond_pool workload_multi_gpu
# and, for the diagnostic configurations, --target poolscope_collector_diag
# (libpoolscope_collector_diag.so: the POOLSCOPE_BENCH_* variables, collector/src/Diagnostics.cpp).
set -uo pipefail
BUILD=${1:-build/gpu}
OUTDIR=${OUT:-$PWD/gpu-out}
mkdir -p "$OUTDIR"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: no GPU"
    exit "${NO_GPU_EXIT:-0}" # ctest sets 77: the test shows as skipped, not passed
fi
BUILD=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PS=$BUILD/bin/poolscope
WL=$BUILD/workloads
COLLECTOR=$BUILD/bin/libpoolscope_collector.so
DIAG=$BUILD/bin/libpoolscope_collector_diag.so
FLOOR=$WL/libpoolscope_floor_injection.so
for f in "$PS" "$COLLECTOR" "$FLOOR" "$WL/churn"; do
    [[ -e $f ]] || { echo "run.sh: missing $f (build with tests/gpu/README or see run.sh)"; exit 2; }
done
WORK=$(mktemp -d /tmp/poolscope-gpu-XXXXXX)
LOG=$OUTDIR/run.log
exec > >(tee -a "$LOG") 2>&1
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$WORK/gpu.txt"
echo "collector: $COLLECTOR"; ldd "$COLLECTOR" | grep -E "cupti|cuda|sqlite|not found"

pass=0; fail=0; results=()
note() { results+=("$1"); if [[ $1 == PASS* ]]; then pass=$((pass+1)); elif [[ $1 != SKIP* ]]; then fail=$((fail+1)); fi; }

# record NAME CHECKARGS... -- PROGRAM ARGS
record_and_check() { # NAME [CHECK ARGS] -- PROGRAM... (EXPECT_RC=N for a program that must fail)
    local name=$1; shift
    local check=()
    while [[ $1 != -- ]]; do check+=("$1"); shift; done
    shift
    local t0=$(date +%s.%N)
    "$PS" record -o "$WORK/$name.poolscope" -- "$@" >"$WORK/$name.truth" 2>"$WORK/$name.err"
    local rc=$?
    echo "-- $name: exit $rc in $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || echo '?') s"
    tail -n 25 "$WORK/$name.err" | sed 's/^/   | /'
    if [[ $rc != ${EXPECT_RC:-0} ]]; then note "FAIL $name: exit status $rc, expected ${EXPECT_RC:-0}"; return; fi
    local out
    out=$(python3 "$HERE/check_trace.py" "$PS" "$WORK/$name.poolscope" "$WORK/$name.truth" "${check[@]}" 2>&1)
    echo "$out"
    note "$(echo "$out" | tail -n 1)"
}

if [[ ${BENCH_ONLY:-0} != 1 ]]; then
export POOLSCOPE_DEBUG=1
record_and_check churn -- "$WL/churn" 1200
unset POOLSCOPE_DEBUG
record_and_check pools -- "$WL/pools"
record_and_check trims_oom -- "$WL/trims_oom"
record_and_check threads -- "$WL/threads" 4 2000
# Issue #11: a thread's first call before the runtime bound a context to it; threads racing on
# the same pools (peaks equal the driver's ReservedMemHigh / UsedMemHigh).
record_and_check thread_first -- "$WL/thread_first"
record_and_check threads_race -- "$WL/threads_race" 4 3000
record_and_check fork_after_init -- "$WL/fork_after_init"
# Issue #18: cudaMalloc/cudaFree, managed, pitch, pinned host memory mixed into cudaMallocAsync.
record_and_check beyond_pool -- "$WL/beyond_pool" 20
if ls "$WORK"/fork_after_init.*.poolscope >/dev/null 2>&1; then note "FAIL fork_after_init: a child that never used CUDA wrote a trace"; fi
# IPC: the child writes its own trace, with its pid in the name.
"$PS" record -o "$WORK/ipc.poolscope" -- "$WL/ipc" >"$WORK/ipc.truth" 2>"$WORK/ipc.err"
rc=$?; echo "-- ipc: exit $rc"; tail -n 20 "$WORK/ipc.err" | sed 's/^/   | /'
child=$(ls "$WORK"/ipc.*.poolscope 2>/dev/null | head -n 1)
if [[ $rc == 0 && -n $child ]]; then
    out=$(python3 "$HERE/check_trace.py" "$PS" "$WORK/ipc.poolscope" "$WORK/ipc.truth" --workload ipc_parent \
          --child-trace "$child" --child-workload ipc_child 2>&1)
    echo "$out"; note "$(echo "$out" | tail -n 1)"
else
    note "FAIL ipc: exit $rc, child trace: ${child:-none}"
fi
# PyTorch with the cudaMallocAsync backend.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync PYTHONUNBUFFERED=1
    record_and_check torch -- "$(command -v python3)" "$WL/torch_async.py"
    unset PYTORCH_CUDA_ALLOC_CONF
else
    note "SKIP torch: no PyTorch with CUDA"
fi
# PyTorch's default (native) caching allocator, traced unchanged: its segments are cudaMalloc
# allocations; the trace's peak outside the pools must be memory_stats' reserved_bytes.all.peak.
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    unset PYTORCH_CUDA_ALLOC_CONF
    PYTHONUNBUFFERED=1 record_and_check torch_native -- "$(command -v python3)" "$WL/torch_native.py"
else
    note "SKIP torch_native: no PyTorch with CUDA"
fi
# Several GPUs (issue #19). The one-GPU mode of multi_gpu (every device field, a second context
# on GPU 0) runs on any machine; the two-GPU runs need two GPUs and say so otherwise.
# NVLink multicast stays off on the test machines (NCCL_NVLS_ENABLE=0, also for what record starts).
export NCCL_NVLS_ENABLE=0
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
record_and_check multi_gpu_one -- "$WL/multi_gpu" --one-gpu
if [[ $NGPU -ge 2 ]]; then
    record_and_check multi_gpu -- "$WL/multi_gpu"
else
    echo "skipped: needs 2 GPUs (found $NGPU)"
    note "SKIP multi_gpu (two GPUs): skipped: needs 2 GPUs (found $NGPU)"
fi
# A two-rank GPT-2 DDP job started by torchrun under record: one trace per rank (the ranks are
# record's children), each checked against its rank's truth, then shown together by `merge`.
# With one GPU the two ranks share it and talk through gloo (GPT2_DDP_SHARE_GPU=1): the same
# torchrun job shape, one process and one trace per rank.
check_ddp() {
    local py tr share=0 backend=nccl
    py=$(command -v python3)
    if [[ $NGPU -lt 2 ]]; then
        echo "gpt2_ddp: one GPU (found $NGPU): both ranks on GPU 0 through gloo"
        share=1 backend=gloo
    fi
    if ! python3 -c "import torch, transformers, torch.distributed as d; assert torch.cuda.is_available() and d.is_${backend}_available()" 2>/dev/null; then
        note "SKIP gpt2_ddp: no transformers / PyTorch with CUDA and ${backend}"; return
    fi
    rm -f "$WORK"/ddp*.poolscope
    GPT2_DDP_SHARE_GPU=$share \
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1 \
        "$PS" record -o "$WORK/ddp.poolscope" -- "$py" -m torch.distributed.run --standalone \
        --nproc-per-node 2 "$HERE/../workloads/gpt2_ddp.py" "${DDP_STEPS:-20}" >"$WORK/ddp.truth" 2>"$WORK/ddp.err"
    local rc=$?
    echo "-- gpt2_ddp: exit $rc"; tail -n 25 "$WORK/ddp.err" | sed 's/^/   | /'
    if [[ $rc != 0 ]]; then note "FAIL gpt2_ddp: exit status $rc"; return; fi
    local ranks
    ranks=$(python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
# Objects, not lines: older copies of the workload could run two ranks' lines together.
text, dec, i = open(f"{work}/ddp.truth", errors="replace").read(), json.JSONDecoder(), 0
while (i := text.find("{", i)) >= 0:
    try:
        j, end = dec.raw_decode(text, i)
    except ValueError:
        i += 1
        continue
    i = end
    if isinstance(j, dict) and j.get("type") == "gpt2_ddp":
        open(f"{work}/ddp.rank{j['rank']}.truth", "w").write(json.dumps(j) + "\n")
        print(j["rank"], j["pid"])
PY
)
    if [[ $(echo "$ranks" | grep -c .) != 2 ]]; then note "FAIL gpt2_ddp: $(echo "$ranks" | grep -c .) rank truth lines, expected 2"; return; fi
    local traces=() r pid out
    while read -r r pid; do
        local tr=$WORK/ddp.$pid.poolscope
        if [[ ! -e $tr ]]; then note "FAIL gpt2_ddp rank $r: no trace $tr"; continue; fi
        traces+=("$tr")
        out=$(python3 "$HERE/check_trace.py" "$PS" "$tr" "$WORK/ddp.rank$r.truth" 2>&1)
        echo "$out"; note "$(echo "$out" | tail -n 1)"
    done <<<"$ranks"
    [[ ${#traces[@]} == 2 ]] || return
    out=$("$PS" merge --json "${traces[@]}" 2>&1)
    if echo "$out" | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if len(d['processes']) == 2 else 1)"; then
        note "PASS gpt2_ddp merge: both ranks' traces in one view"
    else
        note "FAIL gpt2_ddp merge: $(echo "$out" | head -c 300)"
    fi
}
check_ddp
# Real clients, each against its own truth (issue #11): GPT-2 training (transformers, AdamW,
# varying lengths), CuPy's MemoryAsyncPool on two streams, JAX with the cuda_async allocator.
PYWL=$(cd "$HERE/../workloads" && pwd)
PY=$(command -v python3)
if python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null; then
    PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync TRANSFORMERS_VERBOSITY=error PYTHONUNBUFFERED=1 \
        record_and_check gpt2 -- "$PY" "$PYWL/gpt2_train.py" "${GPT2_STEPS:-40}"
else
    note "SKIP gpt2: no transformers / PyTorch with CUDA"
fi
if python3 -c "import cupy" 2>/dev/null; then
    PYTHONUNBUFFERED=1 record_and_check cupy -- "$PY" "$PYWL/cupy_async.py" 300
else
    note "SKIP cupy: no CuPy"
fi
if python3 -c "import jax" 2>/dev/null; then
    XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 \
        record_and_check jax -- "$PY" "$PYWL/jax_async.py" 200
else
    note "SKIP jax: no JAX"
fi
# The collector's cost on a real GPT-2 step (tests/gpu/gpt2_overhead.sh).
if [[ ${GPT2_ROUNDS:-0} -gt 0 ]] && python3 -c "import torch, transformers" 2>/dev/null; then
    "$HERE/gpt2_overhead.sh" "$BUILD" "$GPT2_ROUNDS" | tee "$OUTDIR/gpt2_overhead.json"
fi
# A program that never touches CUDA: a valid empty trace and a note.
"$PS" record -o "$WORK/nocuda.poolscope" -- /bin/true 2>"$WORK/nocuda.err"
if [[ $? == 0 ]] && grep -q "never initialized CUDA" "$WORK/nocuda.err" && "$PS" info "$WORK/nocuda.poolscope" >/dev/null; then
    note "PASS nocuda: empty trace and a note"
else
    note "FAIL nocuda"; cat "$WORK/nocuda.err"
fi
# Fatal signals: abort() and a segmentation fault after 200 allocs/frees; the trace keeps
# every event before the signal and the program's own exit status is passed through.
EXPECT_RC=134 record_and_check crash_abort -- "$WL/crash" abort
EXPECT_RC=139 record_and_check crash_segv -- "$WL/crash" segv
# Another CUPTI subscriber came first: one clear message, the program runs normally.
"$PS" record -o "$WORK/rival.poolscope" -- "$WL/crash" rival >"$WORK/rival.truth" 2>"$WORK/rival.err"
rc=$?; echo "-- rival: exit $rc"; tail -n 5 "$WORK/rival.err" | sed 's/^/   | /'
if [[ $rc == 0 ]] && grep -q '"subscribe":0' "$WORK/rival.truth" &&
   [[ $(grep -c "another CUPTI profiler" "$WORK/rival.err") == 1 ]] && "$PS" info "$WORK/rival.poolscope" >/dev/null; then
    note "PASS rival: one message, program unharmed, trace readable"
else
    note "FAIL rival: exit $rc"; cat "$WORK/rival.truth" | head -3
fi
# A forked child calls CUDA: it gets an error (CUDA does not survive fork), the parent's trace
# stays exact; a trace of the child, if any, is its own file and readable.
record_and_check crash_forkcuda -- "$WL/crash" forkcuda
grep '"fork_child' "$WORK/crash_forkcuda.truth" | sed 's/^/   | /'
for f in "$WORK"/crash_forkcuda.*.poolscope; do
    [[ -e $f ]] || continue
    if "$PS" info "$f" >/dev/null; then note "PASS crash_forkcuda child trace readable: $(basename "$f")"; else note "FAIL crash_forkcuda child trace unreadable"; fi
done
# SIGTERM mid-run: exit status 143 and a readable trace with what was committed.
# (wait only for that pid: a bare `wait` would also wait for the tee of this script's log)
"$PS" record -o "$WORK/term.poolscope" -- "$WL/churn" --bench 100000000 >/dev/null 2>"$WORK/term.err" &
term_pid=$!
sleep 4; kill -TERM "$term_pid"; wait "$term_pid"
echo "-- sigterm: exit $?"
n=$("$PS" info "$WORK/term.poolscope" 2>/dev/null | grep -m1 -o '[0-9]* events' || true)
tail -n 3 "$WORK/term.err"
if grep -q "signal 15" "$WORK/term.err" && [[ -n $n && $n != "0 events" ]]; then note "PASS sigterm: $n kept"; else note "FAIL sigterm: ${n:-unreadable}"; fi

fi # BENCH_ONLY
if [[ ${BENCH_SKIP:-0} != 1 ]]; then
# ---- overhead: bare / floor (empty callbacks on the same ids) / collector, alternating ----
ITER=${BENCH_ITER:-150000}
ROUNDS=${BENCH_ROUNDS:-11}
# Pinned to the same few cores every run: unpinned runs on the VM spread over two modes ~40% apart.
# BENCH_PIN=CPU instead pins only the measuring thread, after CUDA init (churn --pin): the
# driver's and the collector's threads keep every other CPU, as on an idle unpinned machine.
PIN=()
PINARG=()
if [[ -n ${BENCH_PIN:-} ]]; then
    PINARG=(--pin "$BENCH_PIN")
elif command -v taskset >/dev/null; then
    PIN=(taskset -c ${BENCH_CPUS:-2-5})
fi
CONFIGS=${BENCH_CONFIGS:-bare floor collector collector_full collector_nowm collector_mono collector_ring4k}
bench() { # NAME [ENV...]
    local name=$1; shift
    env "$@" "${PIN[@]}" "$WL/churn" --bench "$ITER" "${PINARG[@]}" 2>>"$WORK/bench.err" | grep '"bench"' |
        python3 -c "import json,sys; d=json.load(sys.stdin); print('$name', d['ns_per_iter'], d.get('best_segment_ns_per_iter', d['ns_per_iter']))"
}
: >"$WORK/bench.txt"
C="CUDA_INJECTION64_PATH=$COLLECTOR POOLSCOPE_OUTPUT=$WORK/bench.poolscope"
D="CUDA_INJECTION64_PATH=$DIAG POOLSCOPE_OUTPUT=$WORK/bench.poolscope"
case " $CONFIGS " in
*" collector_discard "* | *" collector_nodrain "* | *" collector_memory2 "* | *" collector_selftime "*)
    [[ -e $DIAG ]] || { echo "run.sh: missing $DIAG (build --target poolscope_collector_diag)"; exit 2; } ;;
esac
for r in $(seq "$ROUNDS"); do
    for cfg in $CONFIGS; do
        case $cfg in
        bare) bench bare ;;
        floor) bench floor CUDA_INJECTION64_PATH="$FLOOR" ;;
        collector) bench collector $C ;;
        collector_full) bench collector_full $C POOLSCOPE_WATERMARKS=full ;;
        collector_nowm) bench collector_nowm $C POOLSCOPE_WATERMARKS=off ;;
        collector_mono) bench collector_mono $C POOLSCOPE_CLOCK=monotonic ;;
        collector_ring4k) bench collector_ring4k $C POOLSCOPE_RING_EVENTS=4096 POOLSCOPE_SAMPLE_PERIOD_MS=0 ;;
        collector_noact) bench collector_noact $C POOLSCOPE_ACTIVITY=0 ;;
        collector_nosamp) bench collector_nosamp $C POOLSCOPE_SAMPLE_PERIOD_MS=0 ;;
        collector_nostacks) bench collector_nostacks $C POOLSCOPE_STACKS=off ;;
        # The diagnostic module (collector/src/Diagnostics.cpp).
        collector_discard) bench collector_discard $D POOLSCOPE_BENCH_DISCARD=1 ;;
        collector_nodrain) bench collector_nodrain $D POOLSCOPE_BENCH_DISCARD=2 POOLSCOPE_RING_EVENTS=2097152 ;;
        collector_memory2) bench collector_memory2 $D POOLSCOPE_WATERMARKS=off POOLSCOPE_BENCH_MEMORY2=1 ;;
        collector_selftime) bench collector_selftime $D POOLSCOPE_BENCH_SELFTIME=1 ;;
        # Any other name: another build of the module left at BUILD_DIR/exp/NAME.so (e.g. an
        # earlier commit's, to compare against), in the default mode.
        *) if [[ -f $BUILD/exp/$cfg.so ]]; then
               bench "$cfg" CUDA_INJECTION64_PATH="$BUILD/exp/$cfg.so" POOLSCOPE_OUTPUT="$WORK/bench.poolscope"
           else echo "run.sh: unknown bench config $cfg" >&2; fi ;;
        esac >>"$WORK/bench.txt"
    done
done
python3 - "$WORK/bench.txt" "$ITER" <<'PY' | tee "$OUTDIR/bench.json"
import json, statistics, sys
rows, best = {}, {}
for line in open(sys.argv[1]):
    k, v, b = line.split()
    rows.setdefault(k, []).append(float(v))
    best.setdefault(k, []).append(float(b))
def ratios(table):
    med = {k: statistics.median(v) for k, v in table.items()}
    mins = {k: min(v) for k, v in table.items()}
    out = {}
    for k in med:
        if k not in ("bare", "floor"):
            out[k] = {"median_ratio": round((med[k] - med["bare"]) / (med["floor"] - med["bare"]), 3),
                      "min_ratio": round((mins[k] - mins["bare"]) / (mins["floor"] - mins["bare"]), 3),
                      "ns_per_call_above_floor": round((med[k] - med["floor"]) / 4, 1)}
    return med, mins, out
med, mins, r_total = ratios(rows)
bmed, bmins, r_best = ratios(best)
# Process runs fall into two speed modes ~1 us/iter apart at random: the mean of each
# configuration's fastest third of rounds (best segments) compares like with like.
def lower_third(v):
    v = sorted(v)
    n = max(1, len(v) // 3)
    return sum(v[:n]) / n
lt = {k: lower_third(v) for k, v in best.items()}
r_lt = {k: round((lt[k] - lt["bare"]) / (lt["floor"] - lt["bare"]), 3)
        for k in lt if k not in ("bare", "floor")}
res = {"iterations": int(sys.argv[2]), "rounds": len(rows["bare"]), "calls_per_iter": 4,
       "median_ns_per_iter": med, "min_ns_per_iter": mins,
       "best_segment_median_ns_per_iter": bmed,
       "floor_ns_per_call": round((med["floor"] - med["bare"]) / 4, 1),
       "lower_third_ns_per_iter": {k: round(v, 1) for k, v in lt.items()},
       "ratios_lower_third": r_lt,
       "ratios_whole_run": r_total, "ratios_best_segment": r_best,
       "runs": rows, "best_segment_runs": best}
print(json.dumps(res, indent=1))
PY
"$PS" info "$WORK/bench.poolscope" 2>/dev/null | head -n 12

fi # BENCH_SKIP
echo "== results"
printf '%s\n' "${results[@]}" | tee "$OUTDIR/results.txt"
echo "== $pass passed, $fail failed"
cp "$WORK/churn.poolscope" "$OUTDIR/churn.poolscope" 2>/dev/null
(cd "$WORK" && tar czf "$OUTDIR/traces.tar.gz" --exclude=bench.poolscope --exclude=term.poolscope *.poolscope *.truth *.err gpu.txt bench.txt 2>/dev/null)
ls -la "$OUTDIR"
[[ $fail == 0 ]]
