// The terminal rendering of a Report: a header, a pools table, a streams table, leaks, failed
// allocations and findings, sized to stay about one screen for typical traces.
#include <cinttypes>
#include <cstdio>

#include "TextTable.h"
#include "poolscope/EventText.h"
#include "poolscope/Report.h"
#include "poolscope/Units.h"

namespace poolscope {

namespace {

std::string bytesOrDash(bool known, uint64_t b) { return known ? formatBytes(b) : "-"; }

std::string threshold(const PoolReport& p) {
    if (!p.thresholdKnown) return "?";
    return p.releaseThreshold == UINT64_MAX ? "max" : formatBytes(p.releaseThreshold);
}

// The three reuse policies in one short cell (the legend is under the table): E follow event
// dependencies, O allow opportunistic, I allow internal dependencies; "-" off, "?" unknown.
std::string reuse(const PoolReport& p) {
    std::string s;
    for (auto [v, letter] : {std::pair{p.reuseFollowEventDependencies, 'E'},
                             {p.reuseAllowOpportunistic, 'O'},
                             {p.reuseAllowInternalDependencies, 'I'}})
        s += v < 0 ? '?' : v ? letter : '-';
    return s;
}

} // namespace

std::string reportToText(const Report& r) {
    auto rel = [&](int64_t ts) { return formatDuration(nsBetween(r.t0, ts)); };
    std::string out = "PoolScope report";
    if (!r.tracePath.empty()) out += ": " + r.tracePath;
    out += "\n";
    const ProcessInfo& p = r.process;
    if (p.pid != 0 || !p.commandLine.empty()) {
        out += "  process " + std::to_string(p.pid);
        if (!p.commandLine.empty()) out += "  " + p.commandLine;
        if (!p.host.empty()) out += "  on " + p.host;
        out += "\n";
    }
    out += "  duration " + formatDuration(nsBetween(r.t0, r.t1)) + ", " + formatCount(r.eventCount) + " events, " +
           formatCount(r.sampleCount) + " samples, " + formatCount(r.syncCount) + " synchronizes, " +
           formatCount(r.implicitReleases) + " implicit releases, " + formatCount(r.waitEdges) +
           " cross-stream waits\n";
    for (const DeviceInfo& d : r.devices)
        out += "  device " + std::to_string(d.ordinal) + ": " + d.name + " (" +
               formatBytes(d.totalMemory) + ")\n";

    out += "\nPools\n";
    // Column titles stay short so the table fits 120 columns with GiB-sized values.
    detail::TextTable pools({"pool", "dev", "kind", "peak rsvd", "used then", "idle then",
                             "peak used", "allocs", "allocated", "live@end", "final rsvd",
                             "threshold", "reuse"});
    for (const PoolReport& pr : r.pools) {
        const bool w = pr.hasWatermarks;
        pools.row({r.names.poolWithHandle(pr.info.handle), pr.info.device < 0 ? "-" : std::to_string(pr.info.device),
                   std::string(poolKindName(pr.info.kind)), bytesOrDash(w, pr.peakReserved),
                   bytesOrDash(w, pr.usedAtPeakReserved), bytesOrDash(w, pr.idleAtPeak),
                   w ? formatBytes(pr.peakUsed) : formatBytes(pr.peakLive) + "*",
                   formatCount(pr.allocCount), formatBytes(pr.bytesAllocated),
                   formatBytes(pr.liveAtEndBytes), bytesOrDash(w, pr.finalReserved),
                   threshold(pr), reuse(pr)});
    }
    out += pools.empty() ? "  (none)\n" : pools.render();
    if (!pools.empty())
        out += "  reuse: E follow event dependencies, O allow opportunistic, I allow internal "
               "dependencies (- off, ? never set nor read)\n";
    for (const PoolReport& pr : r.pools)
        if (!pr.hasWatermarks) {
            out += "  * no watermarks recorded for this pool: peak of the live allocations seen\n";
            break;
        }
    for (const PoolReport& pr : r.pools) {
        if (pr.access.empty()) continue;
        std::string s;
        for (const PoolAccess& a : pr.access) {
            if (!s.empty()) s += ", ";
            s += (a.locationType <= 1 ? deviceLabel(a.device)
                                      : "location type " + std::to_string(a.locationType)) +
                 " " + describeAccessFlags(a.flags);
        }
        out += "  " + r.names.pool(pr.info.handle) + " (" + deviceLabel(pr.info.device) +
               ") shared: " + s + "\n";
    }

    // Several devices: each one's pools together, peaks of the sum at one instant.
    if (r.deviceTotals.size() > 1 || !r.peerCopies.empty()) {
        out += "\nDevices (their pools together)\n";
        detail::TextTable t({"dev", "pools", "peak rsvd", "peak at", "peak used", "allocs",
                             "allocated", "live@end", "final rsvd"});
        for (const DeviceTotals& d : r.deviceTotals)
            t.row({std::to_string(d.device), std::to_string(d.poolCount),
                   formatBytes(d.peakReserved), d.peakReserved ? rel(d.peakReservedTsNs) : "-",
                   formatBytes(d.peakUsed), formatCount(d.allocCount),
                   formatBytes(d.bytesAllocated), formatBytes(d.liveAtEndBytes),
                   formatBytes(d.finalReserved)});
        out += t.render();
        for (const PeerCopyTotal& c : r.peerCopies) {
            out += "  peer copies " + deviceLabel(c.srcDevice) + " → " + deviceLabel(c.dstDevice) +
                   ": " + formatCount(c.count) + " (" + formatBytes(c.bytes) + ")";
            if (c.failedCount) out += ", " + formatCount(c.failedCount) + " failed";
            out += "\n";
        }
    }

    out += "\nStreams\n";
    detail::TextTable streams({"stream", "dev", "allocs", "allocated", "peak live",
                               "peak at", "freed elsewhere", "pending free", "live@end", "failed"});
    for (const StreamReport& s : r.streams) {
        streams.row({r.names.streamWithHandle(s.info.handle),
                     s.info.device < 0 ? "-" : std::to_string(s.info.device), formatCount(s.allocCount),
                     formatBytes(s.bytesAllocated), formatBytes(s.peakLive),
                     s.peakLive ? rel(s.peakLiveTsNs) : "-", formatCount(s.crossStreamFrees),
                     formatBytes(s.peakPendingFree), formatBytes(s.liveAtEndBytes), formatCount(s.failedCount)});
    }
    out += streams.empty() ? "  (none)\n" : streams.render();

    if (r.unorderedFrees + r.unorderedReuses > 0) {
        out += "\nStream-order hazards: " + formatCount(r.unorderedFrees) +
               " unordered cross-stream free(s), " + formatCount(r.unorderedReuses) +
               " unordered reuse(s) across streams\n";
        detail::TextTable t({"hazard", "first (seq, at, stream)", "then (seq, at, stream)", "size",
                             "ptr"});
        for (const StreamHazard& h : r.hazards) {
            const bool free = h.kind == StreamHazard::Kind::UnorderedFree;
            auto at = [&](const char* what, const StreamHazard::At& a) {
                return std::string(what) + " " + std::to_string(a.seq) + ", " + rel(a.tsNs) +
                       ", " + r.names.stream(a.stream);
            };
            t.row({free ? "unordered free" : "unordered reuse",
                   at(free ? "alloc" : "free", h.first), at(free ? "free" : "alloc", h.second),
                   formatBytes(h.bytes), formatHandle(h.ptr)});
        }
        out += t.render();
        const uint64_t all = r.unorderedFrees + r.unorderedReuses;
        if (all > r.hazards.size())
            out += "  ... " + formatCount(all - r.hazards.size()) + " more\n";
    }

    bool anyGrowth = false;
    for (const PoolReport& pr : r.pools) anyGrowth = anyGrowth || pr.growths || pr.failedCount;
    if (anyGrowth) {
        out += "\nFragmentation (pool growths and failed allocations against the idle bytes "
               "just before)\n";
        detail::TextTable t({"pool", "mean idle", "max idle", "growths", "while idle",
                             "fragmented", "failed", "while idle", "fragmented"});
        for (const PoolReport& pr : r.pools) {
            if (!pr.growths && !pr.failedCount) continue;
            t.row({r.names.pool(pr.info.handle), formatBytes(pr.meanIdle), formatBytes(pr.maxIdle),
                   formatCount(pr.growths), formatCount(pr.growthsWhileIdle),
                   formatCount(pr.fragmentedGrowths), formatCount(pr.failedCount),
                   formatCount(pr.failuresWhileIdle), formatCount(pr.fragmentedFailures)});
        }
        out += t.render();
        out += "  while idle: at least the request's size was idle; fragmented: even without "
               "other streams' pending frees\n";
    }

    if (!r.outside.empty()) {
        out += "\nDevice memory outside the pools (cudaMalloc, cuMemAlloc): " +
               formatCount(r.deviceSyncs) + " device-wide synchronize(s) by cudaFree\n";
        detail::TextTable t({"dev", "peak", "peak at", "pools' peak rsvd", "both at peak",
                             "allocs", "frees", "live@end", "managed peak", "cudaFree syncs",
                             "time in them"});
        for (const OutsideReport& o : r.outside)
            t.row({o.device < 0 ? "-" : std::to_string(o.device), formatBytes(o.peakBytes),
                   o.peakBytes ? rel(o.peakTsNs) : "-", formatBytes(o.poolsPeakReserved),
                   formatBytes(o.combinedPeak), formatCount(o.allocCount),
                   formatCount(o.freeCount), formatBytes(o.liveAtEndBytes),
                   formatBytes(o.managedPeakBytes), formatCount(o.syncFrees),
                   o.syncCallNs ? formatDuration(static_cast<int64_t>(o.syncCallNs)) : "-"});
        out += t.render();
    }
    if (r.pinned.any()) {
        const PinnedReport& p = r.pinned;
        out += "\nPinned host memory: peak " + formatBytes(p.totalPeak) + " at " +
               rel(p.totalPeakTsNs) + " (allocated peak " + formatBytes(p.allocatedPeak) +
               ", registered peak " + formatBytes(p.registeredPeak) + ")\n";
        detail::TextTable t({"", "calls", "released", "peak", "at end"});
        t.row({"allocated (cudaHostAlloc, cudaMallocHost)", formatCount(p.allocCount),
               formatCount(p.freeCount), formatBytes(p.allocatedPeak), formatBytes(p.allocatedAtEnd)});
        t.row({"registered (cudaHostRegister)", formatCount(p.registerCount),
               formatCount(p.unregisterCount), formatBytes(p.registeredPeak),
               formatBytes(p.registeredAtEnd)});
        out += t.render();
        std::string flags;
        for (int f = 0; f < 8; ++f) {
            if (!p.allocsByFlags[f]) continue;
            if (!flags.empty()) flags += ", ";
            flags += describePinnedFlags(EventKind::HostAlloc, static_cast<uint32_t>(f)) + " " +
                     formatCount(p.allocsByFlags[f]) + " (" + formatBytes(p.allocatedByFlags[f]) + ")";
        }
        if (!flags.empty()) out += "  allocations by flags: " + flags + "\n";
        if (p.failedCount) out += "  failed: " + formatCount(p.failedCount) + "\n";
    }

    out += "\nLeaks: " + formatCount(r.leakCount) + " allocation(s) live at the end, " +
           formatBytes(r.leakBytes) + "\n";
    if (!r.topLeaks.empty()) {
        detail::TextTable leaks({"ptr", "size", "pool", "stream", "allocated at", "seq"});
        for (const Allocation& a : r.topLeaks)
            leaks.row({formatHandle(a.ptr), formatBytes(a.size), r.names.poolWithHandle(a.pool),
                       r.names.streamWithHandle(a.allocStream), rel(a.allocTsNs), std::to_string(a.allocSeq)});
        out += leaks.render();
        if (r.leakCount > r.topLeaks.size())
            out += "  ... " + formatCount(r.leakCount - r.topLeaks.size()) + " more\n";
    }

    out += "\nFailed allocations: " + formatCount(r.failedCount) + "\n";
    if (!r.failed.empty()) {
        detail::TextTable failed({"at", "size", "stream", "pool", "CUresult", "seq"});
        for (const FailedAllocation& f : r.failed)
            failed.row({rel(f.tsNs), formatBytes(f.size), r.names.streamWithHandle(f.stream), r.names.poolWithHandle(f.pool),
                        formatCuResult(int(f.result)), std::to_string(f.seq)});
        out += failed.render();
        if (r.failedCount > r.failed.size())
            out += "  ... " + formatCount(r.failedCount - r.failed.size()) + " more\n";
    }

    out += "\nFindings\n";
    if (r.findings.empty()) out += "  nothing unusual: reserved memory followed used memory\n";
    for (const std::string& f : r.findings) out += "  - " + f + "\n";
    return out;
}

} // namespace poolscope
