// The chunk codec's fuzz target (issue #12; FuzzTest.cpp has the trace files' and the manner of
// both): real encoded chunks (the bundled samples' events, codecs 6 to 2), mutated, decoded with
// every codec version: never a crash, never more events than claimed. With it, openImage read
// as open() reads a file, and the builder's regressions these targets found.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sqlite3.h>
#include <string>
#include <vector>

#include "FuzzCommon.h"
#include "TestTraces.h"
#include "poolscope/EventCodec.h"
#include "poolscope/EventFields.h"
#include "poolscope/PoolSummary.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Zstd.h"
#include "poolscope/view/EventFilter.h"

namespace poolscope {
namespace {

using namespace fuzz;

// ---- chunk codec -------------------------------------------------------------------------------

struct Seed {
    std::string data;
    uint64_t count;
    int version;
};

std::vector<Seed> codecSeeds() {
    std::vector<Seed> seeds;
    std::mt19937_64 rng(7);
    for (const char* name : kSamples) {
        auto r = TraceReader::open(samplePath(name));
        if (!r) {
            ADD_FAILURE() << name << ": " << r.error().message;
            continue;
        }
        std::vector<Event> all;
        (void)(*r)->forEachChunk([&](std::vector<Event>& c) {
            all.insert(all.end(), c.begin(), c.end());
            return all.size() < 20000;
        });
        if (all.empty()) continue;
        // Runs of several lengths from each sample (short ones keep the rate high; a full chunk
        // or two keep the fast path and the tail both in play).
        for (size_t len : {size_t{1}, size_t{2}, size_t{5}, size_t{17}, size_t{64}, size_t{300},
                           all.size()}) {
            len = std::min(len, all.size());
            const size_t at = rng() % (all.size() - len + 1);
            std::span<const Event> run(all.data() + at, len);
            if (len > 1000 && seeds.size() % 3) continue; // a few large seeds only
            for (int v : {6, 5, 4, 3, 2}) {
                Seed s{{}, len, v};
                if (v >= 4) {
                    // Codec 4 with call sites on some events (the samples predate them).
                    std::vector<Event> withSites(run.begin(), run.end());
                    for (size_t i = 0; i < withSites.size(); i += 3) withSites[i].site = uint32_t(i + 1);
                    encodeEvents(withSites, s.data, v);
                } else {
                    encodeEvents(run, s.data, v);
                }
                seeds.push_back(std::move(s));
            }
        }
    }
    return seeds;
}

uint64_t mutateCount(uint64_t count, size_t bytes, std::mt19937_64& rng) {
    switch (rng() % 8) {
    case 0: return count + 1;
    case 1: return count - 1; // 0 - 1 = 2^64 - 1 too
    case 2: return 0;
    case 3: return std::numeric_limits<uint64_t>::max();
    case 4: return bytes / (1 + rng() % 17); // just fits the smallest event of some codec
    case 5: return rng();
    default: return count;
    }
}

TEST(ChunkCodecFuzz, DecoderSurvivesMutatedChunks) {
    const std::vector<Seed> seeds = codecSeeds();
    ASSERT_GE(seeds.size(), 20u);
    std::vector<std::string> datas;
    for (const Seed& s : seeds)
        datas.push_back(s.data);
    std::mt19937_64 rng(runSeed(20261124));
    const Budget budget(1'000'000, 2500, 1000);
    const auto t0 = Clock::now();
    uint64_t inputs = 0, decoded = 0;
    std::vector<Event> out;
    for (; budget.more(inputs, t0); ++inputs) {
        const Seed& s = seeds[rng() % seeds.size()];
        std::string b = s.data;
        uint64_t count = s.count;
        std::string plain, why;
        if (s.version >= 5 && rng() % 2 && zstd::decompress(b, size_t{1} << 24, plain, why)) {
            // Codecs 5 and 6 past zstd: the regrouped payload mutated, then compressed again, so that
            // the decoder's own checks (stream sizes, fields) see the damage, not only zstd's.
            mutateBytes(plain, datas, rng);
            zstd::Compressor c;
            ASSERT_TRUE(c.compress(plain, b));
        } else if (rng() % 8) {
            mutateBytes(b, datas, rng); // an unmutated seed now and then
        }
        if (rng() % 4 == 0) count = mutateCount(count, b.size(), rng);
        // Every version the decoder accepts, and two it must refuse.
        for (int v : {0, 1, 2, 3, 4, 5, 6, kEventCodecVersion + 1}) {
            out.clear();
            out.shrink_to_fit();
            const bool ok = decodeEvents(b, count, out, v);
            // Never allocates for more events than the bytes could hold (1 byte an event at
            // least, in codec 2), whatever count claims; codecs 5 and 6 are compressed: their
            // events must fit the decompressed bytes (5 an event), at most 2^16 * 113 bytes.
            ASSERT_LE(out.capacity(), v >= 5 ? size_t{1} << 16 : b.size() + 1)
                << "input " << inputs << " v" << v << " count " << count;
            if (ok) {
                ASSERT_TRUE(v >= 1 && v <= kEventCodecVersion) << "input " << inputs << " v" << v;
                ASSERT_EQ(out.size(), count) << "input " << inputs << " v" << v;
                ++decoded;
            } else {
                ASSERT_LE(out.size(), count) << "input " << inputs << " v" << v;
            }
        }
    }
    const int64_t ms = msSince(t0);
    std::printf("chunk codec fuzz: %llu inputs (x8 versions), %llu decoded, %lld ms, %.0f inputs/s\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(decoded),
                static_cast<long long>(ms), ms ? 1000.0 * double(inputs) / double(ms) : 0.0);
    EXPECT_GT(decoded, 0u) << "some inputs must still decode: the seeds are valid";
}

// openImage is what the file fuzz target reads through: it must read a file's bytes as open()
// reads the file, errors included.
TEST(TraceReaderImage, ReadsAsOpenReadsTheFile) {
    test::ScratchDir dir;
    const std::string path = dir.file("copy.poolscope");
    std::vector<std::string> images;
    for (const char* name : {"pools", "cupy", "torch_async"}) images.push_back(readFile(samplePath(name)));
    const std::string good = images[0];
    images.push_back(good.substr(0, good.size() / 2));                  // truncated
    images.push_back(std::string(4096, 'x'));                           // not SQLite
    images.push_back(good.substr(0, 100) + std::string(good.size() - 100, '\0')); // header only
    std::string otherApp = good;
    otherApp[68] ^= 1; // application_id
    images.push_back(otherApp);
    images.push_back("");
    for (size_t i = 0; i < images.size(); ++i) {
        SCOPED_TRACE(i);
        std::ofstream(path, std::ios::binary | std::ios::trunc)
            .write(images[i].data(), static_cast<std::streamsize>(images[i].size()));
        auto f = TraceReader::open(path);
        auto m = TraceReader::openImage(images[i], path);
        ASSERT_EQ(f.ok(), m.ok()) << (f ? m.error().message : f.error().message);
        if (!f) {
            EXPECT_EQ(f.error().code, m.error().code);
            EXPECT_EQ(f.error().message, m.error().message);
            continue;
        }
        auto fs = (*f)->summary();
        auto ms = (*m)->summary();
        ASSERT_TRUE(fs && ms);
        EXPECT_EQ(fs->eventCount, ms->eventCount);
        EXPECT_EQ(fs->sampleCount, ms->sampleCount);
        EXPECT_EQ(fs->countsByKind, ms->countsByKind);
        auto ft = buildTimeline(**f);
        auto mt = buildTimeline(**m);
        ASSERT_TRUE(ft && mt);
        EXPECT_EQ((*ft)->eventCount, (*mt)->eventCount);
        EXPECT_EQ((*ft)->allocations.size(), (*mt)->allocations.size());
        EXPECT_EQ((*f)->damage().size(), (*m)->damage().size());
    }
}

// Found by TraceFileFuzz.Format3ChunksRewrittenPastTheirChecksums (a PointerImport whose pointer
// a later alloc returned): the builder ended the imported mapping as if it were an allocation,
// with stream index kNone (a segfault) and allocation 0 (that block shown freed).
TEST(FuzzRegression, AllocOverAnImportedPointerKeepsOtherAllocations) {
    test::Events ev;
    ev.alloc(100, 0x10, 0x20, 0x5000, 64);         // allocation 0: never freed
    Event& imp = ev.add(EventKind::PointerImport, 200);
    imp.pool = 0x30;
    SharedPointerFields{0x9000}.into(imp);
    ev.alloc(300, 0x10, 0x20, 0x9000, 128);        // the same address, its import not ended
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    std::shared_ptr<const Timeline> tl = b.finish();
    ASSERT_TRUE(tl);
    ASSERT_EQ(tl->allocations.size(), 2u);
    EXPECT_EQ(tl->allocations[0].ptr, 0x5000u);
    EXPECT_EQ(tl->allocations[0].freeSeq, 0u) << "allocation 0 is not ended by the import";
    EXPECT_TRUE(tl->allocations[0].live());
    EXPECT_EQ(tl->allocations[1].ptr, 0x9000u);
    EXPECT_EQ(tl->leaks.size(), 2u);
}

// Found by the long runs of both file targets: a stream or pool handle of 2^64-1 as the first
// one the replay saw matched its empty last-lookup cache (which starts at that value) and read
// streams_[0] of an empty vector.
TEST(FuzzRegression, FirstHandleOfAllOnesIsANewEntity) {
    test::Events ev;
    ev.free(100, ~uint64_t{0}, ~uint64_t{0}, 0x5000); // a free of a block never allocated
    ev.alloc(200, ~uint64_t{0}, ~uint64_t{0}, 0x6000, 64);
    ev.alloc(300, 0x10, 0x20, 0x7000, 32);
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    std::shared_ptr<const Timeline> tl = b.finish();
    ASSERT_TRUE(tl);
    ASSERT_EQ(tl->streams.size(), 2u);
    ASSERT_EQ(tl->pools.size(), 2u);
    for (const auto& s : tl->streams) EXPECT_EQ(s.allocCount, 1u) << s.info.handle;
    const bool both = (tl->pools[0].info.handle == ~uint64_t{0}) != (tl->pools[1].info.handle == ~uint64_t{0});
    EXPECT_TRUE(both) << "one pool 2^64-1, one 0x20";
    EXPECT_EQ(tl->unmatchedFrees, 1u);
    EXPECT_EQ(tl->allocations.size(), 2u);
}

// Found by the sharded format-3 fuzz run (seed 6, docs/SANITIZERS.md): a pointer imported with no
// pool, then freed by an event that carries a pool's watermarks, left the free's fact naming no
// pool while saying it had watermarks; the timeline indexed its pools with kNone (segfault).
TEST(FuzzRegression, FreeWithWatermarksOfABlockImportedWithNoPool) {
    test::Events ev;
    Event& imp = ev.add(EventKind::PointerImport, 100);
    imp.ptr = 0x9000;
    imp.size = 4096;
    imp.pool = 0;
    test::Events::wm(ev.free(200, 0x10, 0x20, 0x9000), 64 << 20, 1 << 20);
    TimelineBuilder b;
    for (const Event& e : ev.all()) b.add(e);
    std::shared_ptr<const Timeline> tl = b.finish();
    ASSERT_TRUE(tl);
    ASSERT_EQ(tl->pools.size(), 1u);
    EXPECT_EQ(tl->pools[0].info.handle, 0x20u);
    EXPECT_EQ(tl->pools[0].peakReserved, uint64_t{64} << 20) << "the free's watermarks are kept";
}

} // namespace
} // namespace poolscope
