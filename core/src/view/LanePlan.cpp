#include "LanePlan.h"

#include "poolscope/view/EntityNames.h"

#include <algorithm>

namespace poolscope::view {

std::set<PoolStream> allocatingPairs(const Timeline& tl) {
    std::set<PoolStream> pairs;
    std::vector<PoolStream> recent;
    for (const Allocation& a : tl.allocations) {
        const PoolStream key{a.pool, a.allocStream};
        if (std::find(recent.begin(), recent.end(), key) != recent.end()) continue;
        if (pairs.insert(key).second && recent.size() < 8) recent.push_back(key);
    }
    return pairs;
}

LanePlan planLanes(const Timeline& tl, std::set<PoolStream>& pairs) {
    // Streams seen anywhere (sync markers, wait edges) get a lane too, so arrows have an end.
    std::set<uint64_t> streamsWithLane;
    for (const PoolStream& key : pairs)
        streamsWithLane.insert(key.second);
    std::set<uint64_t> extraStreams;
    for (const WaitEdge& e : tl.edges) {
        if (!streamsWithLane.count(e.fromStream)) extraStreams.insert(e.fromStream);
        if (!streamsWithLane.count(e.toStream)) extraStreams.insert(e.toStream);
    }
    // A failed allocation goes on a lane of its stream; it gets a lane of its own only when the
    // stream has none (a failure often has no pool: it never got one).
    for (const FailedAllocation& f : tl.failed)
        if (!streamsWithLane.count(f.stream) && !pairs.count({f.pool, f.stream})) {
            pairs.insert({f.pool, f.stream});
            streamsWithLane.insert(f.stream);
        }

    // Devices: those listed, plus any referenced by a pool or stream.
    std::set<int> devices;
    for (const DeviceInfo& d : tl.devices)
        devices.insert(d.ordinal);
    const bool unknownPoolUsed =
        std::any_of(pairs.begin(), pairs.end(), [](const PoolStream& k) { return k.first == 0; });
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
    for (const PoolStream& key : pairs)
        devices.insert(poolDevice(key.first));

    LanePlan plan;
    for (int dev : devices) {
        LanePlan::DeviceLanes d;
        d.device = dev;
        // Pools of this device: those with a timeline, plus unknown pools (handle 0) seen in
        // allocations when the device is unknown.
        std::vector<uint64_t> pools;
        for (const PoolTimeline& p : tl.pools) {
            // The "unknown pool" bucket only earns a lane when something landed in it.
            const bool empty =
                p.info.handle == 0 && p.allocCount == 0 && p.peakReserved == 0 && !unknownPoolUsed;
            if (p.info.device == dev && !empty) pools.push_back(p.info.handle);
        }
        for (const PoolStream& key : pairs)
            if (poolDevice(key.first) == dev &&
                std::find(pools.begin(), pools.end(), key.first) == pools.end())
                pools.push_back(key.first);
        for (uint64_t pool : pools) {
            LanePlan::PoolLanes pl;
            pl.pool = pool;
            for (size_t i = 0; i < tl.pools.size(); ++i)
                if (tl.pools[i].info.handle == pool) pl.poolIndex = static_cast<int>(i);
            for (const PoolStream& key : pairs)
                if (key.first == pool) pl.streams.push_back(key.second);
            d.pools.push_back(std::move(pl));
        }
        for (uint64_t s : extraStreams) {
            const int sd = streamDevice(s);
            if (sd != dev && !(sd < 0 && dev == *devices.begin())) continue;
            d.extraStreams.push_back(s);
        }
        plan.devices.push_back(std::move(d));
    }
    return plan;
}

void numberInLaneOrder(const Timeline& tl, const LanePlan& plan, EntityNames& names) {
    for (const StreamTimeline& st : tl.streams)
        names.numberStream(st.info.handle);
    for (const LanePlan::DeviceLanes& d : plan.devices) {
        for (const LanePlan::PoolLanes& p : d.pools) {
            names.numberPool(tl, p.pool);
            for (uint64_t s : p.streams)
                names.numberStream(s);
        }
        for (uint64_t s : d.extraStreams)
            names.numberStream(s);
    }
}

} // namespace poolscope::view
