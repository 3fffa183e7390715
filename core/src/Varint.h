#pragma once
// LEB128 varints and zigzag codes, shared by the chunk codec (EventCodec.cpp, versions 1 and 2
// and the per-field residuals) and the report's spill (whatif/TapeSpill.cpp). Internal to core.

#include <cstddef>
#include <cstdint>

namespace poolscope::detail {

// A difference taken in modular arithmetic, as a small unsigned code: exact for any pair of
// 64-bit values, small where the signed difference is.
inline uint64_t zigzag(uint64_t delta) {
    auto d = static_cast<int64_t>(delta);
    return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}

inline uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (~(z & 1) + 1); }

// Writes z at buf (at most 10 bytes) and returns how many bytes it took.
inline size_t putVarint(unsigned char* buf, uint64_t z) {
    size_t n = 0;
    while (z >= 0x80) {
        buf[n++] = static_cast<unsigned char>(z | 0x80);
        z >>= 7;
    }
    buf[n++] = static_cast<unsigned char>(z);
    return n;
}

// Reads one varint at p (at most 10 bytes, none at or past `end`), moving p past it. False on
// running into `end` or on an eleventh byte.
inline bool getVarint(const unsigned char*& p, const unsigned char* end, uint64_t& z) {
    z = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (p == end) return false;
        const unsigned char b = *p++;
        z |= static_cast<uint64_t>(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

} // namespace poolscope::detail
