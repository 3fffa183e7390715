#!/usr/bin/env bash
# SplitModelsBench.cpp's question on a real training run: records tests/workloads/gpt2_train.py
# (PyTorch on the async backend) for STEPS steps on a GPU host, then asks how soon a piece of its
# ops modelled from a guessed start meets the true state, with 8 and 16 pieces. No Qt needed:
#
#   tests/bench/split_models_gpu.sh BIN_DIR [STEPS]
#
# BIN_DIR holds poolscope, libpoolscope_collector.so and poolscope_bench_split_models (stripped,
# carried with the device tool), and lib/ beside it any library the host lacks (libsqlite3.so.0).
# The trace and the tables go to $OUT (or /tmp/out).
set -u
B=$(cd "${1:?usage: $0 BIN_DIR [STEPS]}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
O=${OUT:-/tmp/out}; mkdir -p "$O"
T=/tmp/split-gpt2.poolscope
start=$(date +%s)
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$B/poolscope" record -o $T -- \
    python3 "$HERE/../workloads/gpt2_train.py" "${2:-2500}" > "$O/gpt2.truth" 2> "$O/record.err"
echo "record: exit $? in $(( $(date +%s) - start )) s"; tail -3 "$O/record.err"
"$B/poolscope" info $T | head -12
for k in 8 16; do "$B/poolscope_bench_split_models" $T $k | tee "$O/split$k.txt"; done
ls -la $T; [[ $(stat -c %s $T) -lt 40000000 ]] && cp $T "$O/"
