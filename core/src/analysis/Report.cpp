// Builds the Report model from a finished Timeline. Everything here is a reduction over the
// timeline's vectors; nothing re-reads the trace.
#include "poolscope/Report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "poolscope/Units.h"

namespace poolscope {

std::string formatHandle(uint64_t handle) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, handle);
    return buf;
}

namespace {

// Largest reserved - used over time: walks both step series together.
void maxIdle(const PoolTimeline& p, uint64_t& gap, int64_t& at) {
    gap = 0;
    at = 0;
    const Series& r = p.reserved;
    const Series& u = p.used;
    size_t i = 0, j = 0;
    uint64_t rv = 0, uv = 0;
    while (i < r.size() || j < u.size()) {
        int64_t t;
        if (j >= u.size() || (i < r.size() && r.t[i] <= u.t[j]))
            t = r.t[i];
        else
            t = u.t[j];
        while (i < r.size() && r.t[i] == t) rv = r.v[i++];
        while (j < u.size() && u.t[j] == t) uv = u.v[j++];
        const uint64_t g = rv > uv ? rv - uv : 0;
        if (g > gap) {
            gap = g;
            at = t;
        }
    }
}

// Idle bytes (reserved - used) averaged over time, from the first watermark point to the last.
uint64_t meanIdle(const PoolTimeline& p) {
    const Series& r = p.reserved;
    const Series& u = p.used;
    if (r.empty()) return 0;
    size_t i = 0, j = 0;
    uint64_t rv = 0, uv = 0;
    long double area = 0;
    int64_t prev = 0, first = 0;
    bool started = false;
    while (i < r.size() || j < u.size()) {
        int64_t t;
        if (j >= u.size() || (i < r.size() && r.t[i] <= u.t[j]))
            t = r.t[i];
        else
            t = u.t[j];
        // Differences in long double: a sample dated near INT64_MIN (a damaged trace) must not
        // overflow int64_t (UBSan under the debug preset).
        if (started)
            area += static_cast<long double>(rv > uv ? rv - uv : 0) *
                    (static_cast<long double>(t) - static_cast<long double>(prev));
        else first = t;
        started = true;
        prev = t;
        while (i < r.size() && r.t[i] == t) rv = r.v[i++];
        while (j < u.size() && u.t[j] == t) uv = u.v[j++];
    }
    if (prev <= first) return rv > uv ? rv - uv : 0;
    return static_cast<uint64_t>(area / (static_cast<long double>(prev) - static_cast<long double>(first)));
}

std::string poolName(const Report& r, const PoolReport& p) {
    return r.names.poolWithHandle(p.info.handle) +
           (p.info.device >= 0 ? " on device " + std::to_string(p.info.device) : "");
}

std::string percent(uint64_t part, uint64_t whole) {
    if (whole == 0) return "0%";
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * static_cast<double>(part) /
                                                 static_cast<double>(whole));
    return buf;
}

