#pragma once
// Compact encoding of Event runs, used for the trace's event chunks (and usable on the wire).
//
// Common to all versions: a run (one chunk) is encoded event after event. Every field is taken
// as its difference d from the same field of the previous event of the run (the first event
// starts from all zeros), modulo 2^64, zigzag-mapped so that small |d| gives a small number:
//   z = (d << 1) ^ (d >> 63)   (d as int64_t, arithmetic shift).
// Signed fields (tsNs, device, result) are sign-extended to 64 bits first (except in version
// 3's packed word), unsigned ones zero-extended. Decoding adds the unzigzagged z to the previous
// value modulo 2^64. Event::reserved0 is not stored (decoded as 0).
//
// Version 5 (written for a chunk that holds a beyond-pool kind, EventKind::DeviceAlloc and
// later: legacy device memory and pinned host memory, issue #18): byte for byte version 4. The
// version number only says that such kinds may occur, so that a version-4 reader refuses the
// chunk as a newer PoolScope's instead of calling its events damaged. Chunks without those kinds
// are still written as version 4.
//
// Version 4 (written): version 3 plus the call site. Header bit 39, which version 3 requires to
// be 0, is set when the event has a site (Event::site != 0); the site then follows the event's
// 13 fields as 4 raw little-endian bytes (not a delta: sites repeat, they do not drift). An event
// without a site is byte for byte its version-3 encoding. A version-3 reader refuses codec 4
// chunks as a newer PoolScope's.
//
// Version 3 (still read): 13 fields, fixed-width bytes instead of varints, so that neither encoder
// nor decoder has a data-dependent branch. Fields, in order (i = 0..12):
//   0 seq, 1 tsNs, 2 stream, 3 pool, 4 ptr, 5 size, 6 aux, 7 reserved, 8 used, 9 tid,
//   10 correlation, 11 result, 12 packed
// where packed = kind | flags << 8 | variant << 16 | attr << 24 | uint16_t(device) << 40
// (bits 56..63 zero). Per event:
//   len_i = number of bytes of z_i without its leading zero bytes (0 when z_i = 0, else 1..8);
//   code_i = min(len_i, 7); the field takes L(code_i) bytes, L = {0,1,2,3,4,5,6,8} (a 7-byte
//   z is stored in 8 bytes).
//   Header: 5 bytes, a little-endian 40-bit number: bits 3i..3i+2 hold code_i; bit 39 is 0.
//   Then, for i = 0..12, z_i as L(code_i) little-endian bytes.
//   Example: seq +1 and tsNs +500, nothing else changed: z = 2 and 1000: codes 1 and 2 ->
//   header 11 00 00 00 00, data 02 e8 03: 8 bytes.
// A decoder must reject: bit 39 set; a reconstructed tid or correlation above 32 bits, result
// outside int32 (not equal to its own sign extension) or packed above 56 bits; data ending
// inside an event; bytes left after the last event. An event takes 5..109 bytes: ~26 on the
// synthetic training-loop workload (v2: 25), 18-26 on the recorded samples (v2: 16-27).
//
// Version 2 (still read): 17 fields, i = 0..16:
//   seq, tsNs, kind, correlation, ptr, size, used, stream, pool, reserved, tid, aux, variant,
//   device, result, attr, flags
// per event a presence mask as an unsigned LEB128 varint (bit i set when z_i != 0; bits above
// 16 must be zero), then z_i of each present field, in increasing i, as a LEB128 varint.
// Version 1 (still read): no mask; all 17 z_i as LEB128 varints in the order
//   seq, tsNs, kind, variant, tid, device, correlation, result, stream, pool, ptr, size, aux,
//   attr, flags, reserved, used

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope {

// The codec of chunks holding beyond-pool kinds (issue #18). One named constant so that it can be
// reconciled with other codec bumps: everything that decides on it uses this name.
inline constexpr int kBeyondPoolCodecVersion = 5;
inline constexpr int kEventCodecVersion = kBeyondPoolCodecVersion; // the highest read: 1 to 5
// What a chunk without beyond-pool kinds is written as.
inline constexpr int kPoolOnlyCodecVersion = 4;
inline constexpr int kEventCodecFields = 13; // versions 3 and 4
// Most bytes one version-4 event can take: the 5-byte header, 13 fields of 8 bytes, the site.
inline constexpr size_t kMaxEncodedEventBytes = 5 + kEventCodecFields * 8 + 4;

// Incremental version-4 encoder into its own buffer: one run (chunk) at a time. Each event is
// written straight into the buffer (which grows, rarely, only when a worst-case event would
// not fit), with no per-event std::string append.
class EventEncoder {
public:
    EventEncoder();
    // Starts the next run: previous values back to zero, buffer emptied (capacity kept).
    void reset();
    void append(std::span<const Event> events); // appends to the current run
    void append(const Event& e) { append(std::span<const Event>(&e, 1)); }
    std::string_view data() const { return {buf_.get(), size_}; }
    size_t size() const { return size_; }

private:
    void grow();
    alignas(16) uint64_t prev_[kEventCodecFields + 1] = {}; // +1: SIMD pairs
    std::unique_ptr<char[]> buf_;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

// Appends the encoding of events (one run) to out, in codec `version` (4 or 5; 3 or 2 for tests
// and benchmarks that need old-format data: version 3 drops the sites).
void encodeEvents(std::span<const Event> events, std::string& out,
                  int version = kEventCodecVersion);
// Decodes exactly count events encoded with codec `version`, appending them to out; false if
// the data is short, malformed, has bytes left over, or is of an unknown version.
bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out,
                  int version = kEventCodecVersion);

namespace detail {
// Tests only: the portable version-3 encoder (used where SSE2 is missing), which must produce
// exactly the bytes of the SSE2 one.
void encodeEventsPortable(std::span<const Event> events, std::string& out);
} // namespace detail

} // namespace poolscope
