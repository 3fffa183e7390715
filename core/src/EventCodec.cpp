#include "poolscope/EventCodec.h"

#include "poolscope/Zstd.h"

#include "BlockTables.h"
#include "EventCodecParts.h"
#include "EventCodecVarint.h"
#include "Varint.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <utility>

#if defined(__SSE2__) && defined(__x86_64__)
#define POOLSCOPE_CODEC_SSE2 1
#include <emmintrin.h>
#endif

namespace poolscope {

namespace {

using codec6::BlockTables;
using namespace codec;

using detail::unzigzag;
using detail::zigzag;

// ---- version 3 -------------------------------------------------------------------------------

// code = min(significant bytes, 7) and the bytes stored for it, from the mask of z's zero
// bytes (bit b set = byte b is zero: what an SSE2 byte compare gives).
struct CodeLen {
    unsigned char code, len;
};
constexpr std::array<CodeLen, 256> kCodeOfZeroBytes = [] {
    std::array<CodeLen, 256> t{};
    for (unsigned m = 0; m < 256; ++m) {
        const unsigned code = std::min(std::bit_width(~m & 0xFFu), 7u);
        t[m] = {static_cast<unsigned char>(code), kLenOfCode[code]};
    }
    return t;
}();

inline uint64_t codeOf(uint64_t z) {
    // Significant bytes = ceil(bit_width / 8); branch-free (countl_zero(0) may branch).
    const unsigned bytes = (71u - static_cast<unsigned>(__builtin_clzll(z | 1))) >> 3;
    return std::min(bytes, 7u) & (0u - static_cast<unsigned>(z != 0));
}

inline uint64_t packedOf(const Event& e) {
    return uint64_t{static_cast<uint8_t>(e.kind)} | uint64_t{e.flags} << 8 |
           uint64_t{e.variant} << 16 | uint64_t{e.attr} << 24 |
           uint64_t{static_cast<uint16_t>(e.device)} << 40;
}

// Portable encoder of one event (the reference; the SSE2 one below must match it byte for byte).
// out needs kMaxEncodedEventBytes writable bytes; returns the event's length.
template <bool kSites = true>
size_t encodeV3Scalar(const Event& e, uint64_t* prev, unsigned char* out) {
    const uint64_t f[kV3Fields] = {e.seq,  sx(e.tsNs), e.stream,      e.pool,
                                   e.ptr,  e.size,     e.aux,         e.reserved,
                                   e.used, e.tid,      e.correlation, sx(e.result),
                                   packedOf(e)};
    uint64_t z[kV3Fields];
    uint64_t header = 0;
#pragma GCC unroll 13
    for (int i = 0; i < kV3Fields; ++i) {
        z[i] = zigzag(f[i] - prev[i]);
        prev[i] = f[i];
        header |= codeOf(z[i]) << (3 * i);
    }
    if (kSites && e.site) header |= kSiteBit;
    store64(out, header); // 5 bytes; the other 3 are overwritten by the data
    unsigned char* p = out + kV3Header;
#pragma GCC unroll 13
    for (int i = 0; i < kV3Fields; ++i) {
        store64(p, z[i]); // 8 bytes; the ones past the field's length are overwritten next
        p += kLenOfCode[(header >> (3 * i)) & 7];
    }
    if (kSites && e.site) {
        store32(p, e.site);
        p += 4;
    }
    return static_cast<size_t>(p - out);
}

#if POOLSCOPE_CODEC_SSE2
// The same with two fields per SSE2 register: seven pairs (the last one padded with 0). The
// fields' byte lengths come from a byte compare with zero instead of a count of leading zeros.
[[gnu::always_inline]] inline size_t encodeV3Sse2(const Event& e, uint64_t* prev, unsigned char* out) {
    const auto* ev = reinterpret_cast<const unsigned char*>(&e);
    __m128i cur[7];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) // seq,tsNs stream,pool ptr,size aux,reserved: Event's layout
        cur[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ev + 16 * k));
    // used, then tid zero-extended (the load brings correlation in the upper half: masked off)
    cur[4] = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ev + 64)),
                           _mm_set_epi32(0, -1, -1, -1));
    cur[5] = _mm_set_epi64x(static_cast<long long>(sx(e.result)),
                            static_cast<long long>(e.correlation));
    cur[6] = _mm_cvtsi64_si128(static_cast<long long>(packedOf(e)));
    const __m128i zero = _mm_setzero_si128();
    __m128i z[7];
    uint64_t header = 0;
    unsigned len[13];
