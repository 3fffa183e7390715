// The zstd codecs' decoder (versions 5 and 6, EventCodec.h) against a straightforward reference
// written from the header's description alone: event by event, each field read with its own
// bounds check, the block tables as plain vectors. The library's decoder works column by column
// with clamped and unchecked loads over padding; these tests hold it to the reference's events
// on every sample and on generated workloads, and to the reference's accept/refuse and reason on
// payloads damaged or cut at every byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../bench/SyntheticTrace.h"
#include "poolscope/EventCodec.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Zstd.h"

namespace poolscope {
namespace {

uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

uint64_t readLe(const std::string& s, size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<unsigned char>(s[at + i])} << (8 * i);
    return v;
}

// The reference decoder. Its checks come in the library's order, so that the first failing one
// gives the same reason: the frame; the payload's size; the stream sizes; each stream's bytes
// against its headers' codes; the references' encoding; then event by event (a reference past
// the stream, a reference past its table); references left over; invalid fields.
bool referenceDecode(std::string_view data, uint64_t count, int version, std::vector<Event>& out,
                     std::string& why) {
    out.clear();
    why.clear();
    const bool v6 = version == kBlocksCodecVersion;
    if (count > (uint64_t{1} << 16)) {
        why = "its event count is out of range";
        return false;
    }
    if (count == 0) {
        why = data.empty() ? "" : "it holds data but no events";
        return data.empty();
    }
    constexpr size_t kFields = 13;
    const size_t nStreams = v6 ? 15 : 14;
    const size_t prefix = 4 * nStreams;
    const size_t maxBytes = prefix + count * (kMaxEncodedEventBytes + (v6 ? 2 : 0));
    std::string plain;
    if (!zstd::decompress(data, maxBytes, plain, why)) return false;
    if (plain.size() < prefix + count * 5) {
        why = "its decompressed data is too short for its events";
        return false;
    }
    std::vector<size_t> begin(nStreams), end(nStreams);
    size_t total = prefix + count * 5;
    for (size_t i = 0; i < nStreams; ++i) {
        const size_t n = readLe(plain, 4 * i, 4);
        begin[i] = total;
        total += n;
        end[i] = total;
    }
    if (total != plain.size()) {
        why = "its decompressed data does not match its stream sizes";
        return false;
    }
    constexpr unsigned kLen[8] = {0, 1, 2, 3, 4, 5, 6, 8};
    std::vector<uint64_t> headers(count);
    std::vector<size_t> need(nStreams, 0);
    for (uint64_t k = 0; k < count; ++k) {
        headers[k] = readLe(plain, prefix + 5 * k, 5);
        for (size_t i = 0; i < kFields; ++i) need[i] += kLen[(headers[k] >> (3 * i)) & 7];
        need[kFields] += (headers[k] >> 39) & 1 ? 4 : 0;
    }
    for (size_t i = 0; i <= kFields; ++i)
        if (need[i] != end[i] - begin[i]) {
            why = "its decompressed data does not match its events' headers";
            return false;
        }
    std::vector<uint64_t> refs;
    if (v6) {
        for (size_t at = begin[14]; at < end[14];) {
            const unsigned b0 = static_cast<unsigned char>(plain[at++]);
            if (!(b0 & 0x80)) {
                refs.push_back(b0);
                continue;
            }
            if (at == end[14] || (static_cast<unsigned char>(plain[at]) & 0x80)) {
                why = "its block references are cut short or too long";
                return false;
            }
            refs.push_back((b0 & 0x7F) | uint64_t{static_cast<unsigned char>(plain[at++])} << 7);
        }
    }
    std::vector<size_t> at(begin);
    uint64_t prev[kFields] = {};
    bool bad = false;
    // Codec 5's predictor.
    std::vector<uint64_t> pools, lastReserved, lastUsed;
    // Codec 6's tables and bases.
    std::vector<std::pair<uint64_t, uint64_t>> live;
    std::vector<uint64_t> freed;
    uint64_t baseA = 0, baseB = 0, baseC = 0;
    size_t nextRef = 0;
    for (uint64_t k = 0; k < count; ++k) {
        uint64_t f[kFields];
        for (size_t i = 0; i < kFields; ++i) {
            const unsigned n = kLen[(headers[k] >> (3 * i)) & 7];
            const uint64_t z = unzigzag(readLe(plain, at[i], n));
            at[i] += n;
            const bool raw = v6 && (i == 4 || i == 5);
            f[i] = raw ? z : prev[i] + z;
            prev[i] = f[i];
        }
        uint32_t site = 0;
        if ((headers[k] >> 39) & 1) {
            site = static_cast<uint32_t>(readLe(plain, at[kFields], 4));
            at[kFields] += 4;
        }
        const uint64_t kind = f[12] & 0xFF;
        if (v6) {
            const bool isA = kind == uint64_t(EventKind::Alloc), isF = kind == uint64_t(EventKind::Free);
            uint64_t r = 0;
            if (isA || isF) {
                if (nextRef == refs.size()) {
                    why = "its block references are cut short or too long";
                    return false;
                }
                r = refs[nextRef++];
            }
            if (r > (isA ? freed.size() : isF ? live.size() : 0)) {
                why = "a block reference names no block of its table";
                return false;
            }
            uint64_t& ptr = f[4];
            uint64_t& size = f[5];
            if (isA) {
                if (r) {
                    const size_t i = freed.size() - r;
                    ptr += freed[i];
                    freed.erase(freed.begin() + static_cast<long>(i));
                } else {
                    ptr += baseA;
                    baseA = ptr;
                }
                if (live.size() == 1024) live.erase(live.begin(), live.begin() + 256);
                live.push_back({ptr, size});
            } else if (isF) {
                if (r) {
                    const size_t i = live.size() - r;
                    ptr += live[i].first;
                    size += live[i].second;
                    live.erase(live.begin() + static_cast<long>(i));
                } else {
                    ptr += baseB;
                    baseB = ptr;
                }
                if (freed.size() == 64) freed.erase(freed.begin(), freed.begin() + 16);
                freed.push_back(ptr);
            } else {
                ptr += baseC;
                baseC = ptr;
            }
        }
        bad |= (f[9] >> 32) || (f[10] >> 32) || (f[12] >> 56) ||
               f[11] != static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(f[11])));
        Event e;
        e.seq = f[0];
        e.tsNs = static_cast<int64_t>(f[1]);
        e.stream = f[2];
        e.pool = f[3];
        e.ptr = f[4];
        e.size = f[5];
        e.aux = f[6];
        e.reserved = f[7];
        e.used = f[8];
        e.tid = static_cast<uint32_t>(f[9]);
        e.correlation = static_cast<uint32_t>(f[10]);
        e.result = static_cast<int32_t>(f[11]);
        e.kind = static_cast<EventKind>(kind);
        e.flags = static_cast<uint8_t>(f[12] >> 8);
        e.variant = static_cast<uint8_t>(f[12] >> 16);
        e.attr = static_cast<uint16_t>(f[12] >> 24);
        e.device = static_cast<int16_t>(static_cast<uint16_t>(f[12] >> 40));
        e.site = site;
        // The watermark predictor: the first 8 distinct pools of the chunk.
        auto slot = std::find(pools.begin(), pools.end(), e.pool);
        long s = slot - pools.begin();
        if (slot == pools.end()) {
            s = pools.size() < 8 ? static_cast<long>(pools.size()) : -1;
            if (s >= 0) {
                pools.push_back(e.pool);
                lastReserved.push_back(0);
                lastUsed.push_back(0);
            }
        }
        if (s >= 0) {
            e.reserved += lastReserved[s];
            e.used += lastUsed[s] + (e.kind == EventKind::Alloc  ? e.size
                                     : e.kind == EventKind::Free ? 0 - e.size
                                                                 : 0);
            lastReserved[s] = e.reserved;
            lastUsed[s] = e.used;
        }
        e.correlation += static_cast<uint32_t>(e.seq);
        out.push_back(e);
    }
    if (nextRef != refs.size()) {
        why = "its block references do not match its events";
        return false;
    }
    if (bad) {
        why = "its data does not decode";
        return false;
    }
    return true;
}

