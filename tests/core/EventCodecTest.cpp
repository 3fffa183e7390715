// Event codec version 3 (written) and 2 (still read): exact bytes of the documented format,
// round trips of extreme values for every kind, the portable encoder against the SSE2 one,
// rejection of short or malformed data, and TraceWriter -> TraceReader across chunks.
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

namespace poolscope {
namespace {

std::string hex(std::string_view s) {
    static const char* d = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        if (!out.empty()) out += ' ';
        out += d[c >> 4];
        out += d[c & 15];
    }
    return out;
}

void expectSame(const std::vector<Event>& a, const std::vector<Event>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(0, std::memcmp(&a[i], &b[i], sizeof(Event))) << "event " << i;
}

std::vector<Event> roundTrip(const std::vector<Event>& in, int version) {
    std::string data;
    encodeEvents(in, data, version);
    std::vector<Event> out;
    EXPECT_TRUE(decodeEvents(data, in.size(), out, version)) << "version " << version;
    return out;
}

// Every kind, each field swinging between 0, its extremes and back, so that every delta is as
// large as it gets (wrapping modulo 2^64) in both directions.
std::vector<Event> extremeEvents() {
    const uint64_t u64s[] = {0, ~uint64_t{0}, 1, 0x8000'0000'0000'0000ull, 0x7FFF'FFFF'FFFF'FFFFull,
                             0xFF, 0x100, 0x00FF'FFFF'FFFF'FFFFull, 0x0100'0000'0000'0000ull};
    const int64_t i64s[] = {0, INT64_MIN, INT64_MAX, -1, 1, INT64_MIN + 1, 1'700'000'000'000'000'000};
    const int32_t i32s[] = {0, INT32_MIN, INT32_MAX, -1, 2};
    const int16_t i16s[] = {-1, 0, INT16_MIN, INT16_MAX};
    std::vector<Event> v;
    int n = 0;
    for (int k = 0; k < kEventKindCount + 2; ++k) { // kinds past the last one too: stored as is
        for (int j = 0; j < 9; ++j, ++n) {
            Event e;
            e.kind = static_cast<EventKind>(k == kEventKindCount + 1 ? 255 : k);
            e.seq = u64s[(n + 1) % 9];
            e.tsNs = i64s[n % 7];
            e.stream = u64s[n % 9];
            e.pool = u64s[(n + 2) % 9];
            e.ptr = u64s[(n + 3) % 9];
            e.size = u64s[(n + 4) % 9];
            e.aux = u64s[(n + 5) % 9];
            e.reserved = u64s[(n + 6) % 9];
            e.used = u64s[(n + 7) % 9];
            e.tid = static_cast<uint32_t>(u64s[(n + 8) % 9]);
            e.correlation = static_cast<uint32_t>(u64s[(n + 1) % 9] >> (n % 5));
            e.result = i32s[n % 5];
            e.device = i16s[n % 4];
            e.variant = static_cast<uint8_t>(n % 3 ? 255 : 0);
            e.attr = static_cast<uint16_t>(n % 2 ? 65535 : 1002);
            e.flags = static_cast<uint8_t>(n % 4 ? 255 : 0);
            v.push_back(e);
        }
    }
    return v;
}

std::vector<Event> randomEvents(uint64_t seed, size_t n) {
    std::mt19937_64 rng(seed);
    // A value of a random byte width (so every length code occurs), sometimes unchanged.
    uint64_t last = 0;
    auto val = [&]() {
        const unsigned r = rng() % 12;
        if (r == 0) return last;
        if (r >= 9) return last + (rng() % 3) - 1;
        const unsigned bits = 1 + rng() % 64;
        last = rng() >> (64 - bits);
        return last;
    };
    std::vector<Event> v(n);
    for (Event& e : v) {
        e.seq = val();
        e.tsNs = static_cast<int64_t>(val());
        e.stream = val();
        e.pool = val();
        e.ptr = val();
        e.size = val();
        e.aux = val();
        e.reserved = val();
        e.used = val();
        e.tid = static_cast<uint32_t>(val());
        e.correlation = static_cast<uint32_t>(val());
        e.result = static_cast<int32_t>(val());
        e.device = static_cast<int16_t>(val());
        e.kind = static_cast<EventKind>(val());
        e.variant = static_cast<uint8_t>(val());
        e.attr = static_cast<uint16_t>(val());
        e.flags = static_cast<uint8_t>(val());
    }
    return v;
}

TEST(EventCodecV3, BytesAreExactlyTheDocumentedFormat) {
    // The header comment's example: seq +1, tsNs +500, nothing else changed.
    Event e;
    e.kind = static_cast<EventKind>(0);
    e.device = 0;
    e.seq = 1;
    e.tsNs = 500;
    std::string data;
    encodeEvents(std::span<const Event>(&e, 1), data);
    EXPECT_EQ(hex(data), "11 00 00 00 00 02 e8 03");

    // Negative deltas, the packed word, a 7-byte value stored in 8 bytes.
    Event f = e;
    f.seq = 0;                   // d = -1: z = 1
    f.kind = EventKind::Free;    // packed: kind 2, flags 1, device -1 (0xffff << 40)
    f.flags = 1;
    f.device = -1;
    f.ptr = uint64_t{1} << 54;   // z = 2^55: 7 bytes -> code 7, 8 bytes
    f.result = -2;               // z = 3
    data.clear();
    std::vector<Event> two = {e, f};
    encodeEvents(two, data);
    // Event 2 header: seq code 1 (bits 0..2), ptr (i=4) code 7 at bit 12, result (i=11) code 1
    // at bit 33, packed (i=12) code 7 at bit 36: 0x72_0000_7001. Data: seq z=1; ptr z=2^55 in
    // 8 bytes; result z=3; packed d = 0x00ff_ff00_0000_0102, z = 0x01ff_fe00_0000_0204.
    EXPECT_EQ(hex(data.substr(8)), "01 70 00 00 72 01 00 00 00 00 00 00 80 00 03 "
                                   "04 02 00 00 00 fe ff 01");
    std::vector<Event> out;
    ASSERT_TRUE(decodeEvents(data, 2, out));
    expectSame(two, out);
}

TEST(EventCodecV3, EveryLengthCodeTakesItsDocumentedBytes) {
    // Fields 0..7 with z of 1..8 significant bytes (top byte 0x80): codes 1..7, where a 7-byte
    // z is stored in 8 bytes. Pins the code -> length table, which a round trip cannot (encoder
    // and decoder share it).
    Event e;
    e.kind = static_cast<EventKind>(0);
    e.device = 0;
    e.seq = uint64_t{1} << 6;      // z = 2^7: 1 byte
    e.tsNs = int64_t{1} << 14;     // 2 bytes
    e.stream = uint64_t{1} << 22;  // 3
    e.pool = uint64_t{1} << 30;    // 4
    e.ptr = uint64_t{1} << 38;     // 5
    e.size = uint64_t{1} << 46;    // 6
    e.aux = uint64_t{1} << 54;     // 7 -> code 7, 8 bytes
    e.reserved = uint64_t{1} << 62; // 8 -> code 7
    const std::string expected = "d1 58 ff 00 00 80 00 80 00 00 80 00 00 00 80 00 00 00 00 80 00 00 00 00 00 80 00 00 00 00 00 00 80 00 00 00 00 00 00 00 00 80";
    std::string data, portable;
    encodeEvents(std::span<const Event>(&e, 1), data);
    detail::encodeEventsPortable(std::span<const Event>(&e, 1), portable);
    EXPECT_EQ(hex(data), expected);
    EXPECT_EQ(hex(portable), expected);
    std::vector<Event> out;
    ASSERT_TRUE(decodeEvents(data, 1, out));
    expectSame({e}, out);
}

TEST(EventCodecV3, ExtremeValuesOfEveryKindRoundTrip) {
    const std::vector<Event> in = extremeEvents();
    expectSame(in, roundTrip(in, 3));
    expectSame(in, roundTrip(in, 2)); // the version-2 writer kept for tests reads back too
    // Each event alone (a run starting from zeros) as well.
    for (const Event& e : in) expectSame({e}, roundTrip({e}, 3));
}

TEST(EventCodecV3, PortableEncoderWritesTheSameBytes) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
        const std::vector<Event> in = randomEvents(seed, 500);
        std::string fast, portable;
        encodeEvents(in, fast);
        detail::encodeEventsPortable(in, portable);
        ASSERT_EQ(fast, portable) << "seed " << seed;
        std::vector<Event> out;
        ASSERT_TRUE(decodeEvents(fast, in.size(), out)) << "seed " << seed;
        expectSame(in, out);
    }
    const std::vector<Event> extremes = extremeEvents();
    std::string fast, portable;
    encodeEvents(extremes, fast);
    detail::encodeEventsPortable(extremes, portable);
    EXPECT_EQ(fast, portable);
}

