#!/usr/bin/env python3
"""Checks a trace recorded with stacks against its workload's ground truth (issue #13).

usage: stacks_check.py callsites|gpt2 TRUTH.jsonl REPORT.json TRACE
Reads `poolscope report --top-sites --json` output and the trace's nvtx_ranges table (SQLite).
Prints one line per check and exits 1 if any fails.
"""
import json
import sqlite3
import sys

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip().startswith("{")]


def ranges(trace):
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    rows = db.execute("SELECT name, depth, start_ns, end_ns, kind FROM nvtx_ranges ORDER BY start_ns").fetchall()
    db.close()
    return rows


def meta(trace, key):
    db = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    db.close()
    return row[0] if row else ""


def default_pool(report):
    sites = report.get("call_sites")
    check(bool(sites), "the report has call sites")
    if not sites:
        return None
    return max(sites, key=lambda p: p["live_bytes"])


def callsites(truth, report, trace):
    expect = [t for t in truth if t["type"] == "site"]
    peak = next(t for t in truth if t["type"] == "peak")
    pool = default_pool(report)
    if pool is None:
        return
    check(pool["at_peak_reserved"], "sites are taken at the pool's peak reserved")
    check(pool["live_bytes"] == peak["live_bytes"],
          f"live bytes at the peak {pool['live_bytes']} == {peak['live_bytes']}")
    top = pool["top"]

    def names(frame, fn):  # "alloc_weights (callsites.cu:34)", "ns::alloc_weights (...)"
        name = frame.split(" (")[0]
        return name == fn or name.endswith("::" + fn)

    for e in expect:
        # The site as a person reads it starts at the program's function: the CUDA runtime's
        # frames above it (cudaMallocAsync, static cudart's internals) are left out.
        hit = [s for s in top if names(s["text"], e["function"])]
        check(len(hit) == 1, f"one top site reads from {e['function']}")
        if not hit:
            print("     top sites: " + "; ".join(s["text"] for s in top))
            continue
        s = hit[0]
        check(s["bytes"] == e["bytes"] and s["count"] == e["count"],
              f"{e['function']}: {s['bytes']} bytes in {s['count']} == {e['bytes']} in {e['count']}")
        fn = next(f for f in s["frames"] if names(f, e["function"]))
        check("callsites.cu:" in fn, f"{e['function']}: frame has file and line ({fn})")
        check(any(names(f, "main") for f in s["frames"]), f"{e['function']}: main is on the stack")
        check(s["nvtx"] == e["nvtx"], f"{e['function']}: nvtx path '{s['nvtx']}' == '{e['nvtx']}'")
    check(not any("scratch" in " ".join(s["frames"]) for s in top),
          "scratch (freed before the peak) is not among the sites")
    got = [(r[0], r[1]) for r in ranges(trace)]
    want = [(t["name"], t["depth"]) for t in truth if t["type"] == "range"]
    check(got == want, f"nvtx ranges {got} == {want}")
    check(all(r[3] > r[2] for r in ranges(trace)), "every range is closed with end > start")


def gpt2(truth, report, trace):
    gt = next((t for t in truth if t["type"] == "nvtx"), None)
    check(gt is not None, "the workload ran with --nvtx")
    pool = default_pool(report)
    if pool is None or gt is None:
        return
    # The collector's account of the Python frame reader: the interpreter's version, where its
    # layout came from, and "checked" once a walk proved it (or why it is off).
    stacks = meta(trace, "stacks")
    print(f"     meta stacks: {stacks}")
    check("python: 3." in stacks and stacks.endswith(", checked"),
          "the Python frame reader knew this interpreter and proved its layout")
    frames = [f for s in pool["top"] for f in s["frames"]]
    check(any("modeling_gpt2.py:" in f for f in frames),
          "a top site has a Python frame in transformers' modeling_gpt2.py")
    check(any(s["nvtx"].startswith("step/") for s in pool["top"]),
          "top sites carry the step/... NVTX path")
    every = ranges(trace)
    # Libraries the program loads may push ranges of their own once a tool is attached; the
    # script's ranges must come back exactly, the others are listed.
    rows = [r for r in every if r[0] in gt["names"]]
    others = {}
    for r in every:
        if r[0] not in gt["names"]:
            others[r[0]] = others.get(r[0], 0) + 1
    check(len(rows) == gt["ranges"], f"{len(rows)} ranges named {gt['names']} == {gt['ranges']} pushed")
    check(sorted({r[0] for r in rows}) == gt["names"], f"range names == {gt['names']}")
    depth = {"step": 0, "forward": 1, "backward": 1, "optimizer": 1}
    check(all(depth.get(r[0], r[1]) == r[1] for r in rows), "step at depth 0, its phases at depth 1")
    check(all(r[3] > r[2] for r in rows), "every range is closed")
    print(f"     other ranges in the trace (not the script's): {others or 'none'}")
    print("top sites:")
    for s in pool["top"]:
        print(f"  {s['bytes']:>12}  {s['text']}")


def free_sites(events, stacks):
    """Recorded with --stacks-at-free: every free the workload made has a site, and its
    innermost frame of the workload's own code is main or scratch, where callsites.cu frees."""
    sites = {s["site"]: s["frames"] for s in load(stacks)}
    frees = [e for e in load(events) if e["kind"] == "free" and e["result"] == 0 and e["ptr"]]
    check(len(frees) > 0, f"{len(frees)} frees recorded")
    check(all(e["site"] for e in frees), f"every free has a site ({sum(1 for e in frees if e['site'])} of {len(frees)})")
    where = set()
    for e in frees:
        own = [f["frame"] for f in sites.get(e["site"], []) if "callsites.cu:" in f["frame"]]
        where.add(own[0].split(" ")[0] if own else "?")
    check(where and where <= {"main", "scratch"}, f"frees happen in {sorted(where)} (main, scratch)")


def main():
    kind, truth, report, trace = sys.argv[1:5]
    if len(sys.argv) > 6:
        free_sites(sys.argv[5], sys.argv[6])
    truth = load(truth)
    with open(report) as f:
        report = json.load(f)
    {"callsites": callsites, "gpt2": gpt2}[kind](truth, report, trace)
    print(f"{kind}: {'FAIL' if failures else 'PASS'} ({len(failures)} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
