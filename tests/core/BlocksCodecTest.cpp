// Codec 6 (issue #15): codec 5 whose frees name a block allocated earlier in the chunk, and
// whose reusing allocs name a recent free (EventCodec.h). Round trips on random and adversarial
// runs and on the samples, the writer's format, and hostile payloads: references and stream
// sizes that lie must be refused with a reason, before anything is sized by them.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sqlite3.h>
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

bool same(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) == 0; }

void expectRoundTrip(const std::vector<Event>& in, const std::string& what) {
    std::string data;
    ASSERT_TRUE(encodeEvents(in, data, kBlocksCodecVersion)) << what;
    std::vector<Event> out;
    std::string why;
    ASSERT_TRUE(decodeEvents(data, in.size(), out, kBlocksCodecVersion, &why)) << what << ": " << why;
    ASSERT_EQ(out.size(), in.size()) << what;
    for (size_t i = 0; i < in.size(); ++i)
        ASSERT_TRUE(same(in[i], out[i])) << what << ": event " << i << " differs";
}

// Allocs and frees with the edges of the block tables: frees of pointers never allocated (or
// allocated in an earlier chunk), double frees, a pointer allocated twice, failed allocs of
// pointer 0, more live blocks than the table keeps (1024) and more frees than it remembers (64),
// frees whose size differs from the block's, 12 pools (the watermark predictor keeps 8), sites.
std::vector<Event> adversarialRun(uint64_t seed, size_t n) {
    std::mt19937_64 rng(seed);
    std::vector<Event> in;
    std::vector<std::pair<uint64_t, uint64_t>> live;
    std::vector<uint64_t> freed;
    uint64_t seq = 0, next = 0x7f0000000000;
    int64_t ts = 1000;
    while (in.size() < n) {
        Event e;
        e.seq = ++seq;
        e.tsNs = ts += static_cast<int64_t>(rng() % 2000);
        e.tid = 100 + static_cast<uint32_t>(rng() % 3);
        e.correlation = static_cast<uint32_t>(seq + rng() % 2);
        e.device = static_cast<int16_t>(rng() % 3) - 1;
        e.pool = 0x5500 + (rng() % 12) * 0x100;
        e.stream = rng() % 5;
        e.site = rng() % 4 ? 0 : static_cast<uint32_t>(rng());
        e.flags = static_cast<uint8_t>(rng() % 32);
        e.reserved = rng() % 8 ? rng() % (1u << 30) : rng();
        e.used = rng() % 8 ? rng() % (1u << 30) : ~uint64_t{0};
        const uint64_t r = rng() % 100;
        // A long stretch of allocs only, now and then: the live table overflows.
        const bool allocBurst = (in.size() / 1500) % 3 == 1;
        if (allocBurst || r < 45) {
            e.kind = EventKind::Alloc;
            e.size = rng() % 5 ? uint64_t{256} << (rng() % 14) : rng();
            if (rng() % 20 == 0) {
                e.result = 2; // failed: no pointer
                e.ptr = 0;
            } else if (!freed.empty() && rng() % 3) {
                const size_t i = freed.size() - 1 - rng() % std::min<size_t>(freed.size(), 80);
                e.ptr = freed[i];
                freed.erase(freed.begin() + static_cast<long>(i));
            } else if (!live.empty() && rng() % 30 == 0) {
                e.ptr = live[rng() % live.size()].first; // allocated twice (a missed free)
            } else {
                e.ptr = next += uint64_t{1} << (12 + rng() % 10);
            }
            if (e.ptr && e.result == 0) live.push_back({e.ptr, e.size});
        } else if (r < 90) {
            e.kind = EventKind::Free;
            const uint64_t how = rng() % 10;
            if (how < 6 && !live.empty()) {
                const size_t i = rng() % 4 ? live.size() - 1 - rng() % std::min<size_t>(live.size(), 8)
                                           : rng() % live.size();
                e.ptr = live[i].first;
                e.size = rng() % 10 ? live[i].second : rng() % 3 ? 0 : rng();
                live.erase(live.begin() + static_cast<long>(i));
            } else if (how < 8) {
                e.ptr = 0x100000 + rng() % 0x1000; // never allocated here
                e.size = rng() % 4096;
            } else if (how == 8) {
                e.ptr = rng() % 4; // tiny pointers, 0 included: next to the references' values
            } else {
                e.ptr = freed.empty() ? rng() : freed.back(); // a double free
            }
            freed.push_back(e.ptr);
        } else {
            e.kind = static_cast<EventKind>(3 + rng() % 27);
            e.ptr = rng() % 3 ? 0xe000 + rng() % 4 : rng();
            e.size = rng();
            e.aux = rng();
            e.attr = static_cast<uint16_t>(rng());
            e.variant = static_cast<uint8_t>(rng());
        }
        in.push_back(e);
    }
    return in;
}

