// Fuzz targets for the core's reader surfaces (issue #12), in the manner of
// tests/control/test_fuzz.cpp: an in-process mutation fuzzer with a fixed seed, bounded by count
// and by time so that CI runs it on every submission. POOLSCOPE_FUZZ_INPUTS=N runs N inputs with
// no time limit (docs/SANITIZERS.md, "Fuzzing", has the long runs).
//   ChunkCodecFuzz (ChunkCodecFuzzTest.cpp): real encoded chunks, mutated, decoded with every
//     codec version.
//   TraceFileFuzz: images of the bundled samples (and format-3 copies of them), damaged as
//     bytes or as SQL, then opened from memory and read as the window reads them (skipDamaged):
//     errors are values, never a crash. Format3Chunks...: chunks rewritten past their crc and
//     prev_last_seq link; an independent rules oracle says whether damage must be reported.
//     (FuzzReadsTest.cpp: the filtered reads and the reads that trust chunk headers; their
//     damage and oracle are in FuzzTraceFiles.h.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sqlite3.h>
#include <string>
#include <vector>

#include "FuzzTraceFiles.h"

namespace poolscope {
namespace {

using namespace fuzz;

TEST(TraceFileFuzz, ReaderSurvivesDamagedFiles) {
    const FileSeeds& seeds = fileSeeds();
    ASSERT_GE(seeds.all.size(), 10u);
    ASSERT_GE(seeds.v3.size(), 5u);
    size_t bytes = 0;
    for (const auto& s : seeds.all) bytes += s.size();
    std::printf("trace file seeds: %zu images (%zu format 3), %zu KiB in all\n", seeds.all.size(),
                seeds.v3.size(), bytes / 1024);
    const std::vector<std::string> small = {std::string(64, '\0'), std::string(40, '\xFF')};
    std::mt19937_64 rng(runSeed(20261125));
    const Budget budget(1'000'000, 3000, 200);
    const auto t0 = Clock::now();
    uint64_t inputs = 0, opened = 0, built = 0;
    for (; budget.more(inputs, t0); ++inputs) {
        std::string image = seeds.all[rng() % seeds.all.size()];
        const int how = int(rng() % 5);
        if (how == 0) { // raw bytes of the file: flips (pages, headers), truncation, noise
            for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i)
                mutateBytes(image, seeds.all, rng);
        } else {
            MemDb m(image);
            if (how == 1) {
                mutateChunkData(m, rng, small);
            } else if (how == 4) {
                mutateStructure(m, rng); // format 3 only; an older file is left as it is
            } else {
                for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i)
                    m.exec(sqlMutation(rng));
            }
            image = m.image();
        }
        auto r = TraceReader::openImage(image, "fuzz input");
        if (!r) {
            EXPECT_FALSE(r.error().message.empty()) << "input " << inputs;
            continue;
        }
        ++opened;
        TraceReader& reader = **r;
        reader.setSkipDamaged(true);
        (void)reader.verifyChunks();
        (void)reader.summary();
        (void)reader.meta();
        (void)reader.damage();
        // Filtered reads (chunk_index) give what decoding every chunk gives, where both read.
        if (auto all = reader.events(std::numeric_limits<int64_t>::min(),
                                     std::numeric_limits<int64_t>::max());
            all && !all->empty()) {
            for (int k = 0; k < 3; ++k) {
                const view::EventFilter f = filterFrom(*all, rng);
                auto got = reader.events(f);
                if (!got) continue;
                ASSERT_EQ(got->size(), matching(*all, f).size()) << "input " << inputs;
            }
        }
        auto tl = buildTimeline(reader);
        built += tl.ok();
    }
    const int64_t ms = msSince(t0);
    std::printf("trace file fuzz: %llu inputs, %llu opened, %llu timelines, %lld ms, %.0f inputs/s\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(opened),
                static_cast<unsigned long long>(built), static_cast<long long>(ms),
                ms ? 1000.0 * double(inputs) / double(ms) : 0.0);
    EXPECT_GT(built, 0u) << "some damaged files must still build: most damage is partial";
}