// Findings about memory outside the pools (issue #18).
template <class At> void beyondPoolFindings(Report& r, const At& at) {
    uint64_t poolAllocs = 0;
    for (const PoolReport& p : r.pools) poolAllocs += p.allocCount;
    uint64_t legacyAllocs = 0, legacyPeak = 0;
    for (const OutsideReport& o : r.outside) {
        legacyAllocs += o.allocCount;
        legacyPeak = std::max(legacyPeak, o.peakBytes);
    }
    if (poolAllocs > 0 && (legacyAllocs > 0 || r.deviceSyncs > 0)) {
        std::string s = "the program mixes cudaMalloc-style allocations (" +
                        formatCount(legacyAllocs) + ", up to " + formatBytes(legacyPeak) +
                        " live on one device) into a stream-ordered workload (" +
                        formatCount(poolAllocs) + " pool allocations)";
        if (r.deviceSyncs > 0) {
            uint64_t ns = 0;
            for (const OutsideReport& o : r.outside) ns += o.syncCallNs;
            s += "; " + formatCount(r.deviceSyncs) + " cudaFree call(s) synchronized the whole device";
            if (r.deviceSyncsDuringPoolWork > 0)
                s += ", " + formatCount(r.deviceSyncsDuringPoolWork) +
                     " of them while pool allocations were live";
            if (ns > 0) s += " (" + formatDuration(static_cast<int64_t>(ns)) + " inside those calls)";
        }
        s += ": every stream waits at each such free; cudaMallocAsync/cudaFreeAsync on the "
             "same pools avoid it, and that memory would then show in the pools' reserved bytes";
        r.findings.push_back(s);
    }
    for (const OutsideReport& o : r.outside) {
        if (o.poolsPeakReserved == 0 || o.peakBytes <= o.poolsPeakReserved) continue;
        r.findings.push_back("device " + std::to_string(o.device) + " held up to " +
                             formatBytes(o.peakBytes) + " outside any pool (at " + at(o.peakTsNs) +
                             "), more than its pools ever reserved (" +
                             formatBytes(o.poolsPeakReserved) +
                             "): the pools look small while the device fills up");
    }
    for (const OutsideReport& o : r.outside)
        if (o.liveAtEndBytes > 0)
            r.findings.push_back(formatBytes(o.liveAtEndBytes) + " allocated with cudaMalloc on device " +
                                 std::to_string(o.device) +
                                 " was still allocated when the trace ended (a caching allocator "
                                 "keeps its segments; otherwise a leak)");
    const PinnedReport& p = r.pinned;
    if (p.allocatedAtEnd + p.registeredAtEnd > 0)
        r.findings.push_back(formatBytes(p.allocatedAtEnd + p.registeredAtEnd) +
                             " of pinned host memory (" + formatBytes(p.allocatedAtEnd) +
                             " allocated, " + formatBytes(p.registeredAtEnd) +
                             " registered) was still pinned when the trace ended");
    if (p.failedCount > 0)
        r.findings.push_back(formatCount(p.failedCount) +
                             " pinned host allocation(s) or registration(s) failed");
    if (r.unmatchedMemReleases > 0)
        r.findings.push_back(formatCount(r.unmatchedMemReleases) +
                             " cudaFree/cudaFreeHost/cudaHostUnregister call(s) named memory not "
                             "allocated in this trace: ignored");
}

