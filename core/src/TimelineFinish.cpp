// A Timeline's last pass (TimelineFinish.h): the device sums, the totals known only at the end
// and the documented orderings.
#include "TimelineFinish.h"

#include <algorithm>
#include <unordered_map>

#include "poolscope/Timeline.h"

namespace poolscope {

namespace {

// The sum of step series, point by point: a k-way walk over their points (k is a device's pools
// plus one) calling at(t, sum) at each distinct time.
template <class At>
void walkSum(const std::vector<const Series*>& parts, At&& at) {
    std::vector<size_t> idx(parts.size(), 0);
    std::vector<uint64_t> cur(parts.size(), 0);
    uint64_t sum = 0;
    for (;;) {
        int64_t t = INT64_MAX;
        for (size_t k = 0; k < parts.size(); ++k)
            if (idx[k] < parts[k]->size()) t = std::min(t, parts[k]->t[idx[k]]);
        if (t == INT64_MAX) break;
        for (size_t k = 0; k < parts.size(); ++k)
            while (idx[k] < parts[k]->size() && parts[k]->t[idx[k]] == t) {
                sum = sum - cur[k] + parts[k]->v[idx[k]];
                cur[k] = parts[k]->v[idx[k]];
                ++idx[k];
            }
        at(t, sum);
    }
}

// The sum of step series, as a step series.
Series sumOf(const std::vector<const Series*>& parts) {
    Series out;
    walkSum(parts, [&](int64_t t, uint64_t sum) { out.push(t, sum); });
    return out;
}

// The highest value of the parts' sum and when it was first reached, and the sum at the end,
// without keeping the sum's points.
struct SumPeak {
    uint64_t peak = 0;
    int64_t peakTsNs = 0;
    uint64_t last = 0;
};
SumPeak peakOfSum(const std::vector<const Series*>& parts) {
    SumPeak out;
    walkSum(parts, [&](int64_t t, uint64_t sum) {
        if (sum > out.peak) {
            out.peak = sum;
            out.peakTsNs = t;
        }
        out.last = sum;
    });
    return out;
}

// Each device's pools together (Timeline::deviceTotals); pools sorted by device already. Pools
// of no known device (the unknown-pool bucket) are no device's.
void deviceTotals(Timeline& tl) {
    tl.deviceTotals.clear();
    for (size_t i = 0; i < tl.pools.size();) {
        if (tl.pools[i].info.device < 0) {
            ++i;
            continue;
        }
        DeviceTotals d;
        d.device = tl.pools[i].info.device;
        std::vector<const Series*> reserved, used;
        for (; i < tl.pools.size() && tl.pools[i].info.device == d.device; ++i) {
            const PoolTimeline& p = tl.pools[i];
            d.addPoolCounts(p);
            reserved.push_back(&p.reserved);
            used.push_back(&p.used);
        }
        const SumPeak r = peakOfSum(reserved), u = peakOfSum(used);
        d.peakReserved = r.peak;
        d.peakReservedTsNs = r.peakTsNs;
        d.finalReserved = r.last;
        d.peakUsed = u.peak;
        d.peakUsedTsNs = u.peakTsNs;
        d.finalUsed = u.last;
        tl.deviceTotals.push_back(d);
    }
}

} // namespace

void detail::finishTimeline(Timeline& tl, bool shrink) {
    std::unordered_map<uint64_t, PoolTimeline*> pools;
    std::unordered_map<uint64_t, StreamTimeline*> streams;
    for (PoolTimeline& p : tl.pools) {
        p.liveAtEndBytes = p.liveAtEndCount = 0;
        pools[p.info.handle] = &p;
    }
    for (StreamTimeline& s : tl.streams) {
        s.liveAtEndBytes = s.liveAtEndCount = 0;
        streams[s.info.handle] = &s;
    }
    tl.leaks.clear();
    for (size_t i = 0; i < tl.allocations.size(); ++i) {
        const Allocation& a = tl.allocations[i];
        if (!a.live()) continue;
        tl.leaks.push_back(static_cast<uint32_t>(i));
        PoolTimeline* p = pools.at(a.pool);
        p->liveAtEndBytes += a.size;
        p->liveAtEndCount++;
        StreamTimeline* s = streams.at(a.allocStream);
        s->liveAtEndBytes += a.size;
        s->liveAtEndCount++;
    }
    // Growth slack of the big vectors is a third of their size on average: give it back.
    for (PoolTimeline& p : tl.pools) {
        if (shrink) {
            p.reserved.shrinkToFit();
            p.used.shrinkToFit();
        }
        p.releaseThreshold.shrinkToFit();
        p.reuseFollowEventDependencies.shrinkToFit();
        p.reuseAllowOpportunistic.shrinkToFit();
        p.reuseAllowInternalDependencies.shrinkToFit();
    }
    if (shrink) {
        for (StreamTimeline& s : tl.streams) {
            s.liveBytes.shrinkToFit();
            s.allocations.shrink_to_fit();
        }
        tl.allocations.shrink_to_fit();
    }
    auto byDevHandle = [](const auto& a, const auto& b) {
        return a.info.device != b.info.device ? a.info.device < b.info.device
                                              : a.info.handle < b.info.handle;
    };
    std::sort(tl.pools.begin(), tl.pools.end(), byDevHandle);
    std::sort(tl.streams.begin(), tl.streams.end(), byDevHandle);
    // Edges arrive in wait order, so nearly always sorted already (a stable sort of millions
    // of them allocated and merged for nothing).
    auto byWait = [](const WaitEdge& a, const WaitEdge& b) { return a.waitTsNs < b.waitTsNs; };
    if (!std::is_sorted(tl.edges.begin(), tl.edges.end(), byWait))
        std::stable_sort(tl.edges.begin(), tl.edges.end(), byWait);
    std::sort(tl.outside.begin(), tl.outside.end(),
              [](const OutsideTimeline& a, const OutsideTimeline& b) { return a.device < b.device; });
    std::sort(tl.peerCopies.begin(), tl.peerCopies.end(),
              [](const PeerCopyTotal& a, const PeerCopyTotal& b) {
                  return std::pair(a.srcDevice, a.dstDevice) < std::pair(b.srcDevice, b.dstDevice);
              });
    deviceTotals(tl);
    for (OutsideTimeline& o : tl.outside) {
        std::vector<const Series*> parts;
        for (const PoolTimeline& p : tl.pools)
            if (p.info.device == o.device) parts.push_back(&p.reserved);
        o.poolsReservedPeak = sumOf(parts).max();
        parts.push_back(&o.liveBytes);
        o.withPools = sumOf(parts);
        o.withPoolsPeak = o.withPoolsPeakTsNs = 0;
        for (size_t i = 0; i < o.withPools.size(); ++i)
            if (o.withPools.v[i] > o.withPoolsPeak)
                o.withPoolsPeak = o.withPools.v[i], o.withPoolsPeakTsNs = o.withPools.t[i];
    }
    tl.partial = false;
    tl.loadedFromNs = tl.t0;
    tl.loadedUntilNs = tl.t1;
    tl.totalEvents = tl.eventCount;
}

} // namespace poolscope