void writeLe32(std::string& s, size_t at, uint32_t v) {
    for (size_t i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}

bool same(const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof(Event)) == 0; }

// The library against the reference on one chunk's data: the same verdict, reason and events.
// The library appends to a vector that already holds events (as a reader's does): those stay.
void expectAsReference(std::string_view data, uint64_t count, int version, const std::string& what) {
    std::vector<Event> want;
    std::string wantWhy;
    const bool wantOk = referenceDecode(data, count, version, want, wantWhy);
    std::vector<Event> got(3);
    got[1].seq = 77;
    std::string gotWhy;
    const bool gotOk = decodeEvents(data, count, got, version, &gotWhy);
    ASSERT_EQ(gotOk, wantOk) << what << ": library says \"" << gotWhy << "\", reference \"" << wantWhy << "\"";
    ASSERT_EQ(gotWhy, wantWhy) << what;
    ASSERT_EQ(got.size(), 3 + (gotOk ? want.size() : 0)) << what;
    ASSERT_EQ(got[1].seq, 77u) << what;
    for (size_t i = 0; gotOk && i < want.size(); ++i)
        ASSERT_TRUE(same(got[3 + i], want[i])) << what << ": event " << i << " differs";
}

void expectChunksAsReference(const std::vector<Event>& all, size_t chunkEvents, const std::string& what) {
    for (int version : {kZstdCodecVersion, kBlocksCodecVersion}) {
        for (size_t i = 0; i < all.size(); i += chunkEvents) {
            const std::span<const Event> chunk(all.data() + i, std::min(chunkEvents, all.size() - i));
            std::string data;
            ASSERT_TRUE(encodeEvents(chunk, data, version));
            const std::string name = what + ", codec " + std::to_string(version) + ", chunk at " + std::to_string(i);
            expectAsReference(data, chunk.size(), version, name);
            if (::testing::Test::HasFatalFailure()) return;
            // The reference itself gives back what was encoded.
            std::vector<Event> ref;
            std::string why;
            ASSERT_TRUE(referenceDecode(data, chunk.size(), version, ref, why)) << name << ": " << why;
            for (size_t k = 0; k < chunk.size(); ++k)
                ASSERT_TRUE(same(ref[k], chunk[k])) << name << ": reference, event " << k;
        }
    }
}

