#!/usr/bin/env bash
# The collector's cost on a real GPT-2 training step, run on the GPU machine:
#   tests/gpu/gpt2_overhead.sh BUILD_DIR ROUNDS
# GPT2_MODES (default "bare recorded"): bare, recorded (default stacks), nostacks (--stacks off),
# python, native, all (those --stacks modes); GPT2_BENCH_STEPS (default 88 = 11 cycles);
# GPT2_CPUS: a taskset CPU list every run is pinned to (fewer cores wandered between).
# ROUNDS alternating runs per mode; each run reports the median time of a whole cycle of the eight
# sequence lengths (per step); prints the medians over rounds and their spread as JSON. Single
# steps are multimodal by length, so their median jumps between modes from run to run.
set -uo pipefail
BUILD=$(cd "${1:?BUILD_DIR}" && pwd)
GPT2_ROUNDS=${2:?ROUNDS}
HERE=$(cd "$(dirname "$0")" && pwd)
PS=$BUILD/bin/poolscope
PYWL=$(cd "$HERE/../workloads" && pwd)
PY=$(command -v python3)
WORK=$(mktemp -d /tmp/poolscope-gpt2-XXXXXX)
: >"$WORK/gpt2_bench.txt"
modes=(${GPT2_MODES:-bare recorded})
for r in $(seq "$GPT2_ROUNDS"); do
    order=("${modes[@]}")
    # Every other round in reverse, so that no mode always runs right after the same one.
    (( r % 2 == 0 )) && order=($(printf '%s\n' "${modes[@]}" | tac))
    for mode in "${order[@]}"; do
        pre=()
        [[ -n ${GPT2_CPUS:-} ]] && pre=(taskset -c "$GPT2_CPUS")
        case $mode in
        bare) ;;
        recorded) pre+=("$PS" record -o "$WORK/gpt2_bench.poolscope" --) ;;
        nostacks) pre+=("$PS" record --stacks off -o "$WORK/gpt2_bench.poolscope" --) ;;
        *) pre+=("$PS" record --stacks "$mode" -o "$WORK/gpt2_bench.poolscope" --) ;;
        esac
        PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync TRANSFORMERS_VERBOSITY=error \
            "${pre[@]}" "$PY" "$PYWL/gpt2_train.py" "${GPT2_BENCH_STEPS:-88}" 2>/dev/null | grep '"gpt2"' |
            python3 -c "import json,sys; print('$mode', json.load(sys.stdin)['cycle_ms_median'] / 8)" >>"$WORK/gpt2_bench.txt"
    done
done
python3 - "$WORK/gpt2_bench.txt" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    rows.setdefault(k, []).append(float(v))
spread = lambda v: round((max(v) - min(v)) / statistics.median(v) * 100, 1)
b = statistics.median(rows["bare"])
out = {"rounds": len(rows["bare"]), "bare_step_ms": rows["bare"], "median_bare_ms": b,
       "bare_spread_pct": spread(rows["bare"])}
for mode in rows:
    if mode != "bare":
        m = statistics.median(rows[mode])
        out.update({f"{mode}_step_ms": rows[mode], f"median_{mode}_ms": m,
                    f"{mode}_spread_pct": spread(rows[mode]),
                    f"{mode}_overhead_pct": round((m / b - 1) * 100, 2)})
print(json.dumps(out))
PY
