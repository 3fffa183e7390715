#include <gtest/gtest.h>

#include <climits>

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
