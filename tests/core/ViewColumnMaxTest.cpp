// Pixel-column maxima of step series (poolscope/view/ColumnMax.h) against a brute-force scan.
#include "poolscope/view/ColumnMax.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>

namespace poolscope {
namespace {

std::vector<int64_t> blockTimes(const Series& s) {
    std::vector<int64_t> bt;
    for (size_t i = 0; i < s.size(); i += Series::kBlock)
        bt.push_back(s.t[i]);
    return bt;
}

// The value in force at ta (the last point before it) and every point in [ta, tb); -1 outside
// [first point, tEnd) or where no point is in force.
std::vector<double> bruteForce(const Series& s, const std::vector<int64_t>& e, int64_t tEnd) {
    std::vector<double> out;
    for (size_t c = 0; c + 1 < e.size(); ++c) {
        const int64_t ta = e[c], tb = e[c + 1];
        double m = -1;
        if (tb > s.t.front() && ta < tEnd)
            for (size_t i = 0; i < s.size(); ++i) {
                const bool inForceAtTa = s.t[i] < ta && (i + 1 == s.size() || s.t[i + 1] >= ta);
                if (inForceAtTa || (s.t[i] >= ta && s.t[i] < tb)) m = std::max(m, double(s.v[i]));
            }
        out.push_back(m);
    }
    return out;
}

TEST(ViewColumnMax, HandWorkedColumns) {
    Series s;
    s.push(10, 5);
    s.push(20, 9);
    s.push(30, 2);
    const std::vector<int64_t> e{0, 10, 15, 25, 40, 50};
    for (size_t minPoints : {size_t(0), SIZE_MAX}) {
        std::vector<double> got;
        view::columnMaxima(s, blockTimes(s), e, 35, minPoints, got);
        EXPECT_EQ(got, (std::vector<double>{-1, 5, 9, 9, -1})) << minPoints;
    }
}

TEST(ViewColumnMax, BothScansEqualBruteForce) {
    std::mt19937_64 rng(7);
    Series s;
    int64_t t = 1000;
    for (int i = 0; i < 20000; ++i) {
        t += 1 + int64_t(rng() % 50);
        s.push(t, rng() % 1000000);
    }
    ASSERT_EQ(s.blocks.size(), (s.size() + Series::kBlock - 1) / Series::kBlock);
    const int64_t tEnd = s.t.back() + 500;
    const std::vector<int64_t> bt = blockTimes(s);
    // Zoomed out (hundreds of points per column), zoomed in (columns narrower than a point's
    // spacing), and a view reaching past both ends of the series.
    for (auto [from, to, W] : {std::tuple<int64_t, int64_t, int>{0, tEnd + 2000, 97},
                               {s.t[5000], s.t[5100], 800},
                               {s.t[100] - 3, s.t[100] + 3000, 311}}) {
        std::vector<int64_t> e;
        for (int c = 0; c <= W; ++c)
            e.push_back(from + (to - from) * c / W);
        const std::vector<double> want = bruteForce(s, e, tEnd);
        std::vector<double> blockScan, plainScan;
        view::columnMaxima(s, bt, e, tEnd, 0, blockScan);
        view::columnMaxima(s, bt, e, tEnd, SIZE_MAX, plainScan);
        EXPECT_EQ(blockScan, want) << from << ".." << to;
        EXPECT_EQ(plainScan, want) << from << ".." << to;
        // Without block times (or summaries) the plain scan still answers.
        std::vector<double> noBlocks;
        view::columnMaxima(s, {}, e, tEnd, 0, noBlocks);
        EXPECT_EQ(noBlocks, want);
    }
}

TEST(ViewColumnMax, SummarisedMaxEqualsPlainMax) {
    std::mt19937_64 rng(11);
    Series s;
    for (int i = 0; i < 1000; ++i)
        s.push(i * 10, rng() % 5000);
    for (size_t i = 0; i < s.size(); i += 13)
        for (size_t j = i; j <= s.size(); j += 29) {
            uint64_t want = 3;
            for (size_t k = i; k < j; ++k)
                want = std::max(want, s.v[k]);
            ASSERT_EQ(view::summarisedMax(s, i, j, 3), want) << i << " " << j;
        }
}

} // namespace
} // namespace poolscope