TEST(DecodeReference, EverySampleDecodesAsTheReference) {
    ASSERT_TRUE(zstd::available()) << zstd::unavailableReason();
    size_t files = 0, events = 0;
    for (const auto& entry : std::filesystem::directory_iterator(POOLSCOPE_SAMPLES_DIR)) {
        if (entry.path().extension() != ".poolscope") continue;
        auto r = TraceReader::open(entry.path().string());
        ASSERT_TRUE(r) << entry.path() << ": " << r.error().message;
        std::vector<Event> all;
        ASSERT_TRUE((*r)->forEachChunk([&](std::vector<Event>& c) {
            all.insert(all.end(), c.begin(), c.end());
            return true;
        }));
        ++files;
        events += all.size();
        // As the writer cuts them, and in small chunks (the tables' and predictor's starts).
        expectChunksAsReference(all, schema::kChunkEvents, entry.path().filename().string());
        expectChunksAsReference(std::vector<Event>(all.begin(), all.begin() + std::min<size_t>(all.size(), 3000)),
                                37, entry.path().filename().string() + " in 37s");
        if (HasFatalFailure()) return;
    }
    EXPECT_GE(files, 20u);
    EXPECT_GT(events, 100000u);
}

TEST(DecodeReference, GeneratedWorkloadDecodesAsTheReference) {
    bench::SyntheticTrace gen(42);
    std::vector<Event> all;
    while (all.size() < 60000) gen.step(all);
    std::erase_if(all, [](const Event& e) { return e.kind == EventKind::Sample; });
    expectChunksAsReference(all, schema::kChunkEvents, "generator");
}

TEST(DecodeReference, RandomBytesDecodeAsTheReference) {
    std::mt19937_64 rng(1515);
    std::vector<Event> all;
    for (int i = 0; i < 9000; ++i) {
        Event e;
        auto* b = reinterpret_cast<unsigned char*>(&e);
        for (size_t k = 0; k < sizeof(Event); ++k) b[k] = static_cast<unsigned char>(rng());
        e.reserved0 = 0;
        e.kind = static_cast<EventKind>(rng() % 4 ? 1 + rng() % 2 : rng() % 256);
        if (rng() % 2 && !all.empty()) e.ptr = all[rng() % all.size()].ptr;
        if (rng() % 3 == 0) e.site = 0;
        all.push_back(e);
    }
    expectChunksAsReference(all, schema::kChunkEvents, "random");
    expectChunksAsReference(all, 1, "random, one a chunk");
}