#pragma GCC unroll 7
    for (int k = 0; k < 7; ++k) {
        __m128i* pv = reinterpret_cast<__m128i*>(prev + 2 * k);
        const __m128i d = _mm_sub_epi64(cur[k], _mm_load_si128(pv));
        _mm_store_si128(pv, cur[k]);
        const __m128i sign = _mm_shuffle_epi32(_mm_srai_epi32(d, 31), 0xF5); // d >> 63 per lane
        z[k] = _mm_xor_si128(_mm_slli_epi64(d, 1), sign);
        const auto zeroBytes = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(z[k], zero)));
        const CodeLen c0 = kCodeOfZeroBytes[zeroBytes & 0xFF];
        header |= uint64_t{c0.code} << (6 * k);
        len[2 * k] = c0.len;
        if (k < 6) {
            const CodeLen c1 = kCodeOfZeroBytes[zeroBytes >> 8];
            header |= uint64_t{c1.code} << (6 * k + 3);
            len[2 * k + 1] = c1.len;
        }
    }
    if (e.site) header |= kSiteBit;
    store64(out, header);
    unsigned char* p = out + kV3Header;
#pragma GCC unroll 7
    for (int k = 0; k < 7; ++k) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(p), z[k]);
        p += len[2 * k];
        if (k < 6) {
            // (not _mm_storeh_pd: its double* store is misaligned here, which is UB)
            _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_unpackhi_epi64(z[k], z[k]));
            p += len[2 * k + 1];
        }
    }
    if (e.site) {
        store32(p, e.site);
        p += 4;
    }
    return static_cast<size_t>(p - out);
}
#endif

[[gnu::always_inline]] inline size_t encodeV3(const Event& e, uint64_t* prev, unsigned char* out) {
#if POOLSCOPE_CODEC_SSE2
    return encodeV3Sse2(e, prev, out);
#else
    return encodeV3Scalar(e, prev, out);
#endif
}

