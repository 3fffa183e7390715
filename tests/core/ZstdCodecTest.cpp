// Codec 5 (issue #15): version-4 bytes of predicted events, regrouped by field, compressed with
// zstd (EventCodec.h). Round trips on the recorded samples and on edge-case events, the writer's
// fallback when libzstd is missing, and hostile chunks: lying sizes and decompression bombs must
// be refused with a clear reason and bounded allocation.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sqlite3.h>
#include <random>
#include <string>
#include <vector>

#include "TestTraces.h"
#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Zstd.h"

namespace poolscope {
namespace {

std::string samplePath(const char* name) {
    return std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
}

bool same(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) == 0; }

void expectRoundTrip(const std::vector<Event>& in, const std::string& what) {
    std::string data;
    ASSERT_TRUE(encodeEvents(in, data, kZstdCodecVersion)) << what;
    std::vector<Event> out;
    std::string why;
    ASSERT_TRUE(decodeEvents(data, in.size(), out, kZstdCodecVersion, &why)) << what << ": " << why;
    ASSERT_EQ(out.size(), in.size()) << what;
    for (size_t i = 0; i < in.size(); ++i)
        ASSERT_TRUE(same(in[i], out[i])) << what << ": event " << i << " differs";
}

// Restores the real libzstd lookup whatever a test does.
struct SimulatedMissing {
    SimulatedMissing() { zstd::detail::simulateMissing(true); }
    ~SimulatedMissing() { zstd::detail::simulateMissing(false); }
};

TEST(ZstdCodec, SamplesRoundTripChunkByChunk) {
    ASSERT_TRUE(zstd::available()) << zstd::unavailableReason() << " (the build machine has libzstd1)";
    size_t events = 0, bytes = 0, plain = 0;
    for (const char* name : {"churn", "gpt2", "jax", "threads_race", "callsites", "trims_oom"}) {
        auto r = TraceReader::open(samplePath(name));
        ASSERT_TRUE(r) << r.error().message;
        ASSERT_TRUE((*r)->forEachChunk([&](std::vector<Event>& chunk) {
            expectRoundTrip(chunk, name);
            std::string z, p;
            encodeEvents(chunk, z, kZstdCodecVersion);
            encodeEvents(chunk, p, kPlainCodecVersion);
            events += chunk.size();
            bytes += z.size();
            plain += p.size();
            return !::testing::Test::HasFatalFailure();
        }));
    }
    // The point of the codec: the recorded samples in well under half the bytes of codec 4.
    EXPECT_LT(bytes * 2, plain) << bytes << " against " << plain << " bytes for " << events;
}

TEST(ZstdCodec, PredictorEdgesRoundTrip) {
    std::mt19937_64 rng(15);
    std::vector<Event> in;
    for (uint64_t i = 0; i < 3000; ++i) {
        Event e;
        e.seq = i * 3 + (rng() % 3);
        e.tsNs = static_cast<int64_t>(rng()); // times that jump around, negative ones too
        e.kind = static_cast<EventKind>(1 + rng() % 21);
        e.pool = 0x1000 + rng() % 12;         // more pools than the predictor tracks (8)
        e.size = rng() % 4 ? rng() % 4096 : ~uint64_t{0} - rng() % 5; // sizes that wrap used
        e.reserved = rng() % 2 ? rng() : 0;
        e.used = rng() % 2 ? rng() : ~uint64_t{0};
        e.correlation = static_cast<uint32_t>(rng()); // below seq, above, wrapping
        e.tid = static_cast<uint32_t>(rng());
        e.result = static_cast<int32_t>(rng());
        e.device = static_cast<int16_t>(rng());
        e.flags = static_cast<uint8_t>(rng());
        e.variant = static_cast<uint8_t>(rng());
        e.attr = static_cast<uint16_t>(rng());
        e.ptr = rng();
        e.aux = rng();
        e.stream = rng() % 5;
        e.site = rng() % 3 ? 0 : static_cast<uint32_t>(rng());
        in.push_back(e);
    }
    for (size_t n : {size_t{1}, size_t{2}, size_t{9}, size_t{4096}, in.size()}) {
        n = std::min(n, in.size());
        expectRoundTrip(std::vector<Event>(in.begin(), in.begin() + static_cast<long>(n)),
                        std::to_string(n) + " events");
    }
    expectRoundTrip({}, "no events");
}

TEST(ZstdCodec, WriterAskedForCodec5WritesItAndReadsItBack) {
    test::ScratchDir dir;
    const std::string path = dir.file("z.poolscope");
    test::Events ev;
    for (uint64_t i = 0; i < 10000; ++i)
        test::Events::wm(ev.alloc(static_cast<int64_t>(1000 + i * 7), 0x10, 0x20, 0x1000 + 0x100 * i, 256),
                         4096 * (i + 1), 256 * (i + 1));
    {
        WriterOptions o;
        o.zstdCodec = kZstdCodecVersion; // codec 5, which the writer wrote before codec 6
        auto w = TraceWriter::create(path, o);
        ASSERT_TRUE(w) << w.error().message;
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT min(codec), max(codec), sum(length(data)) FROM event_chunks",
                                 -1, &st, nullptr), SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), kZstdCodecVersion);
    EXPECT_EQ(sqlite3_column_int(st, 1), kZstdCodecVersion);
    EXPECT_LT(sqlite3_column_int64(st, 2), 10000 * 2); // a regular run: under 2 bytes an event
    sqlite3_finalize(st);
    sqlite3_close(db);

    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    // Written in the current format, which may hold zstd chunks (any format since 5 does).
    EXPECT_EQ((*r)->schemaVersion(), schema::kVersion);
    static_assert(schema::kVersion >= schema::kZstdChunksVersion);
    std::vector<Event> back;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) { back.push_back(e); return true; }));
    ASSERT_EQ(back.size(), ev.all().size());
    for (size_t i = 0; i < back.size(); ++i) ASSERT_TRUE(same(back[i], ev.all()[i])) << i;
}

