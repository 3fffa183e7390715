#include "poolscope/EventCodec.h"

#include <array>

namespace poolscope {

namespace {

constexpr int kFields = 17;
using Fields = std::array<uint64_t, kFields>;

inline uint64_t sx(int64_t v) { return static_cast<uint64_t>(v); }

// Version 2 order: the fields that change at almost every event first (see the header).
inline Fields toFieldsV2(const Event& e) {
    return {e.seq,      sx(e.tsNs), static_cast<uint64_t>(e.kind), e.correlation, e.ptr,
            e.size,     e.used,     e.stream,  e.pool,   e.reserved, e.tid,
            e.aux,      e.variant,  sx(e.device), sx(e.result), e.attr, e.flags};
}

inline Event fromFieldsV2(const Fields& f) {
    Event e;
    e.seq = f[0];
    e.tsNs = static_cast<int64_t>(f[1]);
    e.kind = static_cast<EventKind>(f[2]);
    e.correlation = static_cast<uint32_t>(f[3]);
    e.ptr = f[4];
    e.size = f[5];
    e.used = f[6];
    e.stream = f[7];
    e.pool = f[8];
    e.reserved = f[9];
    e.tid = static_cast<uint32_t>(f[10]);
    e.aux = f[11];
    e.variant = static_cast<uint8_t>(f[12]);
    e.device = static_cast<int16_t>(static_cast<int64_t>(f[13]));
    e.result = static_cast<int32_t>(static_cast<int64_t>(f[14]));
    e.attr = static_cast<uint16_t>(f[15]);
    e.flags = static_cast<uint8_t>(f[16]);
    return e;
}

// Version 1 order (read only).
inline Event fromFieldsV1(const Fields& f) {
    Fields v2 = {f[0], f[1], f[2], f[6], f[10], f[11], f[16], f[8], f[9],
                 f[15], f[4], f[12], f[3], f[5], f[7], f[13], f[14]};
    return fromFieldsV2(v2);
}

inline uint64_t zigzag(uint64_t delta) {
    auto d = static_cast<int64_t>(delta);
    return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}

inline uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (~(z & 1) + 1); }

inline size_t putVarint(char* buf, uint64_t z) {
    size_t n = 0;
    while (z >= 0x80) {
        buf[n++] = static_cast<char>(z | 0x80);
        z >>= 7;
    }
    buf[n++] = static_cast<char>(z);
    return n;
}

inline bool getVarint(const unsigned char*& p, const unsigned char* end, uint64_t& z) {
    z = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
        if (p == end) return false;
        unsigned char b = *p++;
        z |= static_cast<uint64_t>(b & 0x7F) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

} // namespace

void EventEncoder::append(const Event& e, std::string& out) {
    char buf[3 + kFields * 10];
    const Fields f = toFieldsV2(e);
    Fields d;
    uint32_t mask = 0;
    for (int i = 0; i < kFields; ++i) {
        d[i] = f[i] - prev_[i];
        mask |= static_cast<uint32_t>(d[i] != 0) << i;
        prev_[i] = f[i];
    }
    size_t n = putVarint(buf, mask);
    for (uint32_t m = mask; m; m &= m - 1) {
        int i = __builtin_ctz(m);
        n += putVarint(buf + n, zigzag(d[i]));
    }
    out.append(buf, n);
}

void encodeEvents(std::span<const Event> events, std::string& out) {
    EventEncoder enc;
    for (const Event& e : events) enc.append(e, out);
}

bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out, int version) {
    if (version != 1 && version != 2) return false;
    Fields prev{};
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const auto* end = p + data.size();
    out.reserve(out.size() + count);
    for (uint64_t k = 0; k < count; ++k) {
        uint64_t mask = (1u << kFields) - 1;
        if (version == 2 && (!getVarint(p, end, mask) || mask >> kFields)) return false;
        Fields f = prev;
        for (uint64_t m = mask; m; m &= m - 1) {
            int i = __builtin_ctzll(m);
            uint64_t z;
            if (!getVarint(p, end, z)) return false;
            f[i] = prev[i] + unzigzag(z);
        }
        out.push_back(version == 2 ? fromFieldsV2(f) : fromFieldsV1(f));
        prev = f;
    }
    return p == end;
}

} // namespace poolscope
