// Series semantics and the downsampling guarantee: whatever the range and the point budget, the
// output never hides a peak (or a trough) that a brute-force scan finds in each bucket.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "poolscope/Timeline.h"

namespace poolscope {
namespace {

TEST(Series, PushKeepsStepsCompact) {
    Series s;
    s.push(10, 5);
    s.push(20, 5); // same value: no new point
    s.push(30, 7);
    s.push(30, 9); // same instant: last value wins
    s.push(25, 4); // earlier clock (another thread): treated as the same instant
    s.push(40, 4);
    EXPECT_EQ(s.t, (std::vector<int64_t>{10, 30}));
    EXPECT_EQ(s.v, (std::vector<uint64_t>{5, 4}));
    s.push(40, 5); // back to the previous value at the same instant: the step disappears
    EXPECT_EQ(s.t, (std::vector<int64_t>{10, 30, 40}));
    EXPECT_EQ(s.v, (std::vector<uint64_t>{5, 4, 5}));
    s.push(40, 4);
    EXPECT_EQ(s.t, (std::vector<int64_t>{10, 30}));
    EXPECT_EQ(s.valueAt(9), 0u);
    EXPECT_EQ(s.valueAt(10), 5u);
    EXPECT_EQ(s.valueAt(29), 5u);
    EXPECT_EQ(s.valueAt(1000), 4u);
    EXPECT_EQ(s.maxIn(0, 10), 0u);
    EXPECT_EQ(s.maxIn(0, 11), 5u);
    EXPECT_EQ(s.maxIn(30, 31), 4u);
    EXPECT_EQ(s.max(), 5u);
}

TEST(Downsample, EmptyAndDegenerate) {
    Series s;
    EXPECT_TRUE(downsample(s, 0, 100, 10).empty());
    s.push(5, 1);
    EXPECT_TRUE(downsample(s, 100, 100, 10).empty());
    auto one = downsample(s, 0, 100, 1); // below 4 counts as 4
    ASSERT_EQ(one.size(), 2u);
    EXPECT_EQ(one[0].t, 0);
    EXPECT_EQ(one[0].v, 0u);
    EXPECT_EQ(one[1].t, 5);
    EXPECT_EQ(one[1].v, 1u);
    auto before = downsample(s, 10, 20, 10); // only the value in force
    ASSERT_EQ(before.size(), 1u);
    EXPECT_EQ(before[0].v, 1u);
}

TEST(Downsample, ASinglePeakSurvivesAHugeBucket) {
    Series s;
    for (int64_t i = 0; i < 100000; ++i) s.push(i, i == 61234 ? 1000000 : static_cast<uint64_t>(i % 7));
    auto pts = downsample(s, 0, 100000, 4);
    ASSERT_LE(pts.size(), 4u);
    uint64_t m = 0;
    for (const Point& p : pts) m = std::max(m, p.v);
    EXPECT_EQ(m, 1000000u);
}

// Brute force over the raw points, independent of Series' own helpers.
struct Brute {
    const Series& s;
    uint64_t at(int64_t ts) const {
        uint64_t v = 0;
        for (size_t i = 0; i < s.size() && s.t[i] <= ts; ++i) v = s.v[i];
        return v;
    }
    // Min/max over points with a < t < b (strictly after a: the point at a is the carried-in).
    bool range(int64_t a, int64_t b, bool inclusiveA, uint64_t& lo, uint64_t& hi) const {
        bool any = false;
        for (size_t i = 0; i < s.size(); ++i) {
            if (s.t[i] < a || s.t[i] >= b || (!inclusiveA && s.t[i] == a)) continue;
            lo = any ? std::min(lo, s.v[i]) : s.v[i];
            hi = any ? std::max(hi, s.v[i]) : s.v[i];
            any = true;
        }
        return any;
    }
};

TEST(Downsample, NeverDropsAPeakRandomised) {
    std::mt19937_64 rng(12345);
    for (int round = 0; round < 400; ++round) {
        SCOPED_TRACE("round " + std::to_string(round));
        Series s;
        const int n = static_cast<int>(rng() % 3000);
        int64_t t = static_cast<int64_t>(rng() % 1000) - 500;
        // Bursty timestamps (many close together, some gaps) and spiky values.
        for (int i = 0; i < n; ++i) {
            t += rng() % 8 == 0 ? static_cast<int64_t>(rng() % 10000) : static_cast<int64_t>(rng() % 3);
            const uint64_t v = rng() % 50 == 0 ? rng() % 1000000 : rng() % 1000;
            s.push(t, v);
        }
        const Brute brute{s};
        const int64_t lo = -1000, hi = t + 1000;
        int64_t t0 = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo));
        int64_t t1 = t0 + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - t0));
        if (round % 10 == 0) { // the whole series
            t0 = lo;
            t1 = hi;
        }
        const size_t maxPoints = 4 + rng() % 300;
        const auto pts = downsample(s, t0, t1, maxPoints);
        if (s.empty()) {
            EXPECT_TRUE(pts.empty());
            continue;
        }
        ASSERT_FALSE(pts.empty());
        ASSERT_LE(pts.size(), maxPoints);
        EXPECT_EQ(pts[0].t, t0);
        EXPECT_EQ(pts[0].v, brute.at(t0));
        uint64_t outMax = 0;
        for (size_t i = 0; i < pts.size(); ++i) {
            EXPECT_GE(pts[i].t, t0);
            EXPECT_LT(pts[i].t, t1);
            if (i) {
                EXPECT_LT(pts[i - 1].t, pts[i].t) << "points in time order";
            }
            EXPECT_EQ(pts[i].v, brute.at(pts[i].t)) << "every point is a real value";
            outMax = std::max(outMax, pts[i].v);
        }
        // The peak of the whole range, including the value in force at t0.
        uint64_t bl = 0, bh = 0;
        uint64_t expectMax = brute.at(t0);
        if (brute.range(t0, t1, false, bl, bh)) expectMax = std::max(expectMax, bh);
        EXPECT_EQ(outMax, expectMax);
        EXPECT_EQ(s.maxIn(t0, t1), expectMax);

        // And per bucket: the bucket's own min and max are among its output points.
        const size_t buckets = downsampleBuckets(maxPoints);
        const uint64_t span = static_cast<uint64_t>(t1 - t0);
        const uint64_t width = (span + buckets - 1) / buckets;
        for (size_t k = 0; k < buckets; ++k) {
            const int64_t a = t0 + static_cast<int64_t>(k * width);
            if (a >= t1) break;
            const int64_t b = std::min<int64_t>(t1, a + static_cast<int64_t>(width));
            uint64_t mn = 0, mx = 0;
            if (!brute.range(a, b, k != 0, mn, mx)) continue;
            uint64_t omn = UINT64_MAX, omx = 0;
            for (size_t i = 1; i < pts.size(); ++i)
                if (pts[i].t >= a && pts[i].t < b) {
                    omn = std::min(omn, pts[i].v);
                    omx = std::max(omx, pts[i].v);
                }
            EXPECT_EQ(omx, mx) << "bucket " << k;
            EXPECT_EQ(omn, mn) << "bucket " << k;
        }
    }
}