TEST(BlocksCodec, AdversarialRunsRoundTrip) {
    ASSERT_TRUE(zstd::available()) << zstd::unavailableReason();
    for (uint64_t seed : {1u, 2u, 3u}) {
        const std::vector<Event> all = adversarialRun(seed, 20000);
        // Whole, in writer-sized chunks, and cut at odd places (a free whose block is in the
        // chunk before must still decode, predicted by nothing).
        expectRoundTrip(all, "seed " + std::to_string(seed) + " whole");
        for (size_t chunk : {size_t{1}, size_t{2}, size_t{7}, size_t{4096}, size_t{4097}}) {
            for (size_t i = 0; i < all.size() && i < 3 * 4097; i += chunk)
                expectRoundTrip(std::vector<Event>(all.begin() + static_cast<long>(i),
                                                   all.begin() + static_cast<long>(std::min(all.size(), i + chunk))),
                                "seed " + std::to_string(seed) + " chunks of " + std::to_string(chunk));
            if (HasFatalFailure()) return;
        }
    }
}

TEST(BlocksCodec, RandomEventsRoundTrip) {
    std::mt19937_64 rng(66);
    std::vector<Event> in;
    for (int i = 0; i < 5000; ++i) {
        Event e;
        auto* b = reinterpret_cast<unsigned char*>(&e);
        for (size_t k = 0; k < sizeof(Event); ++k) b[k] = static_cast<unsigned char>(rng());
        e.reserved0 = 0; // not stored
        e.kind = static_cast<EventKind>(rng() % 4 ? 1 + rng() % 2 : rng() % 256);
        if (rng() % 2 && !in.empty()) e.ptr = in[rng() % in.size()].ptr; // frees that hit
        in.push_back(e);
    }
    expectRoundTrip(in, "random bytes");
    expectRoundTrip({}, "no events");
}

TEST(BlocksCodec, SamplesRoundTripSmallerThanCodec5) {
    size_t events = 0, five = 0, six = 0;
    for (const char* name : {"churn", "gpt2", "jax", "threads", "threads_race", "callsites", "torchrun-rank0"}) {
        auto r = TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(r) << r.error().message;
        ASSERT_TRUE((*r)->forEachChunk([&](std::vector<Event>& chunk) {
            expectRoundTrip(chunk, name);
            std::string a, b;
            encodeEvents(chunk, a, kZstdCodecVersion);
            encodeEvents(chunk, b, kBlocksCodecVersion);
            events += chunk.size();
            five += a.size();
            six += b.size();
            return !HasFatalFailure();
        }));
    }
    EXPECT_LT(six, five) << six << " against " << five << " bytes for " << events << " events";
}

