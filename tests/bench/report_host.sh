#!/usr/bin/env bash
# `report` on a GPU host (no /usr/bin/time there): the default against other settings of one
# build, and against an older build where one is given. Both generated traces are written there,
# one `report --timings` of each setting at 105.9 M events (each read thread's CPU), then
# report_rounds.py at both sizes, the settings alternated round by round.
#
#   tests/bench/report_host.sh BIN_DIR [NAME=ARG[,ARG...] ...]
#   e.g. tests/bench/report_host.sh .carry/x/bin led=--lead-replay,report split=--split-analyses,on
#
# BIN_DIR holds poolscope and poolscope_bench_gentrace (stripped, carried with the device tool),
# optionally poolscope-base (an older build, measured as `base`), and lib/ beside it any library
# the host lacks (libsqlite3.so.0). ROUNDS100 (default 5) and ROUNDS10 (default 5): rounds at
# each size; about 21 s a round at 105.9 M events on the slower hosts, so keep a device call's
# 10 minutes in mind with several settings.
set -u
B=$(cd "${1:?usage: $0 BIN_DIR [NAME=ARG[,ARG...] ...]}" && pwd); shift
HERE=$(cd "$(dirname "$0")" && pwd)
[[ -d $B/../lib ]] && export LD_LIBRARY_PATH=$(cd "$B/../lib" && pwd)
T=/tmp/ps; mkdir -p $T
O=${OUT:-/tmp/out}; mkdir -p "$O"
nproc; lscpu | grep -E 'Model name' | head -1
[[ -f $T/z10.poolscope ]] || $B/poolscope_bench_gentrace $T/z10.poolscope 4700000 | tail -1    # 10.5 M events
[[ -f $T/z100.poolscope ]] || $B/poolscope_bench_gentrace $T/z100.poolscope 47000000 | tail -1 # 105.9 M events
builds=(default=$B/poolscope)
[[ -x $B/poolscope-base ]] && builds=(base=$B/poolscope-base "${builds[@]}")
for s in "$@"; do builds+=("${s%%=*}=$B/poolscope,report,${s#*=}"); done
for b in "${builds[@]}"; do
  name=${b%%=*}; IFS=, read -r -a cmd <<< "${b#*=}"
  [[ ${#cmd[@]} -gt 1 ]] || cmd+=(report)
  echo "== $name, 105.9 M events"
  "${cmd[@]}" --timings $T/z100.poolscope > "$O/z100-$name.txt" 2> "$O/z100-$name.err"
  tail -3 "$O/z100-$name.err"
done
md5sum "$O"/z100-*.txt
python3 "$HERE/report_rounds.py" $T/z100.poolscope ${ROUNDS100:-5} "${builds[@]}" 2>&1 | tail -$((6 + ${#builds[@]}))
python3 "$HERE/report_rounds.py" $T/z10.poolscope ${ROUNDS10:-5} "${builds[@]}" 2>&1 | tail -$((6 + ${#builds[@]}))
