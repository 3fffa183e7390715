#!/usr/bin/env bash
# The collector under sustained load (issue #11, point 4), on the GPU machine with a build made
# elsewhere:
#   tests/gpu/sustain.sh [BUILD_DIR]
# 1. Drops: `churn --sustain` (alloc, event record, cross-stream wait, free per iteration, as fast
#    as the driver takes them) recorded for SUSTAIN_SECONDS (default 60) with 1 and with 8
#    threads at once; the trace must hold every call the program made (counts exact, no dropped
#    events) and the collector's memory (peak RSS recorded minus bare) is reported per thread.
# 2. Cost: SUSTAIN_ROUNDS (default 5) alternating bare / recorded runs of SUSTAIN_ROUND_SECONDS
#    (default 5) per thread count; medians and spread of ns per iteration, and their ratio.
#    The floor (an empty CUPTI callback on the same ids: what any CUPTI-callback recorder costs)
#    runs in the same rounds when workloads/libpoolscope_floor_injection.so is there.
# Extra modules to compare: SUSTAIN_MODULES="name=path ..." (recorded with that module too).
# Writes sustain.json and sustain.log to $OUT (or ./gpu-out); exits non-zero when a check fails.
set -uo pipefail
BUILD=${1:-build/gpu}
OUTDIR=${OUT:-$PWD/gpu-out}
mkdir -p "$OUTDIR"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: no GPU"
    exit "${NO_GPU_EXIT:-0}"
fi
BUILD=$(cd "$BUILD" && pwd)
PS=$BUILD/bin/poolscope
CHURN=$BUILD/workloads/churn
for f in "$PS" "$CHURN" "$BUILD/bin/libpoolscope_collector.so"; do
    [[ -e $f ]] || { echo "sustain.sh: missing $f"; exit 2; }
done
SECONDS_LONG=${SUSTAIN_SECONDS:-60}
THREADS=${SUSTAIN_THREADS:-1 8}
ROUNDS=${SUSTAIN_ROUNDS:-5}
ROUND_S=${SUSTAIN_ROUND_SECONDS:-5}
WORK=$(mktemp -d /tmp/poolscope-sustain-XXXXXX)
exec > >(tee -a "$OUTDIR/sustain.log") 2>&1
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(nproc) CPUs"
: >"$WORK/rows.jsonl"

# run LABEL THREADS SECONDS [record|module=PATH|bare] -> one JSON row appended to rows.jsonl
run() {
    local label=$1 th=$2 s=$3 how=$4 pre=()
    local trace="$WORK/$label.poolscope"
    case $how in
    bare) ;;
    record) pre=("$PS" record -o "$trace" --) ;;
    module=*) pre=(env CUDA_INJECTION64_PATH="${how#module=}" POOLSCOPE_OUTPUT="$trace") ;;
    floor=*) pre=(env CUDA_INJECTION64_PATH="${how#floor=}") ;;
    esac
    rm -f "$trace"
    "${pre[@]}" "$CHURN" --sustain "$s" --threads "$th" >"$WORK/$label.truth" 2>"$WORK/$label.err"
    local rc=$?
    python3 - "$label" "$th" "$how" "$rc" "$WORK/$label.truth" "$trace" "$PS" <<'PY' >>"$WORK/rows.jsonl"
import json, os, sqlite3, subprocess, sys
label, th, how, rc, truth, trace, ps = sys.argv[1:8]
row = {"label": label, "threads": int(th), "how": how, "rc": int(rc)}
for line in open(truth):
    if line.startswith("{"):
        j = json.loads(line)
        if j["type"] == "sustain":
            row.update(ns_per_iter=j["ns_per_iter"], iterations=j["iterations"],
                       events_per_s=j["events_per_s"], max_rss_kib=j["max_rss_kib"])
        elif j["type"] == "summary":
            row["truth"] = {k: v for k, v in j.items() if k not in ("type", "workload")}
if how.startswith(("record", "module=")) and os.path.exists(trace):
    info = json.loads(subprocess.run([ps, "info", "--json", trace], capture_output=True, text=True).stdout or "{}")
    row["trace_bytes"] = os.path.getsize(trace)
    row["dropped_events"] = int(info.get("meta", {}).get("dropped_events", "-1"))
    row["events"] = info.get("events")
    kinds = info.get("counts_by_kind", {})
    names = {"allocs": "alloc", "frees": "free", "event_records": "event_record",
             "stream_waits": "stream_wait_event", "stream_syncs": "stream_synchronize",
             "stream_creates": "stream_create"}
    row["mismatches"] = {k: [kinds.get(n, 0), row.get("truth", {}).get(k)] for k, n in names.items()
                         if kinds.get(n, 0) != row.get("truth", {}).get(k)}
