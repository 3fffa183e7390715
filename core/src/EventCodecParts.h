#pragma once
// What the event codec's encoder (EventCodec.cpp) and the regrouped formats' decoder
// (EventCodecZ.cpp) share: the version-3 field codes, the watermark predictor, the layout of the
// regrouped payload. Internal to core.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "poolscope/Event.h"
#include "poolscope/EventCodec.h"

namespace poolscope::codec {

inline uint64_t sx(int64_t v) { return static_cast<uint64_t>(v); }

// Unaligned little-endian 8-byte load/store (memcpy compiles to one mov).
inline uint64_t load64(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    return v;
}

inline void store64(unsigned char* p, uint64_t v) {
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
    std::memcpy(p, &v, 8);
}

inline void store32(unsigned char* p, uint32_t v) {
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
    std::memcpy(p, &v, 4);
}

inline constexpr int kV3Fields = kEventCodecFields; // 13
inline constexpr size_t kV3Header = 5;

// Bytes a field takes for a code, and the mask that keeps those bytes of an 8-byte load.
inline constexpr unsigned char kLenOfCode[8] = {0, 1, 2, 3, 4, 5, 6, 8};
inline constexpr uint64_t kMaskOfCode[8] = {0,
                                     0xFF,
                                     0xFFFF,
                                     0xFF'FFFF,
                                     0xFFFF'FFFF,
                                     0xFF'FFFF'FFFF,
                                     0xFFFF'FFFF'FFFF,
                                     ~uint64_t{0}};

inline constexpr uint64_t kSiteBit = uint64_t{1} << 39; // version 4: a 4-byte site follows the fields

// The predictor of the header comment: the last reserved and used of up to 8 pools.
struct Predictor {
    static inline constexpr int kPools = 8;
    uint64_t pool[kPools] = {}, reserved[kPools] = {}, used[kPools] = {};
    int pools = 0;

    int slot(uint64_t p) {
        // No early exit: pools alternate unpredictably from event to event, and a search that
        // branches on each compare mispredicts about once an event.
        // A bit per slot rather than a compare-and-select: GCC turned the select into a chain of
        // branches on `pools`.
        unsigned match = 0;
#pragma GCC unroll 8
        for (int i = 0; i < kPools; ++i) match |= unsigned{pool[i] == p} << i;
        match &= (1u << pools) - 1; // the slots in use (a pool appears in at most one)
        if (match) [[likely]]
            return std::countr_zero(match);
        if (pools == kPools) return -1;
        pool[pools] = p;
        reserved[pools] = used[pools] = 0;
        return pools++;
    }
    // Predicted reserved and used of e (whose pool, kind and size are real).
    void predict(const Event& e, int s, uint64_t& r, uint64_t& u) const {
        if (s < 0) {
            r = u = 0;
            return;
        }
        r = reserved[s];
        u = used[s] + (e.kind == EventKind::Alloc  ? e.size
                       : e.kind == EventKind::Free ? 0 - e.size
                                                   : 0);
    }
    // The real event e -> what is encoded.
    void forward(Event& e) {
        const int s = slot(e.pool);
        uint64_t r, u;
        predict(e, s, r, u);
        if (s >= 0) {
            reserved[s] = e.reserved;
            used[s] = e.used;
        }
        e.reserved -= r;
        e.used -= u;
        e.correlation -= static_cast<uint32_t>(e.seq);
    }
    // What was decoded -> the real event.
    void inverse(Event& e) {
        const int s = slot(e.pool);
        uint64_t r, u;
        predict(e, s, r, u);
        e.reserved += r;
        e.used += u;
        e.correlation += static_cast<uint32_t>(e.seq);
        if (s >= 0) {
            reserved[s] = e.reserved;
            used[s] = e.used;
        }
    }
};

// Fields stored in version 6 as zigzagged residuals, not deltas from the previous event: ptr
// and size (their predictions above are per kind; a delta across kinds is noise).
inline constexpr uint32_t kV6RawFields = (1u << 4) | (1u << 5);

inline constexpr size_t kV5Streams = kV3Fields + 1; // the 13 fields, then the sites

inline uint64_t headerAt(const unsigned char* p) {
    uint64_t h = 0;
    std::memcpy(&h, p, kV3Header);
    if constexpr (std::endian::native == std::endian::big) h = __builtin_bswap64(h) >> 24;
    return h;
}

// The regrouped payload starts with each stream's size, 14 little-endian uint32: the decoder
// finds the streams without a pass over every header.
inline constexpr size_t kV5Prefix = 4 * kV5Streams;
// Version 6 adds a 15th stream, the block references.
inline constexpr size_t kV6Prefix = kV5Prefix + 4;
// A reference is at most BlockTables::kLive: two LEB128 bytes.
inline constexpr size_t kMaxRefBytes = 2;

// Versions 5 and 6: `data` (zstd) of `count` events appended to out, or false with `why`.
bool decodeRunZ(std::string_view data, uint64_t count, std::vector<Event>& out, std::string& why, bool v6);

} // namespace poolscope::codec
