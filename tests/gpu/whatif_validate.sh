#!/usr/bin/env bash
# Validation of the what-if pool model (issue #14) on the GPU machine, with a build made elsewhere:
#   tests/gpu/whatif_validate.sh [BUILD_DIR]     (default build/gpu; traces and the table go to
#                                                 $OUT or ./gpu-out/whatif)
# Records the churn and threads workloads under 6 settings each (release threshold 0, 64 MiB,
# max x opportunistic reuse on, off: the workloads read POOLSCOPE_WL_RELEASE_THRESHOLD and
# POOLSCOPE_WL_REUSE_OPPORTUNISTIC, tests/workloads/Truth.h), and pools once under its own
# settings; then, from each trace, predicts every other trace of the same workload with
# `poolscope whatif` and prints measured vs predicted peak reserved (target: within 5%) and
# implicit releases (target: within 10%; an absolute difference of 1 passes when the measured
# count is under 10). About a minute on an H100.
# PHASE=record only records (no whatif needed in BUILD's poolscope); PHASE=predict only predicts
# from the traces already in the output folder (TRACES=dir to take them elsewhere).
# Build: cmake --build build/gpu --target poolscope poolscope_collector workload_churn \
#          workload_threads workload_pools
set -uo pipefail
BUILD=${1:-build/gpu}
OUTDIR=${OUT:-$PWD/gpu-out}/whatif
TRACES=${TRACES:-$OUTDIR}
PHASE=${PHASE:-all}
mkdir -p "$OUTDIR"
BUILD=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PS=${POOLSCOPE:-$BUILD/bin/poolscope}
WL=$BUILD/workloads
MiB=$((1 << 20))
SETTINGS="t0-on t0-off t64-on t64-off tmax-on tmax-off"
threshold_bytes() { case $1 in t0) echo 0 ;; t64) echo $((64 * MiB)) ;; tmax) echo max ;; esac; }

if [[ $PHASE != predict ]]; then
    if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "skipped: no GPU"
        exit "${NO_GPU_EXIT:-0}"
    fi
    for f in "$PS" "$BUILD/bin/libpoolscope_collector.so" "$WL/churn" "$WL/threads" "$WL/pools"; do
        [[ -e $f ]] || { echo "whatif_validate.sh: missing $f"; exit 2; }
    done
    echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    for w in churn threads; do
        for s in $SETTINGS; do
            t=${s%-*}; o=${s#*-}
            args=(); [[ $w == churn ]] && args=(1200); [[ $w == threads ]] && args=(4 2000)
            POOLSCOPE_WL_RELEASE_THRESHOLD=$(threshold_bytes "$t") \
            POOLSCOPE_WL_REUSE_OPPORTUNISTIC=$([[ $o == on ]] && echo 1 || echo 0) \
                "$PS" record -q -o "$TRACES/$w-$s.poolscope" -- "$WL/$w" "${args[@]}" \
                >"$TRACES/$w-$s.truth" 2>"$TRACES/$w-$s.err" || { echo "record $w $s failed"; tail "$TRACES/$w-$s.err"; }
        done
    done
    "$PS" record -q -o "$TRACES/pools-own.poolscope" -- "$WL/pools" >"$TRACES/pools-own.truth" 2>&1
    [[ $PHASE == record ]] && { echo "recorded into $TRACES"; exit 0; }
fi

# Predict: every (source, target) pair of one workload; the pool compared is the one the report
# calls "pool #1" (the default pool in these workloads) plus, for pools, every pool.
python3 - "$PS" "$TRACES" "$SETTINGS" <<'PY' | tee "$OUTDIR/whatif_validate.txt"
import json, subprocess, sys
ps, traces, settings = sys.argv[1], sys.argv[2], sys.argv[3].split()
MiB = 1 << 20
thr = {"t0": "0", "t64": "64MiB", "tmax": "max"}
def whatif(path, extra=()):
    out = subprocess.run([ps, "whatif", path, "--json", *extra], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"poolscope whatif {path} failed: {out.stderr.strip()}")
    return {p["pool"].split(" (")[0]: p for p in json.loads(out.stdout)["pools"]}
rows, peak_ok, rel_ok, n = [], 0, 0, 0
def check(w, src, dst, pool, meas, pred):
    global peak_ok, rel_ok, n
    mp, pp = meas["peak_reserved"], pred["peak_reserved"]
    mr, pr = meas["implicit_releases"], pred["implicit_releases"]
    perr = abs(pp - mp) / mp * 100 if mp else (0.0 if pp == 0 else 100.0)
    rok = abs(pr - mr) <= max(1 if mr < 10 else 0, 0.10 * mr)
    n += 1; peak_ok += perr <= 5; rel_ok += rok
    rows.append(f"{w:8} {src:9} {dst:9} {pool:8} {mp/MiB:10.0f} {pp/MiB:10.0f} {perr:6.1f}% {'ok' if perr <= 5 else 'MISS':4}"
                f" {mr:6} {pr:6} {'ok' if rok else 'MISS'}")
for w in ("churn", "threads"):
    for dst in settings:
        measured = whatif(f"{traces}/{w}-{dst}.poolscope")
        t, o = dst.split("-")
        for src in settings:
            pred = whatif(f"{traces}/{w}-{src}.poolscope",
                          ["--release-threshold", thr[t], "--reuse-opportunistic", o])
            for pool, m in measured.items():
                if pool in pred and m["recorded"]:
                    check(w, src, dst, pool, m["recorded"], pred[pool]["predicted"])
own = whatif(f"{traces}/pools-own.poolscope")
for pool, p in own.items():
    if p["recorded"]:
        check("pools", "own", "own", pool, p["recorded"], p["predicted"])
print(f"{'workload':8} {'from':9} {'to':9} {'pool':8} {'peak MiB':>10} {'predicted':>10} {'error':>7} {'':4} {'rel.':>6} {'pred.':>6}")
print("\n".join(rows))
print(f"peak reserved within 5%: {peak_ok}/{n}; implicit releases within 10%: {rel_ok}/{n}")
PY
