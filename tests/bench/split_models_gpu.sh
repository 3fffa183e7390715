#!/usr/bin/env bash
# SplitModelsBench.cpp's question on real clients' runs: records a workload of tests/workloads on
# a GPU host for STEPS steps or iterations, then asks how soon a piece of its ops modelled from a
# guessed start meets the true state, with 8 and 16 pieces. No Qt needed:
#
#   tests/bench/split_models_gpu.sh BIN_DIR [STEPS [WORKLOAD]]
#
# WORKLOAD: gpt2 (gpt2_train.py, PyTorch on the async backend; the default), jax (jax_async.py)
# or cupy (cupy_async.py).
# BIN_DIR holds poolscope, libpoolscope_collector.so and poolscope_bench_split_models (stripped,
# carried with the device tool), and lib/ beside it any library the host lacks (libsqlite3.so.0).
# The trace and the tables go to $OUT (or /tmp/out).
set -u
B=$(cd "${1:?usage: $0 BIN_DIR [STEPS [WORKLOAD]]}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
W=${3:-gpt2}
case $W in
    gpt2) SCRIPT=gpt2_train.py ;;
    jax) SCRIPT=jax_async.py ;;
    cupy) SCRIPT=cupy_async.py ;;
    *) echo "unknown workload $W (gpt2, jax or cupy)"; exit 2 ;;
esac
T=/tmp/split-$W.poolscope
start=$(date +%s)
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$B/poolscope" record -o $T -- \
    python3 "$HERE/../workloads/$SCRIPT" "${2:-2500}" > "$O/$W.truth" 2> "$O/$W-record.err"
echo "record $W: exit $? in $(( $(date +%s) - start )) s"; tail -3 "$O/$W-record.err"
"$B/poolscope" info $T | head -12
for k in 8 16; do "$B/poolscope_bench_split_models" $T $k | tee "$O/$W-split$k.txt"; done
ls -la $T; [[ $(stat -c %s $T) -lt 40000000 ]] && cp $T "$O/"
