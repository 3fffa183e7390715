#!/usr/bin/env bash
# The pool model over a tape in pieces, and the tape's recording in pieces (issue #15), on a
# GPU host's CPUs: poolscope_bench_model_pieces over the generator's 10.5 M events for several
# piece and thread counts (5 rounds each, the figures alone; then once with the reserved series,
# as the window's What-if panel asks), then over 105.9 M events (2 rounds).
#
#   tests/bench/model_pieces_host.sh BIN_DIR
#
# BIN_DIR: poolscope_bench_model_pieces and poolscope_bench_gentrace (stripped), lib/ beside it
# for what the host lacks. RUNS ("PIECES THREADS" pairs; default "16 16" "32 16" "8 8" "4 4").
set -u
B=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
nproc; grep -m1 "model name" /proc/cpuinfo; uptime
T=/tmp/ps; mkdir -p $T
[[ -f $T/g10.poolscope ]] || $B/poolscope_bench_gentrace $T/g10.poolscope 4700000 | tail -1   # 10.5 M events
if [[ -n ${RUNS:-} ]]; then read -r -a runs <<< "$RUNS"; else runs=(16 16 32 16 8 8 4 4); fi
for ((i = 0; i + 1 < ${#runs[@]}; i += 2)); do
  POOLSCOPE_BENCH_NO_SERIES=1 $B/poolscope_bench_model_pieces $T/g10.poolscope "${runs[i]}" "${runs[i + 1]}" 5
done
$B/poolscope_bench_model_pieces $T/g10.poolscope "${runs[0]}" "${runs[1]}" 5
[[ -f $T/z100.poolscope ]] || $B/poolscope_bench_gentrace $T/z100.poolscope 47000000 | tail -1 # 105.9 M events
POOLSCOPE_BENCH_NO_SERIES=1 $B/poolscope_bench_model_pieces $T/z100.poolscope "${runs[2]}" "${runs[3]}" 2
uptime
