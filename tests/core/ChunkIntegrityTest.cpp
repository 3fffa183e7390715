// Damaged event chunks (issue #12): each kind of damage is found, named with the events it
// affects, and the intact chunks still read. Each test writes a trace of 3 full chunks and a
// short one (3 * 4096 + 100 events, format 3) and damages it with SQL, as an attacker would.
#include <gtest/gtest.h>

#include <filesystem>
#include <sqlite3.h>
#include <sys/wait.h>

#include "TestTraces.h"
#include "poolscope/Crc32c.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

using test::execSql;

constexpr uint64_t kEvents = 3 * schema::kChunkEvents + 100;

// Codec 4 (uncompressed): the tests below edit chunk bytes and codecs at fixed places; the row
// checks they exercise are the same for every codec (codec 5's own: ZstdCodecTest.cpp).
void writeTrace(const std::string& path) {
    WriterOptions options;
    options.compressEvents = false;
    auto w = TraceWriter::create(path, options);
    ASSERT_TRUE(w) << w.error().message;
    test::Events ev;
    for (uint64_t i = 0; i < kEvents; ++i)
        ev.alloc(static_cast<int64_t>(1000 + i * 10), 0x10, 0x20, 0x1000 + 0x100 * i, 256);
    ASSERT_TRUE((*w)->append(ev.all()));
    ASSERT_TRUE((*w)->close());
}

struct Read {
    bool ok = false;
    std::string error;
    std::vector<uint64_t> seqs;
    std::vector<TraceDamage> damage;
    uint64_t damagedEvents() const {
        uint64_t n = 0;
        for (const TraceDamage& d : damage) n += d.events;
        return n;
    }
    std::string damageText() const {
        std::string s;
        for (const TraceDamage& d : damage) s += d.what + "\n";
        return s;
    }
};

// Reads every event, skipping damaged chunks (skip) or not.
Read readAll(const std::string& path, bool skip) {
    Read out;
    auto r = TraceReader::open(path);
    if (!r) {
        out.error = r.error().message;
        return out;
    }
    (*r)->setSkipDamaged(skip);
    Status st = (*r)->forEachEvent([&](const Event& e) {
        out.seqs.push_back(e.seq);
        return true;
    });
    out.ok = static_cast<bool>(st);
    if (!st) out.error = st.error().message;
    out.damage = (*r)->damage();
    return out;
}

TEST(Crc32c, KnownValues) {
    EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
    EXPECT_EQ(crc32c(0, "", 0), 0u);
    // Incremental equals one pass (the SSE4.2 path handles 8 bytes at a time).
    const std::string s = "The quick brown fox jumps over the lazy dog, twice over.";
    EXPECT_EQ(crc32c(crc32c(0, s.data(), 13), s.data() + 13, s.size() - 13),
              crc32c(0, s.data(), s.size()));
}

TEST(ChunkIntegrity, IntactTraceHasNoDamageAndIsFormat3) {
    test::ScratchDir dir;
    const std::string path = dir.file("ok.poolscope");
    writeTrace(path);
    Read r = readAll(path, false);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.seqs.size(), kEvents);
    EXPECT_TRUE(r.damage.empty()) << r.damageText();
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    EXPECT_EQ((*reader)->schemaVersion(), schema::kVersion);
    ASSERT_TRUE((*reader)->verifyChunks());
    EXPECT_TRUE((*reader)->damage().empty());
}

TEST(ChunkIntegrity, FlippedByteInABlobIsFoundAndTheRestReads) {
    test::ScratchDir dir;
    const std::string path = dir.file("flip.poolscope");
    writeTrace(path);
    // One byte of chunk 2's data, changed in place (same length).
    execSql(path, "UPDATE event_chunks SET data = CAST(substr(data,1,99) || CASE WHEN "
                  "substr(data,100,1) = x'5a' THEN x'a5' ELSE x'5a' END || substr(data,101) "
                  "AS BLOB) WHERE id = 2");
    Read strict = readAll(path, false);
    EXPECT_FALSE(strict.ok);
    EXPECT_NE(strict.error.find("damaged"), std::string::npos) << strict.error;
    EXPECT_NE(strict.error.find("checksum"), std::string::npos) << strict.error;
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.seqs.size(), kEvents - schema::kChunkEvents);
    ASSERT_EQ(r.damage.size(), 1u) << r.damageText();
    EXPECT_EQ(r.damage[0].events, schema::kChunkEvents);
    EXPECT_NE(r.damage[0].what.find("event chunk 2"), std::string::npos) << r.damageText();
}