void addFindings(Report& r) {
    auto at = [&](int64_t ts) { return formatDuration(nsBetween(r.t0, ts)); };
    auto it = r.meta.find("dropped_events");
    if (it != r.meta.end() && it->second != "0" && !it->second.empty()) {
        // The meta table has no checksum: print a count only when it is one.
        const bool count = it->second.find_first_not_of("0123456789") == std::string::npos;
        std::string s = count ? "the collector dropped " + it->second + " events"
                              : std::string("the trace's dropped-event count is damaged: the "
                                            "collector may have dropped events");
        if (!r.dropGaps.empty()) {
            const DropGap& g = r.dropGaps.front();
            s += " in " + formatCount(r.dropGaps.size()) + " gap(s), the first at " + at(g.tsNs) +
                 " on thread " + std::to_string(g.tid);
        }
        r.findings.push_back(s + ": the figures below may be incomplete");
    }
    for (const PoolReport& p : r.pools) {
        // Reserved far above used is what the stream-ordered allocator's users chase: memory
        // the process holds but does not use, which other processes cannot have.
        if (!p.hasWatermarks || p.peakReserved == 0) continue;
        if (p.idleAtPeak < (uint64_t{1} << 20) || p.idleAtPeak * 4 < p.peakReserved) continue;
        std::string s = poolName(r, p) + ": reserved peaked at " + formatBytes(p.peakReserved) +
                        " (at " + at(p.peakReservedTsNs) + ") while " +
                        formatBytes(p.usedAtPeakReserved) + " was in use: " +
                        formatBytes(p.idleAtPeak) + " (" + percent(p.idleAtPeak, p.peakReserved) +
                        ") held idle";
        if (p.thresholdKnown && p.releaseThreshold >= p.peakReserved)
            s += "; its release threshold (" +
                 (p.releaseThreshold == UINT64_MAX ? std::string("max")
                                                   : formatBytes(p.releaseThreshold)) +
                 ") lets it keep all of it across synchronizes";
        r.findings.push_back(s);
    }
    auto streamName = [&](uint64_t h) { return r.names.streamWithHandle(h); };
    for (const PoolReport& p : r.pools) {
        // A pool that grew although the request's size sat idle in it, and not as other
        // streams' pending frees: its free blocks were too small (fragmentation).
        const uint64_t frag = p.fragmentedGrowths + p.fragmentedFailures;
        if (frag == 0) continue;
        const PoolGrowth* first = nullptr;
        for (const PoolGrowth& g : r.fragmented)
            if (g.pool == p.info.handle) {
                first = &g;
                break;
            }
        std::string s = poolName(r, p) + ": " + formatCount(p.fragmentedGrowths) + " of " +
                        formatCount(p.growths) + " pool growth(s)";
        if (p.fragmentedFailures)
            s += " and " + formatCount(p.fragmentedFailures) + " failed allocation(s)";
        s += " came while at least the request's size sat idle in the pool, beyond any other "
             "stream's pending frees: fragmentation (no free block it could use was large "
             "enough)";
        if (first)
            s += "; the first at " + at(first->tsNs) + ": " + formatBytes(first->bytes) + " on " +
                 streamName(first->stream) + " with " + formatBytes(first->idleBefore) +
                 " idle (seq " + std::to_string(first->seq) + ")";
        if (p.growthsWhileIdle > p.fragmentedGrowths)
            s += "; " + formatCount(p.growthsWhileIdle - p.fragmentedGrowths) +
                 " more growth(s) while the idle bytes may have been other streams' frees not "
                 "yet reusable";
        r.findings.push_back(s);
    }
    // The first listed hazard of a kind, named in its finding (nullptr when none was listed).
    auto firstHazard = [&](StreamHazard::Kind k) -> const StreamHazard* {
        for (const StreamHazard& x : r.hazards)
            if (x.kind == k) return &x;
        return nullptr;
    };
    if (r.unorderedFrees > 0) {
        const StreamHazard* h = firstHazard(StreamHazard::Kind::UnorderedFree);
        std::string s = formatCount(r.unorderedFrees) +
                        " allocation(s) were freed on another stream with nothing ordering the "
                        "allocating stream's work before the free (no event recorded there and "
                        "waited on, no synchronize): the pool may hand the memory out while "
                        "that work still uses it";
        if (h)
            s += "; the first: " + formatBytes(h->bytes) + " allocated on " +
                 streamName(h->first.stream) + " (seq " + std::to_string(h->first.seq) + ", at " +
                 at(h->first.tsNs) + "), freed on " + streamName(h->second.stream) + " (seq " +
                 std::to_string(h->second.seq) + ", at " + at(h->second.tsNs) + ")";
        s += ". Record an event on the allocating stream after its last use and make the freeing "
             "stream wait on it";
        if (r.hazardsTruncated)
            s += " (some streams depended on more streams than the analysis follows: a few of "
                 "these may be ordered after all)";
        r.findings.push_back(s);
    }
    if (r.unorderedReuses > 0) {
        const StreamHazard* h = firstHazard(StreamHazard::Kind::UnorderedReuse);
        std::string s = formatCount(r.unorderedReuses) +
                        " allocation(s) got memory freed on another stream with nothing ordering "
                        "that free before them: only the pool's opportunistic reuse (or a "
                        "dependency the driver inserted) made it possible, so which memory is "
                        "reused depends on GPU timing";
        if (h)
            s += "; the first: freed on " + streamName(h->first.stream) + " (seq " +
                 std::to_string(h->first.seq) + ", at " + at(h->first.tsNs) + "), " +
                 formatBytes(h->bytes) + " allocated on " + streamName(h->second.stream) +
                 " (seq " + std::to_string(h->second.seq) + ", at " + at(h->second.tsNs) + ")";
        if (r.freedForgotten)
            s += " (only reuse within " + formatCount(StreamHazards::kReuseWindow) +
                 " events of the free was checked)";
        r.findings.push_back(s);
    }
    uint64_t cross = 0;
    for (const StreamReport& s : r.streams) cross += s.crossStreamFrees;
    if (cross > 0)
        r.findings.push_back(formatCount(cross) +
                             " allocation(s) were freed on another stream than the one that "
                             "allocated them (reuse then depends on event dependencies)");
    // Frees other streams cannot reuse yet make the pool reserve new memory for their
    // allocations: worth a line when they reach a MiB and some other stream allocates at all
    // (a stream reuses its own frees at once).
    const StreamReport* worst = nullptr;
    for (const StreamReport& s : r.streams)
        if (!worst || s.peakPendingFree > worst->peakPendingFree) worst = &s;
    bool otherAllocates = false;
    for (const StreamReport& s : r.streams)
        otherAllocates = otherAllocates || (&s != worst && s.allocCount > 0);
    if (otherAllocates && worst && worst->peakPendingFree >= (uint64_t{1} << 20))
        r.findings.push_back(r.names.streamWithHandle(worst->info.handle) + " held up to " +
                             formatBytes(worst->peakPendingFree) +
                             " of frees that no synchronize or event wait had handed to other "
                             "streams yet (at " + at(worst->peakPendingFreeTsNs) +
                             "): they could reuse it only opportunistically, so the pool may "
                             "reserve more; a synchronize, or other streams waiting on an event "
                             "recorded after the frees, hands it back sooner");
    if (r.failedCount > 0 && !r.failed.empty()) { // --top 0 lists none
        const FailedAllocation& f = r.failed.front();
        r.findings.push_back(formatCount(r.failedCount) + " allocation(s) failed; the first at " +
                             at(f.tsNs) + " asked for " + formatBytes(f.size) + " (" +
                             formatCuResult(int(f.result)) + ")");
    } else if (r.failedCount > 0) {
        r.findings.push_back(formatCount(r.failedCount) + " allocation(s) failed");
    }
    if (r.leakCount > 0)
        r.findings.push_back(formatCount(r.leakCount) + " allocation(s) (" +
                             formatBytes(r.leakBytes) +
                             ") were still live when the trace ended");
    if (r.unmatchedFrees > 0)
        r.findings.push_back(formatCount(r.unmatchedFrees) +
                             " free(s) of pointers not allocated in this trace (allocated before "
                             "recording started, or their allocation was not recorded): ignored");
    beyondPoolFindings(r, at);
    if (r.outOfOrderEvents > 0)
        r.findings.push_back(formatCount(r.outOfOrderEvents) +
                             " event(s) came further out of time order than the report holds "
                             "points for (a second, less in very dense traces): the idle bytes, "
                             "device-wide peaks and call sites around them are approximate");
}

} // namespace

