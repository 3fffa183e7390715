#!/bin/sh
# The collector module lives in someone else's process: it must export InitializeInjection and
# nothing else, and must never pull in Qt.
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
echo "ok: only InitializeInjection exported, no Qt"
