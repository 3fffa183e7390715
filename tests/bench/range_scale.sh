#!/bin/sh
# A range build (buildTimelineRange) against the prefix build of the same number of events, on
# one trace, alternated RUNS times; prints each run and the ratios range/prefix of the medians.
# usage: tests/bench/range_scale.sh BUILD_DIR TRACE EVENTS [AT=0.6] [RUNS=3]
set -eu
build=$1 trace=$2 n=$3 at=${4:-0.6} runs=${5:-3}
bin=$build/bin/poolscope_bench_range
out=$(mktemp)
i=0
while [ "$i" -lt "$runs" ]; do
    "$bin" "$trace" prefix "$n" | tee -a "$out"
    "$bin" "$trace" range "$n" "$at" | tee -a "$out"
    i=$((i + 1))
done
med() { grep "^$1 " "$out" | awk -v f="$2" '{for (k = 1; k < NF; k++) if ($k == f) print $(k + 1)}' |
        sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for f in wall_s cpu_s maxrss_mib; do
    p=$(med prefix $f) r=$(med range $f)
    echo "$f median: prefix $p range $r range/prefix $(awk -v a="$r" -v b="$p" 'BEGIN {printf "%.2f", a / b}')"
done
rm -f "$out"