// A small chunk's decompressed payload damaged at every byte (several ways) and cut at every
// length, compressed again (a damaged frame would mostly stop at zstd); and the frame itself cut
// at every length. Each must give the reference's verdict and reason, and never crash (run
// under the debug preset's ASan).
TEST(DecodeReference, PayloadsDamagedAtEveryByteFailAsTheReference) {
    ASSERT_TRUE(zstd::available()) << zstd::unavailableReason();
    bench::SyntheticTrace gen(7);
    std::vector<Event> chunk;
    while (chunk.size() < 48) gen.step(chunk);
    std::erase_if(chunk, [](const Event& e) { return e.kind == EventKind::Sample; });
    chunk.resize(40);
    chunk[5].site = 0x80818283; // the sites stream's last bytes, read as references when moved
    chunk[9].result = -3;
    zstd::Compressor compressor(1);
    for (int version : {kZstdCodecVersion, kBlocksCodecVersion}) {
        std::string data, plain, why;
        ASSERT_TRUE(encodeEvents(chunk, data, version));
        ASSERT_TRUE(zstd::decompress(data, size_t{1} << 20, plain, why)) << why;
        size_t refused = 0, tried = 0;
        auto check = [&](const std::string& payload, uint64_t count, const std::string& what) {
            std::string z;
            ASSERT_TRUE(compressor.compress(payload, z));
            std::vector<Event> ignored;
            std::string reason;
            refused += !referenceDecode(z, count, version, ignored, reason);
            ++tried;
            expectAsReference(z, count, version, "codec " + std::to_string(version) + ", " + what);
        };
        for (size_t at = 0; at < plain.size(); ++at) {
            for (unsigned char x : {0x01, 0x02, 0x10, 0x80, 0xFF}) {
                std::string bad = plain;
                bad[at] = static_cast<char>(bad[at] ^ x);
                check(bad, chunk.size(), "byte " + std::to_string(at) + " ^ " + std::to_string(x));
                if (HasFatalFailure()) return;
            }
            check(plain.substr(0, at), chunk.size(), "cut to " + std::to_string(at));
            check(plain.substr(0, at) + plain.substr(at + 1), chunk.size(), "byte " + std::to_string(at) + " left out");
            if (HasFatalFailure()) return;
        }
        // Bytes moved from one stream's size to another's: the sizes still add up, and two
        // streams disagree with what they hold at once (which reason wins is the order above).
        const size_t nStreams = version == kBlocksCodecVersion ? 15 : 14;
        for (size_t from = 0; from < nStreams; ++from)
            for (size_t to = 0; to < nStreams; ++to)
                for (uint32_t d : {1u, 2u, 5u}) {
                    const uint64_t sizeFrom = readLe(plain, 4 * from, 4);
                    if (from == to || sizeFrom < d) continue;
                    std::string bad = plain;
                    writeLe32(bad, 4 * from, static_cast<uint32_t>(sizeFrom - d));
                    writeLe32(bad, 4 * to, static_cast<uint32_t>(readLe(plain, 4 * to, 4) + d));
                    check(bad, chunk.size(), std::to_string(d) + " bytes of stream " + std::to_string(from) +
                                                 "'s size given to " + std::to_string(to));
                    if (HasFatalFailure()) return;
                }
        for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{39}, uint64_t{41}, uint64_t{4096}})
            check(plain, count, "count " + std::to_string(count));
        for (size_t n = 0; n < data.size(); ++n) {
            expectAsReference(std::string_view(data).substr(0, n), chunk.size(), version,
                              "frame cut to " + std::to_string(n));
            if (HasFatalFailure()) return;
        }
        // Most damage is refused (a few bits land in fields that take any value).
        EXPECT_GT(refused * 2, tried) << refused << " of " << tried;
    }
}

} // namespace
} // namespace poolscope
