#!/usr/bin/env python3
"""Checks a recorded trace against the ground truth its workload printed (tests/workloads/Truth.h).

usage: check_trace.py POOLSCOPE TRACE TRUTH [--workload W] [--child-trace T --child-workload W]
Events are read with `poolscope dump` (they are stored in encoded chunks); entity tables and
meta with sqlite3. Prints one line per check and a final PASS/FAIL; exit status 0 only on PASS.
"""
import json
import sqlite3
import subprocess
import sys

KIND_COUNTS = {
    "event_records": "event_record", "stream_waits": "stream_wait_event",
    "stream_syncs": "stream_synchronize", "ctx_syncs": "context_synchronize",
    "event_syncs": "event_synchronize", "trims": "pool_trim_to",
    "set_attributes": "pool_set_attribute", "pool_creates": "pool_create",
    "pool_destroys": "pool_destroy", "set_mempool": "device_set_mempool",
    "pool_exports": "pool_export", "pool_imports": "pool_import",
    "ptr_exports": "pointer_export", "ptr_imports": "pointer_import",
    "stream_creates": "stream_create", "pool_set_access": "pool_set_access",
    "peer_copies": "peer_copy",
}
# Memory outside the pools (issue #18, tests/workloads/beyond_pool.cu): summary keys checked by
# check_beyond against the events and the report's outside_pools / pinned_host.
BEYOND_PREFIX = "beyond_"
WM_KIND = {"alloc": "alloc", "free": "free", "stream_sync": "stream_synchronize",
           "ctx_sync": "context_synchronize", "trim": "pool_trim_to"}


def runtime_retries(allocs):
    """Seqs of allocs that returned 201 (CUDA_ERROR_INVALID_CONTEXT) and whose thread's next
    alloc, the same size, succeeded within 100 ms: the runtime's own retry (the core's rule,
    Timeline::retried), not a failure the program saw."""
    out, last = set(), {}
    for e in allocs:
        prev = last.get(e["tid"])
        if (prev and prev["result"] == 201 and e["result"] == 0 and e["size"] == prev["size"]
                and e["ts_ns"] - prev["ts_ns"] <= 100_000_000):
            out.add(prev["seq"])
        last[e["tid"]] = e
    return out


def report_pools(poolscope, trace):
    out = subprocess.run([poolscope, "report", "--json", trace], check=True, capture_output=True,
                         text=True)
    return {int(p["handle"], 16): p for p in json.loads(out.stdout)["pools"]}, json.loads(out.stdout)


def check_peaks(c, poolscope, trace, label, want):
    """want: {pool handle or None (the one pool with allocations / the largest): (reserved_high,
    used_high)}; compared exactly with the report's peaks."""
    pools, rep = report_pools(poolscope, trace)
    for handle, (rh, uh) in want.items():
        if handle is None:
            cand = [p for p in pools.values() if p.get("alloc_count", 0)]
            if not cand:
                c.failures.append(f"{label}: no pool with allocations in the report")
                continue
            p = max(cand, key=lambda x: x["peak_reserved"])
        else:
            p = pools.get(handle)
            if p is None:
                c.failures.append(f"{label}: pool 0x{handle:x} not in the report")
                continue
        c.eq(f"{label} pool {p['handle']} peak reserved", p["peak_reserved"], rh)
        c.eq(f"{label} pool {p['handle']} peak used", p["peak_used"], uh)
        print(f"  info: {label} pool {p['handle']}: peak reserved {p['peak_reserved']} (driver {rh}), "
              f"peak used {p['peak_used']} (driver {uh})")
    return rep


def load_events(poolscope, trace):
    out = subprocess.run([poolscope, "dump", trace], check=True, capture_output=True, text=True)
    return [json.loads(l) for l in out.stdout.splitlines() if l.strip()]


def load_truth(path, workload=None):
    summary, wms, extra = {}, [], []
    for line in open(path, errors="replace"):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("type") == "summary":
            if workload is None or j.get("workload") == workload:
                summary = j
        elif j.get("type") == "wm":
            wms.append(j)
        else:
            extra.append(j)
    return summary, wms, extra


