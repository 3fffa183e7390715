#pragma once
// Event codecs 1 and 2 (EventCodecVarint.cpp), for EventCodec.cpp's dispatch.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope::detail {
// The fields versions 1 and 2 store of an event: its smallest encoding is one varint a field.
inline constexpr int kVarintFields = 17;
// Version 2 (tests and benchmarks make such traces).
void encodeRunV2(std::span<const Event> events, std::string& out);
// `count` events of version 1 or 2 from [p, end), appended to out: false on damage, or where
// bytes are left over.
bool decodeRunVarint(const unsigned char* p, const unsigned char* end, uint64_t count,
                     std::vector<Event>& out, int version);
} // namespace poolscope::detail
