#pragma once
// Compact encoding of Event runs, used for the trace's event chunks (and usable on the wire).
//
// Format (version 1): events back to back; for each event, its 17 fields in this order
//   seq, tsNs, kind, variant, tid, device, correlation, result, stream, pool, ptr, size, aux,
//   attr, flags, reserved, used
// each as the difference from the same field of the previous event (the first event of a run
// starts from all zeros), taken modulo 2^64, zigzag-mapped and written as an unsigned LEB128
// varint. Signed fields (tsNs, device, result) are sign-extended to 64 bits first. Most deltas
// are 0 or small, so an event takes ~20 bytes instead of 96, and encoding runs at tens of
// millions of events per second.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope {

inline constexpr int kEventCodecVersion = 1;

// Appends the encoding of events to out.
void encodeEvents(std::span<const Event> events, std::string& out);
// Decodes exactly count events from data; false if the data is short or malformed.
bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out);

} // namespace poolscope
