// The names pass (traceNamesAndStart): replaying only the events the names depend on
// (NamesFilter) and taking the blocks live before a stretch from runs of chunks on threads,
// against the replay of every event. The comparisons with the streaming report's names on
// every sample, generated and hand-built trace are in ReportStreamTest (expectSame).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "GeneratedTraces.h"
#include "TestTraces.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope {
namespace {

using test::MiB;
using test::namesPass;
using test::namesText;

// Every field of LiveBlocksBefore's blocks, one line each.
std::string liveText(const std::vector<Allocation>& blocks) {
    std::string out;
    for (const Allocation& a : blocks)
        out += std::to_string(a.ptr) + " " + std::to_string(a.size) + " " + std::to_string(a.pool) + " " +
               std::to_string(a.device) + " " + std::to_string(a.allocStream) + " " +
               std::to_string(a.allocTsNs) + " " + std::to_string(a.allocSeq) + " " + std::to_string(a.tid) +
               " " + std::to_string(a.site) + " " + std::to_string(int(a.api)) + " " +
               std::to_string(a.beforeLoaded) + " " + std::to_string(a.freeTsNs) + "\n";
    return out;
}

// The disorderly traces written in chunks of a few events, so that nearly everything the
// names pass's filter keeps for the events after it (a thread's failure and its retry, a
// record and its wait, a pool's newest reading and a release read before it, a handle's first
// sight and its first with a device) falls on both sides of a chunk's boundary: the filtered
// pass, on one thread and on three, names as the replay of every event does.
TEST(NamesPass, TheFilteredNamesPassNamesAsTheWholeReplayAcrossChunkBoundaries) {
    test::ScratchDir dir;
    int filtered = 0, runs = 0;
    for (uint64_t seed = 1; seed <= 4; ++seed)
        for (size_t per : {size_t(1), size_t(3), size_t(17), size_t(200)}) {
            SCOPED_TRACE("seed " + std::to_string(seed) + ", chunks of " + std::to_string(per));
            test::Disorderly g(seed, seed % 2 ? 50'000'000 : 2'000'000'000);
            g.generate(4000);
            const std::string path = test::writeEvents(dir.file("chunked" + std::to_string(seed) + "_" + std::to_string(per) + ".poolscope"),
                                           g.events(), g.samples(), g.declared(), per);
            auto reader = TraceReader::open(path);
            ASSERT_TRUE(reader);
            (*reader)->setSkipDamaged(true);
            (*reader)->setReuseHeaderScan(true);
            auto ref = namesPass(**reader, 1, false);
            ASSERT_TRUE(ref);
            ASSERT_FALSE(ref->filtered);
            const std::string refText = namesText(**reader, ref->names);
            // The blocks live before a stretch, taken by contiguous runs of chunks on threads.
            for (uint64_t before : {uint64_t(1), uint64_t(1500), uint64_t(2700), uint64_t(1) << 40}) {
                SCOPED_TRACE("live before seq " + std::to_string(before));
                LiveBlocksBefore wholeLive, threadsLive;
                wholeLive.beforeSeq = threadsLive.beforeSeq = before;
                auto w = namesPass(**reader, 1, false, &wholeLive);
                auto t = namesPass(**reader, 3, false, &threadsLive);
                ASSERT_TRUE(w && t);
                EXPECT_TRUE(t->filtered);
                EXPECT_EQ(t->madeFrom, w->madeFrom);
                EXPECT_EQ(liveText(threadsLive.blocks), liveText(wholeLive.blocks));
                if (before == 1500) {
                    EXPECT_GT(wholeLive.blocks.size(), 10u);
                }
            }
            for (unsigned threads : {1u, 3u}) {
                auto got = namesPass(**reader, threads, true);
                ASSERT_TRUE(got);
                EXPECT_EQ(got->t0, ref->t0);
                EXPECT_EQ(namesText(**reader, got->names), refText);
                EXPECT_EQ(got->madeFrom, ref->madeFrom);
                filtered += got->filtered;
                ++runs;
            }
        }
    // Their frees name their block's pool: the filtered pass answers itself.
    EXPECT_EQ(filtered, runs);
}

// Hand-built (not a recording), in two chunks: what the filtered names pass must keep of the
// allocations for later events, each where nothing else would keep it. Pool 0xA00 has reserved
// bytes at one allocation only, in mid-chunk. Pools 0xC00 and 0xD00 get an implicit release
// read before their newest reading: ignored by the replay (no reserved bytes), whether the
// newest reading came before the release in its chunk (a newer one after it) or in the chunk
// before. Thread 7 fails with 201 at the first chunk's end, on a stream that does nothing
// else, and the runtime retries it in the second chunk, after another thread's allocation on
// the retry's stream: the failure is retracted, and its stream gets no lane.
TEST(NamesPass, TheFilteredNamesPassKeepsWhatLaterEventsNeed) {
    test::ScratchDir dir;
    test::Events ev;
    auto alloc = [&](int64_t ts, uint64_t stream, uint64_t pool, uint64_t ptr, uint32_t tid, uint64_t reserved) -> Event& {
        Event& e = ev.alloc(ts, stream, pool, ptr, MiB);
        e.tid = tid;
        return test::Events::wm(e, reserved, MiB);
    };
    auto release = [&](int64_t ts, uint64_t pool) {
        Event& r = ev.add(EventKind::ImplicitRelease, ts);
        r.pool = pool;
        r.size = 16 * MiB;
        test::Events::wm(r, 16 * MiB, 0);
    };
    alloc(100, 0x10, 0xA00, 0x1000, 1, 0);
    alloc(200, 0x10, 0xA00, 0x2000, 1, 8 * MiB);
    alloc(300, 0x10, 0xA00, 0x3000, 1, 0);
    alloc(150, 0x10, 0xC00, 0x4000, 1, 0);
    alloc(500, 0x10, 0xC00, 0x5000, 1, 0);
    alloc(310, 0x10, 0xC00, 0x6000, 1, 0);
    release(400, 0xC00);
    alloc(900, 0x10, 0xC00, 0x7000, 1, 0);
    alloc(160, 0x10, 0xD00, 0xa000, 1, 0);
    alloc(510, 0x10, 0xD00, 0xb000, 1, 0);
    alloc(320, 0x10, 0xD00, 0xc000, 1, 0);
    Event& failed = ev.alloc(330, 0x18, 0xB00, 0, MiB);
    failed.tid = 7;
    failed.result = 201;
    const size_t firstChunk = ev.all().size();
    release(410, 0xD00);
    alloc(700, 0x20, 0xB00, 0x8000, 8, 0);
    alloc(650, 0x20, 0xB00, 0x9000, 7, 0); // the retry: same size, soon after (not the newest reading)
    const std::string path = test::writeEvents(dir.file("handbuilt_filter_keeps.poolscope"), ev.all(), {}, {}, firstChunk);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    (*reader)->setSkipDamaged(true);
    (*reader)->setReuseHeaderScan(true);
    ASSERT_EQ((*reader)->chunkHeaders()->size(), 2u);
    auto ref = namesPass(**reader, 1, false);
    ASSERT_TRUE(ref);
    EXPECT_EQ(ref->madeFrom, "allocating pools: 0xa00 0xb00 0xc00 0xd00\n"
                             "reserved pools: 0xa00\n"
                             "pairs: 0xa00/0x10 0xb00/0x20 0xc00/0x10 0xd00/0x10\n"
                             "waits:\n"
                             "first failures:\n");
    for (unsigned threads : {1u, 2u}) {
        auto got = namesPass(**reader, threads, true);
        ASSERT_TRUE(got);
        EXPECT_TRUE(got->filtered);
        EXPECT_EQ(got->madeFrom, ref->madeFrom);
        EXPECT_EQ(namesText(**reader, got->names), namesText(**reader, ref->names));
    }
}

} // namespace
} // namespace poolscope