TEST(BlocksCodec, WriterWritesCodec6InFormat7) {
    test::ScratchDir dir;
    const std::string path = dir.file("six.poolscope");
    const std::vector<Event> all = adversarialRun(9, 9000);
    std::vector<Event> chunkable;
    for (Event e : all) {
        // What the writer accepts: kinds of the format, no samples, device in range.
        if (static_cast<int>(e.kind) >= kEventKindCount || e.kind == EventKind::Sample) continue;
        chunkable.push_back(e);
    }
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        ASSERT_TRUE((*w)->append(chunkable));
        ASSERT_TRUE((*w)->close());
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT min(codec), max(codec) FROM event_chunks", -1, &st, nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_EQ(sqlite3_column_int(st, 0), kBlocksCodecVersion);
    EXPECT_EQ(sqlite3_column_int(st, 1), kBlocksCodecVersion);
    sqlite3_finalize(st);
    sqlite3_close(db);
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ((*r)->schemaVersion(), schema::kBlocksChunksVersion);
    std::vector<Event> back;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) { back.push_back(e); return true; }));
    ASSERT_EQ(back.size(), chunkable.size());
    for (size_t i = 0; i < back.size(); ++i) ASSERT_TRUE(same(back[i], chunkable[i])) << i;
}

TEST(BlocksCodec, Codec6InFormat6IsDamage) {
    test::ScratchDir dir;
    const std::string path = dir.file("old.poolscope");
    test::Events ev;
    for (uint64_t i = 0; i < 100; ++i) ev.alloc(static_cast<int64_t>(i), 0x10, 0x20, 0x1000 + i, 64);
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w && (*w)->append(ev.all()) && (*w)->close());
    }
    test::execSql(path, "PRAGMA user_version=6");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    (*r)->setSkipDamaged(true);
    ASSERT_TRUE((*r)->verifyChunks());
    const auto d = (*r)->damage();
    ASSERT_FALSE(d.empty());
    EXPECT_NE(d[0].what.find("codec 6 cannot occur in a format 6 trace"), std::string::npos) << d[0].what;
}

// ---- hostile payloads ---------------------------------------------------------------------------

// A valid chunk's payload past zstd, to be edited: 15 stream sizes, the headers, the streams.
struct Payload {
    std::string plain;
    uint64_t count = 0;
    uint32_t size(int i) const {
        uint32_t v;
        std::memcpy(&v, plain.data() + 4 * i, 4);
        return v;
    }
    void setSize(int i, uint32_t v) { std::memcpy(plain.data() + 4 * i, &v, 4); }
    std::string why() const { // decodes it compressed again; "" when it decodes
        zstd::Compressor c;
        std::string z;
        EXPECT_TRUE(c.compress(plain, z));
        std::vector<Event> out;
        std::string reason;
        if (decodeEvents(z, count, out, kBlocksCodecVersion, &reason)) return "";
        EXPECT_TRUE(out.empty()) << "a refused chunk leaves no events behind";
        return reason.empty() ? "(no reason)" : reason;
    }
};

Payload payloadOf(const std::vector<Event>& events) {
    std::string z, why;
    EXPECT_TRUE(encodeEvents(events, z, kBlocksCodecVersion));
    Payload p;
    p.count = events.size();
    EXPECT_TRUE(zstd::decompress(z, size_t{1} << 24, p.plain, why)) << why;
    return p;
}

// Alloc A, alloc B, free A (the second newest: reference 2), free of an unknown pointer
// (reference 0), alloc A again (its pointer freed last but one: reference 2).
std::vector<Event> smallRun() {
    std::vector<Event> v(5);
    const EventKind kinds[5] = {EventKind::Alloc, EventKind::Alloc, EventKind::Free, EventKind::Free,
                                EventKind::Alloc};
    const uint64_t ptrs[5] = {0xA000, 0xB000, 0xA000, 0xC000, 0xA000};
    for (int i = 0; i < 5; ++i) {
        v[i].seq = uint64_t(i) + 1;
        v[i].kind = kinds[i];
        v[i].ptr = ptrs[i];
        v[i].size = 4096;
    }
    return v;
}

TEST(BlocksCodec, ReferencesAreTheDocumentedBytes) {
    const Payload p = payloadOf(smallRun());
    ASSERT_EQ(p.size(14), 5u) << "one reference per alloc and free";
    EXPECT_EQ(p.plain.substr(p.plain.size() - 5), std::string("\x00\x00\x02\x00\x02", 5));
    EXPECT_EQ(p.why(), "");
}