class Checker:
    def __init__(self, name):
        self.name, self.failures, self.passes = name, [], 0

    def eq(self, what, got, want):
        if got == want:
            self.passes += 1
        else:
            self.failures.append(f"{what}: trace has {got}, program says {want}")

    def true(self, what, cond, detail=""):
        if cond:
            self.passes += 1
        else:
            self.failures.append(f"{what} {detail}".strip())


def check(poolscope, trace, truth_path, c, workload=None):
    summary, wms, extra = load_truth(truth_path, workload)
    if workload and workload.endswith("_child"):
        wms = []  # the child prints no watermark lines of its own
    c.true("ground truth present",
           bool(summary) or any(j.get("type") in ("torch", "gpt2", "cupy", "jax", "torch_native",
                                                  "gpt2_ddp") for j in extra),
           f"(no summary line in {truth_path})")
    events = load_events(poolscope, trace)
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    c.eq("dropped_events", meta.get("dropped_events", "0"), "0")
    c.true("collector ran", "collector" in meta, "(no 'collector' meta: the module did not load)")
    seqs = [e["seq"] for e in events]
    c.true("seq strictly increasing", all(a < b for a, b in zip(seqs, seqs[1:])))
    by = {}
    for e in events:
        by.setdefault(e["kind"], []).append(e)
    allocs = by.get("alloc", [])
    ok_allocs = [e for e in allocs if e["result"] == 0]
    retried = runtime_retries(allocs)
    failed = [e for e in allocs if e["result"] != 0 and e["seq"] not in retried]
    if retried:
        print(f"  info: {len(retried)} driver alloc(s) returned 201 and were retried by the runtime")
    frees = [e for e in by.get("free", []) if e["result"] == 0]
    for key, want in summary.items():
        if key in ("type", "workload"):
            continue
        if key == "allocs":
            c.eq("allocs", len(ok_allocs), want)
        elif key == "alloc_bytes":
            c.eq("alloc_bytes", sum(e["size"] for e in ok_allocs), want)
        elif key == "failed_allocs":
            c.eq("failed_allocs", len(failed), want)
        elif key == "failed_bytes":
            c.eq("failed_bytes", sum(e["size"] for e in failed), want)
        elif key == "frees":
            c.eq("frees", len(frees), want)
        elif key == "free_bytes":
            c.eq("frees resolved to their alloc", sum(1 for e in frees if e["flags"] & 8), len(frees))
            c.eq("free_bytes", sum(e["size"] for e in frees if e["flags"] & 8), want)
        elif key == "implicit_releases_min":
            n = len(by.get("implicit_release", []))
            c.true("implicit releases recorded", n >= want, f"({n} < {want})")
        elif key == "threads_allocating":
            c.eq("threads allocating", len({e["tid"] for e in ok_allocs}), want)
        elif key in KIND_COUNTS:
            c.eq(key, len(by.get(KIND_COUNTS[key], [])), want)
        elif key.startswith(BEYOND_PREFIX):
            pass  # check_beyond below
        else:
            c.failures.append(f"unknown truth key {key}")
    for e in failed:
        c.true("failed alloc keeps its error", e["result"] != 0 and e["ptr"] == 0)
    # Frees carry their pool (resolved from the alloc) and exact watermarks where the pool is known.
    def samples_of(pool):
        signed = pool - (1 << 64) if pool >= (1 << 63) else pool
        return db.execute("SELECT ts_ns, reserved, used FROM samples WHERE pool=? ORDER BY id",
                          (signed,)).fetchall()

    pools = {r[0] & 0xFFFFFFFFFFFFFFFF for r in db.execute("SELECT handle FROM pools")}
    for e in ok_allocs:
        if e["pool"] not in pools:
            c.failures.append(f"alloc seq {e['seq']} names pool 0x{e['pool']:x}, not in the pools table")
            break
    # Every alloc and free names its device and pool and carries watermarks (issue #11 point 1:
    # a thread's first call, made before the runtime bound a context to it, included).
    # A free's used is left unknown (no watermarks) where threads raced and seq order cannot
    # give it: counted as info, not as a failure.
    # (cudaFreeAsync of cudaMalloc memory names no pool: it is not a pool free.)
    legacy_ptrs = {e["ptr"] for e in by.get("device_alloc", []) if e["result"] == 0}
    unplaced = [e for e in ok_allocs + [f for f in frees if f["ptr"] and f["ptr"] not in legacy_ptrs]
                if e["device"] < 0 or e["pool"] == 0 or e["kind"] == "alloc" and not e["flags"] & 1]
    c.eq("allocs/frees without device or pool, allocs without watermarks", len(unplaced), 0)
    for e in unplaced[:3]:
        print(f"  info: unplaced {e['kind']} seq {e['seq']} tid {e['tid']} device {e['device']} "
              f"pool 0x{e['pool']:x} flags {e['flags']}")
    no_wm = sum(1 for e in frees if e["ptr"] and e["flags"] & 8 and not e["flags"] & 1
                and e["ptr"] not in legacy_ptrs)
    if no_wm:
        print(f"  info: {no_wm} of {len(frees)} frees without watermarks (used not known in seq order)")
    for w in wms:
        lst = by.get(WM_KIND[w["what"]], [])
        n = w["nth"]
        if n >= len(lst):
            c.failures.append(f"{w['what']} #{n}: only {len(lst)} in the trace")
            continue
        e = lst[n]
        pool = int(w["pool"], 16)
        label = f"{w['what']} #{n} (seq {e['seq']})"
        if not e["flags"] & 1:
            c.failures.append(f"{label}: no watermarks")
            continue
        if e["pool"] != pool:
            # A synchronize carries the device's current pool; every other pool is recorded as
            # a sample at the synchronize's own timestamp.
            s = sorted((abs(x[0] - e["ts_ns"]), x) for x in samples_of(pool))
            s = [x for d, x in s if d < 2000][:1]
            if not s:
                c.failures.append(f"{label}: pool 0x{e['pool']:x}, program read 0x{pool:x}, no sample of it")
                continue
            c.eq(f"{label} reserved (sample)", s[-1][1], w["reserved"])
            c.eq(f"{label} used (sample)", s[-1][2], w["used"])
            continue
        c.eq(f"{label} reserved", e["reserved"], w["reserved"])
        c.eq(f"{label} used", e["used"], w["used"])
    peaks = {int(j["pool"], 16): (j["reserved_high"], j["used_high"]) for j in extra
             if j.get("type") == "peak"}
    for j in extra:
        if j.get("type") in ("gpt2", "cupy", "gpt2_ddp"):
            # The client's own reading of the pool's high watermarks (torch.cuda.max_memory_*,
            # memPoolGetAttribute 6/8): the trace's peaks must be exactly these.
            peaks[int(j["pool"], 16) if j.get("pool") else None] = (j["reserved_high"], j["used_high"])
            c.true(f"{j['type']}: allocs seen", len(ok_allocs) >= j.get("min_allocs", 1),
                   f"({len(ok_allocs)} < {j.get('min_allocs', 1)})")
        if j.get("type") == "jax":
            c.true("jax: allocs recorded", len(ok_allocs) >= j["min_allocs"],
                   f"({len(ok_allocs)} < {j['min_allocs']})")
            c.true("jax: every free matched", all(e["flags"] & 8 for e in frees),
                   f"({sum(1 for e in frees if not e['flags'] & 8)} of {len(frees)} unmatched)")
            print(f"  info: jax {len(ok_allocs)} allocs, {len(frees)} frees")
    if peaks:
        check_peaks(c, poolscope, trace, trace.rsplit("/", 1)[-1], peaks)
    if any(j.get("type") == "attributes" for j in extra):
        check_attributes(c, poolscope, trace, db, extra, by)
    for j in extra:
        if j.get("type") == "gpt2_ddp":
            # One rank, one GPU: every allocation and free on the rank's device.
            wrong = [e for e in ok_allocs + frees if e["device"] != j["device"]]
            c.eq(f"gpt2_ddp rank {j['rank']}: allocs/frees on another device than {j['device']}",
                 len(wrong), 0)
            devices = {r[0] for r in db.execute("SELECT ordinal FROM devices")}
            c.true(f"gpt2_ddp rank {j['rank']}: device {j['device']} in the devices table",
                   j["device"] in devices, f"(table has {sorted(devices)})")
    if any(j.get("type", "").startswith("mg_") for j in extra):
        check_multi_gpu(c, poolscope, trace, db, extra, by, ok_allocs, frees)
    if any(k.startswith(BEYOND_PREFIX) for k in summary) or any(
            j.get("type") in ("host", "torch_native") for j in extra):
        check_beyond(c, poolscope, trace, summary, extra, by)
    for j in extra:
        if j.get("type") == "torch":
            c.true("torch allocs seen", len(ok_allocs) >= j["min_allocs"],
                   f"({len(ok_allocs)} < {j['min_allocs']})")
            syncs = by.get("context_synchronize", [])
            last = [e for e in syncs if e["flags"] & 1]
            c.true("torch: a synchronize with watermarks", bool(last))
            if last:
                c.eq("torch: reserved at the last synchronize", last[-1]["reserved"], j["reserved"])
                print(f"  info: used at last sync {last[-1]['used']}, torch allocated {j['allocated']}")
    kinds = {k: len(v) for k, v in by.items()}
    releases = len(by.get("implicit_release", []))
    samples = db.execute("SELECT count(*) FROM samples").fetchone()[0]
    print(f"  {c.name}: {len(events)} events {kinds}, {samples} samples, {releases} implicit releases")
    return events


