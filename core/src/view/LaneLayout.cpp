#include "poolscope/view/LaneLayout.h"

#include "LanePlan.h"
#include "poolscope/Units.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace poolscope::view {

size_t gallopPast(const std::vector<int64_t>& ends, size_t from, int64_t t) {
    const size_t n = ends.size();
    if (from >= n || ends[from] > t) return from;
    size_t prev = from, step = 1;
    while (from + step < n && ends[from + step] <= t) {
        prev = from + step;
        step *= 2;
    }
    const size_t hi = std::min(n, from + step);
    return size_t(
        std::upper_bound(ends.begin() + ptrdiff_t(prev) + 1, ends.begin() + ptrdiff_t(hi), t) -
        ends.begin());
}

namespace {

bool cancelled(const std::atomic<bool>* c) {
    return c && c->load(std::memory_order_relaxed);
}

// Interval partitioning: each allocation takes the lowest free row at its alloc time, so the
// churn stays in the top rows and long-lived blocks sink below it.
void packRows(const Timeline& tl, std::vector<uint32_t>& allocs, LaneLayout& out, Lane& lane,
              int laneIndex) {
    auto start = [&](uint32_t i) { return tl.allocations[i].allocTsNs; };
    if (!std::is_sorted(allocs.begin(), allocs.end(),
                        [&](uint32_t a, uint32_t b) { return start(a) < start(b); }))
        std::stable_sort(allocs.begin(), allocs.end(),
                         [&](uint32_t a, uint32_t b) { return start(a) < start(b); });
    std::priority_queue<int, std::vector<int>, std::greater<>> freeRows;
    using Busy = std::pair<int64_t, int>; // free time, row
    std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
    int rowCount = 0;
    lane.firstRow = static_cast<int>(out.rows.size());
    for (uint32_t i : allocs) {
        const Allocation& a = tl.allocations[i];
        while (!busy.empty() && busy.top().first <= a.allocTsNs) {
            freeRows.push(busy.top().second);
            busy.pop();
        }
        int row;
        if (freeRows.empty()) {
            row = rowCount++;
            out.rows.emplace_back();
            out.rowEnds.emplace_back();
            out.rowStarts.emplace_back();
            out.laneOfRow.push_back(laneIndex);
        } else {
            row = freeRows.top();
            freeRows.pop();
        }
        const int global = lane.firstRow + row;
        out.rows[static_cast<size_t>(global)].push_back(i);
        out.rowOfAlloc[i] = global;
        busy.push({std::max(a.freeTsNs, a.allocTsNs), row});
    }
    lane.rowCount = rowCount;
    for (int r = 0; r < rowCount; ++r) {
        const auto& row = out.rows[size_t(lane.firstRow + r)];
        auto& ends = out.rowEnds[size_t(lane.firstRow + r)];
        auto& starts = out.rowStarts[size_t(lane.firstRow + r)];
        ends.reserve(row.size());
        starts.reserve(row.size());
        for (uint32_t i : row) {
            const Allocation& a = tl.allocations[i];
            ends.push_back(a.live() ? std::max(tl.t1, a.allocTsNs) : a.freeTsNs);
            starts.push_back(a.allocTsNs);
        }
    }
}

int indexOfStream(const Timeline& tl, uint64_t s) {
    int idx = -1;
    for (size_t i = 0; i < tl.streams.size(); ++i)
        if (tl.streams[i].info.handle == s) idx = int(i);
    return idx;
}

// A stream's lane subtitle: what kind of stream it is and what it allocated; its handle is in
// the details pane.
std::string streamSubtitle(const Timeline& tl, uint64_t s) {
    // Short: it shares the label column with the lane's title (the flags and the handle are in
    // the details pane).
    std::string kind = s == 0 ? "default" : s == 1 ? "legacy" : s == 2 ? "per-thread" : "";
    const int i = indexOfStream(tl, s);
    const StreamTimeline* st = i >= 0 ? &tl.streams[size_t(i)] : nullptr;
    if (st && s > 2 && st->info.priorityKnown && st->info.priority)
        kind = "priority " + std::to_string(st->info.priority);
    const std::string what =
        !st || st->allocCount == 0
            ? (st && st->freeCount ? std::to_string(st->freeCount) +
                                         (st->freeCount == 1 ? " free" : " frees") +
                                         " · no allocations"
                                   : std::string("no allocations"))
            : std::to_string(st->allocCount) + (st->allocCount == 1 ? " alloc" : " allocs") +
                  " · peak " + formatBytes(st->peakLive);
    return kind.empty() ? what : kind + " · " + what;
}

} // namespace