TEST(Downsample, BlockSummaryAgreesWithAPlainScan) {
    // The same points pushed (with the per-block summary) and filled directly (scanned point by
    // point) must downsample identically, including which of equal extremes is picked.
    std::mt19937_64 rng(99);
    for (int round = 0; round < 50; ++round) {
        Series pushed;
        int64_t t = 0;
        const int n = 1 + static_cast<int>(rng() % 20000);
        for (int i = 0; i < n; ++i) {
            t += static_cast<int64_t>(rng() % 4); // repeats exercise the same-instant rewrite
            pushed.push(t, rng() % 16);           // few values: many ties
        }
        ASSERT_EQ(pushed.blocks.size(), (pushed.size() + Series::kBlock - 1) / Series::kBlock);
        Series plain;
        plain.t = pushed.t;
        plain.v = pushed.v;
        for (int q = 0; q < 20; ++q) {
            const int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(t + 2)) - 1;
            const int64_t b = a + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t + 2));
            const size_t m = 4 + rng() % 100;
            const auto x = downsample(pushed, a, b, m);
            const auto y = downsample(plain, a, b, m);
            ASSERT_EQ(x.size(), y.size());
            for (size_t i = 0; i < x.size(); ++i) {
                EXPECT_EQ(x[i].t, y[i].t);
                EXPECT_EQ(x[i].v, y[i].v);
            }
            EXPECT_EQ(pushed.maxIn(a, b), plain.maxIn(a, b));
        }
        EXPECT_EQ(pushed.max(), plain.max());
    }
}

} // namespace
} // namespace poolscope
