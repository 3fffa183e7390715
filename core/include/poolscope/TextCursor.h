#pragma once
// Text appended to a std::string through a pointer, for writers of one row an event (the CSV
// export, `dump`): a row of two dozen fields appended one `append` at a time spent a third of its
// time copying each field from a stack buffer and checking the string's capacity.
//
// The string is grown ahead in steps; the fields are written in place, each write making sure of
// its room first. finish() cuts the string to what was written. A cursor is meant to live over
// many rows (a chunk's): each new one fills its first step.

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "poolscope/Units.h"

namespace poolscope {

namespace detail {
// "00" to "99".
inline constexpr char kDigitPairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// x < 10^8 as exactly eight digits (leading zeros): two halves of four, each two pairs, in
// 32-bit arithmetic the halves do not wait on each other.
inline char* eightDigits(char* p, uint32_t x) {
    const uint32_t hi = x / 10000, lo = x % 10000;
    std::memcpy(p, kDigitPairs + 2 * (hi / 100), 2);
    std::memcpy(p + 2, kDigitPairs + 2 * (hi % 100), 2);
    std::memcpy(p + 4, kDigitPairs + 2 * (lo / 100), 2);
    std::memcpy(p + 6, kDigitPairs + 2 * (lo % 100), 2);
    return p + 8;
}
} // namespace detail

// v in decimal, as std::to_chars writes it (at most 20 chars). A row's numbers are mostly tiny
// (flags, kinds, a device) or long (handles, pointers, times: 15 to 19 digits): one or two
// digits are written at once; longer ones from their end, eight digits at a time where they
// can be, each group in 32-bit arithmetic whose steps do not wait on each other.
inline char* writeDecimal(char* p, uint64_t v) {
    if (v < 10) {
        *p = static_cast<char>('0' + v);
        return p + 1;
    }
    if (v < 100) {
        std::memcpy(p, detail::kDigitPairs + 2 * v, 2);
        return p + 2;
    }
    static constexpr uint64_t kPow10[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
                                            10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
                                            100000000000ull, 1000000000000ull, 10000000000000ull,
                                            100000000000000ull, 1000000000000000ull, 10000000000000000ull,
                                            100000000000000000ull, 1000000000000000000ull,
                                            10000000000000000000ull};
    // The digit count: log2 * log10(2) (1233 / 4096) is it or one less.
    const unsigned t = (static_cast<unsigned>(64 - __builtin_clzll(v)) * 1233) >> 12;
    char* const end = p + t + (v >= kPow10[t] ? 1 : 0);
    char* b = end;
    while (v >= 100000000) {
        const auto group = static_cast<uint32_t>(v % 100000000);
        v /= 100000000;
        b -= 8;
        detail::eightDigits(b, group);
    }
    auto x = static_cast<uint32_t>(v);
    while (x >= 100) {
        b -= 2;
        std::memcpy(b, detail::kDigitPairs + 2 * (x % 100), 2);
        x /= 100;
    }
    if (x >= 10) std::memcpy(b - 2, detail::kDigitPairs + 2 * x, 2);
    else b[-1] = static_cast<char>('0' + x);
    return end;
}
inline char* writeDecimal(char* p, int64_t v) {
    if (v >= 0) return writeDecimal(p, static_cast<uint64_t>(v));
    *p++ = '-';
    return writeDecimal(p, ~static_cast<uint64_t>(v) + 1); // INT64_MIN's magnitude too
}


class TextCursor {
public:
    static constexpr size_t kStep = size_t{1} << 16;
    // `step`: how far ahead the string is grown at a time (smaller for a cursor of one row).
    explicit TextCursor(std::string& s, size_t step = kStep) : s_(s), step_(std::max<size_t>(step, 64)) {
        const size_t at = s.size();
        grow(at, 0);
    }
    TextCursor(const TextCursor&) = delete;
    TextCursor& operator=(const TextCursor&) = delete;
    ~TextCursor() { finish(); }

    // Cuts the string to the text written (also done when the cursor goes).
    void finish() { s_.resize(static_cast<size_t>(p_ - s_.data())); }

    void put(char c) {
        room(1);
        *p_++ = c;
    }
    void put(std::string_view v) {
        room(v.size());
        std::memcpy(p_, v.data(), v.size());
        p_ += v.size();
    }
    template <class T> void number(T v) {
        static_assert(std::is_integral_v<T>);
        room(24);
        if constexpr (std::is_unsigned_v<T>) p_ = writeDecimal(p_, static_cast<uint64_t>(v));
        else p_ = writeDecimal(p_, static_cast<int64_t>(v));
    }
    // A literal of a few chars (a key, a separator), copied with its length known.
    template <size_t N> void lit(const char (&text)[N]) {
        room(N - 1);
        std::memcpy(p_, text, N - 1);
        p_ += N - 1;
    }
    void hex(uint64_t h) { // "0x" and lower-case digits, as hexHandle
        room(20);
        *p_++ = '0';
        *p_++ = 'x';
        p_ = std::to_chars(p_, p_ + 16, h, 16).ptr;
    }
    void bytes(uint64_t b) {
        room(kUnitTextMax);
        p_ = writeBytes(p_, b);
    }
    void duration(int64_t ns) {
        room(kUnitTextMax);
        p_ = writeDuration(p_, ns);
    }
    // RFC 4180 (appendCsvField writes through this): quoted when it holds a comma, a quote or a
    // line break, its quotes doubled.
    void csvField(std::string_view v) {
        if (v.find_first_of(",\"\r\n") == std::string_view::npos) {
            put(v);
            return;
        }
        room(2 * v.size() + 2);
        *p_++ = '"';
        for (char c : v) {
            if (c == '"') *p_++ = '"';
            *p_++ = c;
        }
        *p_++ = '"';
    }

private:

    [[gnu::always_inline]] void room(size_t n) {
        if (static_cast<size_t>(end_ - p_) < n) [[unlikely]]
            grow(static_cast<size_t>(p_ - s_.data()), n);
    }
    // resize() fills what it adds: a step at a time, so that a row costs no more than its text.
    [[gnu::noinline]] void grow(size_t used, size_t n) {
        s_.resize(used + std::max(n, step_));
        p_ = s_.data() + used;
        end_ = s_.data() + s_.size();
    }

    std::string& s_;
    size_t step_;
    char* p_ = nullptr;
    char* end_ = nullptr;
};

} // namespace poolscope
