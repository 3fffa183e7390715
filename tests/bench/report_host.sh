#!/usr/bin/env bash
# `report` on a GPU host (no /usr/bin/time there), two builds of the CLI and the live set kept
# once off, on (a thread of its own) and by the report's own replay (`--lead-replay report`): both generated traces written there, one `report --timings` of each setting
# on the large one (each read thread's CPU), then report_rounds.py at both sizes.
#
#   tests/bench/report_host.sh BIN_DIR [OUT_DIR]
#
# BIN_DIR holds poolscope-base, poolscope-new and poolscope_bench_gentrace (stripped, carried
# with the device tool), and lib/ beside it any library the host lacks (libsqlite3.so.0).
set -u
B=$(cd "${1:?usage: $0 BIN_DIR [OUT_DIR]}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
T=/tmp/ps; mkdir -p $T
O=${2:-${OUT:-/tmp/out}}; mkdir -p "$O"
nproc; lscpu | grep -E 'Model name|^CPU\(s\)|Thread' | head -3
( time $B/poolscope_bench_gentrace $T/z10.poolscope 4700000 ) 2>&1 | tail -4   # 10.5 M events
( time $B/poolscope_bench_gentrace $T/z100.poolscope 47000000 ) 2>&1 | tail -4 # 105.9 M events
for bin in base new; do for lead in off on report; do
  [[ $bin == base && $lead == report ]] && continue # (not in 5118b6d)
  echo "== $bin, live set kept once $lead, 105.9 M events"
  { time $B/poolscope-$bin report --timings --lead-replay $lead $T/z100.poolscope > "$O/z100-$bin-$lead.txt" 2> "$O/z100-$bin-$lead.err" ; } 2>&1 | tail -3
  tail -3 "$O/z100-$bin-$lead.err"
done; done
md5sum "$O"/z100-*.txt
# (About 9 minutes on the faster hosts with 5 rounds at both sizes: ROUNDS100=2 stays within a
# device call's 10 minutes on the slower ones.)
for t in z10 z100; do
  rounds=5; [[ $t == z100 ]] && rounds=${ROUNDS100:-5}
  python3 "$HERE/report_rounds.py" $T/$t.poolscope $rounds base=$B/poolscope-base new=$B/poolscope-new \
    newlead=$B/poolscope-new,report,--lead-replay,on led=$B/poolscope-new,report,--lead-replay,report 2>&1 | tail -13
done