TEST(ZstdCodec, WithoutLibzstdTheWriterFallsBackAndTheReaderSaysWhy) {
    test::ScratchDir dir;
    const std::string plain = dir.file("plain.poolscope");
    const std::string packed = dir.file("packed.poolscope");
    test::Events ev;
    for (uint64_t i = 0; i < 5000; ++i) ev.alloc(static_cast<int64_t>(i), 0x10, 0x20, 0x1000 + i, 64);
    {
        auto w = TraceWriter::create(packed);
        ASSERT_TRUE(w && (*w)->append(ev.all()) && (*w)->close());
    }
    SimulatedMissing missing;
    {
        auto w = TraceWriter::create(plain);
        ASSERT_TRUE(w) << w.error().message;
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    auto r = TraceReader::open(plain);
    ASSERT_TRUE(r) << r.error().message;
    uint64_t n = 0;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event&) { return ++n, true; }));
    EXPECT_EQ(n, ev.all().size()); // codec 4: read without the library

    auto z = TraceReader::open(packed);
    ASSERT_TRUE(z) << z.error().message; // opens; the counts and checksums need no library
    ASSERT_TRUE((*z)->verifyChunks());
    EXPECT_TRUE((*z)->damage().empty());
    const Status st = (*z)->forEachEvent([](const Event&) { return true; });
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::NotReadable);
    EXPECT_NE(st.error().message.find("libzstd"), std::string::npos) << st.error().message;
    EXPECT_TRUE((*z)->damage().empty()) << "a missing library is not damage";
}

// A chunk row given other data with a valid checksum: what a hostile file can do.
void replaceChunk(const std::string& path, int64_t id, const std::string& data) {
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT first_seq,last_seq,prev_last_seq,t_min,t_max,count,kinds,codec "
                                     "FROM event_chunks WHERE id=?", -1, &st, nullptr), SQLITE_OK);
    sqlite3_bind_int64(st, 1, id);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    schema::ChunkHeader h;
    h.firstSeq = uint64_t(sqlite3_column_int64(st, 0));
    h.lastSeq = uint64_t(sqlite3_column_int64(st, 1));
    h.prevLastSeq = uint64_t(sqlite3_column_int64(st, 2));
    h.tMin = sqlite3_column_int64(st, 3);
    h.tMax = sqlite3_column_int64(st, 4);
    h.count = uint64_t(sqlite3_column_int64(st, 5));
    h.kinds = uint64_t(sqlite3_column_int64(st, 6));
    h.codec = sqlite3_column_int64(st, 7);
    sqlite3_finalize(st);
    ASSERT_EQ(sqlite3_prepare_v2(db, "UPDATE event_chunks SET data=?, crc=? WHERE id=?", -1, &st, nullptr),
              SQLITE_OK);
    sqlite3_bind_blob64(st, 1, data.data(), data.size(), SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, schema::chunkChecksum(h, data));
    sqlite3_bind_int64(st, 3, id);
    ASSERT_EQ(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

std::string damageOfChunk1(const std::string& path) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r);
    if (!r) return {};
    (*r)->setSkipDamaged(true);
    uint64_t n = 0;
    EXPECT_TRUE((*r)->forEachEvent([&](const Event&) { return ++n, true; }));
    const auto d = (*r)->damage();
    EXPECT_EQ(d.size(), 1u);
    EXPECT_EQ(n, 10000u - schema::kChunkEvents) << "the other chunks still read";
    return d.empty() ? "" : d[0].what;
}

