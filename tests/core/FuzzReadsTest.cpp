// Fuzz targets for the reader's filtered and header-trusting reads (issue #12; FuzzTest.cpp says
// how they run): whatever chunk_index or chunk_headers hold, a read gives what decoding every
// chunk gives.
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

// chunk_index damaged as SQL (values, types, rows deleted or doubled, the table emptied, dropped
// or altered), sometimes with chunks rewritten past their checksums and their rows left stale, or
// the chunks' data damaged: a filtered read gives exactly what decoding every chunk and testing
// every event gives. (A checksum finds damage, not a forger: no row here is re-signed.)
TEST(TraceFileFuzz, FilteredReadsMatchDecodingWhateverTheIndexSays) {
    const FileSeeds& seeds = fileSeeds();
    ASSERT_GE(seeds.v3.size(), 5u);
    std::mt19937_64 rng(runSeed(20261127));
    const Budget budget(1'000'000, 2000, 150);
    const auto t0 = Clock::now();
    uint64_t inputs = 0, filters = 0, nonEmpty = 0, flagged = 0;
    static const char* kCols[] = {"streams", "pools", "failed", "size_min", "size_max", "crc", "chunk"};
    static const char* kValues[] = {"0", "-1", "1", "'x'", "NULL", "X'00'", "1e300", "crc + 1",
                                    "9223372036854775807", "-9223372036854775808"};
    for (; budget.more(inputs, t0); ++inputs) {
        MemDb m(seeds.v3[rng() % seeds.v3.size()]);
        ASSERT_TRUE(m.ok());
        for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i) {
            const std::string row = "(SELECT chunk FROM chunk_index ORDER BY chunk LIMIT 1 OFFSET " +
                                    std::to_string(rng() % 3) + ")";
            switch (rng() % 8) {
            case 0: case 1: case 2:
                m.exec(std::string("UPDATE chunk_index SET ") + kCols[rng() % std::size(kCols)] +
                       " = " + kValues[rng() % std::size(kValues)] +
                       (rng() % 2 ? " WHERE chunk = " + row : std::string()));
                break;
            case 3:
                m.exec("DELETE FROM chunk_index" + (rng() % 3 ? " WHERE chunk = " + row : std::string()));
                break;
            case 4: // rebuilt without its key, a row listed twice
                m.exec("CREATE TABLE c2 AS SELECT * FROM chunk_index; DROP TABLE chunk_index; "
                       "CREATE TABLE chunk_index AS SELECT * FROM c2; DROP TABLE c2; "
                       "INSERT INTO chunk_index SELECT * FROM chunk_index WHERE chunk = " + row);
                break;
            case 5:
                m.exec(rng() % 2 ? "DROP TABLE chunk_index"
                                 : "ALTER TABLE chunk_index DROP COLUMN failed");
                break;
            case 6: { // a chunk rewritten past its crc, its row left as it was
                const std::string saved = "CREATE TEMP TABLE keep AS SELECT * FROM chunk_index";
                m.exec(saved);
                (void)mutateStructure(m, rng);
                m.exec("DELETE FROM chunk_index; INSERT INTO chunk_index SELECT * FROM keep; "
                       "DROP TABLE keep");
                break;
            }
            default:
                mutateChunkData(m, rng, seeds.all);
            }
        }
        const std::string image = m.image();
        auto r = TraceReader::openImage(image, "fuzz input");
        if (!r) continue;
        TraceReader& reader = **r;
        reader.setSkipDamaged(true);
        auto all = reader.events(std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max());
        if (!all || all->empty()) continue;
        for (int k = 0; k < 8; ++k, ++filters) {
            const view::EventFilter f = filterFrom(*all, rng);
            auto got = reader.events(f);
            ASSERT_TRUE(got) << "input " << inputs << ": " << got.error().message;
            const std::vector<Event> expected = matching(*all, f);
            ASSERT_EQ(got->size(), expected.size()) << "input " << inputs << " filter " << k;
            for (size_t i = 0; i < expected.size(); ++i)
                ASSERT_EQ(std::memcmp(&(*got)[i], &expected[i], sizeof(Event)), 0)
                    << "input " << inputs << " filter " << k << " event " << i;
            nonEmpty += !expected.empty();
        }
        for (const TraceDamage& d : reader.damage()) flagged += d.what.find("chunk_index") != std::string::npos;
    }
    const int64_t ms = msSince(t0);
    std::printf("chunk_index fuzz: %llu inputs, %llu filters (%llu matching something), %llu "
                "index findings, %lld ms\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(filters),
                static_cast<unsigned long long>(nonEmpty), static_cast<unsigned long long>(flagged),
                static_cast<long long>(ms));
    EXPECT_GT(nonEmpty, filters / 10);
    EXPECT_GT(flagged, inputs / 4);
}

