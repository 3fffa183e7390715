#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <random>
#include <string>

#include "poolscope/Units.h"

namespace poolscope {
namespace {

TEST(Units, FormatBytes) {
    EXPECT_EQ(formatBytes(0), "0 B");
    EXPECT_EQ(formatBytes(512), "512 B");
    EXPECT_EQ(formatBytes(1023), "1023 B");
    EXPECT_EQ(formatBytes(1024), "1.00 KiB");
    EXPECT_EQ(formatBytes(1536), "1.50 KiB");
    EXPECT_EQ(formatBytes(64ull << 20), "64.0 MiB");
    EXPECT_EQ(formatBytes(512ull << 20), "512 MiB");
    EXPECT_EQ(formatBytes(static_cast<uint64_t>(20.3 * (1ull << 30))), "20.3 GiB");
    EXPECT_EQ(formatBytes((1ull << 20) - 1), "1.00 MiB"); // never "1024 KiB"
    EXPECT_EQ(formatBytes(UINT64_MAX), "max (UINT64_MAX)");
}

// The three digits through std::to_chars against printf's "%.Nf", the way they were written
// before: on values at each precision's edges (x.xx5, 99.95, 999.5) and at random.
TEST(Units, ThreeDigitsAreWhatPrintfWrites) {
    auto viaPrintf = [](double v, const char* unit) {
        char buf[64];
        if (v >= 100.0) std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
        else if (v >= 10.0) std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
        else std::snprintf(buf, sizeof buf, "%.2f %s", v, unit);
        return std::string(buf);
    };
    auto wantDuration = [&](int64_t ns) {
        const double d = double(ns);
        return ns < 1000000 ? viaPrintf(d / 1e3, "\xC2\xB5s")
               : ns < 1000000000 ? viaPrintf(d / 1e6, "ms")
                                 : viaPrintf(d / 1e9, "s");
    };
    std::mt19937_64 rng(5);
    size_t checked = 0;
    for (int i = 0; i < 200000; ++i) {
        // Bytes: a random size at a random scale, and sizes at rounding edges of each unit.
        const uint64_t bytes = i % 2 ? (rng() >> (rng() % 64)) : (uint64_t(1) << (10 * (1 + i % 5))) * (1000 + i % 50) / 1000 + i % 7;
        if (bytes >= 1024 && bytes != UINT64_MAX) {
            double v = double(bytes);
            int u = -1;
            static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
            while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
            if (v >= 999.5 && u < 5) v /= 1024.0, ++u;
            ASSERT_EQ(formatBytes(bytes), viaPrintf(v, kUnits[u])) << bytes;
            ++checked;
        }
        const int64_t ns = int64_t(rng() % 60'000'000'000);
        if (ns >= 1000) {
            ASSERT_EQ(formatDuration(ns), wantDuration(ns)) << ns;
        }
    }
    // Durations at the rounding edges of each precision and unit.
    for (int64_t scale : {int64_t(1000), int64_t(1000000), int64_t(1000000000)})
        for (double v : {1.005, 1.125, 9.995, 9.9949999, 10.05, 10.25, 99.95, 99.949999, 100.5, 101.5, 998.5, 999.49}) {
            const int64_t ns = int64_t(v * double(scale));
            if (ns < 60'000'000'000) { // then minutes
                EXPECT_EQ(formatDuration(ns), wantDuration(ns)) << ns;
            }
        }
    EXPECT_GT(checked, 100000u);
}

// formatBytes and formatDuration round in integers where the quotient is not a tie (Units.cpp):
// every value of whole ranges around each unit's and precision's edges against printf of the
// double, where exact ties (1.125 KiB, 1.005 us) are frequent; and the append forms add the same
// text after what is there.
TEST(Units, IntegerRoundingIsPrintfsOnWholeRanges) {
    auto viaPrintf = [](double v, const char* unit) {
        char buf[64];
        std::snprintf(buf, sizeof buf, v >= 100.0 ? "%.0f %s" : v >= 10.0 ? "%.1f %s" : "%.2f %s", v, unit);
        return std::string(buf);
    };
    static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    auto wantBytes = [&](uint64_t bytes) {
        double v = double(bytes);
        int u = -1;
        while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
        if (v >= 999.5 && u < 5) v /= 1024.0, ++u;
        return viaPrintf(v, kUnits[u]);
    };
    // Whether num / den, at the precision it is printed with, lies exactly halfway between two
    // outputs: the cases the integers leave to the double.
    auto tie = [](uint64_t num, uint64_t den) {
        const uint64_t scale = num >= 100 * den ? 1 : num >= 10 * den ? 10 : 100;
        return (num * scale) % den * 2 == den;
    };
    size_t byteTies = 0, durationTies = 0, checked = 0;
    auto bytesFrom = [&](uint64_t first, uint64_t count, uint64_t step) {
        for (uint64_t b = first, i = 0; i < count; ++i, b += step) {
            ASSERT_EQ(formatBytes(b), wantBytes(b)) << b;
            ++checked;
            uint64_t den = 1024; // the unit the value is printed in
            while (b >= den * 1024 && den < (uint64_t{1} << 50)) den *= 1024;
            if (2 * b >= 1999 * den && den < (uint64_t{1} << 50)) den *= 1024;
            byteTies += b < (uint64_t{1} << 53) && tie(b, den);
        }
    };
    bytesFrom(1024, 300000, 1);                      // KiB at every precision, up to 293 KiB
    bytesFrom(1000 * 1024 - 5000, 60000, 1);         // across 999.5 KiB to MiB
    for (uint64_t unit : {uint64_t{1} << 20, uint64_t{1} << 30, uint64_t{1} << 40, uint64_t{1} << 50}) {
        bytesFrom(unit, 20000, unit / 4096);         // each unit's values in steps that tie often
        bytesFrom(unit * 10 - 20000, 40000, 1);      // the 10.0 edge
        bytesFrom(unit * 999 + unit / 2 - 20000, 40000, 1); // the 999.5 edge
    }
    bytesFrom((uint64_t{1} << 53) - 2000, 4000, 1);  // where the double stops being exact
    auto wantDuration = [&](int64_t ns) {
        const double d = double(ns);
        return ns < 1000000 ? viaPrintf(d / 1e3, "\xC2\xB5s")
               : ns < 1000000000 ? viaPrintf(d / 1e6, "ms")
                                 : viaPrintf(d / 1e9, "s");
    };
    auto durationsFrom = [&](int64_t first, int64_t count, int64_t step) {
        for (int64_t ns = first, i = 0; i < count; ++i, ns += step) {
            ASSERT_EQ(formatDuration(ns), wantDuration(ns)) << ns;
            ASSERT_EQ(formatDuration(-ns), "-" + wantDuration(ns)) << ns;
            ++checked;
            const uint64_t den = ns < 1000000 ? 1000 : ns < 1000000000 ? 1000000 : 1000000000;
            durationTies += tie(uint64_t(ns), den);
        }
    };
    durationsFrom(1000, 1000000, 1);                 // every µs value up to 1 ms
    durationsFrom(1000000, 100000, 5);               // ms, ties (x.xx5) included
    durationsFrom(9'990'000, 20000, 1);              // the 10 ms edge
    durationsFrom(99'900'000, 200000, 1);            // the 100 ms edge
    durationsFrom(1'000'000'000, 100000, 5000);      // s, ties included
    durationsFrom(9'995'000'000 - 100000, 200000, 1);
    durationsFrom(59'999'000'000, 1000, 1000);       // up to the minutes
    EXPECT_GT(checked, 2000000u);
    EXPECT_GT(byteTies, 400u);      // 494 in these ranges
    EXPECT_GT(durationTies, 2500u); // 2,803
    std::string row = "a,";
    appendBytes(row, 1536);
    row += ',';
    appendDuration(row, -12400);
    EXPECT_EQ(row, "a,1.50 KiB,-12.4 \xC2\xB5s");
}

TEST(Units, FormatBytesSigned) {
    EXPECT_EQ(formatBytesSigned(1 << 20), "+1.00 MiB");
    EXPECT_EQ(formatBytesSigned(-(32LL << 20)), "-32.0 MiB");
    EXPECT_EQ(formatBytesSigned(0), "+0 B");
    EXPECT_EQ(formatBytesSigned(INT64_MIN), "-8.00 EiB");
}

TEST(Units, FormatDuration) {
    EXPECT_EQ(formatDuration(0), "0 ns");
    EXPECT_EQ(formatDuration(850), "850 ns");
    EXPECT_EQ(formatDuration(12400), "12.4 \xC2\xB5s");
    EXPECT_EQ(formatDuration(3'200'000), "3.20 ms");
    EXPECT_EQ(formatDuration(1'250'000'000), "1.25 s");
    EXPECT_EQ(formatDuration(-850), "-850 ns");
    EXPECT_EQ(formatDuration(125LL * 1'000'000'000), "2 min 05 s");
}

TEST(Units, DurationsWithoutOverflow) {
    EXPECT_EQ(nsBetween(10, 25), 15);
    EXPECT_EQ(nsBetween(25, 10), -15);
    EXPECT_EQ(nsBetween(INT64_MIN + 1, INT64_MAX), INT64_MAX);  // saturated, not -2
    EXPECT_EQ(nsBetween(INT64_MAX, INT64_MIN), INT64_MIN);      // saturated, not 1
    EXPECT_EQ(nsBetween(INT64_MIN, INT64_MIN), 0);
    EXPECT_EQ(formatDuration(INT64_MIN), "-" + formatDuration(INT64_MAX)); // -INT64_MIN is UB
}

TEST(Units, FormatCount) {
    EXPECT_EQ(formatCount(0), "0");
    EXPECT_EQ(formatCount(999), "999");
    EXPECT_EQ(formatCount(1000), "1,000");
    EXPECT_EQ(formatCount(9'950'369), "9,950,369");
    EXPECT_EQ(formatCount(UINT64_MAX), "18,446,744,073,709,551,615");
}

TEST(Units, ParseBytes) {
    uint64_t v = 0;
    EXPECT_TRUE(parseBytes("4096", v));
    EXPECT_EQ(v, 4096u);
    EXPECT_TRUE(parseBytes("64MiB", v));
    EXPECT_EQ(v, 64ull << 20);
    EXPECT_TRUE(parseBytes("1.5 GB", v)); // binary units whatever the spelling
    EXPECT_EQ(v, 3ull << 29);
    EXPECT_TRUE(parseBytes(" 2k ", v));
    EXPECT_EQ(v, 2048u);
    EXPECT_TRUE(parseBytes("1 TiB", v));
    EXPECT_EQ(v, 1ull << 40);
    EXPECT_TRUE(parseBytes("max", v));
    EXPECT_EQ(v, UINT64_MAX);
    EXPECT_TRUE(parseBytes("MAX", v));
    for (const char* bad : {"", "abc", "-5", "12 parsecs", "1e400", "MiB", "20000000 TiB"})
        EXPECT_FALSE(parseBytes(bad, v)) << bad;
}

TEST(Units, FormatThenParseIsClose) {
    for (uint64_t b : {1ull, 1000ull, 123456ull, 7ull << 30, 3ull << 40}) {
        uint64_t back = 0;
        ASSERT_TRUE(parseBytes(formatBytes(b), back)) << formatBytes(b);
        EXPECT_NEAR(static_cast<double>(back), static_cast<double>(b), b * 0.01 + 1) << b;
    }
}

} // namespace
} // namespace poolscope

TEST(Units, FormatCuResult) {
    // Named with the number kept, so a user can search for either.
    EXPECT_EQ(poolscope::formatCuResult(2), "CUDA_ERROR_OUT_OF_MEMORY (2)");
    EXPECT_EQ(poolscope::formatCuResult(201), "CUDA_ERROR_INVALID_CONTEXT (201)");
    EXPECT_EQ(poolscope::formatCuResult(0), "CUDA_SUCCESS (0)");
    EXPECT_EQ(poolscope::formatCuResult(12345), "CUresult 12345");
    EXPECT_EQ(poolscope::formatCuResult(-1), "CUresult -1");
}

TEST(Units, ParseDuration) {
    int64_t ns = -1;
    struct Case {
        const char* text;
        int64_t ns;
    };
    for (const Case& c : {Case{"1.5s", 1'500'000'000}, Case{"  250 ms ", 250'000'000}, Case{"40us", 40'000},
                          Case{"40\xc2\xb5s", 40'000}, Case{"900ns", 900}, Case{"2min", 120'000'000'000},
                          Case{"1h", 3'600'000'000'000}, Case{"7", 7'000'000'000}, Case{"0", 0},
                          Case{".5", 500'000'000}, Case{"0.000000001s", 1}, Case{"1.000000001", 1'000'000'001},
                          Case{"3S", 3'000'000'000}, Case{"9223372036.854775807s", INT64_MAX},
                          Case{"9223372036854775807ns", INT64_MAX}}) {
        ns = -1;
        EXPECT_TRUE(poolscope::parseDuration(c.text, ns)) << c.text;
        EXPECT_EQ(ns, c.ns) << c.text;
    }
    for (const char* bad : {"", " ", "s", "-1s", "1.5x", "1..5s", "1e3s", "0.0000000001s", "0.5ns",
                            "9223372036.854775808s", "9223372036854775808ns", "99999999999999999999h",
                            "1 s s", "1m", "abc", "."}) {
        ns = 42;
        EXPECT_FALSE(poolscope::parseDuration(bad, ns)) << bad;
        EXPECT_EQ(ns, 42) << bad << ": unchanged on failure";
    }
}