TEST(EventCodecV3, EncoderRunsAreIndependentAfterReset) {
    const std::vector<Event> a = randomEvents(7, 3000), b = randomEvents(8, 3000);
    EventEncoder enc;
    enc.append(a); // grows its buffer past the initial capacity
    enc.reset();
    enc.append(b);
    std::string direct;
    encodeEvents(b, direct);
    EXPECT_EQ(std::string(enc.data()), direct);
}

TEST(EventCodecV3, ShortOrMalformedDataIsRejected) {
    const std::vector<Event> in = randomEvents(3, 50);
    std::string data;
    encodeEvents(in, data);
    std::vector<Event> out;
    // Every truncation, with the right count: false (the last events are read from a padded
    // copy, so under ASan an over-read would show).
    for (size_t n = 0; n < data.size(); ++n) {
        std::string cut = data.substr(0, n); // own allocation: ASan sees its exact end
        out.clear();
        EXPECT_FALSE(decodeEvents(cut, in.size(), out)) << "length " << n;
    }
    EXPECT_FALSE(decodeEvents(data + '\0', in.size(), out));   // a byte left over
    EXPECT_FALSE(decodeEvents(data, in.size() + 1, out));      // one event too many
    EXPECT_FALSE(decodeEvents(data, in.size() - 1, out));      // trailing bytes
    EXPECT_FALSE(decodeEvents(data, uint64_t{1} << 62, out));  // absurd count: no allocation
    EXPECT_FALSE(decodeEvents(data, in.size(), out, kEventCodecVersion + 1)); // unknown version
    EXPECT_FALSE(decodeEvents(data, in.size(), out, 0));

    // Header bit 39 set: invalid in version 3; in version 4 it announces a site the data
    // does not hold.
    std::string bad = data;
    bad[4] = static_cast<char>(bad[4] | 0x80);
    EXPECT_FALSE(decodeEvents(bad, in.size(), out, 3));
    EXPECT_FALSE(decodeEvents(bad, in.size(), out, 4));

    // Values out of their field's range: tid above 32 bits, result outside int32, the packed
    // word above 56 bits. One event: header with a single 8-byte field (code 7) of all ones.
    auto oneField = [](int field) {
        std::string s(5, '\0');
        const uint64_t header = uint64_t{7} << (3 * field);
        for (int i = 0; i < 5; ++i) s[i] = static_cast<char>(header >> (8 * i));
        s += std::string(8, '\xfe'); // z = 0xfefe...: a large positive value
        return s;
    };
    EXPECT_TRUE(decodeEvents(oneField(0), 1, out)); // seq: any 64-bit value is fine
    EXPECT_FALSE(decodeEvents(oneField(9), 1, out));  // tid
    EXPECT_FALSE(decodeEvents(oneField(10), 1, out)); // correlation
    EXPECT_FALSE(decodeEvents(oneField(11), 1, out)); // result
    EXPECT_FALSE(decodeEvents(oneField(12), 1, out)); // packed

    // Random bytes never crash or read out of bounds, whatever the verdict.
    std::mt19937_64 rng(5);
    for (int t = 0; t < 2000; ++t) {
        std::string junk(rng() % 300, '\0');
        for (char& c : junk) c = static_cast<char>(rng());
        std::vector<Event> o;
        (void)decodeEvents(junk, rng() % 8, o, 1 + static_cast<int>(rng() % 3));
    }
    // An empty run is empty data.
    EXPECT_TRUE(decodeEvents("", 0, out));
    EXPECT_FALSE(decodeEvents("x", 0, out));
}