// Decodes one event at p into prev (the running values), which must have
// kMaxEncodedEventBytes readable bytes (the fast path checks; the tail is decoded from a
// zero-padded copy). Returns the next event's position; bad collects invalid bits.
// prev[kV3Fields] receives the event's site (version 4; 0 when it has none).
template <bool kV4>
inline const unsigned char* decodeV3(const unsigned char* p, uint64_t* prev, uint64_t& bad) {
    const uint64_t header = load64(p);
    if (!kV4) bad |= header & kSiteBit;
    p += kV3Header;
#pragma GCC unroll 13
    for (int i = 0; i < kV3Fields; ++i) {
        const unsigned code = (header >> (3 * i)) & 7;
        prev[i] += unzigzag(load64(p) & kMaskOfCode[code]);
        p += kLenOfCode[code];
    }
    if (kV4) {
        const bool site = (header & kSiteBit) != 0;
        prev[kV3Fields] = site ? (load64(p) & 0xFFFF'FFFFu) : 0;
        p += site ? 4 : 0;
    }
    return p;
}

inline Event eventOfV3(const uint64_t* f, uint64_t& bad) {
    bad |= (f[9] >> 32) | (f[10] >> 32) | (f[12] >> 56) |
           (f[11] ^ sx(static_cast<int32_t>(f[11])));
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
    const uint64_t packed = f[12];
    e.kind = static_cast<EventKind>(packed & 0xFF);
    e.flags = static_cast<uint8_t>(packed >> 8);
    e.variant = static_cast<uint8_t>(packed >> 16);
    e.attr = static_cast<uint16_t>(packed >> 24);
    e.device = static_cast<int16_t>(static_cast<uint16_t>(packed >> 40));
    e.site = static_cast<uint32_t>(f[kV3Fields]);
    return e;
}

template <bool kV4>
bool decodeRunV3(const unsigned char* p, const unsigned char* end, uint64_t count,
                 std::vector<Event>& out) {
    uint64_t prev[kV3Fields + 1] = {};
    uint64_t bad = 0;
    uint64_t k = 0;
    // Fast path: every byte the event could touch is inside the data.
    for (; k < count && static_cast<size_t>(end - p) >= kMaxEncodedEventBytes; ++k) {
        p = decodeV3<kV4>(p, prev, bad);
        out.push_back(eventOfV3(prev, bad));
    }
    if (k < count) {
        // Tail (fewer than kMaxEncodedEventBytes left): decode from a zero-padded copy, so a
        // short or damaged chunk is never read past its end.
        unsigned char tail[2 * kMaxEncodedEventBytes] = {};
        const size_t left = static_cast<size_t>(end - p);
        std::memcpy(tail, p, left);
        const unsigned char* q = tail;
        const unsigned char* qEnd = tail + left;
        for (; k < count; ++k) {
            if (qEnd - q < static_cast<std::ptrdiff_t>(kV3Header)) return false;
            q = decodeV3<kV4>(q, prev, bad);
            if (q > qEnd) return false;
            out.push_back(eventOfV3(prev, bad));
        }
        p = end - (qEnd - q);
    }
    return p == end && bad == 0;
}

// ---- version 5 (predicted, regrouped by field, zstd) ------------------------------------------

// Regroups version-4 data of n events (bytes at v4, followed by 8 readable bytes) into out:
// the stream sizes, the headers, then stream by stream.
void regroup(const unsigned char* v4, size_t bytes, uint64_t n, std::string& out,
             const std::string* refs = nullptr) {
    const size_t prefix = refs ? kV6Prefix : kV5Prefix;
    const size_t extra = refs ? refs->size() : 0;
    // Pass 1: each stream's size (the headers are read where they lie in v4).
    size_t sizes[kV5Streams] = {};
    {
        const unsigned char* p = v4;
        for (uint64_t k = 0; k < n; ++k) {
            const uint64_t h = headerAt(p);
            p += kV3Header;
            for (int i = 0; i < kV3Fields; ++i) {
                const unsigned len = kLenOfCode[(h >> (3 * i)) & 7];
                sizes[i] += len;
                p += len;
            }
            const unsigned site = (h & kSiteBit) ? 4 : 0;
            sizes[kV3Fields] += site;
            p += site;
        }
    }
    // Each field is stored with one 8-byte write, so each stream is written with 8 bytes of room
    // after it (the next stream's start would be overwritten), then moved into place.
    out.resize(prefix + bytes + extra + 8 * kV5Streams);
    auto* o = reinterpret_cast<unsigned char*>(out.data());
    for (size_t i = 0; i < kV5Streams; ++i) store32(o + 4 * i, static_cast<uint32_t>(sizes[i]));
    if (refs) store32(o + 4 * kV5Streams, static_cast<uint32_t>(extra));
    o += prefix;
    unsigned char* start[kV5Streams];
    unsigned char* at[kV5Streams];
    start[0] = o + n * kV3Header;
    for (size_t i = 1; i < kV5Streams; ++i) start[i] = start[i - 1] + sizes[i - 1] + 8;
    std::copy(start, start + kV5Streams, at);
    unsigned char* hdr = o;
    const unsigned char* p = v4;
    for (uint64_t k = 0; k < n; ++k) {
        const uint64_t h = headerAt(p);
        std::memcpy(hdr, p, kV3Header);
        hdr += kV3Header;
        p += kV3Header;
#pragma GCC unroll 13
        for (int i = 0; i < kV3Fields; ++i) {
            const unsigned len = kLenOfCode[(h >> (3 * i)) & 7];
            store64(at[i], load64(p));
            at[i] += len;
            p += len;
        }
        if (h & kSiteBit) {
            std::memcpy(at[kV3Fields], p, 4);
            at[kV3Fields] += 4;
            p += 4;
        }
    }
    unsigned char* to = o + n * kV3Header;
    for (size_t i = 0; i < kV5Streams; ++i) {
        std::memmove(to, start[i], sizes[i]);
        to += sizes[i];
    }
    if (refs) std::memcpy(to, refs->data(), extra);
    out.resize(prefix + bytes + extra);
}

} // namespace

