#include "poolscope/Units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <utility>

namespace poolscope {

namespace {
char* put(char* p, const char* text) {
    while (*text) *p++ = *text++;
    return p;
}

// Three significant digits: "1.50 KiB", "20.3 GiB", "512 MiB". std::to_chars with a precision
// writes what printf's "%.*f" writes in the C locale, without printf's cost.
char* threeDigits(char* p, double v, const char* unit) {
    const int precision = v >= 100.0 ? 0 : v >= 10.0 ? 1 : 2;
    // Every value given here is below 1024 * 1024 (EiB holds the rest): a few digits.
    const auto r = std::to_chars(p, p + 24, v, std::chars_format::fixed, precision);
    if (r.ec == std::errc()) p = r.ptr;
    *p++ = ' ';
    return put(p, unit);
}

// threeDigits of num / den, where that double is the exact quotient or the one nearest to it,
// in integers: the double's to_chars was most of a CSV row's time (four an event). Rounding the
// exact quotient agrees with rounding the double everywhere except where the quotient lies
// exactly halfway between two outputs (the double, a hair to either side, decides there):
// nullptr then, and nothing written. Callers keep num * 100 within 2^64 and den within 2^53.
// `divide(n)` is {n / den, n % den}: given as a constant or a shift, the divisions cost a
// multiplication each instead of a division's tens of cycles (two a call, four calls a row).
template <class Divide>
[[gnu::always_inline]] inline char* threeDigitsExact(char* p, uint64_t num, uint64_t den, const char* unit,
                                                     Divide divide) {
    const int precision = num >= 100 * den ? 0 : num >= 10 * den ? 1 : 2;
    const uint64_t n = precision == 0 ? num : precision == 1 ? num * 10 : num * 100;
    auto [q, r] = divide(n);
    if (2 * r == den) return nullptr;
    if (2 * r > den) ++q;
    uint64_t whole = q, frac = 0;
    if (precision == 1) whole = q / 10, frac = q % 10;
    else if (precision == 2) whole = q / 100, frac = q % 100;
    p = std::to_chars(p, p + 24, whole).ptr;
    if (precision > 0) {
        *p++ = '.';
        if (precision == 2) *p++ = static_cast<char>('0' + frac / 10);
        *p++ = static_cast<char>('0' + frac % 10);
    }
    *p++ = ' ';
    return put(p, unit);
}

struct Pair {
    uint64_t q, r;
};
} // namespace

char* writeBytes(char* p, uint64_t bytes) {
    if (bytes == std::numeric_limits<uint64_t>::max()) return put(p, "max (UINT64_MAX)");
    static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        p = std::to_chars(p, p + 8, bytes).ptr;
        return put(p, " B");
    }
    // Below 2^53 the double is the byte count itself and each division by 1024 exact, so the
    // value threeDigits is given is bytes / 1024^k exactly.
    if (bytes < (uint64_t{1} << 53)) {
        int u = 0;
        uint64_t den = 1024;
        while (bytes >= den * 1024 && u < 5) den *= 1024, ++u;
        // Rounding can produce "1024 KiB": move up a unit instead (v >= 999.5).
        if (2 * bytes >= 1999 * den && u < 5) den *= 1024, ++u;
        const unsigned shift = 10 * (static_cast<unsigned>(u) + 1); // den = 2^shift
        auto divide = [&](uint64_t n) { return Pair{n >> shift, n & (den - 1)}; };
        if (char* end = threeDigitsExact(p, bytes, den, kUnits[u], divide)) return end;
    }
    double v = static_cast<double>(bytes);
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    if (v >= 999.5 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    return threeDigits(p, v, kUnits[u]);
}

// A write* form's text appended to out.
template <class T> void appendWritten(std::string& out, char* (*write)(char*, T), T v) {
    char buf[kUnitTextMax];
    out.append(buf, static_cast<size_t>(write(buf, v) - buf));
}

void appendBytes(std::string& out, uint64_t bytes) { appendWritten(out, writeBytes, bytes); }

std::string formatBytes(uint64_t bytes) {
    std::string out;
    appendBytes(out, bytes);
    return out;
}

std::string formatBytesSigned(int64_t bytes) {
    if (bytes < 0) return "-" + formatBytes(static_cast<uint64_t>(-(bytes + 1)) + 1);
    return "+" + formatBytes(static_cast<uint64_t>(bytes));
}

std::string formatCuResult(int result) {
    // The codes an allocation, free or pool call returns in practice (cuda.h's CUresult).
    static constexpr std::pair<int, const char*> kNames[] = {
        {0, "CUDA_SUCCESS"},
        {1, "CUDA_ERROR_INVALID_VALUE"},
        {2, "CUDA_ERROR_OUT_OF_MEMORY"},
        {3, "CUDA_ERROR_NOT_INITIALIZED"},
        {4, "CUDA_ERROR_DEINITIALIZED"},
        {100, "CUDA_ERROR_NO_DEVICE"},
        {101, "CUDA_ERROR_INVALID_DEVICE"},
        {201, "CUDA_ERROR_INVALID_CONTEXT"},
        {400, "CUDA_ERROR_INVALID_HANDLE"},
        {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
        {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
        {719, "CUDA_ERROR_LAUNCH_FAILED"},
        {800, "CUDA_ERROR_NOT_PERMITTED"},
        {801, "CUDA_ERROR_NOT_SUPPORTED"},
        {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
        {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
        {999, "CUDA_ERROR_UNKNOWN"},
    };
    for (const auto& [code, name] : kNames)
        if (code == result) return std::string(name) + " (" + std::to_string(result) + ")";
    return "CUresult " + std::to_string(result);
}

std::string formatCount(uint64_t n) {
    const std::string digits = std::to_string(n);
    std::string s;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i != 0 && (digits.size() - i) % 3 == 0) s += ',';
        s += digits[i];
    }
    return s;
}

int64_t nsBetween(int64_t from, int64_t to) {
    int64_t d;
    if (!__builtin_sub_overflow(to, from, &d)) return d;
    return to > from ? INT64_MAX : INT64_MIN;
}

char* writeDuration(char* p, int64_t ns) {
    if (ns < 0) {
        // -INT64_MIN overflows: one nanosecond less reads the same.
        *p++ = '-';
        ns = ns == INT64_MIN ? INT64_MAX : -ns;
    }
    if (ns < 1000) {
        p = std::to_chars(p, p + 8, ns).ptr;
        return put(p, " ns");
    }
    if (ns < 60LL * 1000000000) {
        // The double ns / unit is the quotient correctly rounded; below a minute its error is
        // far smaller than the distance from any quotient that is not a tie to a rounding edge.
        const uint64_t n = static_cast<uint64_t>(ns);
        char* end;
        if (ns < 1000000)
            end = threeDigitsExact(p, n, 1000, "\xC2\xB5s", [](uint64_t v) { return Pair{v / 1000, v % 1000}; });
        else if (ns < 1000000000)
            end = threeDigitsExact(p, n, 1000000, "ms", [](uint64_t v) { return Pair{v / 1000000, v % 1000000}; });
        else
            end = threeDigitsExact(p, n, 1000000000, "s",
                                   [](uint64_t v) { return Pair{v / 1000000000, v % 1000000000}; });
        if (end) return end;
        const uint64_t den = ns < 1000000 ? 1000 : ns < 1000000000 ? 1000000 : 1000000000;
        const char* unit = den == 1000 ? "\xC2\xB5s" : den == 1000000 ? "ms" : "s";
        return threeDigits(p, static_cast<double>(ns) / static_cast<double>(den), unit);
    }
    // "%lld min %02lld s": at most 153,722,867 minutes.
    const long long s = ns / 1000000000;
    p = std::to_chars(p, p + 12, s / 60).ptr;
    p = put(p, " min ");
    const long long sec = s % 60;
    *p++ = static_cast<char>('0' + sec / 10);
    *p++ = static_cast<char>('0' + sec % 10);
    return put(p, " s");
}

void appendDuration(std::string& out, int64_t ns) { appendWritten(out, writeDuration, ns); }

std::string formatDuration(int64_t ns) {
    std::string out;
    appendDuration(out, ns);
    return out;
}

bool parseBytes(const std::string& text, uint64_t& out) {
    size_t i = 0;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::string rest = text.substr(i);
    std::string lower;
    for (char c : rest) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!lower.empty() && std::isspace(static_cast<unsigned char>(lower.back()))) lower.pop_back();
    if (lower == "max" || lower == "uint64_max") {
        out = std::numeric_limits<uint64_t>::max();
        return true;
    }
    if (lower.empty() || lower[0] == '-') return false;
    char* end = nullptr;
    double v = std::strtod(lower.c_str(), &end);
    if (end == lower.c_str() || !std::isfinite(v) || v < 0) return false;
    std::string unit(end);
    while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
    double mul = 1;
    if (unit.empty() || unit == "b")
        mul = 1;
    else if (unit == "k" || unit == "kib" || unit == "kb")
        mul = 1024.0;
    else if (unit == "m" || unit == "mib" || unit == "mb")
        mul = 1024.0 * 1024;
    else if (unit == "g" || unit == "gib" || unit == "gb")
        mul = 1024.0 * 1024 * 1024;
    else if (unit == "t" || unit == "tib" || unit == "tb")
        mul = 1024.0 * 1024 * 1024 * 1024;
    else
        return false;
    double bytes = v * mul;
    if (bytes >= 18446744073709551615.0) return false;
    out = static_cast<uint64_t>(std::llround(bytes));
    return true;
}

bool parseDuration(const std::string& text, int64_t& ns) {
    size_t i = 0;
    auto space = [&] {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    };
    space();
    const size_t digitsAt = i;
    uint64_t whole = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        whole = whole * 10 + unsigned(text[i] - '0');
        if (whole > static_cast<uint64_t>(INT64_MAX)) return false;
        ++i;
    }
    bool anyDigit = i > digitsAt;
    uint64_t frac = 0; // in 10^-9 of the unit
    if (i < text.size() && text[i] == '.') {
        ++i;
        int places = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
            if (places == 9) return false;
            frac = frac * 10 + unsigned(text[i] - '0');
            ++places, ++i;
            anyDigit = true;
        }
        for (; places < 9; ++places) frac *= 10;
    }
    if (!anyDigit) return false;
    space();
    std::string unit;
    for (; i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])); ++i)
        unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    space();
    if (i != text.size()) return false;
    constexpr uint64_t kSecond = 1'000'000'000;
    uint64_t mul; // nanoseconds a unit
    if (unit.empty() || unit == "s") mul = kSecond;
    else if (unit == "ms") mul = 1'000'000;
    else if (unit == "us" || unit == "\xc2\xb5s" || unit == "\xce\xbcs") mul = 1'000;
    else if (unit == "ns") mul = 1;
    else if (unit == "min") mul = 60 * kSecond;
    else if (unit == "h") mul = 3600 * kSecond;
    else return false;
    if (whole > static_cast<uint64_t>(INT64_MAX) / mul) return false;
    // The fraction in nanoseconds, where it is a whole number of them (frac * mul stays below
    // 2^64 for the units under a second: mul <= 10^6).
    uint64_t fracNs;
    if (mul >= kSecond) {
        fracNs = frac * (mul / kSecond);
    } else {
        if (frac * mul % kSecond != 0) return false;
        fracNs = frac * mul / kSecond;
    }
    const uint64_t wholeNs = whole * mul;
    if (fracNs > static_cast<uint64_t>(INT64_MAX) - wholeNs) return false;
    ns = static_cast<int64_t>(wholeNs + fracNs);
    return true;
}

} // namespace poolscope