TEST(EventCodecV2, HandBuiltVersion2BytesStillDecode) {
    // Independent of the encoder kept for tests: two events written out by hand.
    // Event 1: mask 0x27 (seq, tsNs, kind, size) = 27, z: seq 1 -> 02, tsNs 1000 -> d0 0f,
    //          kind 1 -> 02, size 4096 -> 80 40.
    // Event 2: mask 0x01 (seq), seq +1 -> 02.
    const std::string v2("\x27\x02\xd0\x0f\x02\x80\x40\x01\x02", 9);
    std::vector<Event> out;
    ASSERT_TRUE(decodeEvents(v2, 2, out, 2));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].seq, 1u);
    EXPECT_EQ(out[0].tsNs, 1000);
    EXPECT_EQ(out[0].kind, EventKind::Alloc);
    EXPECT_EQ(out[0].size, 4096u);
    EXPECT_EQ(out[0].device, 0); // starts from zero, like every field
    EXPECT_EQ(out[1].seq, 2u);
    EXPECT_EQ(out[1].size, 4096u);
    // Mask bits above the 17 fields are damage; so is a cut varint.
    EXPECT_FALSE(decodeEvents(std::string("\x80\x80\x08\x02", 4), 1, out, 2));
    EXPECT_FALSE(decodeEvents(v2.substr(0, 3), 1, out, 2));
    // The same events through the version-2 encoder give the same bytes.
    std::string again;
    encodeEvents(std::vector<Event>(out.end() - 2, out.end()), again, 2);
    EXPECT_EQ(hex(again), hex(v2));
}

