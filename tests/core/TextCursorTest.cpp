// TextCursor and writeDecimal (poolscope/TextCursor.h), which `dump` and the CSV export write
// every row through: the same text as std::to_chars and as appending field by field.
#include <gtest/gtest.h>

#include <charconv>
#include <limits>
#include <random>
#include <string>

#include "poolscope/EventCsv.h"
#include "poolscope/EventJson.h"
#include "poolscope/TextCursor.h"
#include "poolscope/Units.h"

namespace poolscope {
namespace {

template <class T> std::string viaToChars(T v) {
    char buf[24];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

template <class T> std::string viaWriteDecimal(T v) {
    char buf[24];
    return std::string(buf, writeDecimal(buf, v));
}

// Every power of ten and its neighbours (where the groups of eight digits split), the ends of
// both types, and values of every length at random.
TEST(TextCursor, WriteDecimalIsToChars) {
    std::vector<uint64_t> values = {0, 1, 9, std::numeric_limits<uint64_t>::max(),
                                    std::numeric_limits<uint64_t>::max() - 1};
    for (uint64_t p = 1;; p *= 10) {
        for (uint64_t d : {uint64_t{0}, uint64_t{1}, uint64_t{2}}) values.push_back(p - d), values.push_back(p + d);
        for (uint64_t k = 2; k <= 9; ++k)
            if (p <= std::numeric_limits<uint64_t>::max() / k) values.push_back(p * k - 1);
        if (p > std::numeric_limits<uint64_t>::max() / 10) break;
    }
    std::mt19937_64 rng(3);
    for (int i = 0; i < 200000; ++i) values.push_back(rng() >> (rng() % 64));
    size_t longest = 0, checked = 0;
    for (uint64_t v : values) {
        ASSERT_EQ(viaWriteDecimal(v), viaToChars(v)) << v;
        const int64_t s = static_cast<int64_t>(v);
        ASSERT_EQ(viaWriteDecimal(s), viaToChars(s)) << s;
        ASSERT_EQ(viaWriteDecimal(-(s >> 1)), viaToChars(-(s >> 1))) << s;
        longest = std::max(longest, viaWriteDecimal(v).size());
        ++checked;
    }
    for (int64_t s : {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::min() + 1,
                      std::numeric_limits<int64_t>::max(), int64_t{-1}, int64_t{-100000000}})
        EXPECT_EQ(viaWriteDecimal(s), viaToChars(s)) << s;
    EXPECT_EQ(longest, 20u);
    EXPECT_GT(checked, 200000u);
}

// Rows through one cursor whose steps are far shorter than the text (so that it grows again and
// again, mid-row too), against the same fields appended one by one; the text already in the
// string stays, and the string ends where the text does.
TEST(TextCursor, ManyRowsThroughSmallStepsAreTheAppendedText) {
    std::mt19937_64 rng(5);
    const std::string before = "header,line\n";
    std::string viaCursor = before, expected = before;
    {
        TextCursor c(viaCursor, 64);
        for (int row = 0; row < 20000; ++row) {
            const uint64_t a = rng() >> (rng() % 64);
            const int64_t t = static_cast<int64_t>(rng()) >> (rng() % 64);
            const std::string field = row % 7 == 0 ? "with, comma \"quoted\"" : row % 3 ? "plain" : "";
            const std::string quoted = row % 7 == 0 ? "\"with, comma \"\"quoted\"\"\"" : field; // RFC 4180
            c.number(a);
            c.put(',');
            c.number(t);
            c.lit(",x,");
            c.number(static_cast<uint32_t>(a));
            c.put(',');
            c.hex(a);
            c.put(',');
            c.bytes(a);
            c.put(',');
            c.duration(t);
            c.put(',');
            c.csvField(field);
            c.put(std::string(static_cast<size_t>(row % 300), 'z')); // longer than a step
            c.put('\n');

            expected += viaToChars(a) + "," + viaToChars(t) + ",x," + viaToChars(static_cast<uint32_t>(a)) + ",";
            char hex[24] = {'0', 'x'};
            expected.append(hex, std::to_chars(hex + 2, hex + sizeof hex, a, 16).ptr);
            expected += "," + formatBytes(a) + "," + formatDuration(t) + ",";
            expected += quoted;
            expected += std::string(static_cast<size_t>(row % 300), 'z') + "\n";
        }
    }
    EXPECT_EQ(viaCursor.size(), expected.size());
    EXPECT_TRUE(viaCursor == expected);
    EXPECT_EQ(viaCursor.compare(0, before.size(), before), 0);
}

} // namespace
} // namespace poolscope