std::shared_ptr<const LaneLayout> LaneLayout::build(const Timeline& tl,
                                                    const std::atomic<bool>* cancel) {
    auto out = std::make_shared<LaneLayout>();
    if (!out->compute(tl, cancel)) return nullptr;
    return out;
}

bool LaneLayout::compute(const Timeline& tl, const std::atomic<bool>* cancel) {
    rowOfAlloc.assign(tl.allocations.size(), -1);

    // Which (pool, stream) pairs allocate, and their allocations. Traces have a handful of
    // pairs and allocations alternate between them: a few recently used pairs are found by a
    // linear compare instead of a map lookup per allocation (millions of them), and each list
    // is reserved for its stream's allocation count so it is not copied while growing.
    std::map<PoolStream, std::vector<uint32_t>> pairAllocs;
    struct Recent {
        uint64_t pool, stream;
        std::vector<uint32_t>* list;
    };
    std::vector<Recent> recent;
    for (uint32_t i = 0; i < tl.allocations.size(); ++i) {
        const Allocation& a = tl.allocations[i];
        std::vector<uint32_t>* list = nullptr;
        for (const Recent& r : recent)
            if (r.pool == a.pool && r.stream == a.allocStream) {
                list = r.list;
                break;
            }
        if (!list) {
            auto [it, inserted] = pairAllocs.try_emplace({a.pool, a.allocStream});
            list = &it->second;
            if (inserted)
                if (const StreamTimeline* st = tl.stream(a.allocStream))
                    list->reserve(st->allocations.size());
            if (recent.size() < 8) recent.push_back({a.pool, a.allocStream, list});
        }
        list->push_back(i);
        if ((i & 0xFFFF) == 0 && cancelled(cancel)) return false;
    }
    std::set<PoolStream> pairs;
    for (auto& [key, v] : pairAllocs)
        pairs.insert(key);
    const LanePlan plan = planLanes(tl, pairs);
    numberInLaneOrder(tl, plan, names);

    int poolSlots = 0;
    for (const LanePlan::DeviceLanes& dp : plan.devices) {
        const int dev = dp.device;
        Lane d;
        d.kind = LaneKind::Device;
        d.device = dev;
        d.title = dev >= 0 ? "GPU " + std::to_string(dev) : std::string("unknown device");
        for (const DeviceInfo& di : tl.devices)
            if (di.ordinal == dev) {
                d.subtitle = di.name;
                if (di.totalMemory) d.subtitle += " · " + formatBytes(di.totalMemory);
            }
        // Several devices: each one's pools together first, so the devices compare at a glance
        // (a one-line header drops the name before it cuts this).
        if (tl.deviceTotals.size() > 1)
            if (const DeviceTotals* t = tl.totalsOf(dev))
                d.subtitle = "pools peak " + formatBytes(t->peakReserved) +
                             (d.subtitle.empty() ? std::string() : " · " + d.subtitle);
        lanes.push_back(std::move(d));
        addOutsideLane(tl, dev);

        for (const LanePlan::PoolLanes& pp : dp.pools) {
            const uint64_t pool = pp.pool;
            Lane pl;
            pl.kind = LaneKind::Pool;
            pl.device = dev;
            pl.pool = pool;
            pl.poolIndex = pp.poolIndex;
            const int slot = poolSlots++;
            pl.poolSlot = slot;
            pl.title = names.pool(pool);
            // What the pool did, not its handle (the handle is in the details pane).
            if (pp.poolIndex >= 0) {
                const PoolTimeline& pt = tl.pools[size_t(pp.poolIndex)];
                pl.subtitle = pt.peakReserved || pp.streams.size()
                                  ? "peak " + formatBytes(pt.peakReserved) + " reserved"
                                  : std::string(pt.info.kind == PoolKind::Imported
                                                    ? "imported · nothing allocated here"
                                                    : "nothing allocated");
                // Opened to other devices (cudaMemPoolSetAccess): the details pane says how.
                for (const PoolAccess& a : pt.access)
                    if (a.flags != 0 && a.device >= 0 && a.device != pt.info.device) {
                        pl.subtitle += " · GPU " + std::to_string(a.device) + " may use";
                        break;
                    }
            }
            poolLane_[pool] = static_cast<int>(lanes.size());
            lanes.push_back(std::move(pl));

            for (uint64_t s : pp.streams) {
                if (cancelled(cancel)) return false;
                Lane sl;
                sl.kind = LaneKind::Stream;
                sl.device = dev;
                sl.pool = pool;
                sl.poolIndex = pp.poolIndex;
                sl.poolSlot = slot;
                sl.stream = s;
                sl.streamIndex = indexOfStream(tl, s);
                sl.title = names.stream(s);
                sl.subtitle = streamSubtitle(tl, s);
                const int laneIndex = static_cast<int>(lanes.size());
                auto it = pairAllocs.find({pool, s});
                std::vector<uint32_t> none;
                packRows(tl, it != pairAllocs.end() ? it->second : none, *this, sl, laneIndex);
                pairLane_[{pool, s}] = laneIndex;
                if (!streamLane_.count(s)) streamLane_[s] = laneIndex;
                lanes.push_back(std::move(sl));
            }
        }
        // Streams of this device that never allocate but sync or wait.
        for (uint64_t s : dp.extraStreams) {
            Lane sl;
            sl.kind = LaneKind::Stream;
            sl.device = dev;
            sl.stream = s;
            sl.streamIndex = indexOfStream(tl, s);
            sl.title = names.stream(s);
            sl.subtitle = streamSubtitle(tl, s);
            sl.firstRow = static_cast<int>(rows.size());
            streamLane_[s] = static_cast<int>(lanes.size());
            lanes.push_back(std::move(sl));
        }
    }

    // Devices with memory outside the pools but no lane yet (no pool, stream or device record).
    for (const OutsideTimeline& o : tl.outside) {
        bool has = false;
        for (const Lane& l : lanes) has = has || (l.kind == LaneKind::Device && l.device == o.device);
        if (has) continue;
        Lane d;
        d.kind = LaneKind::Device;
        d.device = o.device;
        d.title = o.device >= 0 ? "GPU " + std::to_string(o.device) : std::string("unknown device");
        lanes.push_back(std::move(d));
        addOutsideLane(tl, o.device);
    }
    if (tl.pinned.any()) {
        const PinnedTimeline& pt = tl.pinned;
        Lane h;
        h.kind = LaneKind::Host;
        h.title = "Host: pinned memory";
        h.subtitle = "peak " + formatBytes(pt.totalPeak) + " · registered " +
                     formatBytes(pt.registeredPeak);
        h.firstRow = static_cast<int>(rows.size());
        lanes.push_back(std::move(h));
    }

    // Markers: stream-bound ones on every lane of their stream, pool-bound ones on the pool lane,
    // the rest (context/event synchronize) on the first device lane.
    auto poolDevice = [&](uint64_t pool) {
        const PoolTimeline* p = tl.pool(pool);
        return p ? p->info.device : -1;
    };
    auto deviceLane = [&](int dev) {
        for (size_t i = 0; i < lanes.size(); ++i)
            if (lanes[i].kind == LaneKind::Device && lanes[i].device == dev) return int(i);
        return lanes.empty() ? -1 : 0;
    };
    for (uint32_t i = 0; i < tl.markers.size(); ++i) {
        const Marker& m = tl.markers[i];
        if ((i & 0xFFFF) == 0 && cancelled(cancel)) return false;
        if (m.kind == EventKind::StreamSynchronize) {
            bool placed = false;
            for (size_t l = 0; l < lanes.size(); ++l)
                if (lanes[l].kind == LaneKind::Stream && lanes[l].stream == m.stream) {
                    lanes[l].markers.push_back(i);
                    placed = true;
                }
            if (placed) continue;
        }
        int lane = -1;
        if (m.pool && poolLane_.count(m.pool))
            lane = poolLane_[m.pool];
        else if (m.stream && streamLane_.count(m.stream))
            lane = streamLane_[m.stream];
        else
            lane = deviceLane(m.pool ? poolDevice(m.pool) : -1);
        if (lane >= 0) lanes[size_t(lane)].markers.push_back(i);
    }
    for (uint32_t i = 0; i < tl.failed.size(); ++i) {
        const FailedAllocation& f = tl.failed[i];
        int lane = laneOf(f.pool, f.stream);
        if (lane < 0) lane = laneOfStream(f.stream);
        if (lane < 0) lane = deviceLane(-1);
        if (lane >= 0) lanes[size_t(lane)].failed.push_back(i);
    }
    auto blockTimes = [](const Series& s) {
        std::vector<int64_t> bt;
        bt.reserve(s.size() / Series::kBlock + 1);
        for (size_t i = 0; i < s.size(); i += Series::kBlock)
            bt.push_back(s.t[i]);
        return bt;
    };
    for (const PoolTimeline& p : tl.pools)
        poolBlockT.push_back({blockTimes(p.reserved), blockTimes(p.used)});
    for (const StreamTimeline& st : tl.streams)
        streamBlockT.push_back(blockTimes(st.liveBytes));
    for (Lane& l : lanes) {
        std::stable_sort(l.markers.begin(), l.markers.end(), [&](uint32_t a, uint32_t b) {
            return tl.markers[a].tsNs < tl.markers[b].tsNs;
        });
        std::stable_sort(l.failed.begin(), l.failed.end(), [&](uint32_t a, uint32_t b) {
            return tl.failed[a].tsNs < tl.failed[b].tsNs;
        });
    }
    return true;
}

