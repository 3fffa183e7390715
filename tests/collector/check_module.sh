#!/bin/sh
# The collector module lives in someone else's process: it must export InitializeInjection and
# nothing else, must never pull in Qt, and carries no benchmark diagnostics.
set -eu
m="$1"
[ -f "$m" ] || { echo "no module at $m"; exit 1; }
exports=$(nm -D --defined-only "$m" | awk '$2 ~ /^[TtWwDdBbVvRr]$/ {print $3}' | sort -u)
if [ "$exports" != "InitializeInjection" ]; then
    echo "unexpected exported symbols:"; echo "$exports"; exit 1
fi
if readelf -d "$m" | grep -i 'NEEDED.*libQt'; then
    echo "the collector links Qt"; exit 1
fi
readelf -d "$m" | grep -q 'NEEDED.*libcupti' || { echo "libcupti not linked"; exit 1; }
# Benchmark diagnostics belong to poolscope_collector_diag only (collector/src/Diagnostics.h).
if grep -a -q 'POOLSCOPE_BENCH' "$m"; then
    echo "the module carries benchmark diagnostics (POOLSCOPE_BENCH_*)"; exit 1
fi
echo "ok: only InitializeInjection exported, no Qt, no benchmark diagnostics"