ATTRIBUTES = {1: "follow_event_dependencies", 2: "allow_opportunistic",
              3: "allow_internal_dependencies", 4: "release_threshold"}
REPORT_ATTRIBUTES = {1: "reuse_follow_event_dependencies", 2: "reuse_allow_opportunistic",
                     3: "reuse_allow_internal_dependencies", 4: "release_threshold"}


def check_attributes(c, poolscope, trace, db, extra, by):
    """Issue #17: each pool's reuse policies and release threshold as the collector read them
    when it first saw the pool (pool_initial_attributes) equal what the program read with
    cudaMemPoolGetAttribute before changing any; the report shows them where the program never
    changed them."""
    rows = {}
    try:
        for pool, attr, value in db.execute("SELECT pool, attr, value FROM pool_initial_attributes"):
            rows[(pool & 0xFFFFFFFFFFFFFFFF, attr)] = value & 0xFFFFFFFFFFFFFFFF
    except sqlite3.Error as e:
        c.failures.append(f"pool_initial_attributes unreadable: {e}")
        return
    changed = {(e["pool"], e["attr"]) for e in by.get("pool_set_attribute", []) if e["result"] == 0}
    pools, _ = report_pools(poolscope, trace)
    for j in (j for j in extra if j.get("type") == "attributes"):
        pool = int(j["pool"], 16)
        for attr, key in ATTRIBUTES.items():
            c.eq(f"pool {j['pool']} {key} read at first sight", rows.get((pool, attr)), j[key])
            if (pool, attr) in changed:
                continue
            p = pools.get(pool)
            if p is None:
                continue  # a pool with no lane in the report (never allocated from)
            got = p.get(REPORT_ATTRIBUTES[attr])
            want = j[key] if attr == 4 else bool(j[key])
            c.eq(f"report: pool {j['pool']} {REPORT_ATTRIBUTES[attr]} (never set)", got, want)
        print(f"  info: pool {j['pool']} starts with " +
              ", ".join(f"{k}={j[k]}" for k in ATTRIBUTES.values()))


