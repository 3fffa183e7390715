#include "poolscope/EventCodec.h"

#include <array>

namespace poolscope {

namespace {

constexpr int kFields = 17;
using Fields = std::array<uint64_t, kFields>;

inline uint64_t sx(int64_t v) { return static_cast<uint64_t>(v); }

inline Fields toFields(const Event& e) {
    return {e.seq,      sx(e.tsNs),  static_cast<uint64_t>(e.kind),
            e.variant,  e.tid,       sx(e.device),
            e.correlation, sx(e.result), e.stream,
            e.pool,     e.ptr,       e.size,
            e.aux,      e.attr,      e.flags,
            e.reserved, e.used};
}

inline Event fromFields(const Fields& f) {
    Event e;
    e.seq = f[0];
    e.tsNs = static_cast<int64_t>(f[1]);
    e.kind = static_cast<EventKind>(f[2]);
    e.variant = static_cast<uint8_t>(f[3]);
    e.tid = static_cast<uint32_t>(f[4]);
    e.device = static_cast<int16_t>(static_cast<int64_t>(f[5]));
    e.correlation = static_cast<uint32_t>(f[6]);
    e.result = static_cast<int32_t>(static_cast<int64_t>(f[7]));
    e.stream = f[8];
    e.pool = f[9];
    e.ptr = f[10];
    e.size = f[11];
    e.aux = f[12];
    e.attr = static_cast<uint16_t>(f[13]);
    e.flags = static_cast<uint8_t>(f[14]);
    e.reserved = f[15];
    e.used = f[16];
    return e;
}

inline uint64_t zigzag(uint64_t delta) {
    auto d = static_cast<int64_t>(delta);
    return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}

inline uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (~(z & 1) + 1); }

} // namespace

void encodeEvents(std::span<const Event> events, std::string& out) {
    Fields prev{};
    // Worst case 10 bytes per field; write into a local buffer per event to avoid per-byte
    // growth checks on the string.
    char buf[kFields * 10];
    for (const Event& e : events) {
        Fields f = toFields(e);
        size_t n = 0;
        for (int i = 0; i < kFields; ++i) {
            uint64_t z = zigzag(f[i] - prev[i]);
            while (z >= 0x80) {
                buf[n++] = static_cast<char>(z | 0x80);
                z >>= 7;
            }
            buf[n++] = static_cast<char>(z);
        }
        out.append(buf, n);
        prev = f;
    }
}

bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out) {
    Fields prev{};
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    const auto* end = p + data.size();
    out.reserve(out.size() + count);
    for (uint64_t k = 0; k < count; ++k) {
        Fields f;
        for (int i = 0; i < kFields; ++i) {
            uint64_t z = 0;
            int shift = 0;
            for (;;) {
                if (p == end || shift > 63) return false;
                unsigned char b = *p++;
                z |= static_cast<uint64_t>(b & 0x7F) << shift;
                if (!(b & 0x80)) break;
                shift += 7;
            }
            f[i] = prev[i] + unzigzag(z);
        }
        out.push_back(fromFields(f));
        prev = f;
    }
    return p == end;
}

} // namespace poolscope
