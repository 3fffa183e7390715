#!/usr/bin/env bash
# GPU check of the live session (issue #5): a long churn workload runs under
# `poolscope record --listen`; `poolscope ctl` moves its default pool's knobs; then the trace is
# checked against the semantics (../shared/seeds, GPU_FACTS.md):
#   threshold UINT64_MAX -> reserved stays above used across syncs;
#   threshold 0          -> reserved is released at the next sync;
#   trim to 0            -> reserved drops (never below what is in use);
#   opportunistic reuse off/on -> read back as set;
# and each change is in the trace as a knob_change event with the driver's read-back, matching
# what ctl was acknowledged.
#
# usage: tests/gpu/live_check.sh BUILD_DIR [SECONDS]
#   BUILD_DIR has bin/poolscope and the collector. CHURN=/path/to/prog and CHURN_ARGS="..." use
#   another workload (it must run on device 0's default pool for SECONDS or longer); by default a
#   small churn program is compiled here with nvcc.
set -euo pipefail

BUILD=${1:?usage: live_check.sh BUILD_DIR [SECONDS]}
SECONDS_TOTAL=${2:-40}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "skipped: no GPU"
    exit "${NO_GPU_EXIT:-0}" # ctest sets 77: the test shows as skipped, not passed
fi
BUILD=$(cd "$BUILD" && pwd)
POOLSCOPE=""
for p in "$BUILD/bin/poolscope" "$BUILD/app/poolscope"; do [[ -x $p ]] && POOLSCOPE=$p && break; done
[[ -n $POOLSCOPE ]] || { echo "live_check: no poolscope binary under $BUILD" >&2; exit 2; }

