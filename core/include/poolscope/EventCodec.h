#pragma once
// Compact encoding of Event runs, used for the trace's event chunks (and usable on the wire).
//
// Every field of an event is stored as its difference from the same field of the previous
// event (the first event of a run starts from all zeros), taken modulo 2^64 and zigzag-mapped,
// as an unsigned LEB128 varint. Signed fields (tsNs, device, result) are sign-extended first.
//
// Version 2 (written): per event, a varint presence mask with bit i set when field i's delta is
// not zero, then the varints of those fields only. Field order (bit order):
//   seq, tsNs, kind, correlation, ptr, size, used, stream, pool, reserved, tid, aux, variant,
//   device, result, attr, flags
// The fields that change at nearly every event come first, so the mask is usually one byte and
// an event takes ~15-25 bytes instead of 96.
// Version 1 (still read): no mask; all 17 fields in the order
//   seq, tsNs, kind, variant, tid, device, correlation, result, stream, pool, ptr, size, aux,
//   attr, flags, reserved, used

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope {

inline constexpr int kEventCodecVersion = 2; // written; 1 and 2 are read

// Incremental encoder: one run (chunk) at a time; reset() starts the next run.
class EventEncoder {
public:
    void reset() { std::fill(std::begin(prev_), std::end(prev_), 0); }
    void append(const Event& e, std::string& out);

private:
    uint64_t prev_[17] = {};
};

// Appends the encoding of events (one run) to out.
void encodeEvents(std::span<const Event> events, std::string& out);
// Decodes exactly count events encoded with codec `version`; false if the data is short,
// malformed or of an unknown version.
bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out,
                  int version = kEventCodecVersion);

} // namespace poolscope
