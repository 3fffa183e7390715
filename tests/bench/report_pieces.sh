#!/usr/bin/env bash
# What a split of `report`'s read in time could give at most on this machine: the same work in
# independent pieces run at once (generated traces of a half and a quarter of the 105.9 M events,
# each a whole report of its own, no state carried between them), against the whole and a piece
# alone. docs/PERFORMANCE.md, "What a split of the read in time could give at most".
#
#   tests/bench/report_pieces.sh BIN_DIR [PASSES]
#
# BIN_DIR as report_host.sh's (poolscope, poolscope_bench_gentrace; lib/ beside it).
set -u
B=$(cd "${1:?usage: $0 BIN_DIR [PASSES]}" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
T=/tmp/ps; mkdir -p $T
el() { python3 -c "print(f'{$EPOCHREALTIME - $1:.2f}')"; }
[[ -f $T/z100.poolscope ]] || $B/poolscope_bench_gentrace $T/z100.poolscope 47000000 | tail -1
[[ -f $T/z50.poolscope ]] || $B/poolscope_bench_gentrace $T/z50.poolscope 23500000 | tail -1
[[ -f $T/z25.poolscope ]] || $B/poolscope_bench_gentrace $T/z25.poolscope 11750000 | tail -1
for ((i = 0; i < ${2:-2}; ++i)); do
  s=$EPOCHREALTIME; $B/poolscope report $T/z100.poolscope > /dev/null; echo "== one whole: $(el $s) s"
  s=$EPOCHREALTIME; $B/poolscope report $T/z50.poolscope > /dev/null & $B/poolscope report $T/z50.poolscope > /dev/null; wait
  echo "== two halves at once: $(el $s) s"
  s=$EPOCHREALTIME; $B/poolscope report $T/z50.poolscope > /dev/null; echo "== one half alone: $(el $s) s"
  s=$EPOCHREALTIME; for k in 1 2 3; do $B/poolscope report $T/z25.poolscope > /dev/null & done
  $B/poolscope report $T/z25.poolscope > /dev/null; wait; echo "== four quarters at once: $(el $s) s"
  s=$EPOCHREALTIME; $B/poolscope report $T/z25.poolscope > /dev/null; echo "== one quarter alone: $(el $s) s"
done
