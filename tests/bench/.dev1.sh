#!/bin/bash
# Session 20: the filtered names pass on the GPU host (ad hoc, not committed).
set -u
C=.carry/gpu33
export LD_LIBRARY_PATH=$PWD/$C/lib
B=$C/bin
nproc; uptime
( time $B/poolscope_bench_gentrace /tmp/z100.poolscope 47000000 ) 2>&1 | tail -4
$B/poolscope_bench_gentrace /tmp/z10.poolscope 4700000 > /dev/null
R="python3 tests/bench/report_rounds.py"
echo "== dump --names --from 40s --to 41s, 105.9 M"
$R --discard /tmp/z100.poolscope 5 old=$B/poolscope-old,dump,--names,--from,40s,--to,41s new=$B/poolscope,dump,--names,--from,40s,--to,41s
echo "== export --format csv --from 40s --to 41s, 105.9 M (outputs compared)"
$R /tmp/z100.poolscope 5 old=$B/poolscope-old,export,--format,csv,--from,40s,--to,41s,-o,- new=$B/poolscope,export,--format,csv,--from,40s,--to,41s,-o,-
echo "== export --format csv whole, 10.5 M"
$R --discard /tmp/z10.poolscope 3 old=$B/poolscope-old,export,--format,csv,-o,/dev/null new=$B/poolscope,export,--format,csv,-o,/dev/null
echo "== md5"
for b in poolscope-old poolscope; do
  echo "$b dump-names-stretch $($B/$b dump --names --from 40s --to 41s /tmp/z100.poolscope | md5sum)"
  echo "$b csv-whole-z10 $($B/$b export --format csv /tmp/z10.poolscope -o - | md5sum)"
  echo "$b dump-names-z10-json $($B/$b dump --names /tmp/z10.poolscope | md5sum)"
done
echo "== export --from 40s --to 41s (Perfetto: names pass with live blocks, unchanged), 105.9 M"
$R --discard /tmp/z100.poolscope 2 old=$B/poolscope-old,export,--from,40s,--to,41s,-o,/tmp/r.json new=$B/poolscope,export,--from,40s,--to,41s,-o,/tmp/r2.json
uptime