// event_counts per kind as a writer keeps it, after chunks were rewritten with other kinds:
// only where every chunk decodes and the table's total already equals the chunks' (a total
// that differs is damage the reader must find, and is left).
void recountKinds(MemDb& m) {
    uint64_t perKind[64] = {}, total = 0;
    for (const ChunkRow& c : chunkRows(m.get())) {
        std::vector<Event> ev;
        if (!decodeEvents(c.data, c.h.count, ev, int(c.h.codec))) return;
        for (const Event& e : ev) ++perKind[unsigned(e.kind) & 63];
        total += ev.size();
    }
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(m.get(), "SELECT coalesce(sum(count),0) FROM event_counts", -1, &st,
                           nullptr) != SQLITE_OK)
        return;
    const bool same = sqlite3_step(st) == SQLITE_ROW && uint64_t(sqlite3_column_int64(st, 0)) == total;
    sqlite3_finalize(st);
    if (!same) return;
    std::string sql = "DELETE FROM event_counts;";
    for (unsigned k = 0; k < 64; ++k)
        if (perKind[k])
            sql += "INSERT INTO event_counts(kind,count) VALUES(" + std::to_string(k) + "," +
                   std::to_string(perKind[k]) + ");";
    m.exec(sql);
}

// Format 3 only, every input rewritten past its checksums. Besides "no crash": a rewrite that
// keeps the format's rules must read with no damage reported and every event counted, and one
// that breaks them must be named in damage() (a lie the format can see is never silent).
TEST(TraceFileFuzz, Format3ChunksRewrittenPastTheirChecksums) {
    const FileSeeds& seeds = fileSeeds();
    ASSERT_GE(seeds.v3.size(), 5u);
    std::mt19937_64 rng(runSeed(20261126));
    const Budget budget(1'000'000, 2500, 200);
    const auto t0 = Clock::now();
    uint64_t inputs = 0, valid = 0, invalid = 0, built = 0, mispredicted = 0;
    std::map<std::string, uint64_t> byHow;
    for (; budget.more(inputs, t0); ++inputs) {
        MemDb m(seeds.v3[rng() % seeds.v3.size()]);
        std::string how;
        bool predicted = mutateStructure(m, rng, &how);
        for (int i = 0, n = int(rng() % 3); i < n; ++i) { // sometimes two or three at once
            std::string h2;
            predicted = mutateStructure(m, rng, &h2); // may mend what the one before broke
            how += "+" + h2;
        }
        recountKinds(m);
        // The rules decide. What mutateStructure meant is only counted against them (a rough
        // check of the mutator: a random seq can land where it is valid).
        const bool ok = followsTheRules(m.get());
        if (how.find('+') == std::string::npos && ok != predicted) ++mispredicted;
        ++byHow[how.substr(0, how.find('+'))];
        const std::string image = m.image();
        auto r = TraceReader::openImage(image, "fuzz input");
        ASSERT_TRUE(r) << "input " << inputs << " (" << how << "): " << r.error().message;
        TraceReader& reader = **r;
        reader.setSkipDamaged(true);
        ASSERT_TRUE(reader.verifyChunks()) << "input " << inputs;
        auto tl = buildTimeline(reader);
        built += tl.ok();
        const auto damage = reader.damage();
        if (ok) {
            ++valid;
            ASSERT_TRUE(tl) << "input " << inputs << " (" << how << "): " << tl.error().message;
            std::string first = damage.empty() ? "" : damage.front().what;
            ASSERT_TRUE(damage.empty())
                << "input " << inputs << " (" << how << ") is valid, yet: " << first;
            // Every event the rows hold was read: nothing silently dropped.
            uint64_t rowsHold = 0;
            for (const ChunkRow& c : chunkRows(m.get())) rowsHold += c.h.count;
            auto sum = reader.summary();
            ASSERT_TRUE(sum);
            ASSERT_EQ(sum->eventCount, rowsHold) << "input " << inputs << " (" << how << ")";
        } else {
            ++invalid;
            ASSERT_FALSE(damage.empty() && tl.ok())
                << "input " << inputs << " (" << how << "): a rule broken, nothing reported";
        }
    }
    const int64_t ms = msSince(t0);
    std::printf("format-3 structural fuzz: %llu inputs (%llu valid, %llu breaking a rule; "
                "%llu not as the mutator meant), %llu timelines, %lld ms, %.0f inputs/s\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(valid),
                static_cast<unsigned long long>(invalid),
                static_cast<unsigned long long>(mispredicted), static_cast<unsigned long long>(built),
                static_cast<long long>(ms), ms ? 1000.0 * double(inputs) / double(ms) : 0.0);
    EXPECT_GT(valid, 0u);
    EXPECT_GT(invalid, 0u);
}

} // namespace
} // namespace poolscope