// Re-signs every chunk_headers row over its chunk's columns as they are now (a forger: only a
// comparison with the chunk's own columns or events can tell a changed value).
void resignChunkHeaders(MemDb& m) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(m.get(),
                           "SELECT c.id,c.first_seq,c.last_seq,h.prev_last_seq,c.t_min,c.t_max,"
                           "c.count,c.kinds,c.codec,h.crc,length(data),kind_counts FROM "
                           "event_chunks c JOIN "
                           "chunk_headers h ON h.chunk = c.id",
                           -1, &st, nullptr) != SQLITE_OK)
        return;
    std::vector<std::pair<int64_t, uint32_t>> rows;
    while (sqlite3_step(st) == SQLITE_ROW) {
        auto u = [&](int c) { return uint64_t(sqlite3_column_int64(st, c)); };
        const schema::ChunkHeader h{u(1), u(2), u(3), int64_t(u(4)), int64_t(u(5)), u(6), u(7),
                                    int64_t(u(8))};
        const auto* p = static_cast<const char*>(sqlite3_column_blob(st, 11));
        const std::string counts(p ? p : "", size_t(sqlite3_column_bytes(st, 11)));
        rows.emplace_back(int64_t(u(0)),
                          schema::chunkHeaderRowChecksum(h, uint32_t(u(9)), u(10), counts));
    }
    sqlite3_finalize(st);
    for (const auto& [id, crc] : rows)
        m.exec("UPDATE chunk_headers SET row_crc = " + std::to_string(crc) + " WHERE chunk = " +
               std::to_string(id));
}