TEST(ZstdCodec, HostileChunksAreDamageWithAReason) {
    test::ScratchDir dir;
    const std::string base = dir.file("base.poolscope");
    test::Events ev;
    for (uint64_t i = 0; i < 10000; ++i) ev.alloc(static_cast<int64_t>(i * 5), 0x10, 0x20, 0x1000 + i * 64, 64);
    {
        WriterOptions o;
        o.zstdCodec = kZstdCodecVersion;
        auto w = TraceWriter::create(base, o);
        ASSERT_TRUE(w && (*w)->append(ev.all()) && (*w)->close());
    }
    zstd::Compressor c;
    auto variant = [&](const char* name, const std::string& data) {
        const std::string path = dir.file(name);
        std::filesystem::copy_file(base, path);
        replaceChunk(path, 1, data);
        return damageOfChunk1(path);
    };
    // A bomb: 1 GiB of zeros compresses to a few dozen KiB; its frame says so, and is refused
    // before anything is allocated for it.
    {
        std::string bomb;
        ASSERT_TRUE(c.compress(std::string(64u << 20, '\0'), bomb)); // 64 MiB: quick to make
        const std::string what = variant("bomb.poolscope", bomb);
        EXPECT_NE(what.find("claims 67108864 bytes"), std::string::npos) << what;
    }
    // Not zstd at all.
    EXPECT_NE(variant("junk.poolscope", std::string(300, 'x')).find("not a zstd frame"),
              std::string::npos);
    // Valid frames whose payload lies: stream sizes that do not add up to the data, and sizes
    // that add up but that the headers' length codes do not fill.
    {
        std::string lie;
        ASSERT_TRUE(c.compress(std::string(56 + 5 * schema::kChunkEvents + 7, '\x01'), lie));
        const std::string what = variant("sizes.poolscope", lie);
        EXPECT_NE(what.find("does not match its stream sizes"), std::string::npos) << what;
    }
    {
        std::string payload(56 + 5 * schema::kChunkEvents + 10, '\0');
        payload[0] = 10; // stream 0 (seq) says 10 bytes; every header says each field is 0 bytes
        std::string lie;
        ASSERT_TRUE(c.compress(payload, lie));
        const std::string what = variant("headers.poolscope", lie);
        EXPECT_NE(what.find("does not match its events' headers"), std::string::npos) << what;
    }
    // A frame cut short.
    {
        std::string good;
        std::vector<Event> first(ev.all().begin(), ev.all().begin() + schema::kChunkEvents);
        ASSERT_TRUE(encodeEvents(first, good, kZstdCodecVersion));
        const std::string what = variant("cut.poolscope", good.substr(0, good.size() - 3));
        EXPECT_NE(what.find("zstd"), std::string::npos) << what;
    }
}

TEST(ZstdCodec, Codec5InAnOlderFormatIsDamage) {
    // Codec 5 exists only in format 5 files: one relabelled into an older format is damage, not
    // read as if the format allowed it.
    test::ScratchDir dir;
    const std::string path = dir.file("old.poolscope");
    test::Events ev;
    for (uint64_t i = 0; i < 100; ++i) ev.alloc(static_cast<int64_t>(i), 0x10, 0x20, 0x1000 + i, 64);
    {
        WriterOptions o;
        o.zstdCodec = kZstdCodecVersion;
        auto w = TraceWriter::create(path, o);
        ASSERT_TRUE(w && (*w)->append(ev.all()) && (*w)->close());
    }
    test::execSql(path, "PRAGMA user_version=4");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    (*r)->setSkipDamaged(true);
    ASSERT_TRUE((*r)->verifyChunks());
    const auto d = (*r)->damage();
    ASSERT_FALSE(d.empty());
    EXPECT_NE(d[0].what.find("codec 5 cannot occur in a format 4 trace"), std::string::npos) << d[0].what;
}

} // namespace
} // namespace poolscope
