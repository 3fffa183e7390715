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
// Version 6 (written where libzstd is found, in format 7 files; core/src/Zstd.h): version 5 whose
// pointers and sizes are predicted from the chunk's own blocks. The data is one zstd frame that
// states its content size, at most 60 + count * (kMaxEncodedEventBytes + 2) (refused above that
// before allocating). Decompressed: 15 little-endian uint32, the byte sizes of the 15 streams
// after the headers; every event's 5-byte header; field streams 0..12 and the sites as in
// version 5; then the references: one LEB128 number (1 or 2 bytes, the second byte's top bit 0)
// for each event whose kind is Alloc or Free, in event order. The events so encoded are those of
// version 5's predictor (correlation, reserved, used as below), with ptr and size replaced too,
// and those two fields (4 and 5) stored as zigzagged values themselves, not as deltas from the
// previous event (a decoder takes them as they are). Two tables, empty at the chunk's start:
//   L, live blocks: (ptr, size) of each Alloc of the chunk not yet named by a Free, oldest
//      first, at most 1024 (an Alloc that finds it full first drops its 256 oldest entries);
//   F, freed pointers: the ptr of each Free of the chunk not yet named by an Alloc, oldest first,
//      at most 64 (a Free that finds it full first drops its 16 oldest);
// and three bases A, B, C (0 at the start). Event by event, with the real values:
//   Alloc: r = 0 if ptr is not in F, else 1 + (its position from F's newest end, 0 = newest;
//          the newest occurrence); if r > 0: ptr' = 0 (ptr - that entry) and the entry leaves F
//          (the others keep their order); else ptr' = ptr - A and A = ptr. size' = size. Then
//          (ptr, size) joins L as its newest entry.
//   Free:  r the same in L; if r > 0: ptr' = ptr - entry.ptr (0), size' = size - entry.size,
//          and the entry leaves L; else ptr' = ptr - B, B = ptr, size' = size. Then ptr joins F.
//   other: ptr' = ptr - C, C = ptr; size' = size; no reference.
// (all modulo 2^64). A decoder reads r (when the kind has one), computes the prediction the
// same way from its tables and adds it. The watermark predictor of version 5 runs on the real
// events alongside (it sees the real size).
// Example: Alloc 0xA000, Alloc 0xB000, Free 0xA000, Free 0xC000, Alloc 0xA000 has references
// 00 00 02 00 02 (the first free names the second newest live block; the last alloc the second
// newest free).
// A decoder rejects, besides version 5's checks, a reference above its table's length, a
// reference of more than 2 bytes or past the stream's end, and bytes left in the stream after
// the last. Why: most frees name a block allocated a few hundred events before, which a delta
// from the previous pointer codes in 3-6 bytes and a rank in one, and a pool hands out again the
// block freed last: the generator's chunks go from 7.3 to 5.4 bytes an event, the recorded
// samples' by 4-42 % (docs/PERFORMANCE.md).
//
// Version 5 (written from format 5 until version 6; still read): version 4 bytes of predicted
// events, regrouped by field and compressed with zstd. The data is one zstd frame that states its
// content size, which is at most 56 + count * kMaxEncodedEventBytes (a reader refuses larger
// claims before allocating). Decompressed, it is the version-4 encoding of the events below, with
// its bytes regrouped: 14 little-endian uint32, the byte sizes of the 14 streams that follow the
// headers; every event's 5-byte header; then for i = 0..12 every event's field i bytes (in event
// order, each as long as its code says); then every present site's 4 bytes. A decoder must reject
// sizes that do not add up to the data, or that the headers' codes do not fill exactly.
// The events so encoded are the real ones with three fields replaced by what a predictor missed,
// so that the deltas are mostly zero:
//   correlation' = correlation - uint32(seq)       (collectors number both from one counter)
//   reserved'    = reserved - R[pool]               (R, U: the last reserved and used seen for
//   used'        = used - (U[pool] + size if alloc, - size if free, + 0 otherwise)   that pool)
// modulo 2^64 (correlation modulo 2^32), where R and U are kept for the first 8 distinct pool
// values of the chunk (starting at 0; other pools predict 0) from the real values of the events
// before. A decoder undoes this event by event after decoding version 4. Why: a general-purpose
// compressor after the delta codec takes the synthetic training loop from ~26 to ~7 bytes an
// event and the recorded samples to 4-6 (docs/PERFORMANCE.md); the regrouping and the
// predictors are each worth about a fifth of that.
//
// Version 4 (written without libzstd): version 3 plus the call site. Header bit 39, which version 3 requires to
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

