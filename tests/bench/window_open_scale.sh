#!/bin/sh
# The window's open of a trace larger than it holds (issue #15), variants alternated run by run:
#   main   the bench of another build (OLD_BENCH: e.g. a copy of main's), as it opens the trace;
#   full   this build with the first load as long as the limit (POOLSCOPE_WINDOW_FIRST_EVENTS);
#   short  this build as it opens the trace (the short first load);
#   fullz / shortz  the same, zoomed at the first frame to ZOOM of the trace around its middle:
#          open -> that view's detail on screen.
# Prints each run's figures, then per variant the median and the range over the runs.
# usage: tests/bench/window_open_scale.sh BUILD_DIR TRACE [RUNS=3] [OLD_BENCH] [ZOOM=0.01]
# VARIANTS="main short shortz" runs only those.
set -eu
variants=" ${VARIANTS:-main full short fullz shortz} "
want() { case "$variants" in *" $1 "*) return 0 ;; esac; return 1; }
build=$1 trace=$2 runs=${3:-3} old=${4:-} zoom=${5:-0.01}
bin=$build/bin/poolscope_bench_gui
limit=${POOLSCOPE_WINDOW_MAX_EVENTS:-18790481}
out=$(mktemp)
run() { # NAME BENCH ENV... -- ARGS...
    name=$1 b=$2
    shift 2
    r=$(env QT_QPA_PLATFORM=offscreen "$@" /usr/bin/time -f 'maxrss_kib %M' "$b" --trace "$trace" \
            --load-only ${ZARGS:-} 2>&1)
    first=$(echo "$r" | sed -n 's/^open -> first frame with data: \([0-9]*\) ms/\1/p;s/^open -> first frame: \([0-9]*\) ms/\1/p')
    loaded=$(echo "$r" | sed -n 's/^open -> frame of the whole timeline: \([0-9]*\) ms/\1/p')
    detail=$(echo "$r" | sed -n 's/.*open -> its detail on screen: \([0-9]*\) ms.*/\1/p')
    gap=$(echo "$r" | sed -n 's/^longest the event loop.*: \([0-9]*\) ms/\1/p')
    rss=$(echo "$r" | sed -n 's/^maxrss_kib \([0-9]*\)/\1/p')
    echo "$name first_ms ${first:--} loaded_ms ${loaded:--} detail_ms ${detail:--} gap_ms ${gap:--} maxrss_mib $((rss / 1024)) load $(cut -d' ' -f1 /proc/loadavg)" |
        tee -a "$out"
}
i=0
while [ "$i" -lt "$runs" ]; do
    if [ -n "$old" ] && want main; then ZARGS= run main "$old" X=1; fi
    if want full; then ZARGS= run full "$bin" POOLSCOPE_WINDOW_FIRST_EVENTS=$limit; fi
    if want short; then ZARGS= run short "$bin" X=1; fi
    if want fullz; then ZARGS="--zoom-at-first-frame $zoom" run fullz "$bin" POOLSCOPE_WINDOW_FIRST_EVENTS=$limit; fi
    if want shortz; then ZARGS="--zoom-at-first-frame $zoom" run shortz "$bin" X=1; fi
    if want mainz && [ -n "$old" ]; then ZARGS="--zoom-at-first-frame $zoom" run mainz "$old" X=1; fi
    i=$((i + 1))
done
for v in main full short fullz shortz mainz; do
    grep -q "^$v " "$out" || continue
    line="$v:"
    for f in first_ms loaded_ms detail_ms gap_ms maxrss_mib; do
        vals=$(grep "^$v " "$out" | awk -v f="$f" '{for (k = 1; k < NF; k++) if ($k == f) print $(k + 1)}' | grep -v -- - | sort -n)
        [ -z "$vals" ] && continue
        line="$line $f $(echo "$vals" | awk '{v[NR] = $1} END {printf "%s (%s-%s)", v[int((NR + 1) / 2)], v[1], v[NR]}')"
    done
    echo "$line"
done
rm -f "$out"
