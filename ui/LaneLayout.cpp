#include "LaneLayout.h"

#include "poolscope/Units.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>

namespace poolscope::ui {

QString hexHandle(uint64_t h) {
    return QStringLiteral("0x") + QString::number(h, 16);
}

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

QString streamLabel(uint64_t s) {
    // The runtime's special handles: 0 = default stream, 1 = cudaStreamLegacy, 2 = per-thread.
    if (s == 0) return QStringLiteral("default stream (0)");
    if (s == 1) return QStringLiteral("legacy stream (0x1)");
    if (s == 2) return QStringLiteral("per-thread stream (0x2)");
    return hexHandle(s);
}

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

} // namespace

std::shared_ptr<const LaneLayout> LaneLayout::build(const Timeline& tl,
                                                    const std::atomic<bool>* cancel) {
    auto out = std::make_shared<LaneLayout>();
    out->rowOfAlloc.assign(tl.allocations.size(), -1);

    // Which (pool, stream) pairs allocate, and their allocations. Traces have a handful of
    // pairs and allocations alternate between them: a few recently used pairs are found by a
    // linear compare instead of a map lookup per allocation (millions of them), and each list
    // is reserved for its stream's allocation count so it is not copied while growing.
    std::map<std::pair<uint64_t, uint64_t>, std::vector<uint32_t>> pairAllocs;
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
        if ((i & 0xFFFF) == 0 && cancelled(cancel)) return nullptr;
    }
    // Streams seen anywhere (sync markers, wait edges) get a lane too, so arrows have an end.
    std::set<uint64_t> streamsWithLane;
    for (auto& [key, v] : pairAllocs)
        streamsWithLane.insert(key.second);
    std::set<uint64_t> extraStreams;
    for (const WaitEdge& e : tl.edges) {
        if (!streamsWithLane.count(e.fromStream)) extraStreams.insert(e.fromStream);
        if (!streamsWithLane.count(e.toStream)) extraStreams.insert(e.toStream);
    }
    // A failed allocation goes on a lane of its stream; it gets a lane of its own only when the
    // stream has none (a failure often has no pool: it never got one).
    for (const FailedAllocation& f : tl.failed)
        if (!streamsWithLane.count(f.stream) && !pairAllocs.count({f.pool, f.stream})) {
            pairAllocs[{f.pool, f.stream}];
            streamsWithLane.insert(f.stream);
        }

    // Devices: those listed, plus any referenced by a pool or stream.
    std::set<int> devices;
    for (const DeviceInfo& d : tl.devices)
        devices.insert(d.ordinal);
    const bool unknownPoolUsed = std::any_of(pairAllocs.begin(), pairAllocs.end(),
                                             [](const auto& kv) { return kv.first.first == 0; });
    for (const PoolTimeline& p : tl.pools)
        if (p.info.handle != 0 || unknownPoolUsed || p.allocCount || p.peakReserved)
            devices.insert(p.info.device);
    auto poolDevice = [&](uint64_t pool) {
        const PoolTimeline* p = tl.pool(pool);
        return p ? p->info.device : -1;
    };
    auto streamDevice = [&](uint64_t s) {
        const StreamTimeline* st = tl.stream(s);
        return st ? st->info.device : -1;
    };
    for (auto& [key, v] : pairAllocs)
        devices.insert(poolDevice(key.first));

    int poolNo = 0, streamNo = 0;
    auto nameStream = [&](uint64_t s) {
        if (!out->streamNames_.count(s))
            out->streamNames_[s] = QStringLiteral("stream #%1").arg(++streamNo);
    };
    for (const StreamTimeline& st : tl.streams)
        nameStream(st.info.handle);

    for (int dev : devices) {
        Lane d;
        d.kind = LaneKind::Device;
        d.device = dev;
        d.title = dev >= 0 ? QStringLiteral("GPU %1").arg(dev) : QStringLiteral("unknown device");
        for (const DeviceInfo& di : tl.devices)
            if (di.ordinal == dev) {
                d.subtitle = QString::fromStdString(di.name);
                if (di.totalMemory)
                    d.subtitle += QStringLiteral(" · %1").arg(
                        QString::fromStdString(formatBytes(di.totalMemory)));
            }
        out->lanes.push_back(std::move(d));

        // Pools of this device: those with a timeline, plus unknown pools (handle 0) seen in
        // allocations when the device is unknown.
        std::vector<uint64_t> pools;
        for (const PoolTimeline& p : tl.pools) {
            // The "unknown pool" bucket only earns a lane when something landed in it.
            const bool empty =
                p.info.handle == 0 && p.allocCount == 0 && p.peakReserved == 0 && !unknownPoolUsed;
            if (p.info.device == dev && !empty) pools.push_back(p.info.handle);
        }
        for (auto& [key, v] : pairAllocs)
            if (poolDevice(key.first) == dev &&
                std::find(pools.begin(), pools.end(), key.first) == pools.end())
                pools.push_back(key.first);

        for (uint64_t pool : pools) {
            Lane pl;
            pl.kind = LaneKind::Pool;
            pl.device = dev;
            pl.pool = pool;
            for (size_t i = 0; i < tl.pools.size(); ++i)
                if (tl.pools[i].info.handle == pool) pl.poolIndex = static_cast<int>(i);
            const PoolTimeline* pt = pl.poolIndex >= 0 ? &tl.pools[size_t(pl.poolIndex)] : nullptr;
            QString kind = pt ? QString::fromUtf8(poolKindName(pt->info.kind).data()) : "unknown";
            QString name = QStringLiteral("pool #%1").arg(++poolNo);
            if (pool == 0) name = QStringLiteral("unknown pool");
            out->poolNames_[pool] = name + QStringLiteral(" (%1)").arg(kind);
            pl.title = out->poolNames_[pool];
            pl.subtitle = pool ? hexHandle(pool) : QString();
            out->poolLane_[pool] = static_cast<int>(out->lanes.size());
            out->lanes.push_back(std::move(pl));
            const int poolLaneIdx = static_cast<int>(out->lanes.size()) - 1;

            for (auto& [key, allocs] : pairAllocs) {
                if (key.first != pool) continue;
                if (cancelled(cancel)) return nullptr;
                Lane sl;
                sl.kind = LaneKind::Stream;
                sl.device = dev;
                sl.pool = pool;
                sl.poolIndex = out->lanes[size_t(poolLaneIdx)].poolIndex;
                sl.stream = key.second;
                for (size_t i = 0; i < tl.streams.size(); ++i)
                    if (tl.streams[i].info.handle == key.second) sl.streamIndex = int(i);
                nameStream(key.second);
                sl.title = out->streamNames_[key.second];
                sl.subtitle = streamLabel(key.second);
                const int laneIndex = static_cast<int>(out->lanes.size());
                packRows(tl, allocs, *out, sl, laneIndex);
                out->pairLane_[key] = laneIndex;
                if (!out->streamLane_.count(key.second)) out->streamLane_[key.second] = laneIndex;
                out->lanes.push_back(std::move(sl));
            }
        }
        // Streams of this device that never allocate but sync or wait.
        for (uint64_t s : extraStreams) {
            const int sd = streamDevice(s);
            if (sd != dev && !(sd < 0 && dev == *devices.begin())) continue;
            Lane sl;
            sl.kind = LaneKind::Stream;
            sl.device = dev;
            sl.stream = s;
            for (size_t i = 0; i < tl.streams.size(); ++i)
                if (tl.streams[i].info.handle == s) sl.streamIndex = int(i);
            nameStream(s);
            sl.title = out->streamNames_[s];
            sl.subtitle = streamLabel(s) + QStringLiteral(" · no allocations");
            sl.firstRow = static_cast<int>(out->rows.size());
            out->streamLane_[s] = static_cast<int>(out->lanes.size());
            out->lanes.push_back(std::move(sl));
        }
    }

    // Markers: stream-bound ones on every lane of their stream, pool-bound ones on the pool lane,
    // the rest (context/event synchronize) on the first device lane.
    auto deviceLane = [&](int dev) {
        for (size_t i = 0; i < out->lanes.size(); ++i)
            if (out->lanes[i].kind == LaneKind::Device && out->lanes[i].device == dev)
                return int(i);
        return out->lanes.empty() ? -1 : 0;
    };
    for (uint32_t i = 0; i < tl.markers.size(); ++i) {
        const Marker& m = tl.markers[i];
        if ((i & 0xFFFF) == 0 && cancelled(cancel)) return nullptr;
        if (m.kind == EventKind::StreamSynchronize) {
            bool placed = false;
            for (size_t l = 0; l < out->lanes.size(); ++l)
                if (out->lanes[l].kind == LaneKind::Stream && out->lanes[l].stream == m.stream) {
                    out->lanes[l].markers.push_back(i);
                    placed = true;
                }
            if (placed) continue;
        }
        int lane = -1;
        if (m.pool && out->poolLane_.count(m.pool))
            lane = out->poolLane_[m.pool];
        else if (m.stream && out->streamLane_.count(m.stream))
            lane = out->streamLane_[m.stream];
        else
            lane = deviceLane(m.pool ? poolDevice(m.pool) : -1);
        if (lane >= 0) out->lanes[size_t(lane)].markers.push_back(i);
    }
    for (uint32_t i = 0; i < tl.failed.size(); ++i) {
        const FailedAllocation& f = tl.failed[i];
        int lane = out->laneOf(f.pool, f.stream);
        if (lane < 0) lane = out->laneOfStream(f.stream);
        if (lane < 0) lane = deviceLane(-1);
        if (lane >= 0) out->lanes[size_t(lane)].failed.push_back(i);
    }
    auto blockTimes = [](const Series& s) {
        std::vector<int64_t> bt;
        bt.reserve(s.size() / Series::kBlock + 1);
        for (size_t i = 0; i < s.size(); i += Series::kBlock)
            bt.push_back(s.t[i]);
        return bt;
    };
    for (const PoolTimeline& p : tl.pools)
        out->poolBlockT.push_back({blockTimes(p.reserved), blockTimes(p.used)});
    for (const StreamTimeline& st : tl.streams)
        out->streamBlockT.push_back(blockTimes(st.liveBytes));
    for (Lane& l : out->lanes) {
        std::stable_sort(l.markers.begin(), l.markers.end(), [&](uint32_t a, uint32_t b) {
            return tl.markers[a].tsNs < tl.markers[b].tsNs;
        });
        std::stable_sort(l.failed.begin(), l.failed.end(), [&](uint32_t a, uint32_t b) {
            return tl.failed[a].tsNs < tl.failed[b].tsNs;
        });
    }
    return out;
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

QString LaneLayout::poolName(uint64_t pool) const {
    auto it = poolNames_.find(pool);
    return it == poolNames_.end() ? hexHandle(pool) : it->second;
}

QString LaneLayout::streamName(uint64_t stream) const {
    auto it = streamNames_.find(stream);
    return it == streamNames_.end() ? streamLabel(stream) : it->second;
}

} // namespace poolscope::ui