void LaneLayout::addOutsideLane(const Timeline& tl, int device) {
    for (size_t i = 0; i < tl.outside.size(); ++i) {
        const OutsideTimeline& o = tl.outside[i];
        if (o.device != device) continue;
        Lane l;
        l.kind = LaneKind::Outside;
        l.device = device;
        l.outsideIndex = static_cast<int>(i);
        l.title = "outside the pools";
        // Its total beside the pools' reserved bytes: what the device held in all.
        // (Short: the label column is narrow; the tooltip and the report say more.)
        l.subtitle = "peak " + formatBytes(o.peakBytes) + " · with pools " +
                     formatBytes(o.withPoolsPeak);
        l.firstRow = static_cast<int>(rows.size());
        lanes.push_back(std::move(l));
    }
}

int LaneLayout::laneOfStream(uint64_t stream) const {
    auto it = streamLane_.find(stream);
    return it == streamLane_.end() ? -1 : it->second;
}

int LaneLayout::laneOfPool(uint64_t pool) const {
    auto it = poolLane_.find(pool);
    return it == poolLane_.end() ? -1 : it->second;
}

int LaneLayout::laneOf(uint64_t pool, uint64_t stream) const {
    auto it = pairLane_.find({pool, stream});
    return it == pairLane_.end() ? -1 : it->second;
}

TimeSpan allocatorActivity(const Timeline& tl) {
    int64_t a = INT64_MAX, b = INT64_MIN;
    for (const Allocation& x : tl.allocations) {
        a = std::min(a, x.allocTsNs);
        b = std::max(b, x.live() ? x.allocTsNs : x.freeTsNs);
    }
    for (const FailedAllocation& f : tl.failed) {
        a = std::min(a, f.tsNs);
        b = std::max(b, f.tsNs);
    }
    if (a == INT64_MAX) return {};
    for (const PoolTimeline& p : tl.pools) // trims and releases after the last free
        if (!p.reserved.empty()) b = std::max(b, p.reserved.t.back());
    return {a, std::max(a, b)};
}

} // namespace poolscope::view
