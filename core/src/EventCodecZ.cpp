// The regrouped formats' decoder (versions 5 and 6: predicted, regrouped by field, zstd; the
// layout in EventCodecParts.h, the encoder in EventCodec.cpp).
#include "EventCodecParts.h"

#include "poolscope/Zstd.h"

#include "BlockTables.h"
#include "Varint.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace poolscope::codec {

namespace {

using codec6::BlockTablesDecoder;
using detail::unzigzag;

// Versions 5 and 6 are decoded block by block (kDecodeBlock events), so that a block's events,
// headers and narrow fields stay in L1: each field's stream is read for the block (one short loop
// with a single running offset; the event by event order keeps 14 offsets live), the full-width
// fields straight into the events, then one pass over the block's events does the narrow fields,
// codec 6's tables and the watermark predictor. The loads are unchecked: the data is followed by
// slack (decompressInto), and with damaged headers a stream's offset passes its end by at most 8
// bytes an event before the check that each stream ends exactly where its size says. Reasons
// for refusing keep the priority of the earlier whole-chunk passes: stream sizes, then headers
// against streams, the references' encoding, the first event whose reference fails, references
// left over, invalid fields.
constexpr size_t kDecodeBlock = 128;

// Events' fields 0..8 (seq .. used) are 8 bytes at 8 * i: written in place by the field loops.
static_assert(offsetof(Event, seq) == 0 && offsetof(Event, tsNs) == 8 &&
              offsetof(Event, stream) == 16 && offsetof(Event, pool) == 24 &&
              offsetof(Event, ptr) == 32 && offsetof(Event, size) == 40 &&
              offsetof(Event, aux) == 48 && offsetof(Event, reserved) == 56 &&
              offsetof(Event, used) == 64);
constexpr int kWideFields = 9;

// One field of n events: its values (running sum, or as they are for kRaw) stored kStride bytes
// apart from dst. Returns the stream's offset after them.
// The shift is a constant: a shift by %cl is 2-3 uops on x86 without BMI2.
template <bool kRaw, size_t kStride, unsigned kShift>
[[gnu::always_inline]] inline size_t decodeField(const unsigned char* base, size_t at,
                                                 const uint64_t* hdr, size_t n, uint64_t& run,
                                                 unsigned char* dst) {
    uint64_t v = run;
    for (size_t k = 0; k < n; ++k) {
        const unsigned code = (hdr[k] >> kShift) & 7;
        const uint64_t z = unzigzag(load64(base + at) & kMaskOfCode[code]);
        at += kLenOfCode[code];
        if constexpr (kRaw) v = z;
        else v += z;
        std::memcpy(dst + k * kStride, &v, 8); // native order: the event's own field
    }
    if constexpr (!kRaw) run = v;
    return at;
}

// A field whose codes are all 0 in the block (common: most fields rarely change): its value
// repeats (0 for a residual), no load.
template <bool kRaw, size_t kStride>
[[gnu::always_inline]] inline void fillField(size_t n, uint64_t run, unsigned char* dst) {
    const uint64_t v = kRaw ? 0 : run;
    for (size_t k = 0; k < n; ++k) std::memcpy(dst + k * kStride, &v, 8);
}

template <bool kV6>
bool decodeRunZBlocks(const unsigned char* base, const uint64_t* sizes, size_t prefix,
                      uint64_t count, std::vector<Event>& out, const uint16_t* refs, size_t nRefs,
                      bool refsBad, std::string& why) {
    size_t at[kV5Streams], end[kV5Streams];
    at[0] = prefix + count * kV3Header;
    for (size_t i = 0; i < kV5Streams; ++i) {
        end[i] = at[i] + sizes[i];
        if (i + 1 < kV5Streams) at[i + 1] = end[i];
    }
    uint64_t run[kV3Fields] = {};
    uint64_t hdr[kDecodeBlock];
    uint64_t narrow[kV3Fields - kWideFields][kDecodeBlock]; // tid, correlation, result, packed
    uint64_t bad = 0;
    Predictor pred;
    BlockTablesDecoder* blocks = nullptr;
    if constexpr (kV6) {
        // On the heap: the collector links this decoder, and a module's thread-locals are
        // static TLS once its hot path's initial-exec pointer is in it (a few KiB there and
        // the driver cannot dlopen it; tests/collector/check_module.sh).
        thread_local std::unique_ptr<BlockTablesDecoder> tables;
        if (!tables) tables = std::make_unique<BlockTablesDecoder>();
        blocks = tables.get();
        blocks->reset(count);
    }
    bool tablesOn = kV6 && !refsBad; // off after the first failing reference: that is the reason
    const char* tableWhy = nullptr;
    size_t r = 0;
    const unsigned char* headers = base + prefix;
    for (uint64_t b = 0; b < count; b += kDecodeBlock) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kDecodeBlock, count - b));
        // The block's events are made only now (room is reserved: no reallocation), so that
        // their lines, first written here, are still in L1 when the fields are; as copies of
        // one event (resize's default construction zeroed each with a `rep stos`, ~8 ns).
        const size_t before = out.size();
        out.insert(out.end(), n, Event{});
        Event* e0 = out.data() + before;
        uint64_t any = 0;
        for (size_t k = 0; k < n; ++k) {
            hdr[k] = load64(headers + (b + k) * kV3Header) & 0xFF'FFFF'FFFFu;
            any |= hdr[k];
        }
        auto* wide = reinterpret_cast<unsigned char*>(e0);
        auto field = [&]<int I>(std::integral_constant<int, I>) {
            constexpr unsigned kShift = 3 * I;
            constexpr bool kRawField = kV6 && (kV6RawFields >> I & 1);
            constexpr bool kWide = I < kWideFields;
            constexpr size_t kStride = kWide ? sizeof(Event) : 8;
            unsigned char* dst = kWide ? wide + 8 * I
                                       : reinterpret_cast<unsigned char*>(narrow[kWide ? 0 : I - kWideFields]);
            if (((any >> kShift) & 7) == 0) fillField<kRawField, kStride>(n, run[I], dst);
            else at[I] = decodeField<kRawField, kStride, kShift>(base, at[I], hdr, n, run[I], dst);
        };
        [&]<int... I>(std::integer_sequence<int, I...>) {
            (field(std::integral_constant<int, I>{}), ...);
        }(std::make_integer_sequence<int, kV3Fields>{});
        if (any & kSiteBit) { // else the events' sites stay 0
            size_t s = at[kV3Fields];
            for (size_t k = 0; k < n; ++k) {
                const bool site = (hdr[k] & kSiteBit) != 0;
                e0[k].site = site ? static_cast<uint32_t>(load64(base + s)) : 0;
                s += site ? 4 : 0;
            }
            at[kV3Fields] = s;
        }
        for (size_t k = 0; k < n; ++k) {
            Event& e = e0[k];
            const uint64_t tid = narrow[0][k], corr = narrow[1][k], res = narrow[2][k];
            const uint64_t packed = narrow[3][k];
            bad |= (tid >> 32) | (corr >> 32) | (packed >> 56) | (res ^ sx(static_cast<int32_t>(res)));
            e.tid = static_cast<uint32_t>(tid);
            e.correlation = static_cast<uint32_t>(corr);
            e.result = static_cast<int32_t>(res);
            e.kind = static_cast<EventKind>(packed & 0xFF);
            e.flags = static_cast<uint8_t>(packed >> 8);
            e.variant = static_cast<uint8_t>(packed >> 16);
            e.attr = static_cast<uint16_t>(packed >> 24);
            e.device = static_cast<int16_t>(static_cast<uint16_t>(packed >> 40));
            if constexpr (kV6) {
                if (tablesOn) [[likely]] {
                    const uint64_t kind = packed & 0xFF;
                    const bool has = kind == uint64_t(EventKind::Alloc) || kind == uint64_t(EventKind::Free);
                    const uint64_t ref = has ? refs[r] : 0; // refs[nRefs] is a spare 0
                    r += has;
                    if (r > nRefs) [[unlikely]] {
                        tableWhy = "its block references are cut short or too long";
                        tablesOn = false;
                    } else if (!blocks->inverse(kind, e.ptr, e.size, ref)) [[unlikely]] {
                        tableWhy = "a block reference names no block of its table";
                        tablesOn = false;
                    }
                }
            }
            pred.inverse(e);
        }
    }
    for (size_t i = 0; i < kV5Streams; ++i) {
        if (at[i] != end[i]) {
            why = "its decompressed data does not match its events' headers";
            return false;
        }
    }
    if (refsBad) {
        why = "its block references are cut short or too long";
        return false;
    }
    if (tableWhy) {
        why = tableWhy;
        return false;
    }
    if (r != nRefs) {
        why = "its block references do not match its events";
        return false;
    }
    if (bad) {
        why = "its data does not decode";
        return false;
    }
    return true;
}

} // namespace