// chunk_headers damaged as SQL (values, types, rows deleted or doubled, the table emptied,
// dropped or altered), sometimes re-signed after the change (a lie its row_crc cannot show), or
// with the chunks' own columns or data damaged and the copy left as written: every read gives
// what a reader that ignores the table gives (events, filtered reads, counts, pages; after every
// chunk is read, the same events lost), and a strict read fails exactly when that reader's does.
TEST(TraceFileFuzz, ReadsMatchIgnoringChunkHeadersWhateverTheyHold) {
    const FileSeeds& seeds = fileSeeds();
    ASSERT_GE(seeds.v3.size(), 5u);
    std::mt19937_64 rng(runSeed(20261128));
    const Budget budget(1'000'000, 2000, 150);
    const auto t0 = Clock::now();
    uint64_t inputs = 0, filters = 0, counted = 0, flagged = 0;
    static const char* kCols[] = {"prev_last_seq", "crc", "kind_counts", "row_crc", "chunk"};
    static const char* kValues[] = {"0", "-1", "1", "'x'", "NULL", "X'0100'", "1e300", "crc + 1",
                                    "prev_last_seq - 1", "4294967296", "9223372036854775807"};
    for (; budget.more(inputs, t0); ++inputs) {
        MemDb m(seeds.v3[rng() % seeds.v3.size()]);
        ASSERT_TRUE(m.ok());
        bool resign = false;
        for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i) {
            const std::string row = "(SELECT chunk FROM chunk_headers ORDER BY chunk LIMIT 1 "
                                    "OFFSET " + std::to_string(rng() % 3) + ")";
            switch (rng() % 9) {
            case 0: case 1: case 2:
                m.exec(std::string("UPDATE chunk_headers SET ") + kCols[rng() % std::size(kCols)] +
                       " = " + kValues[rng() % std::size(kValues)] +
                       (rng() % 2 ? " WHERE chunk = " + row : std::string()));
                resign |= rng() % 2 == 0;
                break;
            case 3:
                m.exec("DELETE FROM chunk_headers" + (rng() % 3 ? " WHERE chunk = " + row : std::string()));
                break;
            case 4: // rebuilt without its key, a row listed twice
                m.exec("CREATE TABLE c2 AS SELECT * FROM chunk_headers; DROP TABLE chunk_headers; "
                       "CREATE TABLE chunk_headers AS SELECT * FROM c2; DROP TABLE c2; "
                       "INSERT INTO chunk_headers SELECT * FROM chunk_headers WHERE chunk = " + row);
                break;
            case 5:
                m.exec(rng() % 2 ? "DROP TABLE chunk_headers"
                                 : "ALTER TABLE chunk_headers DROP COLUMN kind_counts");
                break;
            case 6: { // the chunks' own columns changed, the copy left as written
                const char* col = rng() % 2 ? "crc" : "prev_last_seq";
                m.exec(std::string("UPDATE event_chunks SET ") + col + " = " +
                       kValues[rng() % std::size(kValues)] + " WHERE id = (SELECT id FROM "
                       "event_chunks ORDER BY id LIMIT 1 OFFSET " + std::to_string(rng() % 4) + ")");
                break;
            }
            case 7: // a chunk row deleted (its copy stays)
                m.exec("DELETE FROM event_chunks WHERE id = (SELECT id FROM event_chunks ORDER BY "
                       "id LIMIT 1 OFFSET " + std::to_string(rng() % 4) + ")");
                break;
            default:
                mutateChunkData(m, rng, seeds.all);
            }
        }
        if (resign) resignChunkHeaders(m);
        const std::string image = m.image();
        auto withTable = TraceReader::openImage(image, "fuzz input");
        auto without = TraceReader::openImage(image, "fuzz input");
        ASSERT_EQ(bool(withTable), bool(without));
        if (!withTable) continue;
        TraceReader& reader = **withTable;
        TraceReader& ref = **without;
        ref.setUseChunkHeaders(false);
        {
            // Strict: fails (or not) as the reference does.
            auto strict = TraceReader::openImage(image, "fuzz input");
            auto strictRef = TraceReader::openImage(image, "fuzz input");
            ASSERT_TRUE(strict && strictRef);
            (*strictRef)->setUseChunkHeaders(false);
            auto a = (*strict)->events(INT64_MIN, INT64_MAX);
            auto b = (*strictRef)->events(INT64_MIN, INT64_MAX);
            ASSERT_EQ(bool(a), bool(b)) << "input " << inputs << ": "
                                        << (a ? b.error().message : a.error().message);
            if (a) {
                ASSERT_EQ(a->size(), b->size()) << "input " << inputs;
            }
        }
        reader.setSkipDamaged(true);
        ref.setSkipDamaged(true);
        auto all = ref.events(INT64_MIN, INT64_MAX);
        auto got = reader.events(INT64_MIN, INT64_MAX);
        ASSERT_EQ(bool(all), bool(got)) << "input " << inputs;
        if (!all) continue;
        ASSERT_EQ(got->size(), all->size()) << "input " << inputs;
        for (size_t i = 0; i < all->size(); ++i)
            ASSERT_EQ(std::memcmp(&(*got)[i], &(*all)[i], sizeof(Event)), 0)
                << "input " << inputs << " event " << i;
        ASSERT_TRUE(reader.verifyChunks());
        ASSERT_TRUE(ref.verifyChunks());
        auto lost = [](const TraceReader& r) {
            uint64_t n = 0;
            for (const TraceDamage& d : r.damage()) n += d.events;
            return n;
        };
        auto sa = reader.summary(), sb = ref.summary();
        ASSERT_TRUE(sa && sb);
        ASSERT_EQ(sa->eventCount, sb->eventCount) << "input " << inputs;
        ASSERT_EQ(lost(reader), lost(ref)) << "input " << inputs;
        if (all->empty()) continue;
        for (int k = 0; k < 6; ++k, ++filters) {
            view::EventFilter f = filterFrom(*all, rng);
            if (k % 2 == 0) { // kinds and time only: what the counts answer
                f.failedOnly = false;
                f.stream.reset();
                f.pool.reset();
                f.minSize = 0;
                f.maxSize = UINT64_MAX;
            }
            const std::vector<Event> expected = matching(*all, f);
            FilteredReadStats stats;
            auto n = reader.countMatching(f, &stats);
            ASSERT_TRUE(n) << "input " << inputs << ": " << n.error().message;
            ASSERT_EQ(*n, expected.size()) << "input " << inputs << " filter " << k;
            counted += stats.answeredByCounts;
            const uint64_t skip = expected.empty() ? 0 : rng() % (expected.size() + 1);
            bool more = false;
            auto page = reader.events(f, 40, &more, nullptr, skip);
            ASSERT_TRUE(page) << "input " << inputs << ": " << page.error().message;
            const size_t to = std::min(expected.size(), size_t(skip) + 40);
            ASSERT_EQ(page->size(), to - size_t(skip)) << "input " << inputs << " filter " << k;
            for (size_t i = 0; i < page->size(); ++i)
                ASSERT_EQ(std::memcmp(&(*page)[i], &expected[size_t(skip) + i], sizeof(Event)), 0)
                    << "input " << inputs << " filter " << k << " event " << i;
            ASSERT_EQ(more, to < expected.size());
        }
        for (const TraceDamage& d : reader.damage())
            flagged += d.what.find("chunk_headers") != std::string::npos;
    }
    const int64_t ms = msSince(t0);
    std::printf("chunk_headers fuzz: %llu inputs, %llu filters, %llu chunks answered by counts, "
                "%llu findings, %lld ms\n",
                static_cast<unsigned long long>(inputs), static_cast<unsigned long long>(filters),
                static_cast<unsigned long long>(counted), static_cast<unsigned long long>(flagged),
                static_cast<long long>(ms));
    EXPECT_GT(counted, 0u);
    EXPECT_GT(flagged, inputs / 4);
}

} // namespace
} // namespace poolscope
