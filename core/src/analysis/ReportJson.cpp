// The JSON rendering of a Report for scripts. Field names are a public interface: add, never
// rename.
#include <nlohmann/json.hpp>

#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/Report.h"

namespace poolscope {

namespace {

using json = nlohmann::ordered_json; // keys in the order written: readable output

json allocationJson(const Allocation& a, int64_t t0) {
    return json{{"ptr", formatHandle(a.ptr)},
                {"size", a.size},
                {"pool", formatHandle(a.pool)},
                {"stream", formatHandle(a.allocStream)},
                {"alloc_ns", jsonNsBetween<json>(t0, a.allocTsNs)},
                {"alloc_seq", a.allocSeq},
                {"tid", a.tid},
                {"device", a.device},
                {"api", allocApiName(static_cast<AllocApi>(a.api))}};
}

json policy(int8_t v) {
    return v < 0 ? json() : json(v != 0);
}

} // namespace

std::string reportToJson(const Report& r, int indent) {
    json j;
    j["trace"] = r.tracePath;
    j["process"] = {{"pid", r.process.pid},
                    {"parent_pid", r.process.parentPid},
                    {"command_line", r.process.commandLine},
                    {"host", r.process.host},
                    {"driver_version", r.process.driverVersion},
                    {"runtime_version", r.process.runtimeVersion},
                    {"collector_version", r.process.collectorVersion}};
    j["meta"] = r.meta;
    j["t0_ns"] = r.t0;
    j["duration_ns"] = jsonNsBetween<json>(r.t0, r.t1);
    j["events"] = r.eventCount;
    j["samples"] = r.sampleCount;
    j["synchronizes"] = r.syncCount;
    j["implicit_releases"] = r.implicitReleases;
    j["trims"] = r.trims;
    j["wait_edges"] = r.waitEdges;
    j["unmatched_frees"] = r.unmatchedFrees;
    j["reused_without_free"] = r.reusedWithoutFree;

    json devices = json::array();
    for (const DeviceInfo& d : r.devices)
        devices.push_back({{"ordinal", d.ordinal},
                           {"name", d.name},
                           {"total_memory", d.totalMemory},
                           {"uuid", d.uuid}});
    j["devices"] = devices;

    // A pool or stream that never held a byte (an imported pool's unread side, events that
    // named no pool, PyTorch's 128 idle streams) has no time for its peak: null, not a time
    // before the trace began.
    auto peakAt = [&r](uint64_t value, int64_t ts) {
        return value ? jsonNsBetween<json>(r.t0, ts) : json();
    };
    json pools = json::array();
    for (const PoolReport& p : r.pools) {
        json o = {{"handle", formatHandle(p.info.handle)},
                  {"name", r.names.pool(p.info.handle)},
                  {"device", p.info.device},
                  {"kind", poolKindName(p.info.kind)},
                  {"max_size", p.info.maxSize},
                  {"has_watermarks", p.hasWatermarks},
                  {"peak_reserved", p.peakReserved},
                  {"peak_reserved_ns", peakAt(p.peakReserved, p.peakReservedTsNs)},
                  {"used_at_peak_reserved", p.usedAtPeakReserved},
                  {"idle_at_peak", p.idleAtPeak},
                  {"max_idle", p.maxIdle},
                  {"max_idle_ns", peakAt(p.maxIdle, p.maxIdleTsNs)},
                  {"peak_used", p.peakUsed},
                  {"peak_used_ns", peakAt(p.peakUsed, p.peakUsedTsNs)},
                  {"peak_live", p.peakLive},
                  {"bytes_allocated", p.bytesAllocated},
                  {"alloc_count", p.allocCount},
                  {"free_count", p.freeCount},
                  {"failed_count", p.failedCount},
                  {"live_at_end_bytes", p.liveAtEndBytes},
                  {"live_at_end_count", p.liveAtEndCount},
                  {"final_reserved", p.finalReserved},
                  {"final_used", p.finalUsed},
                  {"release_threshold", p.thresholdKnown ? json(p.releaseThreshold) : json()},
                  {"threshold_changes", p.thresholdChanges},
                  {"reuse_follow_event_dependencies", policy(p.reuseFollowEventDependencies)},
                  {"reuse_allow_opportunistic", policy(p.reuseAllowOpportunistic)},
                  {"reuse_allow_internal_dependencies", policy(p.reuseAllowInternalDependencies)},
                  {"mean_idle", p.meanIdle},
                  {"growths", p.growths},
                  {"growths_while_idle", p.growthsWhileIdle},
                  {"fragmented_growths", p.fragmentedGrowths},
                  {"failures_while_idle", p.failuresWhileIdle},
                  {"fragmented_failures", p.fragmentedFailures}};
        json access = json::array();
        for (const PoolAccess& a : p.access)
            access.push_back({{"device", a.device},
                              {"location_type", a.locationType},
                              {"flags", a.flags},
                              {"access", describeAccessFlags(a.flags)},
                              {"at_ns", jsonNsBetween<json>(r.t0, a.tsNs)}});
        o["access"] = std::move(access);
        pools.push_back(std::move(o));
    }
    j["pools"] = pools;

    // Each device's pools together: peaks of the sum at one instant.
    json totals = json::array();
    for (const DeviceTotals& d : r.deviceTotals)
        totals.push_back({{"device", d.device},
                          {"pools", d.poolCount},
                          {"peak_reserved", d.peakReserved},
                          {"peak_reserved_ns", peakAt(d.peakReserved, d.peakReservedTsNs)},
                          {"peak_used", d.peakUsed},
                          {"peak_used_ns", peakAt(d.peakUsed, d.peakUsedTsNs)},
                          {"final_reserved", d.finalReserved},
                          {"final_used", d.finalUsed},
                          {"bytes_allocated", d.bytesAllocated},
                          {"alloc_count", d.allocCount},
                          {"free_count", d.freeCount},
                          {"failed_count", d.failedCount},
                          {"live_at_end_bytes", d.liveAtEndBytes},
                          {"live_at_end_count", d.liveAtEndCount}});
    j["device_totals"] = totals;
    json peer = json::array();
    for (const PeerCopyTotal& c : r.peerCopies)
        peer.push_back({{"src_device", c.srcDevice},
                        {"dst_device", c.dstDevice},
                        {"count", c.count},
                        {"bytes", c.bytes},
                        {"failed_count", c.failedCount}});
    j["peer_copies"] = peer;
    j["pool_access_grants"] = r.peerAccessGrants;

    json streams = json::array();
    for (const StreamReport& s : r.streams)
        streams.push_back({{"handle", formatHandle(s.info.handle)},
                           {"name", r.names.stream(s.info.handle)},
                           {"device", s.info.device},
                           {"alloc_count", s.allocCount},
                           {"bytes_allocated", s.bytesAllocated},
                           {"free_count", s.freeCount},
                           {"cross_stream_frees", s.crossStreamFrees},
                           {"failed_count", s.failedCount},
                           {"peak_live", s.peakLive},
                           {"peak_live_ns", peakAt(s.peakLive, s.peakLiveTsNs)},
                           {"live_at_end_bytes", s.liveAtEndBytes},
                           {"live_at_end_count", s.liveAtEndCount},
                           {"peak_pending_free", s.peakPendingFree},
                           {"peak_pending_free_ns", peakAt(s.peakPendingFree, s.peakPendingFreeTsNs)}});
    j["streams"] = streams;

    json leaks = json::array();
    for (const Allocation& a : r.topLeaks) leaks.push_back(allocationJson(a, r.t0));
    j["leaks"] = {{"count", r.leakCount}, {"bytes", r.leakBytes}, {"top", leaks}};

    json failed = json::array();
    for (const FailedAllocation& f : r.failed)
        failed.push_back({{"ts_ns", jsonNsBetween<json>(r.t0, f.tsNs)},
                          {"seq", f.seq},
                          {"size", f.size},
                          {"stream", formatHandle(f.stream)},
                          {"pool", formatHandle(f.pool)},
                          {"result", f.result}});
    j["failed_allocations"] = {{"count", r.failedCount}, {"first", failed}};
    auto at = [&](const StreamHazard::At& a) {
        return json{{"seq", a.seq},
                    {"ns", jsonNsBetween<json>(r.t0, a.tsNs)},
                    {"stream", formatHandle(a.stream)},
                    {"stream_name", r.names.stream(a.stream)}};
    };
    json hazards = json::array();
    for (const StreamHazard& h : r.hazards) {
        const bool free = h.kind == StreamHazard::Kind::UnorderedFree;
        json o = {{"kind", free ? "unordered_free" : "unordered_reuse"},
                  {free ? "alloc" : "free", at(h.first)},
                  {free ? "free" : "alloc", at(h.second)},
                  {"ptr", formatHandle(h.ptr)},
                  {"size", h.bytes},
                  {"pool", formatHandle(h.pool)}};
        if (!free)
            o["opportunistic_reuse"] = h.opportunistic < 0 ? json() : json(h.opportunistic == 1);
        hazards.push_back(std::move(o));
    }
    j["stream_hazards"] = {{"unordered_frees", r.unorderedFrees},
                           {"unordered_reuses", r.unorderedReuses},
                           {"orderings_truncated", r.hazardsTruncated},
                           {"freed_addresses_forgotten", r.freedForgotten},
                           {"first", hazards}};
    json frag = json::array();
    for (const PoolGrowth& g : r.fragmented)
        frag.push_back({{"seq", g.seq},
                        {"ns", jsonNsBetween<json>(r.t0, g.tsNs)},
                        {"pool", formatHandle(g.pool)},
                        {"stream", formatHandle(g.stream)},
                        {"size", g.bytes},
                        {"failed", g.failed},
                        {"idle_before", g.idleBefore},
                        {"pending_elsewhere", g.pendingElsewhere},
                        {"grew_by", g.grewBy}});
    j["fragmented_allocations"] = frag;

    json outside = json::array();
    for (const OutsideReport& o : r.outside)
        outside.push_back({{"device", o.device},
                           {"peak_bytes", o.peakBytes},
                           {"peak_ns", o.peakBytes ? jsonNsBetween<json>(r.t0, o.peakTsNs) : json(0)},
                           {"live_at_end_bytes", o.liveAtEndBytes},
                           {"managed_peak_bytes", o.managedPeakBytes},
                           {"alloc_count", o.allocCount},
                           {"free_count", o.freeCount},
                           {"failed_count", o.failedCount},
                           {"sync_frees", o.syncFrees},
                           {"sync_call_ns", o.syncCallNs},
                           {"pools_peak_reserved", o.poolsPeakReserved},
                           {"combined_peak", o.combinedPeak},
                           {"combined_peak_ns",
                            o.combinedPeak ? jsonNsBetween<json>(r.t0, o.combinedPeakTsNs) : json(0)}});
    j["outside_pools"] = {{"devices", outside},
                          {"device_syncs", r.deviceSyncs},
                          {"device_syncs_during_pool_work", r.deviceSyncsDuringPoolWork},
                          {"unmatched_releases", r.unmatchedMemReleases}};
    const PinnedReport& pn = r.pinned;
    json byFlags = json::array();
    for (int f = 0; f < 8; ++f) {
        if (pn.allocsByFlags[f] == 0) continue;
        byFlags.push_back({{"portable", (f & 1) != 0},
                           {"mapped", (f & 2) != 0},
                           {"write_combined", (f & 4) != 0},
                           {"count", pn.allocsByFlags[f]},
                           {"bytes", pn.allocatedByFlags[f]}});
    }
    j["pinned_host"] = {{"allocated_peak", pn.allocatedPeak},
                        {"registered_peak", pn.registeredPeak},
                        {"total_peak", pn.totalPeak},
                        {"total_peak_ns", pn.totalPeak ? jsonNsBetween<json>(r.t0, pn.totalPeakTsNs) : json(0)},
                        {"allocated_at_end", pn.allocatedAtEnd},
                        {"registered_at_end", pn.registeredAtEnd},
                        {"alloc_count", pn.allocCount},
                        {"free_count", pn.freeCount},
                        {"register_count", pn.registerCount},
                        {"unregister_count", pn.unregisterCount},
                        {"failed_count", pn.failedCount},
                        {"allocations_by_flags", byFlags}};
    // Only where it happened: the streaming report's approximation (TraceReport.h).
    if (r.outOfOrderEvents > 0) j["out_of_order_events"] = r.outOfOrderEvents;
    j["findings"] = r.findings;
    return dumpJson(j, indent);
}

} // namespace poolscope
