#include "poolscope/view/ColumnMax.h"

#include <algorithm>

namespace poolscope::view {

namespace {

uint64_t plainMax(const uint64_t* v, size_t i, size_t j) {
    uint64_t m = 0;
    for (; i < j; ++i)
        m = std::max(m, v[i]);
    return m;
}

// The highest value in force anywhere in [ta, tb), given i = the first point with t >= ta
// (advanced past [ta, tb) on return); -1 when nothing is in force there.
double columnMax(const Series& s, size_t& i, int64_t tb, bool summarised) {
    const size_t n = s.size();
    // The value in force at ta: the last point before it (none: nothing drawn before it).
    const bool any = i > 0;
    uint64_t m = any ? s.v[i - 1] : 0;
    size_t j = i;
    // Gallop to the first point at or after tb.
    if (j < n && s.t[j] < tb) {
        size_t step = 1, lo = j;
        while (lo + step < n && s.t[lo + step] < tb) {
            lo += step;
            step *= 2;
        }
        j = size_t(std::lower_bound(s.t.begin() + ptrdiff_t(lo),
                                    s.t.begin() + ptrdiff_t(std::min(n, lo + step + 1)), tb) -
                   s.t.begin());
    }
    if (j == i && !any) return -1.0;
    m = summarised ? summarisedMax(s, i, j, m) : std::max(m, plainMax(s.v.data(), i, j));
    i = j;
    return double(m);
}

// Branchless lower_bound over [first, first + len): the searches of many columns are
// independent, and without a branch to mispredict the CPU overlaps their cache misses.
size_t lowerBoundIn(const int64_t* first, size_t len, int64_t x) {
    if (len == 0) return 0;
    const int64_t* b = first;
    while (len > 1) {
        const size_t half = len / 2;
        b = b[half - 1] < x ? b + half : b;
        len -= half;
    }
    return size_t(b - first) + (*b < x);
}

// columnMax for every column at once, found in passes (block of each boundary, then the point
// inside its block, then the maxima) so that each pass's memory reads are independent of each
// other and prefetched a few columns ahead.
void columnMaxes(const Series& s, const std::vector<int64_t>& blockT, const std::vector<int64_t>& e,
                 int64_t tEnd, std::vector<double>& colMax) {
    constexpr size_t K = Series::kBlock;
    const size_t n = s.size(), B = blockT.size(), W = e.size() - 1;
    const int64_t* t = s.t.data();
    const uint64_t* v = s.v.data();
    // idx[q]: the first point with t >= e[q].
    std::vector<size_t> blk(W + 1), idx(W + 1);
    size_t b = 0;
    for (size_t q = 0; q <= W; ++q) {
        // First block whose first point is at or after e[q] (boundaries increase: walk on).
        size_t step = 1;
        while (b < B && blockT[b] < e[q]) {
            if (b + step < B && blockT[b + step] < e[q]) {
                b += step;
                step *= 2;
            } else {
                ++b;
                step = 1;
            }
        }
        blk[q] = b;
    }
    constexpr size_t D = 6; // prefetch distance, in columns
    auto range = [&](size_t bq, size_t& from, size_t& len) {
        // t[(bq - 1) * K] < e <= t[bq * K]: the answer is in ((bq - 1) * K, bq * K].
        from = bq == 0 ? 0 : (bq - 1) * K + 1;
        const size_t to = bq == 0 ? 0 : bq < B ? bq * K : n;
        len = to - from;
    };
    for (size_t q = 0; q <= W; ++q) {
        if (q + D <= W) {
            size_t f, l;
            range(blk[q + D], f, l);
            for (size_t o = 0; o < l; o += 8)
                __builtin_prefetch(t + f + o);
        }
        size_t from, len;
        range(blk[q], from, len);
        idx[q] = from + lowerBoundIn(t + from, len, e[q]);
    }
    for (size_t c = 0; c < W; ++c) {
        if (c + D < W) {
            const size_t i2 = idx[c + D];
            __builtin_prefetch(v + (i2 > 0 ? i2 - 1 : 0));
            __builtin_prefetch(&s.blocks[std::min(B - 1, (i2 + K - 1) / K)]);
            __builtin_prefetch(v + std::min(n - 1, idx[c + D + 1] / K * K));
        }
        const int64_t ta = e[c], tb = e[c + 1];
        if (!(tb > t[0] && ta < tEnd)) continue; // outside the series: nothing drawn
        const size_t i = idx[c], j = idx[c + 1];
        if (j == i && i == 0) continue;
        colMax[c] = double(summarisedMax(s, i, j, i > 0 ? v[i - 1] : 0));
    }
}

} // namespace

uint64_t summarisedMax(const Series& s, size_t i, size_t j, uint64_t m) {
    const size_t K = Series::kBlock;
    const size_t firstFull = (i + K - 1) / K, endFull = j / K;
    if (firstFull < endFull) {
        m = std::max(m, plainMax(s.v.data(), i, firstFull * K));
        for (size_t b = firstFull; b < endFull; ++b)
            m = std::max(m, s.blocks[b].maxV);
        i = endFull * K;
    }
    return std::max(m, plainMax(s.v.data(), i, j));
}

void columnMaxima(const Series& s, const std::vector<int64_t>& blockT,
                  const std::vector<int64_t>& e, int64_t tEnd, size_t blockScanMinPoints,
                  std::vector<double>& colMax) {
    const size_t W = e.empty() ? 0 : e.size() - 1;
    colMax.assign(W, -1.0);
    if (W == 0 || s.empty()) return;
    const bool summarised = s.blocks.size() == (s.size() + Series::kBlock - 1) / Series::kBlock;
    // Columns of many points each (zoomed out): every column's boundaries searched through the
    // block times, then the maxima, in passes. With a few points per column the plain scan is
    // cheaper.
    auto pointsIn = [&](int64_t a, int64_t b) {
        return size_t(std::lower_bound(s.t.begin(), s.t.end(), b) -
                      std::lower_bound(s.t.begin(), s.t.end(), a));
    };
    if (summarised && blockT.size() == s.blocks.size() &&
        pointsIn(e.front(), e.back()) >= blockScanMinPoints * W) {
        columnMaxes(s, blockT, e, tEnd, colMax);
        return;
    }
    int64_t ta = e.front();
    size_t i = size_t(std::lower_bound(s.t.begin(), s.t.end(), ta) - s.t.begin());
    for (size_t c = 0; c < W; ++c) {
        const int64_t tb = e[c + 1];
        // Outside the trace (or before the series starts) nothing is drawn.
        if (tb > s.t.front() && ta < tEnd)
            colMax[c] = columnMax(s, i, tb, summarised);
        else if (ta < tEnd)
            i = size_t(std::lower_bound(s.t.begin(), s.t.end(), tb) - s.t.begin());
        ta = tb;
    }
}

} // namespace poolscope::view