struct EventEncoder::Packer {
    explicit Packer(int level) : compressor(level) {}
    Predictor pred;
    BlockTables blocks; // version 6
    std::string refs;   // version 6: the references stream
    zstd::Compressor compressor;
    std::string grouped, packed;
};

namespace {
bool compressed(int version) {
    return version == kZstdCodecVersion || version == kBlocksCodecVersion;
}
} // namespace

EventEncoder::EventEncoder(int version) {
    capacity_ = 64 * 1024;
    buf_ = std::make_unique_for_overwrite<char[]>(capacity_);
    version_ = compressed(version) && zstd::available() ? version : kPlainCodecVersion;
    // Zstd level 1: levels 3-6 save another 5-12 % at a third of the speed or less, and the
    // writer must keep up with the collector's rings (docs/PERFORMANCE.md).
    if (compressed(version_)) packer_ = std::make_unique<Packer>(1);
}

EventEncoder::~EventEncoder() = default;
EventEncoder::EventEncoder(EventEncoder&&) noexcept = default;
EventEncoder& EventEncoder::operator=(EventEncoder&&) noexcept = default;

void EventEncoder::reset() {
    std::fill(std::begin(prev_), std::end(prev_), 0);
    size_ = 0;
    count_ = 0;
    if (packer_) {
        packer_->pred = {};
        packer_->blocks.reset();
        packer_->refs.clear();
    }
}

std::string_view EventEncoder::finish() {
    if (!packer_) return data();
    regroup(reinterpret_cast<const unsigned char*>(buf_.get()), size_, count_, packer_->grouped,
            version_ == kBlocksCodecVersion ? &packer_->refs : nullptr);
    if (!packer_->compressor.compress(packer_->grouped, packer_->packed)) return {};
    return packer_->packed;
}

void EventEncoder::grow() {
    const size_t cap = std::max(capacity_ * 2, size_ + kMaxEncodedEventBytes + 8);
    auto bigger = std::make_unique_for_overwrite<char[]>(cap);
    std::memcpy(bigger.get(), buf_.get(), size_);
    buf_ = std::move(bigger);
    capacity_ = cap;
}

void EventEncoder::append(std::span<const Event> events) {
    count_ += events.size();
    if (version_ == kBlocksCodecVersion) {
        Packer& pk = *packer_;
        for (Event e : events) {
            if (capacity_ - size_ < kMaxEncodedEventBytes + 8) [[unlikely]]
                grow();
            pk.pred.forward(e);
            const uint32_t ref = pk.blocks.forward(e);
            if (e.kind == EventKind::Alloc || e.kind == EventKind::Free) {
                if (ref < 0x80) {
                    pk.refs.push_back(static_cast<char>(ref));
                } else {
                    const char two[2] = {static_cast<char>(ref | 0x80), static_cast<char>(ref >> 7)};
                    pk.refs.append(two, 2);
                }
            }
            for (uint32_t m = kV6RawFields; m; m &= m - 1) prev_[__builtin_ctz(m)] = 0;
            size_ += encodeV3(e, prev_, reinterpret_cast<unsigned char*>(buf_.get() + size_));
        }
        return;
    }
    if (packer_) {
        for (Event e : events) {
            // + 8: regroup() reads each field with one 8-byte load
            if (capacity_ - size_ < kMaxEncodedEventBytes + 8) [[unlikely]]
                grow();
            packer_->pred.forward(e);
            size_ += encodeV3(e, prev_, reinterpret_cast<unsigned char*>(buf_.get() + size_));
        }
        return;
    }
    for (const Event& e : events) {
        if (capacity_ - size_ < kMaxEncodedEventBytes) [[unlikely]]
            grow();
        size_ += encodeV3(e, prev_, reinterpret_cast<unsigned char*>(buf_.get() + size_));
    }
}

