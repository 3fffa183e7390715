#pragma once
// Text appended to a std::string through a pointer, for writers of one row an event (the CSV
// export): a row of two dozen fields appended one `append` at a time spent a third of its time
// copying each field from a stack buffer and checking the string's capacity. Internal to core.
//
// The string is grown ahead in steps; the fields are written in place (to_chars straight into
// it), each write making sure of its room first. finish() cuts the string to what was written.

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <string_view>

#include "poolscope/Units.h"

namespace poolscope::detail {

class TextCursor {
public:
    explicit TextCursor(std::string& s) : s_(s) {
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
        room(24);
        p_ = std::to_chars(p_, p_ + 24, v).ptr;
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
    // RFC 4180 (appendCsvField): quoted when it holds a comma, a quote or a line break.
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
    static constexpr size_t kStep = size_t{1} << 16;

    [[gnu::always_inline]] void room(size_t n) {
        if (static_cast<size_t>(end_ - p_) < n) [[unlikely]]
            grow(static_cast<size_t>(p_ - s_.data()), n);
    }
    // resize() fills what it adds: a step at a time, so that a row costs no more than its text.
    [[gnu::noinline]] void grow(size_t used, size_t n) {
        s_.resize(used + std::max(n, kStep));
        p_ = s_.data() + used;
        end_ = s_.data() + s_.size();
    }

    std::string& s_;
    char* p_ = nullptr;
    char* end_ = nullptr;
};

} // namespace poolscope::detail
