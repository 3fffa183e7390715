#!/usr/bin/env bash
# The report's replay analyses read in pieces (issue #15) on a GPU host: the pieces alone
# against one read of 105.9 M generated events (poolscope_bench_analyses_pieces, with the
# pieces' largest resident set), for several piece and thread counts; then `report` with the
# pieces beside the read against the default (report_host.sh, its settings as arguments).
#
#   tests/bench/pieces_host.sh BIN_DIR [NAME=ARG[,ARG...] ...]
#   e.g. ROUNDS100=3 ROUNDS10=1 tests/bench/pieces_host.sh .carry/x/bin p16=--analyses-pieces,16
#
# BIN_DIR: poolscope, poolscope_bench_analyses_pieces and poolscope_bench_gentrace (stripped),
# lib/ beside it for what the host lacks. PIECES ("PIECES THREADS" pairs; default "16 16" "32 16"
# "64 16" "32 8"): the bench's runs, one round each, about 35 s each at 105.9 M events.
set -u
B=$(cd "${1:?usage: $0 BIN_DIR [NAME=ARG[,ARG...] ...]}" && pwd); shift
HERE=$(cd "$(dirname "$0")" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
T=/tmp/ps; mkdir -p $T
[[ -f $T/z100.poolscope ]] || $B/poolscope_bench_gentrace $T/z100.poolscope 47000000 | tail -1 # 105.9 M events
if [[ -n ${PIECES:-} ]]; then read -r -a runs <<< "$PIECES"; else runs=(16 16 32 16 64 16 32 8); fi
for ((i = 0; i + 1 < ${#runs[@]}; i += 2)); do
  $B/poolscope_bench_analyses_pieces $T/z100.poolscope "${runs[i]}" "${runs[i + 1]}" 1 | grep -v '^|--'
done
[[ $# -gt 0 ]] && bash "$HERE/report_host.sh" "$B" "$@"