namespace detail {
void addFindings(Report& r) { poolscope::addFindings(r); }
void dropEmptyUnknownPool(Report& r) {
    std::erase_if(r.pools, [](const PoolReport& p) {
        return p.info.handle == 0 && !p.hasWatermarks && p.allocCount == 0 && p.freeCount == 0 &&
               p.failedCount == 0 && p.bytesAllocated == 0 && p.peakLive == 0 &&
               p.thresholdChanges == 0;
    });
}
} // namespace detail

Report buildReport(const Timeline& tl, const ReportOptions& options, std::string tracePath,
                   ProcessInfo process, std::map<std::string, std::string> meta) {
    Report r;
    r.tracePath = std::move(tracePath);
    r.process = std::move(process);
    r.meta = std::move(meta);
    r.t0 = tl.t0;
    r.t1 = tl.t1;
    r.eventCount = tl.eventCount;
    r.sampleCount = tl.sampleCount;
    r.unmatchedFrees = tl.unmatchedFrees;
    r.reusedWithoutFree = tl.reusedWithoutFree;
    r.waitEdges = tl.edges.size();
    r.dropGaps = tl.dropGaps;
    r.devices = tl.devices;
    r.names = view::EntityNames::fromTimeline(tl);
    for (const Marker& m : tl.markers) {
        switch (m.kind) {
        case EventKind::StreamSynchronize:
        case EventKind::EventSynchronize:
        case EventKind::ContextSynchronize: r.syncCount++; break;
        case EventKind::ImplicitRelease: r.implicitReleases++; break;
        case EventKind::PoolTrimTo: r.trims++; break;
        case EventKind::PoolSetAccess: r.peerAccessGrants++; break;
        default: break;
        }
    }

    for (const PoolTimeline& p : tl.pools) {
        PoolReport pr;
        pr.info = p.info;
        pr.hasWatermarks = !p.reserved.empty() || !p.used.empty();
        pr.peakReserved = p.peakReserved;
        pr.peakReservedTsNs = p.peakReservedTsNs;
        pr.usedAtPeakReserved = p.used.valueAt(p.peakReservedTsNs);
        pr.idleAtPeak =
            pr.peakReserved > pr.usedAtPeakReserved ? pr.peakReserved - pr.usedAtPeakReserved : 0;
        maxIdle(p, pr.maxIdle, pr.maxIdleTsNs);
        pr.peakUsed = p.peakUsed;
        pr.peakUsedTsNs = p.peakUsedTsNs;
        pr.peakLive = p.peakLive;
        pr.bytesAllocated = p.bytesAllocated;
        pr.allocCount = p.allocCount;
        pr.freeCount = p.freeCount;
        pr.failedCount = p.failedCount;
        pr.liveAtEndBytes = p.liveAtEndBytes;
        pr.liveAtEndCount = p.liveAtEndCount;
        pr.finalReserved = p.reserved.empty() ? 0 : p.reserved.v.back();
        pr.finalUsed = p.used.empty() ? 0 : p.used.v.back();
        pr.access = p.access;
        pr.thresholdKnown = !p.releaseThreshold.empty();
        pr.releaseThreshold = pr.thresholdKnown ? p.releaseThreshold.v.back() : 0;
        pr.thresholdChanges = p.releaseThreshold.size();
        auto last = [](const Series& s) -> int8_t { return s.empty() ? -1 : s.v.back() != 0; };
        pr.reuseFollowEventDependencies = last(p.reuseFollowEventDependencies);
        pr.reuseAllowOpportunistic = last(p.reuseAllowOpportunistic);
        pr.reuseAllowInternalDependencies = last(p.reuseAllowInternalDependencies);
        pr.meanIdle = meanIdle(p);
        if (const Fragmentation::Pool* f = tl.fragmentation.pool(p.info.handle)) {
            pr.growths = f->growths;
            pr.growthsWhileIdle = f->growthsWhileIdle;
            pr.fragmentedGrowths = f->fragmentedGrowths;
            pr.failuresWhileIdle = f->failuresWhileIdle;
            pr.fragmentedFailures = f->fragmentedFailures;
        }
        r.pools.push_back(std::move(pr));
    }

    for (const StreamTimeline& s : tl.streams) {
        StreamReport sr;
        sr.info = s.info;
        sr.allocCount = s.allocCount;
        sr.bytesAllocated = s.bytesAllocated;
        sr.freeCount = s.freeCount;
        sr.failedCount = s.failedCount;
        sr.peakLive = s.peakLive;
        sr.peakLiveTsNs = s.peakLiveTsNs;
        sr.liveAtEndBytes = s.liveAtEndBytes;
        sr.liveAtEndCount = s.liveAtEndCount;
        if (const PendingFrees::Stream* pf = tl.pendingFrees.stream(s.info.handle)) {
            sr.peakPendingFree = pf->peak;
            sr.peakPendingFreeTsNs = pf->peakTsNs;
        }
        for (uint32_t idx : s.allocations) {
            const Allocation& a = tl.allocations[idx];
            if (!a.live() && a.freeSeq != 0 && a.freeStream != a.allocStream) sr.crossStreamFrees++;
        }
        r.streams.push_back(std::move(sr));
    }

    r.leakCount = tl.leaks.size();
    std::vector<uint32_t> leaks = tl.leaks;
    for (uint32_t i : leaks) r.leakBytes += tl.allocations[i].size;
    const size_t n = std::min(options.topN, leaks.size());
    std::partial_sort(leaks.begin(), leaks.begin() + static_cast<ptrdiff_t>(n), leaks.end(),
                      [&](uint32_t a, uint32_t b) {
                          const Allocation& x = tl.allocations[a];
                          const Allocation& y = tl.allocations[b];
                          return x.size != y.size ? x.size > y.size : x.allocSeq < y.allocSeq;
                      });
    for (size_t i = 0; i < n; ++i) r.topLeaks.push_back(tl.allocations[leaks[i]]);

    r.failedCount = tl.failed.size();
    for (size_t i = 0; i < tl.failed.size() && i < options.topN; ++i)
        r.failed.push_back(tl.failed[i]);

    r.unorderedFrees = tl.hazards.unorderedFrees;
    r.unorderedReuses = tl.hazards.unorderedReuses;
    r.hazardsTruncated = tl.hazards.truncated;
    r.freedForgotten = tl.hazards.freedForgotten;
    for (size_t i = 0; i < tl.hazards.hazards.size() && i < options.topN; ++i)
        r.hazards.push_back(tl.hazards.hazards[i]);
    for (const PoolGrowth& g : tl.fragmentation.events) {
        if (r.fragmented.size() >= options.topN) break;
        if (g.fragmented()) r.fragmented.push_back(g);
    }

    r.deviceTotals = tl.deviceTotals;
    r.peerCopies = tl.peerCopies;
    for (const OutsideTimeline& o : tl.outside) {
        OutsideReport orr;
        orr.device = o.device;
        orr.peakBytes = o.peakBytes;
        orr.peakTsNs = o.peakTsNs;
        orr.liveAtEndBytes = o.liveAtEndBytes;
        orr.managedPeakBytes = o.managedPeakBytes;
        orr.allocCount = o.allocCount;
        orr.freeCount = o.freeCount;
        orr.failedCount = o.failedCount;
        orr.syncFrees = o.syncFrees;
        orr.syncCallNs = o.syncCallNs;
        orr.poolsPeakReserved = o.poolsReservedPeak;
        orr.combinedPeak = o.withPoolsPeak;
        orr.combinedPeakTsNs = o.withPoolsPeakTsNs;
        r.deviceSyncs += o.syncFrees;
        r.outside.push_back(orr);
    }
    // A cudaFree while stream-ordered blocks were live stalls the pool workload's streams.
    for (const DeviceSync& d : tl.deviceSyncs) {
        for (const StreamTimeline& s : tl.streams)
            if (s.liveBytes.valueAt(d.tsNs) > 0) {
                r.deviceSyncsDuringPoolWork++;
                break;
            }
    }
    const PinnedTimeline& pt = tl.pinned;
    PinnedReport& pr = r.pinned;
    pr.allocatedPeak = pt.allocatedPeak;
    pr.registeredPeak = pt.registeredPeak;
    pr.totalPeak = pt.totalPeak;
    pr.totalPeakTsNs = pt.totalPeakTsNs;
    pr.allocatedAtEnd = pt.allocatedAtEnd;
    pr.registeredAtEnd = pt.registeredAtEnd;
    pr.allocCount = pt.allocCount;
    pr.freeCount = pt.freeCount;
    pr.registerCount = pt.registerCount;
    pr.unregisterCount = pt.unregisterCount;
    pr.failedCount = pt.failedCount;
    for (int i = 0; i < 8; ++i) {
        pr.allocatedByFlags[i] = pt.allocatedByFlags[i];
        pr.allocsByFlags[i] = pt.allocsByFlags[i];
    }
    r.unmatchedMemReleases = tl.unmatchedMemReleases;

    detail::dropEmptyUnknownPool(r);
    addFindings(r);
    return r;
}

} // namespace poolscope