TEST(ChunkIntegrity, RelabelledCodecIsAChecksumMismatch) {
    test::ScratchDir dir;
    const std::string path = dir.file("codec.poolscope");
    writeTrace(path);
    execSql(path, "UPDATE event_chunks SET codec = 2 WHERE id = 1;"
                  "UPDATE event_chunks SET codec = 1 WHERE id = 2");
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.seqs.size(), kEvents - 2 * schema::kChunkEvents);
    ASSERT_EQ(r.damage.size(), 2u) << r.damageText();
    // Codec 1 needs 17 bytes an event: chunk 2's header is refused before its data is read
    // (by the scan, or, where chunk_headers holds the written header, when its row is read).
    const std::string text = r.damageText();
    EXPECT_NE(text.find("event chunk 2 (seq 4097..8192, 4096 events): its data is missing or too "
                        "short"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("event chunk 1 (seq 1..4096, 4096 events): checksum"), std::string::npos)
        << text;
}

TEST(ChunkIntegrity, CodecBeyond32BitsIsNotReadAsItsLowBits) {
    test::ScratchDir dir;
    const std::string path = dir.file("codec64.poolscope");
    writeTrace(path);
    execSql(path, "UPDATE event_chunks SET codec = 4294967299 WHERE id = 3"); // 2^32 + 3
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.seqs.size(), kEvents - schema::kChunkEvents);
    ASSERT_EQ(r.damage.size(), 1u) << r.damageText();
    EXPECT_NE(r.damage[0].what.find("codec value 4294967299"), std::string::npos)
        << r.damageText();
    EXPECT_EQ(r.damage[0].events, schema::kChunkEvents);
}

TEST(ChunkIntegrity, DeletedRowLeavesANamedHole) {
    test::ScratchDir dir;
    const std::string path = dir.file("deleted.poolscope");
    writeTrace(path);
    execSql(path, "DELETE FROM event_chunks WHERE id = 2");
    Read strict = readAll(path, false);
    EXPECT_FALSE(strict.ok);
    EXPECT_NE(strict.error.find("missing"), std::string::npos) << strict.error;
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.seqs.size(), kEvents - schema::kChunkEvents);
    const std::string text = r.damageText();
    EXPECT_NE(text.find("seq 4097..8192 are missing"), std::string::npos) << text;
    EXPECT_NE(text.find("event_counts says 12388 events"), std::string::npos) << text;
}

TEST(ChunkIntegrity, DeletedLastRowIsFoundThroughEventCounts) {
    test::ScratchDir dir;
    const std::string path = dir.file("last.poolscope");
    writeTrace(path);
    execSql(path, "DELETE FROM event_chunks WHERE id = 4");
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.seqs.size(), 3 * schema::kChunkEvents);
    ASSERT_EQ(r.damage.size(), 1u) << r.damageText();
    EXPECT_EQ(r.damage[0].events, 100u) << r.damageText();
}

TEST(ChunkIntegrity, DuplicatedRowIsSkipped) {
    test::ScratchDir dir;
    const std::string path = dir.file("dup.poolscope");
    writeTrace(path);
    execSql(path, "INSERT INTO event_chunks(first_seq,last_seq,t_min,t_max,count,kinds,codec,data,"
                  "prev_last_seq,crc) SELECT first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                  "data,prev_last_seq,crc FROM event_chunks WHERE id = 2");
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    ASSERT_EQ(r.seqs.size(), kEvents) << "each event once";
    for (size_t i = 0; i < r.seqs.size(); ++i) ASSERT_EQ(r.seqs[i], i + 1);
    EXPECT_NE(r.damageText().find("overlaps"), std::string::npos) << r.damageText();
}

TEST(ChunkIntegrity, ReorderedRowsReadInOrderWithAWarning) {
    test::ScratchDir dir;
    const std::string path = dir.file("reorder.poolscope");
    writeTrace(path);
    execSql(path, "UPDATE event_chunks SET id = 100 WHERE id = 1;"
                  "UPDATE event_chunks SET id = 1 WHERE id = 3;"
                  "UPDATE event_chunks SET id = 3 WHERE id = 100;");
    Read r = readAll(path, false);
    ASSERT_TRUE(r.ok) << r.error << " (nothing is lost: strict reading still works)";
    ASSERT_EQ(r.seqs.size(), kEvents);
    for (size_t i = 0; i < r.seqs.size(); ++i) ASSERT_EQ(r.seqs[i], i + 1);
    // The per-chunk pool summaries and header copies name their chunk by id (and its crc): the
    // moved rows' no longer match them, which is said too (nothing is lost either).
    ASSERT_EQ(r.damage.size(), 3u) << r.damageText();
    EXPECT_NE(r.damage[0].what.find("out of seq order"), std::string::npos) << r.damageText();
    EXPECT_NE(r.damage[1].what.find("pool_chunk_summary rows of 2 event chunk(s) do not hold up"),
              std::string::npos) << r.damageText();
    EXPECT_EQ(r.damage[1].events, 0u);
    EXPECT_NE(r.damage[2].what.find("chunk_headers: 2 row(s) do not match their event chunk"),
              std::string::npos) << r.damageText();
    EXPECT_EQ(r.damage[2].events, 0u);
}

TEST(ChunkIntegrity, EmptiedChunkTableIsNotAnEmptyTrace) {
    test::ScratchDir dir;
    const std::string path = dir.file("emptied.poolscope");
    writeTrace(path);
    execSql(path, "DELETE FROM event_chunks");
    Read strict = readAll(path, false);
    EXPECT_FALSE(strict.ok);
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_TRUE(r.seqs.empty());
    ASSERT_EQ(r.damage.size(), 1u) << r.damageText();
    EXPECT_EQ(r.damage[0].events, kEvents);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    auto s = (*reader)->summary();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->eventCount, 0u);
    EXPECT_TRUE(s->countsByKind.empty()) << "no count the chunks cannot back";
}