def check_multi_gpu(c, poolscope, trace, db, extra, by, ok_allocs, frees):
    """Several GPUs (tests/workloads/multi_gpu.cu): every device field (ordinal, name, memory,
    UUID), each pool's device and kind, the device and pool of each allocation and free in program
    order, pool access grants, peer copies with both devices, and each device's pools' peak."""
    mode = next((j for j in extra if j["type"] == "mg_mode"), {})
    print(f"  info: multi_gpu mode {mode.get('mode')}, {mode.get('devices_found')} GPU(s) found")
    for j in extra:
        if j["type"] == "mg_note":
            print(f"  info: the machine refused {j['what']}: {j['error']} (not counted)")
    devices = {r[0]: r for r in db.execute("SELECT ordinal, name, total_memory, uuid FROM devices")}
    for j in (j for j in extra if j["type"] == "mg_device"):
        row = devices.get(j["ordinal"])
        if row is None:
            c.failures.append(f"device {j['ordinal']} not in the devices table ({sorted(devices)})")
            continue
        c.eq(f"device {j['ordinal']} name", row[1], j["name"])
        c.eq(f"device {j['ordinal']} total memory", row[2], j["total_memory"])
        c.eq(f"device {j['ordinal']} uuid", row[3], j["uuid"])
    want_devices = {j["ordinal"] for j in extra if j["type"] == "mg_device"}
    c.eq("devices in the trace", set(devices), want_devices)
    pools = {r[0] & 0xFFFFFFFFFFFFFFFF: r for r in db.execute("SELECT handle, device, kind FROM pools")}
    for j in (j for j in extra if j["type"] == "mg_pool"):
        h = int(j["pool" if "pool" in j else "handle"], 16)
        row = pools.get(h)
        if row is None:
            c.failures.append(f"{j['kind']} pool 0x{h:x} of device {j['device']} not in the pools table")
            continue
        c.eq(f"{j['kind']} pool 0x{h:x} device", row[1], j["device"])
        c.eq(f"{j['kind']} pool 0x{h:x} kind", row[2], {"default": 1, "explicit": 2}[j["kind"]])
    for kind, lst in (("mg_alloc", ok_allocs), ("mg_free", frees)):
        for j in (j for j in extra if j["type"] == kind):
            n = j["nth"]
            label = f"{kind[3:]} #{n}"
            if n >= len(lst):
                c.failures.append(f"{label}: only {len(lst)} in the trace")
                continue
            e = lst[n]
            c.eq(f"{label} (seq {e['seq']}) device", e["device"], j["device"])
            c.eq(f"{label} (seq {e['seq']}) pool", f"0x{e['pool']:x}", j["pool"])
            c.eq(f"{label} (seq {e['seq']}) stream", f"0x{e['stream']:x}", j["stream"])
            c.eq(f"{label} (seq {e['seq']}) size", e["size"], j["size"])
    grants = [e for e in by.get("pool_set_access", []) if e["result"] == 0]
    _, rep = report_pools(poolscope, trace)
    rep_pools = {int(p["handle"], 16): p for p in rep["pools"]}
    for j in (j for j in extra if j["type"] == "mg_access"):
        h = int(j["pool"], 16)
        hit = [e for e in grants if e["pool"] == h and e["device"] == j["device"] and e["aux"] == j["flags"]]
        c.true(f"access to pool 0x{h:x} for device {j['device']} recorded", len(hit) == 1,
               f"({len(hit)} matching events of {len(grants)})")
        acc = rep_pools.get(h, {}).get("access", [])
        c.true(f"report: pool 0x{h:x} shared with device {j['device']}",
               any(a["device"] == j["device"] and a["flags"] == j["flags"] for a in acc), f"({acc})")
    peers = [e for e in by.get("peer_copy", []) if e["result"] == 0]
    for j in (j for j in extra if j["type"] == "mg_peer"):
        n = j["nth"]
        if n >= len(peers):
            c.failures.append(f"peer copy #{n}: only {len(peers)} in the trace")
            continue
        e = peers[n]
        c.eq(f"peer copy #{n} source device", (e["attr"] & 0xFF) - 1, j["src_device"])
        c.eq(f"peer copy #{n} destination device", (e["attr"] >> 8) - 1, j["dst_device"])
        c.eq(f"peer copy #{n} bytes", e["size"], j["bytes"])
        c.eq(f"peer copy #{n} stream", f"0x{e['stream']:x}", j["stream"])
    totals = {d["device"]: d for d in rep.get("device_totals", [])}
    for j in (j for j in extra if j["type"] == "mg_total"):
        d = totals.get(j["device"])
        if d is None:
            c.failures.append(f"report: no device_totals for device {j['device']}")
            continue
        c.eq(f"report: device {j['device']} pools", d["pools"], j["pools"])
        c.eq(f"report: device {j['device']} peak reserved (its pools together)", d["peak_reserved"],
             j["peak_reserved"])
        print(f"  info: device {j['device']}: pools together peaked at {d['peak_reserved']} B "
              f"(the program's sum of ReservedMemHigh: {j['peak_reserved']})")


