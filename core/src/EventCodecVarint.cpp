// Event codecs 1 and 2 (LEB128 varints of each field's delta): what traces written before
// codec 3 hold (EventCodec.h). Read whenever such a trace is opened; written only by tests and
// benchmarks, which make such traces.
#include "EventCodecVarint.h"

#include <array>

#include "Varint.h"

namespace poolscope {

namespace {

using detail::getVarint;
using detail::putVarint;
using detail::unzigzag;
using detail::zigzag;

inline uint64_t sx(int64_t v) { return static_cast<uint64_t>(v); }

constexpr int kFields = detail::kVarintFields;
using Fields = std::array<uint64_t, kFields>;

// Version 2 order: the fields that change at almost every event first (see EventCodec.h).
inline Fields toFields(const Event& e) {
    return {e.seq,      sx(e.tsNs), static_cast<uint64_t>(e.kind), e.correlation, e.ptr,
            e.size,     e.used,     e.stream,  e.pool,   e.reserved, e.tid,
            e.aux,      e.variant,  sx(e.device), sx(e.result), e.attr, e.flags};
}

inline Event fromFields(const Fields& f) {
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
    return fromFields(v2);
}

} // namespace

void detail::encodeRunV2(std::span<const Event> events, std::string& out) {
    Fields prev{};
    unsigned char buf[3 + kFields * 10];
    for (const Event& e : events) {
        const Fields f = toFields(e);
        Fields d;
        uint32_t mask = 0;
        for (int i = 0; i < kFields; ++i) {
            d[i] = f[i] - prev[i];
            mask |= static_cast<uint32_t>(d[i] != 0) << i;
            prev[i] = f[i];
        }
        size_t n = putVarint(buf, mask);
        for (uint32_t m = mask; m; m &= m - 1) n += putVarint(buf + n, zigzag(d[__builtin_ctz(m)]));
        out.append(reinterpret_cast<const char*>(buf), n);
    }
}

bool detail::decodeRunVarint(const unsigned char* p, const unsigned char* end, uint64_t count,
                     std::vector<Event>& out, int version) {
    Fields prev{};
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
        out.push_back(version == 2 ? fromFields(f) : fromFieldsV1(f));
        prev = f;
    }
    return p == end;
}

} // namespace poolscope