WORK=$(mktemp -d /tmp/poolscope-live-XXXXXX)
# A private control directory: only our target shows up, nothing else is touched.
export POOLSCOPE_CONTROL_DIR="$WORK/ctl"
mkdir -m 0700 "$POOLSCOPE_CONTROL_DIR"
TRACE="$WORK/live.poolscope"
REC_PID=""
cleanup() {
    [[ -n $REC_PID ]] && kill "$REC_PID" 2>/dev/null || true
    [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "live_check: FAIL: $*" >&2; echo "(work dir kept: $WORK)" >&2; KEEP=1; exit 1; }
step() { echo "live_check: $*"; }

# ---- workload ----
if [[ -n ${CHURN:-} ]]; then
    read -r -a WORKLOAD <<<"$CHURN ${CHURN_ARGS:-}"
else
    NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    cat >"$WORK/live_churn.cu" <<'EOF'
// Churn on device 0's default pool: alloc on stream A, free on stream B after an event wait,
// both streams synchronized every 200 iterations, for argv[1] seconds. Freed memory stays cached
// in the pool unless the release threshold lets the sync hand it back. While the file named by
// $LIVE_PAUSE exists the workload holds still at a synchronized point (nothing live, nothing
// pending) and says so by creating $LIVE_PAUSE.held: a trim there must release everything.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <string>
#include <unistd.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
int main(int argc, char** argv) {
    double secs = argc > 1 ? std::atof(argv[1]) : 30;
    cudaStream_t a, b;
    cudaEvent_t ev;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    const char* pause = std::getenv("LIVE_PAUSE");
    const std::string held = pause ? std::string(pause) + ".held" : std::string();
    auto t0 = std::chrono::steady_clock::now();
    unsigned long long it = 0;
    for (;;) {
        void* p[4];
        for (int k = 0; k < 4; ++k) {
            size_t sz = size_t(1 + (it * 7919 + k * 104729) % 32) << 20; // 1..32 MiB
            CK(cudaMallocAsync(&p[k], sz, a));
        }
        CK(cudaEventRecord(ev, a));
        CK(cudaStreamWaitEvent(b, ev, 0));
        for (int k = 0; k < 4; ++k) CK(cudaFreeAsync(p[k], b));
        if (++it % 200 == 0) {
            CK(cudaStreamSynchronize(a));
            CK(cudaStreamSynchronize(b));
            usleep(2000);
            if (pause && access(pause, F_OK) == 0) {
                if (FILE* f = std::fopen(held.c_str(), "w")) std::fclose(f);
                while (access(pause, F_OK) == 0) usleep(1000);
                unlink(held.c_str());
            }
            std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0;
            if (d.count() >= secs) break;
        }
    }
    CK(cudaDeviceSynchronize());
    std::printf("live_churn: %llu iterations\n", it);
    return 0;
}
EOF
    step "compiling the churn workload with $NVCC"
    "$NVCC" -O2 -o "$WORK/live_churn" "$WORK/live_churn.cu" || fail "nvcc failed"
    WORKLOAD=("$WORK/live_churn" "$SECONDS_TOTAL")
fi

# ---- record --listen ----
if "$POOLSCOPE" record --help 2>&1 | grep -q -- '--listen'; then
    LISTEN=(--listen)
else
    step "note: 'poolscope record' has no --listen here; using POOLSCOPE_LISTEN=1"
    export POOLSCOPE_LISTEN=1
    LISTEN=()
fi
step "recording ${WORKLOAD[*]} for ${SECONDS_TOTAL}s"
LIVE_PAUSE="$WORK/pause" "$POOLSCOPE" record "${LISTEN[@]}" -o "$TRACE" -- "${WORKLOAD[@]}" >"$WORK/record.out" 2>&1 &
REC_PID=$!
unset POOLSCOPE_LISTEN

ctl() { "$POOLSCOPE" ctl "$TARGET" "$@" --json --origin script; }

# The target appears in the private directory once the collector starts its server, and the
# default pool once the workload's first cudaMallocAsync ran.
TARGET=""
for _ in $(seq 1 150); do
    TARGET=$("$POOLSCOPE" ctl targets --json | python3 -c \
        'import json,sys; t=json.load(sys.stdin); print(t[0]["pid"] if t else "")')
    [[ -n $TARGET ]] && ctl get default >/dev/null 2>&1 && break
    kill -0 "$REC_PID" 2>/dev/null || { cat "$WORK/record.out" >&2; fail "the recording ended before the target became controllable"; }
    sleep 0.2
done
[[ -n $TARGET ]] || { cat "$WORK/record.out" >&2; fail "no control socket appeared in $POOLSCOPE_CONTROL_DIR"; }
ctl get default >"$WORK/pool0.json" || fail "ctl get default failed"
step "target pid $TARGET: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(hex(d["handle"]), "threshold", d["release_threshold"], "reserved", d["reserved_mem_current"])' "$WORK/pool0.json")"

# Leaves room for CUDA start-up and the last toggles before the workload ends.
PHASE=$(python3 -c "print(max(2.0, ($SECONDS_TOTAL - 16) / 4))")
ack() { # name, then the ctl arguments; keeps each ack for the trace check
    local name=$1; shift
    ctl "$@" >"$WORK/ack_$name.json" || fail "ctl $* failed"
    step "ack $name: $(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(a["op"], a["attr_name"], "old", a.get("old_value"), "->", a["value"])' "$WORK/ack_$name.json")"
}
ack max set default release-threshold max
sleep "$PHASE"
ack zero set default release-threshold 0
sleep "$PHASE"
ack max2 set default release-threshold max
sleep "$PHASE"
# The trim is made while the workload holds still after a synchronize (nothing live, no free
# pending): then it must release every byte. Mid-churn, whether a trim can release anything
# depends on which chunks hold live blocks at that instant. A workload given through CHURN may
# not know LIVE_PAUSE: then the trim is made mid-churn and only the weaker checks apply.
PAUSED=0
touch "$WORK/pause"
for _ in $(seq 1 100); do [[ -e $WORK/pause.held ]] && PAUSED=1 && break; sleep 0.05; done
[[ $PAUSED == 1 || -n ${CHURN:-} ]] || fail "the workload did not hold still within 5 s"
ack trim trim default 0
rm -f "$WORK/pause"
echo "$PAUSED" >"$WORK/paused"
step "trim made $([[ $PAUSED == 1 ]] && echo 'while the workload held still' || echo 'mid-churn')"
sleep 1
ack oppoff set default reuse-allow-opportunistic off
sleep 1
ack oppon set default reuse-allow-opportunistic on
step "waiting for the workload to finish"
rc=0
wait "$REC_PID" || rc=$?
[[ $rc == 0 ]] || { cat "$WORK/record.out" >&2; fail "record exited with $rc"; }
REC_PID=""
[[ -s $TRACE ]] || fail "no trace at $TRACE"

"$POOLSCOPE" dump "$TRACE" --samples >"$WORK/events.jsonl" || fail "poolscope dump failed"

python3 - "$WORK" <<'EOF' || fail "trace check failed (see above)"
import json, sys, os
work = sys.argv[1]
MAX = 2**64 - 1
acks = {n: json.load(open(os.path.join(work, f"ack_{n}.json")))
        for n in ["max", "zero", "max2", "trim", "oppoff", "oppon"]}
pool = acks["max"]["pool"]
events = [json.loads(l) for l in open(os.path.join(work, "events.jsonl"))]
knobs = [e for e in events if e["kind"] == "knob_change" and e["pool"] == pool]
problems = []
def check(ok, msg):
    print(("  ok   " if ok else "  FAIL ") + msg)
    if not ok: problems.append(msg)

# 1. each change recorded once, in order, with the driver's read-back = what ctl was acknowledged
expect = [("max", 4, MAX), ("zero", 4, 0), ("max2", 4, MAX), ("trim", 1001, None),
          ("oppoff", 2, 0), ("oppon", 2, 1)]
check(len(knobs) == len(expect), f"{len(knobs)} knob_change events for pool {hex(pool)} (expected {len(expect)})")
ts = {}
for (name, attr, value), k in zip(expect, knobs):
    a = acks[name]
    ts[name] = k["ts_ns"]
    check(k["attr"] == attr, f"{name}: attr {k['attr']} == {attr}")
    check(k["result"] == 0, f"{name}: driver result {k['result']} == 0")
    check(k["flags"] & 4 != 0, f"{name}: flagged as made by PoolScope")
    if value is not None:
        check(a["value"] == value, f"{name}: ack read-back {a['value']} == requested {value}")
        check(k["size"] == a["value"], f"{name}: trace read-back {k['size']} == ack {a['value']}")
        check(k["flags"] & 2 == 0 or k["aux"] == a.get("old_value"),
              f"{name}: trace old value {k['aux']} == ack old {a.get('old_value')}")
check(len(knobs) < 4 or knobs[3]["flags"] & 1 != 0, "trim: watermarks read after the trim")
# The trim's fields mean what EventFields.h's KnobFields says: requested (ptr) = minBytesToKeep,
# value (size) = reserved after, old (aux) = reserved before: the same triple as the ack.
if len(knobs) >= 4:
    k, a = knobs[3], acks["trim"]
    check(k["ptr"] == 0, f"trim: requested {k['ptr']} == 0 (minBytesToKeep)")
    check(k["size"] == a["value"], f"trim: trace reserved after {k['size']} == ack {a['value']}")
    check(k["flags"] & 2 != 0 and k["aux"] == a.get("old_value"),
          f"trim: trace reserved before {k['aux']} == ack old {a.get('old_value')}")

def watermarks(t0, t1):
    return [(e["ts_ns"], e["reserved"], e["used"]) for e in events
            if e["pool"] == pool and t0 <= e["ts_ns"] < t1 and e["kind"] != "knob_change"
            and (e["kind"] == "sample" or e["flags"] & 1)]
syncs = [e["ts_ns"] for e in events if e["kind"] == "stream_synchronize"]
def after_syncs(t0, t1):
    return [w for w in watermarks(t0, t1) if any(s <= w[0] for s in syncs if s >= t0)]

if len(ts) == len(expect):
    # 2. threshold max: memory is kept cached across syncs (reserved above used)
    a = after_syncs(ts["max"], ts["zero"])
    kept = [r - u for _, r, u in a]
    check(len(a) > 0 and max(kept) > 0,
          f"threshold max: reserved stays above used after syncs (max cached {max(kept) if kept else 'n/a'} B)")
    peak_a = max((r for _, r, _ in a), default=0)
    # 3. threshold 0: released at the next sync
    releases = [e for e in events if e["kind"] == "implicit_release" and e["pool"] == pool
                and ts["zero"] <= e["ts_ns"] < ts["max2"]]
    b = after_syncs(ts["zero"], ts["max2"])
    low = min((r for _, r, _ in b), default=None)
    check(bool(releases) or (low is not None and low < peak_a // 2),
          f"threshold 0: released at a sync ({len(releases)} implicit releases, lowest reserved {low}, peak with max {peak_a})")
    # 4. trim to 0: reserved dropped, but not below what was in use. The reserved value after
    # the trim is the event's watermark (flag 1); the ack has reserved before/after as read back.
    t, ta = knobs[3], acks["trim"]
    before = ta.get("old_value", 0)
    after = t["reserved"] if t["flags"] & 1 else ta["value"]
    check(after <= before, f"trim: reserved {before} -> {after} did not grow")
    if open(os.path.join(work, "paused")).read().strip() == "1":
        # Nothing live and nothing pending: every reserved byte is releasable.
        check(t["flags"] & 1 != 0 and t["used"] == 0,
              f"trim while the workload held still: nothing in use (used {t['used']})")
        check(before > 0 and after == 0,
              f"trim while the workload held still: released everything ({before} -> {after})")
    check(t["flags"] & 1 == 0 or after >= t["used"], "trim: reserved not below used")
    # (the ack's own read-back may differ a little: the workload keeps allocating in between)
print(f"live_check: {len(events)} events, {len(problems)} problems")
sys.exit(1 if problems else 0)
EOF
step "PASS"