int64_t chunkCodec(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &st, nullptr);
    int64_t v = -1;
    if (st && sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

TEST(EventCodecV3, WriterToReaderAcrossChunksWithSamplesInBetween) {
    test::ScratchDir dir;
    const std::string path = dir.file("v3.poolscope");
    std::vector<Event> events = randomEvents(11, 3 * schema::kChunkEvents + 123);
    for (size_t i = 0; i < events.size(); ++i) {
        events[i].seq = i + 1; // seq order, as the writer expects
        // Kinds a writer produces (the reader names any other kind in a chunk as damage);
        // the codec tests above keep every byte value.
        const int k = static_cast<int>(events[i].kind) % (static_cast<int>(EventKind::Sample) - 1);
        events[i].kind = static_cast<EventKind>(1 + k);
    }
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        // Odd batch sizes with a sample now and then: runs split at samples and chunk ends.
        std::vector<Event> batch;
        size_t i = 0, size = 1;
        while (i < events.size()) {
            batch.clear();
            for (size_t j = 0; j < size && i < events.size(); ++j) batch.push_back(events[i++]);
            Event s;
            s.kind = EventKind::Sample;
            s.tsNs = static_cast<int64_t>(i);
            batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(batch.size() / 2), s);
            ASSERT_TRUE((*w)->append(batch));
            size = size * 3 % 997 + 1;
            if (i % 5 == 0) {
                ASSERT_TRUE((*w)->commit());
            }
        }
        EXPECT_EQ((*w)->eventsWritten(), events.size());
        ASSERT_TRUE((*w)->close());
    }
    EXPECT_EQ(chunkCodec(path, "SELECT min(codec) FROM event_chunks"), kEventCodecVersion);
    EXPECT_EQ(chunkCodec(path, "SELECT max(codec) FROM event_chunks"), kEventCodecVersion);
    EXPECT_EQ(chunkCodec(path, "SELECT max(count) FROM event_chunks"),
              static_cast<int64_t>(schema::kChunkEvents));
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    std::vector<Event> read;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) {
        read.push_back(e);
        return true;
    }));
    expectSame(events, read);
}

TEST(EventCodecV3, ChunkOfANewerCodecIsANewerVersionError) {
    test::ScratchDir dir;
    const std::string path = dir.file("newer.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        Event e;
        e.seq = 1;
        ASSERT_TRUE((*w)->append(e));
        ASSERT_TRUE((*w)->close());
    }
    chunkCodec(path, ("UPDATE event_chunks SET codec = " + std::to_string(kEventCodecVersion + 1)).c_str());
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    auto ev = (*r)->events(INT64_MIN, INT64_MAX);
    ASSERT_FALSE(ev);
    EXPECT_EQ(ev.error().code, ErrorCode::NewerVersion);
    EXPECT_NE(ev.error().message.find("newer PoolScope"), std::string::npos) << ev.error().message;
    Status st = (*r)->forEachEvent([](const Event&) { return true; });
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::NewerVersion);
    // A damaged blob of a known codec stays a Corrupt error.
    chunkCodec(path, "UPDATE event_chunks SET codec = 3, data = x'ff'");
    auto r2 = TraceReader::open(path);
    ASSERT_TRUE(r2);
    auto ev2 = (*r2)->events(INT64_MIN, INT64_MAX);
    ASSERT_FALSE(ev2);
    EXPECT_EQ(ev2.error().code, ErrorCode::Corrupt);
}


// Codec 4 (issue #13): the call site rides on header bit 39 plus 4 bytes; an event without one
// is byte for byte its version-3 encoding, and version 3 (still written for tests) drops sites.
TEST(EventCodec, Version4CarriesSitesAndOtherwiseMatchesVersion3) {
    std::vector<Event> in = extremeEvents();
    for (size_t i = 0; i < in.size(); ++i) in[i].site = (i % 3 == 0) ? 0 : uint32_t(i * 2654435761u) | 1;
    in.back().site = ~uint32_t{0};
    std::string v4, portable;
    encodeEvents(in, v4);
    detail::encodeEventsPortable(in, portable);
    EXPECT_EQ(v4, portable);
    std::vector<Event> out;
    ASSERT_TRUE(decodeEvents(v4, in.size(), out, 4));
    expectSame(in, out);

    std::vector<Event> noSites = in;
    for (Event& e : noSites) e.site = 0;
    std::string a, b;
    encodeEvents(noSites, a, 4);
    encodeEvents(in, b, 3);
    EXPECT_EQ(a, b) << "version 3 must drop the sites, version 4 without sites must equal it";
    std::vector<Event> v3out;
    ASSERT_TRUE(decodeEvents(b, in.size(), v3out, 3));
    expectSame(noSites, v3out);
    // A version-3 reader of a chunk with sites: refused (bit 39), never misread.
    std::vector<Event> refused;
    EXPECT_FALSE(decodeEvents(v4, in.size(), refused, 3));
    // Each site costs its 4 bytes, nothing else.
    size_t withSite = 0;
    for (const Event& e : in) withSite += e.site != 0;
    EXPECT_EQ(v4.size(), a.size() + 4 * withSite);
}

} // namespace
} // namespace poolscope
