#!/usr/bin/env bash
# `poolscope report` at scale (issue #15): the streaming report against the Timeline-based one it
# replaced (`report --via-timeline`, kept for this comparison and the tests), on the same trace in
# the same run, alternated, with `info` (chunk checksums, no decoding) as a floor.
#
#   tests/bench/report_scale.sh BUILD_DIR [N_ALLOCATIONS] [RUNS] [WORK_DIR]
#
# The trace is poolscope_bench_gentrace's synthetic training loop (about 2.2 events an
# allocation; 4.7 M allocations make 10.5 M events). Printed: wall, user+sys CPU and max RSS of
# each (/usr/bin/time), the median over RUNS, and new/old ratios; the two reports' output is
# compared byte for byte. Needs the targets poolscope and poolscope_bench_gentrace in BUILD_DIR.
# Give WORK_DIR to keep the trace between runs (it is removed otherwise).
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [N_ALLOCATIONS] [RUNS] [WORK_DIR]}
n=${2:-4700000}
runs=${3:-3}
keep=${4:-}
work=${keep:-$(mktemp -d /tmp/poolscope-report-scale.XXXXXX)}
cli=$build/bin/poolscope
gen=$build/bin/poolscope_bench_gentrace
for t in "$cli" "$gen"; do [ -x "$t" ] || { echo "missing $t (build it first)" >&2; exit 2; }; done
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT

trace=$work/synthetic-$n.poolscope
if [ ! -f "$trace" ]; then
  "$gen" "$trace" "$n" > "$work/gen.txt"
fi
events=$("$cli" info --json "$trace" | sed -nE 's/^  "events": ([0-9]+).*/\1/p')

# measure NAME CMD...: appends "wall cpu rss" of one run to $work/NAME.times.
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" > "$work/$name.out" 2> "$work/err" ||
    { echo "failed: $*" >&2; cat "$work/err" >&2; exit 1; }
  awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/time" >> "$work/$name.times"
}
rm -f "$work"/*.times
for ((i = 0; i < runs; i++)); do
  measure old "$cli" report --via-timeline "$trace"
  measure new "$cli" report "$trace"
  measure info "$cli" info "$trace"
done
cmp -s "$work/old.out" "$work/new.out" || { echo "the two reports differ:" >&2; diff "$work/old.out" "$work/new.out" >&2 || true; exit 1; }
cmp -s <("$cli" report --json --via-timeline "$trace") <("$cli" report --json "$trace") ||
  { echo "the two JSON reports differ" >&2; exit 1; }

# median COLUMN NAME
median() { cut -d' ' -f"$1" "$work/$2.times" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
echo
echo "$events events ($n allocations), $(stat -c %s "$trace") bytes; median of $runs runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf "| %-26s | %10s | %10s | %12s |\n" "" "wall s" "CPU s" "max RSS MiB"
printf "|%s|%s|%s|%s|\n" "----------------------------" "------------" "------------" "--------------"
for v in old new info; do
  case $v in old) label="report --via-timeline" ;; new) label="report (streaming)" ;; info) label="info" ;; esac
  printf "| %-26s | %10s | %10s | %12s |\n" "$label" "$(median 1 $v)" "$(median 2 $v)" "$(mib "$(median 3 $v)")"
done
printf "| %-26s | %10s | %10s | %12s |\n" "streaming / Timeline" "$(ratio "$(median 1 new)" "$(median 1 old)")" \
  "$(ratio "$(median 2 new)" "$(median 2 old)")" "$(ratio "$(median 3 new)" "$(median 3 old)")"
echo
echo "identical text and JSON output: yes"