TEST(BlocksCodec, ReferenceBeyondItsTableIsRefused) {
    Payload p = payloadOf(smallRun());
    // The free's reference 2 -> 3: two blocks are live.
    p.plain[p.plain.size() - 3] = 3;
    EXPECT_NE(p.why().find("names no block"), std::string::npos) << p.why();
    // The last alloc's reference 2 -> 3: two pointers were freed.
    p = payloadOf(smallRun());
    p.plain.back() = 3;
    EXPECT_NE(p.why().find("names no block"), std::string::npos) << p.why();
    // A first alloc naming a free: none yet.
    p = payloadOf(smallRun());
    p.plain[p.plain.size() - 5] = 1;
    EXPECT_NE(p.why().find("names no block"), std::string::npos) << p.why();
}

TEST(BlocksCodec, ReferencesThatLieAboutTheirLengthAreRefused) {
    // A reference of three bytes (the most a table's index takes is two).
    Payload p = payloadOf(smallRun());
    p.plain.back() = '\x80';
    p.plain.append("\x80\x01", 2);
    p.setSize(14, p.size(14) + 2);
    EXPECT_NE(p.why().find("cut short or too long"), std::string::npos) << p.why();
    // A stream one reference short, its size agreeing.
    p = payloadOf(smallRun());
    p.plain.pop_back();
    p.setSize(14, p.size(14) - 1);
    EXPECT_NE(p.why().find("cut short or too long"), std::string::npos) << p.why();
    // A byte left after the last reference.
    p = payloadOf(smallRun());
    p.plain.push_back('\0');
    p.setSize(14, p.size(14) + 1);
    EXPECT_NE(p.why().find("do not match its events"), std::string::npos) << p.why();
    // Sizes that do not add up to the data.
    p = payloadOf(smallRun());
    p.setSize(14, p.size(14) + 1);
    EXPECT_NE(p.why().find("does not match its stream sizes"), std::string::npos) << p.why();
}

TEST(BlocksCodec, HeadersClaimingBytesOfAnEmptyStreamAreRefused) {
    // The result and sites streams of the small run are empty (the decoder fills their columns
    // without reading them): a header whose code says otherwise is damage, not a 0.
    Payload p = payloadOf(smallRun());
    ASSERT_EQ(p.size(11), 0u);
    ASSERT_EQ(p.size(13), 0u);
    p.plain[60 + 5 * 3 + 4] |= 0x02; // event 3's result: code 1 (header bits 33..35)
    EXPECT_NE(p.why().find("does not match its events' headers"), std::string::npos) << p.why();
    p = payloadOf(smallRun());
    p.plain[60 + 4] |= '\x80'; // event 0: "a site follows" (bit 39)
    EXPECT_NE(p.why().find("does not match its events' headers"), std::string::npos) << p.why();
}

TEST(BlocksCodec, ContentSizeIsBoundedByTheCount) {
    // A payload of the most bytes 3 events may take (56 + 4 + 3 * (113 + 2)) gets past the
    // frame's size check; one byte more does not.
    const uint64_t count = 3;
    const size_t bound = 60 + count * (kMaxEncodedEventBytes + 2);
    for (size_t n : {bound, bound + 1}) {
        std::string plain(n, '\0'), z, why;
        zstd::Compressor c;
        ASSERT_TRUE(c.compress(plain, z));
        std::vector<Event> out;
        EXPECT_FALSE(decodeEvents(z, count, out, kBlocksCodecVersion, &why));
        EXPECT_EQ(why.find("claims") != std::string::npos, n > bound) << n << ": " << why;
    }
    std::vector<Event> out;
    std::string why;
    EXPECT_FALSE(decodeEvents("x", (uint64_t{1} << 16) + 1, out, kBlocksCodecVersion, &why));
    EXPECT_NE(why.find("out of range"), std::string::npos) << why;
    EXPECT_EQ(out.capacity(), 0u);
}

} // namespace
} // namespace poolscope
