#!/bin/sh
# The collector module lives in someone else's process: it must export InitializeInjection and
# NVTX's InitializeInjectionNvtx2 and nothing else, must never pull in Qt, and carries no benchmark diagnostics.
set -eu
m="$1"
[ -f "$m" ] || { echo "no module at $m"; exit 1; }
exports=$(nm -D --defined-only "$m" | awk '$2 ~ /^[TtWwDdBbVvRr]$/ {print $3}' | sort -u)
if [ "$exports" != "$(printf 'InitializeInjection\nInitializeInjectionNvtx2')" ]; then
    echo "unexpected exported symbols:"; echo "$exports"; exit 1
fi
if readelf -d "$m" | grep -i 'NEEDED.*libQt'; then
    echo "the collector links Qt"; exit 1
fi
# libcuda and CUPTI are loaded at run time (collector/src/CudaLibs.h), never linked: the package
# must install without the NVIDIA driver, and CUPTI is wherever the recording machine has it.
if readelf -d "$m" | grep -E 'NEEDED.*(libcupti|libcuda)'; then
    echo "the collector links libcuda or libcupti"; exit 1
fi
if readelf -d "$m" | grep -E '(RPATH|RUNPATH)'; then
    echo "the collector carries a hard-coded library path"; exit 1
fi
# Benchmark diagnostics belong to poolscope_collector_diag only (collector/src/Diagnostics.h).
if grep -a -q 'POOLSCOPE_BENCH' "$m"; then
    echo "the module carries benchmark diagnostics (POOLSCOPE_BENCH_*)"; exit 1
fi
# The module's thread-locals are initial-exec (the hot path's ThreadState pointer), so all of its
# TLS comes out of the few hundred bytes glibc keeps spare for modules dlopen'ed later: a few KiB
# of it and the driver's dlopen fails with "cannot allocate memory in static TLS block", and
# nothing is recorded. Large per-thread state belongs on the heap.
tls=$(readelf -lW "$m" | awk '$1 == "TLS" {print $6}')
if [ -n "$tls" ] && [ $((tls)) -gt 256 ]; then
    echo "the module's TLS block is $((tls)) bytes (at most 256: it is static TLS once loaded)"; exit 1
fi
echo "ok: only InitializeInjection and InitializeInjectionNvtx2 exported, no Qt, no libcuda/libcupti link, no benchmark diagnostics, TLS ${tls:-none}"
