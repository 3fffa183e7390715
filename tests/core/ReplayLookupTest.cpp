// The replay's fast lookups against plain references on random input: the live set
// (FlatPtrMap: keys apart from values, backward-shift deletion) against std::unordered_map, and
// the pool and stream indices (last handle, the inline array of the first kFast, then the hash
// map) against first-seen order.
#include <gtest/gtest.h>

#include <map>
#include <queue>
#include <random>
#include <unordered_map>

#include "../../core/src/MostlySorted.h"
#include "../../core/src/replay/FlatPtrMap.h"
#include "TestTraces.h"
#include "poolscope/replay/Replay.h"

namespace poolscope {
namespace {

struct Value {
    uint64_t a = 0;
    uint32_t b = 0;
    bool operator==(const Value&) const = default;
};

// Keys from a narrow range collide and wrap around the table; aligned pointers from a wide one
// spread as the replay's do.
void randomMapOps(uint64_t seed, uint64_t keyRange, uint64_t keyStep) {
    std::mt19937_64 rng(seed);
    detail::FlatPtrMap<Value> map;
    std::unordered_map<uint64_t, Value> ref;
    for (int i = 0; i < 200'000; ++i) {
        const uint64_t key = (rng() % keyRange + 1) * keyStep;
        const unsigned op = static_cast<unsigned>(rng() % 8);
        if (op < 4) {
            const Value v{rng(), static_cast<uint32_t>(i)};
            map.put(key, v);
            ref[key] = v;
        } else if (op < 7) {
            Value got{};
            const bool took = map.take(key, got);
            auto it = ref.find(key);
            ASSERT_EQ(took, it != ref.end()) << "take " << key << " at op " << i;
            if (took) {
                EXPECT_EQ(got, it->second);
                ref.erase(it);
            }
        } else {
            const Value* found = map.find(key);
            auto it = ref.find(key);
            ASSERT_EQ(found != nullptr, it != ref.end()) << "find " << key << " at op " << i;
            if (found) EXPECT_EQ(*found, it->second);
        }
        ASSERT_EQ(map.size(), ref.size());
    }
    // Every key still held is found with its value, and forEach visits each value once.
    for (const auto& [k, v] : ref) {
        const Value* found = map.find(k);
        ASSERT_NE(found, nullptr) << k;
        EXPECT_EQ(*found, v);
    }
    std::map<uint32_t, int> seen;
    map.forEach([&](const Value& v) { seen[v.b]++; });
    std::map<uint32_t, int> want;
    for (const auto& [k, v] : ref) want[v.b]++;
    EXPECT_EQ(seen, want);
}

TEST(ReplayLookup, FlatPtrMapMatchesAStdMapOnRandomOps) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        randomMapOps(seed, 300, 1);          // dense: long probe runs, wrap-around, regrowth
        randomMapOps(seed + 10, 50'000, 512); // sparse, aligned like device pointers
    }
}

TEST(ReplayLookup, PoolAndStreamIndicesFollowFirstSightOnRandomEvents) {
    // More handles than the inline array holds, so every path is taken: the last handle, the
    // array, the hash map, and new handles.
    std::mt19937_64 rng(42);
    const uint64_t streams[] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA,
                                0xBB, 0xCC, 0xDD, 0xEE};
    const uint64_t pools[] = {0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 0x700, 0x800, 0x900,
                              0xA00, 0xB00};
    test::Events ev;
    for (int i = 0; i < 50'000; ++i) {
        // Runs of one handle, then jumps: both the last-handle cache and the searches are hit.
        const uint64_t s = streams[(rng() % 3 == 0) ? rng() % std::size(streams) : i / 7 % 4];
        const uint64_t p = pools[(rng() % 3 == 0) ? rng() % std::size(pools) : i / 5 % 3];
        Event& e = ev.alloc(i, s, p, 0x10000 + 0x200 * static_cast<uint64_t>(i), 256);
        e.device = static_cast<int16_t>(rng() % 4 == 0 ? -1 : static_cast<int>(p >> 8) % 2);
    }
    replay::Replay r;
    std::map<uint64_t, uint32_t> streamRef, poolRef;
    std::map<uint64_t, int> poolDevice, streamDevice;
    for (const Event& e : ev.all()) {
        const replay::Fact& f = r.apply(e);
        ASSERT_TRUE(f.allocated);
        const uint32_t ws = streamRef.try_emplace(e.stream, static_cast<uint32_t>(streamRef.size())).first->second;
        const uint32_t wp = poolRef.try_emplace(e.pool, static_cast<uint32_t>(poolRef.size())).first->second;
        ASSERT_EQ(f.stream, ws) << "seq " << e.seq;
        ASSERT_EQ(f.pool, wp) << "seq " << e.seq;
        // A pool first seen without a device learns it from its first event that names one.
        for (auto* devices : {&poolDevice, &streamDevice}) {
            auto [it, fresh] = devices->try_emplace(devices == &poolDevice ? e.pool : e.stream, e.device);
            if (!fresh && it->second < 0) it->second = e.device;
        }
        ASSERT_EQ(r.pools()[f.pool].info.device, poolDevice[e.pool]) << "seq " << e.seq;
        ASSERT_EQ(r.streams()[f.stream].info.device, streamDevice[e.stream]) << "seq " << e.seq;
    }
    EXPECT_EQ(r.streams().size(), std::size(streams));
    EXPECT_EQ(r.pools().size(), std::size(pools));
    for (const auto& [h, i] : streamRef) EXPECT_EQ(r.streamIndex(h), i);
    for (const auto& [h, i] : poolRef) EXPECT_EQ(r.poolIndex(h), i);
}


// MostlySorted (the streamed Perfetto export's queues) against one heap: the same items in the
// same order, for streams of keys that run in order with some late ones, all late, and all in
// order, with pops in between.
TEST(MostlySorted, ComesOutAsOneHeap) {
    using Key = std::pair<int64_t, uint64_t>; // (time, arrival): a total order
    std::mt19937_64 rng(11);
    for (int lateOneIn : {4, 1, 1000000}) {
        detail::MostlySorted<Key> q;
        std::priority_queue<Key, std::vector<Key>, std::greater<>> ref;
        int64_t t = 0;
        uint64_t arrival = 0, popped = 0;
        for (int i = 0; i < 200000; ++i) {
            if (rng() % 3 != 0) {
                t += int64_t(rng() % 5);
                const int64_t at = rng() % uint64_t(lateOneIn) == 0 ? t - int64_t(rng() % 1000) : t;
                q.push({at, arrival});
                ref.push({at, arrival});
                ++arrival;
            } else if (!ref.empty()) {
                ASSERT_EQ(q.size(), ref.size());
                ASSERT_EQ(q.top(), ref.top()) << "pop " << popped;
                q.pop();
                ref.pop();
                ++popped;
            }
        }
        while (!ref.empty()) {
            ASSERT_FALSE(q.empty());
            ASSERT_EQ(q.top(), ref.top());
            q.pop();
            ref.pop();
        }
        EXPECT_TRUE(q.empty());
        EXPECT_GT(popped, 10000u);
    }
}

} // namespace
} // namespace poolscope