namespace detail {
void encodeEventsPortable(std::span<const Event> events, std::string& out) {
    alignas(16) uint64_t prev[kV3Fields + 1] = {};
    unsigned char buf[kMaxEncodedEventBytes];
    for (const Event& e : events)
        out.append(reinterpret_cast<const char*>(buf), encodeV3Scalar<true>(e, prev, buf));
}

std::vector<StreamBytes> streamBytes(std::span<const Event> events, int version) {
    std::vector<StreamBytes> r;
    if (!compressed(version) || events.empty()) return r;
    EventEncoder enc(version);
    if (enc.version() != version) return r;
    enc.append(events);
    const std::string_view z = enc.finish();
    std::string plain, why;
    if (z.empty() || !zstd::decompress(z, size_t{1} << 30, plain, why)) return r;
    const size_t streams = version == kBlocksCodecVersion ? kV5Streams + 1 : kV5Streams;
    size_t at = 4 * streams;
    zstd::Compressor c(1);
    std::string out;
    auto add = [&](size_t n) {
        c.compress(std::string_view(plain).substr(at, n), out);
        r.push_back({n, n ? out.size() : 0});
        at += n;
    };
    add(events.size() * kV3Header);
    for (size_t i = 0; i < streams; ++i) {
        uint32_t v;
        std::memcpy(&v, plain.data() + 4 * i, 4);
        add(v);
    }
    return r;
}
} // namespace detail

bool encodeEvents(std::span<const Event> events, std::string& out, int version) {
    if (version == 2) {
        detail::encodeRunV2(events, out);
        return true;
    }
    if (version == 3) {
        alignas(16) uint64_t prev[kV3Fields + 1] = {};
        unsigned char buf[kMaxEncodedEventBytes];
        for (const Event& e : events)
            out.append(reinterpret_cast<const char*>(buf), encodeV3Scalar<false>(e, prev, buf));
        return true;
    }
    if (version != kPlainCodecVersion && !compressed(version)) return false;
    if (events.empty()) return true; // no events, no bytes: in every codec
    EventEncoder enc(version);
    if (enc.version() != version) return false;
    enc.append(events);
    const std::string_view d = enc.finish();
    if (d.empty()) return false;
    out.append(d);
    return true;
}

bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out, int version,
                  std::string* why) {
    if (compressed(version)) {
        std::string reason;
        // A trace's chunk holds at most 4,096 events; this bound keeps a lying count from
        // sizing anything big (decompress() allocates at most count * kMaxEncodedEventBytes).
        constexpr uint64_t kMaxCount = uint64_t{1} << 16;
        if (count > kMaxCount) reason = "its event count is out of range";
        else if (count == 0) reason = data.empty() ? "" : "it holds data but no events";
        else if (codec::decodeRunZ(data, count, out, reason, version == kBlocksCodecVersion))
            return true;
        if (why) *why = reason;
        return reason.empty();
    }
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const auto* end = p + data.size();
    // Smallest event: 5 header bytes (v3), 1 mask byte (v2), 17 varints (v1). A count that
    // cannot fit is damage; checking it first keeps reserve() from a huge bogus allocation.
    const size_t minBytes = version >= 3 ? kV3Header : version == 2 ? 1 : detail::kVarintFields;
    if (version < 1 || version > kPlainCodecVersion || count > data.size() / minBytes) return false;
    // Grow geometrically: a caller appending chunk after chunk to one vector must not pay a
    // reallocation (and copy of everything so far) per chunk.
    if (out.capacity() - out.size() < count) out.reserve(std::max(out.size() + count, 2 * out.capacity()));
    if (version >= 4) return decodeRunV3<true>(p, end, count, out); // 5: the bytes of 4
    if (version == 3) return decodeRunV3<false>(p, end, count, out);
    return detail::decodeRunVarint(p, end, count, out, version);
}

} // namespace poolscope