bool decodeRunZ(std::string_view data, uint64_t count, std::vector<Event>& out, std::string& why,
                bool v6) {
    const size_t prefix = v6 ? kV6Prefix : kV5Prefix;
    const size_t streams = v6 ? kV5Streams + 1 : kV5Streams;
    thread_local std::string plain;
    const size_t maxBytes = prefix + count * (kMaxEncodedEventBytes + (v6 ? kMaxRefBytes : 0));
    size_t bytes = 0;
    // Slack for the unchecked loads (decodeRunZBlocks): 8 bytes an event a stream may overrun,
    // and the last 8-byte load.
    if (!zstd::decompressInto(data, maxBytes, plain, 8 * count + 16, bytes, why)) return false;
    if (bytes < prefix + count * kV3Header) {
        why = "its decompressed data is too short for its events";
        return false;
    }
    const auto* base = reinterpret_cast<const unsigned char*>(plain.data());
    uint64_t sizes[kV5Streams + 1];
    uint64_t total = prefix + count * kV3Header;
    for (size_t i = 0; i < streams; ++i) {
        uint32_t v;
        std::memcpy(&v, base + 4 * i, 4);
        if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
        sizes[i] = v;
        total += v;
    }
    if (total != bytes) {
        why = "its decompressed data does not match its stream sizes";
        return false;
    }
    // Version 6's references, all read first (one short loop; the events then take them in
    // order): LEB128 of at most kMaxRefBytes bytes, none cut by the stream's end. A bad one is
    // reported only once the streams are found to match their headers (that reason comes first).
    thread_local std::vector<uint16_t> refs;
    size_t nRefs = 0;
    bool refsBad = false;
    if (v6) {
        size_t at = total - sizes[kV5Streams];
        refs.resize(sizes[kV5Streams] + 1); // at most one reference a byte, and a spare
        while (at < total) {
            const unsigned char b0 = base[at++];
            if (!(b0 & 0x80)) [[likely]] {
                refs[nRefs++] = b0;
                continue;
            }
            const unsigned char b1 = at < total ? base[at++] : 0x80;
            if (b1 & 0x80) {
                refsBad = true;
                break;
            }
            refs[nRefs++] = static_cast<uint16_t>((b0 & 0x7Fu) | unsigned{b1} << 7);
        }
        refs[nRefs] = 0;
    }
    // Only now, with count checked against real bytes, room for the events (geometric growth:
    // a caller appends chunk after chunk to one vector).
    const size_t before = out.size();
    if (out.capacity() - before < count) out.reserve(std::max(before + count, 2 * out.capacity()));
    const bool ok = v6 ? decodeRunZBlocks<true>(base, sizes, prefix, count, out, refs.data(),
                                                nRefs, refsBad, why)
                       : decodeRunZBlocks<false>(base, sizes, prefix, count, out, nullptr, 0,
                                                 false, why);
    if (!ok) out.resize(before);
    return ok;
}

} // namespace poolscope::codec
