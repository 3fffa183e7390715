#!/usr/bin/env bash
# `poolscope report` of one trace by two builds of the CLI (before and after a change), alternated
# in the same run: wall, user+sys CPU and max RSS of each (/usr/bin/time), the median over RUNS,
# new/old ratios, and both reports (text and JSON) compared byte for byte.
#
#   tests/bench/report_ab.sh OLD_CLI NEW_CLI TRACE [RUNS]
#
# Keep a copy of the old binary before rebuilding (cp build/default/bin/poolscope /tmp/old).
set -euo pipefail
old=${1:?usage: $0 OLD_CLI NEW_CLI TRACE [RUNS]}
new=${2:?usage: $0 OLD_CLI NEW_CLI TRACE [RUNS]}
trace=${3:?usage: $0 OLD_CLI NEW_CLI TRACE [RUNS]}
runs=${4:-3}
work=$(mktemp -d /tmp/poolscope-report-ab.XXXXXX)
trap 'rm -rf "$work"' EXIT

measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" > "$work/$name.out" 2> "$work/err" ||
    { echo "failed: $*" >&2; cat "$work/err" >&2; exit 1; }
  awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$work/time" >> "$work/$name.times"
}
loads=""
for ((i = 0; i < runs; i++)); do
  loads="$loads $(cut -d' ' -f1 /proc/loadavg)"
  measure old "$old" report "$trace"
  measure new "$new" report "$trace"
done
cmp -s "$work/old.out" "$work/new.out" || { echo "the two reports differ" >&2; exit 1; }
cmp -s <("$old" report --json "$trace") <("$new" report --json "$trace") ||
  { echo "the two JSON reports differ" >&2; exit 1; }

median() { cut -d' ' -f"$1" "$work/$2.times" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
events=$("$new" info --json "$trace" | sed -nE 's/^  "events": ([0-9]+).*/\1/p')
echo
echo "$events events, $(stat -c %s "$trace") bytes; median of $runs runs; 1-min load before each pair:$loads"
echo
printf "| %-12s | %10s | %10s | %12s |\n" "" "wall s" "CPU s" "max RSS MiB"
printf "|%s|%s|%s|%s|\n" "--------------" "------------" "------------" "--------------"
for v in old new; do
  printf "| %-12s | %10s | %10s | %12s |\n" "$v" "$(median 1 $v)" "$(median 2 $v)" "$(mib "$(median 3 $v)")"
done
printf "| %-12s | %10s | %10s | %12s |\n" "new / old" "$(ratio "$(median 1 new)" "$(median 1 old)")" \
  "$(ratio "$(median 2 new)" "$(median 2 old)")" "$(ratio "$(median 3 new)" "$(median 3 old)")"
echo
echo "identical text and JSON output: yes"
