#!/usr/bin/env bash
# PoolScope and heaptrack side by side on the same number of allocations (issue #15).
#
#   tests/bench/vs_heaptrack.sh BUILD_DIR [N_ALLOCATIONS] [WORK_DIR]
#
# heaptrack records tests/bench/malloc_churn.c (N malloc/free pairs); PoolScope's trace of N
# allocations is made by poolscope_bench_gentrace (the benchmarks' synthetic training loop: about
# 2.1 events an allocation). Then each tool's reader: heaptrack_print against poolscope report,
# info and dump. Printed: file size, wall time and max RSS of each, and PoolScope's as a ratio of
# heaptrack's (the baseline, measured in the same run). Needs heaptrack (apt-get install heaptrack)
# and the targets poolscope and poolscope_bench_gentrace built in BUILD_DIR.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [N_ALLOCATIONS] [WORK_DIR]}
n=${2:-1000000}
work=${3:-$(mktemp -d /tmp/poolscope-vs-heaptrack.XXXXXX)}
here=$(cd "$(dirname "$0")" && pwd)
cli=$build/bin/poolscope
gen=$build/bin/poolscope_bench_gentrace
for t in "$cli" "$gen"; do [ -x "$t" ] || { echo "missing $t (build it first)" >&2; exit 2; }; done
command -v heaptrack >/dev/null || { echo "heaptrack is not installed (apt-get install heaptrack)" >&2; exit 2; }
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# measure NAME CMD...: wall seconds and max RSS (KiB) of CMD into the arrays, stdout discarded.
declare -A wall rss
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" > /dev/null 2> "$work/err" ||
    { echo "failed: $*" >&2; cat "$work/err" >&2; exit 1; }
  read -r wall[$name] rss[$name] < "$work/time"
}

cc -O2 -o "$work/malloc_churn" "$here/malloc_churn.c"
measure heaptrack_record heaptrack -o "$work/ht" "$work/malloc_churn" "$n"
ht_file=$(ls "$work"/ht*.zst 2>/dev/null || ls "$work"/ht*.gz)
ht_bytes=$(stat -c %s "$ht_file")
measure heaptrack_print heaptrack_print "$ht_file"

gen_out=$("$gen" "$work/ps.poolscope" "$n")
ps_events=$(sed -E 's/.*events ([0-9]+) .*/\1/' <<< "$gen_out")
ps_bytes=$(stat -c %s "$work/ps.poolscope")
measure report "$cli" report "$work/ps.poolscope"
measure info "$cli" info "$work/ps.poolscope"
measure dump "$cli" dump "$work/ps.poolscope"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
echo
echo "$n allocations; PoolScope's trace: $ps_events events ($gen_out)"
echo
printf "| %-38s | %14s | %14s | %18s |\n" "" "heaptrack" "PoolScope" "PoolScope/heaptrack"
printf "|%s|%s|%s|%s|\n" "----------------------------------------" "----------------" "----------------" "--------------------"
printf "| %-38s | %14s | %14s | %18s |\n" "file, bytes per allocation" \
  "$(ratio "$ht_bytes" "$n")" "$(ratio "$ps_bytes" "$n")" "$(ratio "$ps_bytes" "$ht_bytes")"
printf "| %-38s | %14s | %14s | %18s |\n" "file, bytes per event" "-" "$(ratio "$ps_bytes" "$ps_events")" ""
printf "| %-38s | %14s | %14s | %18s |\n" "print / report: wall s" \
  "${wall[heaptrack_print]}" "${wall[report]}" "$(ratio "${wall[report]}" "${wall[heaptrack_print]}")"
printf "| %-38s | %14s | %14s | %18s |\n" "print / report: max RSS MiB" \
  "$(mib "${rss[heaptrack_print]}")" "$(mib "${rss[report]}")" "$(ratio "${rss[report]}" "${rss[heaptrack_print]}")"
for v in info dump; do
  printf "| %-38s | %14s | %14s | %18s |\n" "poolscope $v: wall s / max RSS MiB" "-" \
    "${wall[$v]} / $(mib "${rss[$v]}")" ""
done
printf "| %-38s | %14s | %14s | %18s |\n" "recording: wall s (heaptrack: run)" "${wall[heaptrack_record]}" "-" ""