TEST(ChunkIntegrity, BadTimeInAHeaderIsFoundByVerify) {
    test::ScratchDir dir;
    const std::string path = dir.file("tmax.poolscope");
    writeTrace(path);
    execSql(path, "UPDATE event_chunks SET t_max = 4611686018427387904 WHERE id = 2");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    ASSERT_TRUE((*r)->verifyChunks());
    auto damage = (*r)->damage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_EQ(damage[0].events, schema::kChunkEvents);
    auto s = (*r)->summary();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->lastTsNs, static_cast<int64_t>(1000 + (kEvents - 1) * 10)) << "not the bad t_max";
    EXPECT_EQ(s->eventCount, kEvents - schema::kChunkEvents);
}

TEST(ChunkIntegrity, HugeEventCountsAreClampedAndReported) {
    test::ScratchDir dir;
    const std::string path = dir.file("counts.poolscope");
    writeTrace(path);
    execSql(path, "UPDATE event_counts SET count = 9223372036854775807 WHERE kind = 1;"
                  "INSERT OR REPLACE INTO event_counts VALUES(2, 500000000)");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    auto s = (*r)->summary();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->eventCount, kEvents);
    for (const auto& [kind, n] : s->countsByKind) EXPECT_LE(n, kEvents);
    auto damage = (*r)->damage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_NE(damage[0].what.find("event_counts is damaged"), std::string::npos) << damage[0].what;
    // Building the timeline must not size anything from the claimed counts (it aborted before).
    (*r)->setSkipDamaged(true);
    auto tl = buildTimeline(**r);
    ASSERT_TRUE(tl) << tl.error().message;
    EXPECT_EQ((*tl)->allocations.size(), kEvents);
}

TEST(ChunkIntegrity, NonIntegerAndOutOfRangeHeadersAreDamage) {
    test::ScratchDir dir;
    const std::string path = dir.file("types.poolscope");
    writeTrace(path);
    execSql(path, "UPDATE event_chunks SET count = 'many' WHERE id = 1;"
                  "UPDATE event_chunks SET count = 100000 WHERE id = 2;"
                  "UPDATE event_chunks SET t_min = t_max + 1 WHERE id = 3;"
                  "UPDATE event_chunks SET crc = -1 WHERE id = 4;");
    Read r = readAll(path, true);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_TRUE(r.seqs.empty());
    EXPECT_GE(r.damage.size(), 4u) << r.damageText();
}

TEST(ChunkIntegrity, DroppedColumnIsDamageNotAnIoError) {
    test::ScratchDir dir;
    const std::string path = dir.file("dropcol.poolscope");
    writeTrace(path);
    execSql(path, "ALTER TABLE event_chunks DROP COLUMN kinds");
    Read r = readAll(path, true);
    EXPECT_FALSE(r.ok);
    EXPECT_NE(r.error.find("is damaged (no such column: kinds)"), std::string::npos) << r.error;
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    Status st = (*reader)->forEachEvent([](const Event&) { return true; });
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::Corrupt);
}

TEST(ChunkIntegrity, OldFormatSampleOpensWithoutDamage) {
    // The bundled samples are format 1 (codec 2, no checksum): still read, headers checked.
    const std::string path = std::string(POOLSCOPE_SAMPLES_DIR) + "/churn.poolscope";
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_LT((*r)->schemaVersion(), 3);
    ASSERT_TRUE((*r)->verifyChunks());
    EXPECT_TRUE((*r)->damage().empty());
}

TEST(ChunkIntegrity, OldFormatHeaderThatDisagreesWithItsEventsIsDamage) {
    test::ScratchDir dir;
    const std::string path = dir.file("old.poolscope");
    std::filesystem::copy_file(std::string(POOLSCOPE_SAMPLES_DIR) + "/churn.poolscope", path);
    execSql(path, "UPDATE event_chunks SET t_max = t_max + 4611686018427387 WHERE id = 1");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    ASSERT_TRUE((*r)->verifyChunks());
    auto damage = (*r)->damage();
    ASSERT_EQ(damage.size(), 1u);
    EXPECT_NE(damage[0].what.find("header does not match"), std::string::npos) << damage[0].what;
}

} // namespace
} // namespace poolscope