print(json.dumps(row))
PY
    tail -n 1 "$WORK/rows.jsonl"
    grep -v '^{' "$WORK/$label.err" | tail -n 3 | sed 's/^/   | /'
}

for th in $THREADS; do
    echo "-- ${SECONDS_LONG} s, $th thread(s): bare, then recorded"
    run "long_bare_t$th" "$th" "$SECONDS_LONG" bare
    run "long_rec_t$th" "$th" "$SECONDS_LONG" record
    for m in ${SUSTAIN_MODULES:-}; do run "long_${m%%=*}_t$th" "$th" "$SECONDS_LONG" "module=${m#*=}"; done
done
FLOOR=$BUILD/workloads/libpoolscope_floor_injection.so
for r in $(seq "$ROUNDS"); do
    for th in $THREADS; do
        run "round${r}_bare_t$th" "$th" "$ROUND_S" bare
        [[ -e $FLOOR ]] && run "round${r}_floor_t$th" "$th" "$ROUND_S" "floor=$FLOOR"
        run "round${r}_rec_t$th" "$th" "$ROUND_S" record
    done
done

python3 - "$WORK/rows.jsonl" "$SECONDS_LONG" <<'PY' | tee "$OUTDIR/sustain.json"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out, ok = {"long_seconds": float(sys.argv[2]), "checks": [], "cost": {}, "rows": rows}, True
def check(name, cond, detail):
    global ok
    ok &= bool(cond)
    out["checks"].append(("PASS " if cond else "FAIL ") + name + ": " + detail)
for r in rows:
    if not r["label"].startswith("long_"):
        continue
    if r["how"] == "bare":
        continue
    t = r["threads"]
    bare = next((b for b in rows if b["label"] == f"long_bare_t{t}"), None)
    check(f"{r['label']} exit", r["rc"] == 0, f"exit {r['rc']}")
    check(f"{r['label']} no dropped events", r.get("dropped_events") == 0,
          f"{r.get('dropped_events')} dropped of {r.get('events')}")
    check(f"{r['label']} counts exact", r.get("mismatches") == {} and "truth" in r,
          f"mismatches {r.get('mismatches')}")
    if bare and "max_rss_kib" in r and "max_rss_kib" in bare:
        extra = (r["max_rss_kib"] - bare["max_rss_kib"]) / 1024
        out.setdefault("collector_rss_mib", {})[r["label"]] = {
            "extra_mib": round(extra, 1), "per_thread_mib": round(extra / t, 1),
            "bare_mib": round(bare["max_rss_kib"] / 1024, 1),
            "events_per_s_recorded": r.get("events_per_s"), "events_per_s_bare": bare.get("events_per_s")}
for t in sorted({r["threads"] for r in rows}):
    b = [r["ns_per_iter"] for r in rows if r["label"].startswith("round") and r["how"] == "bare" and r["threads"] == t and "ns_per_iter" in r]
    c = [r["ns_per_iter"] for r in rows if r["label"].startswith("round") and r["how"] == "record" and r["threads"] == t and "ns_per_iter" in r]
    f = [r["ns_per_iter"] for r in rows if r["label"].startswith("round") and r["how"].startswith("floor") and r["threads"] == t and "ns_per_iter" in r]
    if b and c:
        mb, mc = statistics.median(b), statistics.median(c)
        cost = {"rounds": len(b), "bare_ns_per_iter": b, "recorded_ns_per_iter": c,
                "median_bare": mb, "median_recorded": mc,
                "ratio_of_medians": round(mc / mb, 3),
                "bare_spread": [min(b), max(b)], "recorded_spread": [min(c), max(c)]}
        if f:
            mf = statistics.median(f)
            cost.update(floor_ns_per_iter=f, median_floor=mf, floor_ratio=round(mf / mb, 3),
                        floor_spread=[min(f), max(f)],
                        collector_share_above_floor=round((mc - mf) / mb, 3))
        out["cost"][f"threads_{t}"] = cost
out["ok"] = ok
print(json.dumps(out, indent=1))
sys.exit(0 if ok else 1)
PY
rc=$?
grep -E '"(PASS|FAIL)' "$OUTDIR/sustain.json" | sed 's/^ *//'
exit $rc