def check_beyond(c, poolscope, trace, summary, extra, by):
    """Memory outside the pools: exact counts and bytes of each kind, per-call sizes and flags of
    pinned memory in program order, and the report's peaks against the program's own."""
    ok = lambda kind: [e for e in by.get(kind, []) if e["result"] == 0]
    dev_allocs = ok("device_alloc")
    malloc = [e for e in dev_allocs if e["variant"] in (0, 1)]  # cuMemAlloc, cuMemAllocPitch
    managed = [e for e in dev_allocs if e["variant"] == 2]
    dev_frees = ok("device_free")
    pool_frees = [e for e in dev_frees if e["pool"]]  # stream-ordered blocks freed with cudaFree
    syncs = [e for e in dev_frees if not e["pool"] and e["ptr"]]
    host_allocs, host_frees = ok("host_alloc"), ok("host_free")
    host_regs, host_unregs = ok("host_register"), ok("host_unregister")
    _, rep = report_pools(poolscope, trace)
    outside = {d["device"]: d for d in rep.get("outside_pools", {}).get("devices", [])}
    pinned = rep.get("pinned_host", {})
    d0 = outside.get(0, {})
    got = {
        "beyond_device_allocs": len(malloc),
        "beyond_device_alloc_bytes": sum(e["size"] for e in malloc),
        "beyond_pitch_allocs": sum(1 for e in malloc if e["variant"] == 1),
        "beyond_device_frees": sum(1 for e in syncs if e["ptr"] in {a["ptr"] for a in malloc}),
        "beyond_device_free_bytes": sum(e["size"] for e in syncs if e["flags"] & 8
                                        and e["ptr"] in {a["ptr"] for a in malloc}),
        "beyond_device_syncs": len(syncs),
        "beyond_managed_allocs": len(managed),
        "beyond_managed_bytes": sum(e["size"] for e in managed),
        "beyond_managed_frees": sum(1 for e in syncs if e["ptr"] in {a["ptr"] for a in managed}),
        "beyond_pool_blocks_cudafree": len(pool_frees),
        "beyond_legacy_freed_async": sum(1 for e in by.get("free", []) if e["result"] == 0
                                         and e["ptr"] in {a["ptr"] for a in malloc}),
        "beyond_host_allocs": len(host_allocs),
        "beyond_host_alloc_bytes": sum(e["size"] for e in host_allocs),
        "beyond_host_frees": len(host_frees),
        "beyond_host_registers": len(host_regs),
        "beyond_host_register_bytes": sum(e["size"] for e in host_regs),
        "beyond_host_unregisters": len(host_unregs),
        "beyond_device_peak": d0.get("peak_bytes"),
        "beyond_device_live_at_end": d0.get("live_at_end_bytes"),
        "beyond_host_allocated_peak": pinned.get("allocated_peak"),
        "beyond_host_registered_peak": pinned.get("registered_peak"),
        "beyond_host_total_peak": pinned.get("total_peak"),
        "beyond_host_allocated_at_end": pinned.get("allocated_at_end"),
        "beyond_host_registered_at_end": pinned.get("registered_at_end"),
    }
    for key, want in summary.items():
        if key.startswith(BEYOND_PREFIX):
            if key not in got:
                c.failures.append(f"unknown truth key {key}")
            else:
                c.eq(key, got[key], want)
    if "beyond_device_syncs" in summary:
        c.eq("report: device-wide syncs by cudaFree", rep["outside_pools"]["device_syncs"],
             summary["beyond_device_syncs"])
        c.true("every cudaFree's call time measured", all(e["aux"] > 0 for e in syncs),
               f"({sum(1 for e in syncs if not e['aux'])} of {len(syncs)} without)")
        c.true("report: the mixed-allocation finding",
               any("mixes cudaMalloc-style allocations" in f for f in rep["findings"]))
    # Pinned calls in program order: sizes exact; the flags the program passed must be there
    # (the runtime may add bits of its own: reported, not failed).
    want_host = [j for j in extra if j.get("type") == "host"]
    for what, recorded in (("host_alloc", host_allocs), ("host_register", host_regs)):
        wanted = [j for j in want_host if j["what"] == what]
        if not wanted:
            continue
        c.eq(f"{what} calls", len(recorded), len(wanted))
        for i, (e, w) in enumerate(zip(recorded, wanted)):
            c.eq(f"{what} #{i} size", e["size"], w["size"])
            c.true(f"{what} #{i} flags {w['flags']} recorded", e["aux"] & w["flags"] == w["flags"],
                   f"(trace has {e['aux']})")
            if e["aux"] != w["flags"]:
                print(f"  info: {what} #{i}: program passed flags {w['flags']}, driver call had {e['aux']}")
    for j in extra:
        if j.get("type") != "torch_native":
            continue
        # c10's native allocator: every segment is a cudaMalloc, so the trace's peak of device
        # memory outside the pools is PyTorch's own reserved peak.
        c.eq("torch_native: peak outside the pools = reserved_bytes.all.peak",
             d0.get("peak_bytes"), j["reserved_peak"])
        c.eq("torch_native: cudaMalloc calls = segment.all.allocated", len(malloc), j["segments"])
        # The stats are read before the interpreter exits: whatever PyTorch releases at exit
        # comes after them, so frees can only be more and live memory only less.
        c.true("torch_native: cudaFree calls >= segment.all.freed", len(syncs) >= j["segments_freed"],
               f"({len(syncs)} < {j['segments_freed']})")
        c.true("torch_native: live outside the pools at the end <= reserved at the stats",
               (d0.get("live_at_end_bytes") or 0) <= j["reserved_now"],
               f"({d0.get('live_at_end_bytes')} > {j['reserved_now']})")
        print(f"  info: torch {j['torch']}: reserved peak {j['reserved_peak']}, "
              f"{j['segments']} segments, {j['segments_freed']} freed (trace: {len(syncs)} cudaFree, "
              f"{d0.get('live_at_end_bytes')} B live at the end)")


def main():
    args = sys.argv[1:]
    poolscope, trace, truth = args[0], args[1], args[2]
    name = trace.rsplit("/", 1)[-1]
    c = Checker(name)
    try:
        opt = lambda k: args[args.index(k) + 1] if k in args else None
        check(poolscope, trace, truth, c, opt("--workload"))
        if opt("--child-trace"):
            check(poolscope, opt("--child-trace"), truth, c, opt("--child-workload"))
    except Exception as ex:  # a crash of the checker is a failure, with its reason
        c.failures.append(f"checker error: {ex!r}")
    for f in c.failures[:40]:
        print(f"  FAIL {f}")
    if len(c.failures) > 40:
        print(f"  ... {len(c.failures) - 40} more failures")
    status = "PASS" if not c.failures else "FAIL"
    print(f"{status} {name}: {c.passes} checks passed, {len(c.failures)} failed")
    sys.exit(0 if not c.failures else 1)


if __name__ == "__main__":
    main()