// The zstd codec (version 5 above). This is the one constant of that format change: another
// change of the event encoding takes the next number.
inline constexpr int kZstdCodecVersion = 5;
// Written when libzstd is missing, and the default of encodeEvents/decodeEvents.
inline constexpr int kPlainCodecVersion = 4;
// Codec 5 plus frees and reuses predicted from the chunk's own blocks (version 6 above): written
// where libzstd is found.
inline constexpr int kBlocksCodecVersion = 6;
inline constexpr int kEventCodecVersion = kBlocksCodecVersion; // the newest; 1 to it are read
inline constexpr int kEventCodecFields = 13; // versions 3 and 4
// Most bytes one version-4 event can take: the 5-byte header, 13 fields of 8 bytes, the site.
inline constexpr size_t kMaxEncodedEventBytes = 5 + kEventCodecFields * 8 + 4;

// Incremental encoder into its own buffer: one run (chunk) at a time, in version 4, 5 or 6. Each
// event is written straight into the buffer (which grows, rarely, only when a worst-case event
// would not fit), with no per-event std::string append. Versions 5 and 6 encode the predicted
// events as they go and regroup and compress them in finish().
class EventEncoder {
public:
    // Versions 5 and 6 fall back to 4 when libzstd is missing: version() says which is written.
    explicit EventEncoder(int version = kPlainCodecVersion);
    ~EventEncoder();
    EventEncoder(EventEncoder&&) noexcept;
    EventEncoder& operator=(EventEncoder&&) noexcept;
    // Starts the next run: previous values back to zero, buffer emptied (capacity kept).
    void reset();
    void append(std::span<const Event> events); // appends to the current run
    void append(const Event& e) { append(std::span<const Event>(&e, 1)); }
    // The run's data in version(); valid until the next append or reset. For version 4 the same
    // as data(); for versions 5 and 6 it compresses (empty if that fails).
    std::string_view finish();
    int version() const { return version_; }
    // The version-4 bytes appended so far (for versions 5 and 6: of the predicted events,
    // ungrouped).
    std::string_view data() const { return {buf_.get(), size_}; }
    size_t size() const { return size_; }

private:
    void grow();
    alignas(16) uint64_t prev_[kEventCodecFields + 1] = {}; // +1: SIMD pairs
    std::unique_ptr<char[]> buf_;
    size_t size_ = 0;
    size_t capacity_ = 0;
    uint64_t count_ = 0;
    int version_;
    struct Packer; // versions 5 and 6: predictor state, regrouping and compression buffers
    std::unique_ptr<Packer> packer_;
};

// Appends the encoding of events (one run) to out, in codec `version` (4; 5 or 6 compressed,
// false when libzstd is missing; 3 or 2 for tests and benchmarks that need old-format data:
// version 3 drops the sites).
bool encodeEvents(std::span<const Event> events, std::string& out,
                  int version = kPlainCodecVersion);
// Decodes exactly count events encoded with codec `version`, appending them to out; false if
// the data is short, malformed, has bytes left over, or is of an unknown version. why, when
// given, gets the reason for versions 5 and 6 (a missing libzstd, a lying frame size).
bool decodeEvents(std::string_view data, uint64_t count, std::vector<Event>& out,
                  int version = kPlainCodecVersion, std::string* why = nullptr);

namespace detail {
// Tests only: the portable version-3 encoder (used where SSE2 is missing), which must produce
// exactly the bytes of the SSE2 one.
void encodeEventsPortable(std::span<const Event> events, std::string& out);
// Benchmarks only: the events encoded as one chunk in codec 5 or 6, stream by stream (the
// headers, the 13 fields, the sites, for 6 the references): each stream's bytes before zstd,
// and compressed alone at the writer's level. Empty for another version or without libzstd.
struct StreamBytes {
    size_t raw = 0, packed = 0;
};
std::vector<StreamBytes> streamBytes(std::span<const Event> events, int version);
} // namespace detail

} // namespace poolscope
