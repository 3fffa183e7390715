#pragma once
// Validators for numeric options. CLI11's own conversion takes "nan", "inf", "1e309" (inf), "0x10"
// and "" for a double, and "-1" for an unsigned (wrapping to 2^64-1): a bad value started a run
// that never ended, or reached undefined behaviour (issue #12). These check the text itself.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace poolscope::cli {

// A plain decimal number ("12", "0.5", "2e3"), finite, in [lo, hi]; `zeroMeans`, when set, also
// allows 0 below lo and says what it means.
inline CLI::Validator decimalIn(double lo, double hi, const char* zeroMeans = nullptr) {
    auto check = [lo, hi, zeroMeans](std::string& s) -> std::string {
        char range[96];
        std::snprintf(range, sizeof range, "%.10g to %.10g%s%s", lo, hi,
                      zeroMeans ? ", or 0 for " : "", zeroMeans ? zeroMeans : "");
        const std::string bad = "'" + s + "' is not a number from " + range;
        if (s.empty() || s.find_first_not_of("0123456789.eE+-") != std::string::npos) return bad;
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end == s.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v)) return bad;
        if (zeroMeans && v == 0) return {};
        if (v < lo || v > hi) return bad;
        return {};
    };
    return CLI::Validator(check, "NUMBER", "decimalIn");
}

// A whole decimal number ("0", "250") in [lo, hi], no sign.
inline CLI::Validator wholeIn(unsigned long long lo, unsigned long long hi) {
    auto check = [lo, hi](std::string& s) -> std::string {
        const std::string bad = "'" + s + "' is not a whole number from " + std::to_string(lo) +
                                " to " + std::to_string(hi);
        if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
            return bad;
        errno = 0;
        const unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
        if (errno == ERANGE || v < lo || v > hi) return bad;
        return {};
    };
    return CLI::Validator(check, "N", "wholeIn");
}

} // namespace poolscope::cli
