// Step series and their min/max downsampling. Series are columnar (t and v in separate vectors)
// because every query is a binary search on t followed by a scan of v; the per-block min/max
// summary turns the scan of a zoomed-out range into a walk over blocks.
#include <algorithm>

#include "HugeReserve.h"
#include "poolscope/Timeline.h"

namespace poolscope {

void Series::refreshLastBlock() {
    if (t.empty()) {
        blocks.clear();
        return;
    }
    const size_t b = (t.size() - 1) / kBlock;
    blocks.resize(b + 1);
    size_t lo = b * kBlock, hi = lo;
    for (size_t k = lo + 1; k < t.size(); ++k) {
        if (v[k] < v[lo]) lo = k;
        if (v[k] > v[hi]) hi = k;
    }
    blocks[b] = Block{v[lo], v[hi], static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)};
}

bool Series::capFrom(size_t from, uint64_t cap) {
    size_t first = from;
    while (first < v.size() && v[first] <= cap) ++first;
    if (first >= v.size()) return false;
    const bool summarised = blocks.size() == (t.size() + kBlock - 1) / kBlock;
    std::vector<int64_t> tt(t.begin() + static_cast<ptrdiff_t>(first), t.end());
    std::vector<uint64_t> vv(v.begin() + static_cast<ptrdiff_t>(first), v.end());
    t.resize(first);
    v.resize(first);
    if (summarised) {
        blocks.resize((first + kBlock - 1) / kBlock);
        if (first % kBlock != 0) refreshLastBlock();
    }
    for (size_t i = 0; i < tt.size(); ++i) {
        const uint64_t value = vv[i] < cap ? vv[i] : cap;
        if (!v.empty() && v.back() == value) continue;
        if (summarised)
            pushSlow(tt[i], value);
        else
            t.push_back(tt[i]), v.push_back(value);
    }
    return true;
}

void Series::pushSlow(int64_t ts, uint64_t value) {
    const bool summarised = blocks.size() == (t.size() + kBlock - 1) / kBlock;
    if (!t.empty()) {
        if (ts <= t.back()) {
            // Same instant (or a slightly earlier clock on another thread): the last word wins.
            v.back() = value;
            const size_t n = v.size();
            if (n >= 2 && v[n - 2] == value) {
                t.pop_back();
                v.pop_back();
            }
            if (summarised) refreshLastBlock();
            return;
        }
        if (v.back() == value) return;
    }
    t.push_back(ts);
    v.push_back(value);
    if (!summarised) return; // t/v were filled directly: no summary to keep up
    const size_t i = t.size() - 1;
    const auto idx = static_cast<uint32_t>(i);
    if (i % kBlock == 0) {
        blocks.push_back(Block{value, value, idx, idx});
    } else {
        Block& b = blocks.back();
        if (value < b.minV) b = Block{value, b.maxV, idx, b.maxI};
        if (value > b.maxV) b = Block{b.minV, value, b.minI, idx};
    }
}

void Series::reserve(size_t n) {
    detail::reserveHuge(t, n);
    detail::reserveHuge(v, n);
    detail::reserveHuge(blocks, n / kBlock + 1);
}

void Series::shrinkToFit() {
    t.shrink_to_fit();
    v.shrink_to_fit();
    blocks.shrink_to_fit();
}

void Series::minMaxIndex(size_t i, size_t j, size_t& lo, size_t& hi) const {
    lo = hi = i;
    auto scan = [&](size_t a, size_t b) {
        for (size_t k = a; k < b; ++k) {
            if (v[k] < v[lo]) lo = k;
            if (v[k] > v[hi]) hi = k;
        }
    };
    const bool summarised = blocks.size() == (t.size() + kBlock - 1) / kBlock;
    const size_t firstFull = (i + kBlock - 1) / kBlock; // first block starting at or after i
    const size_t endFull = j / kBlock;                  // blocks before this end by j
    if (!summarised || firstFull >= endFull) {
        scan(i + 1, j);
        return;
    }
    // Strict comparisons in time order keep the first occurrence, as the plain scan does.
    scan(i + 1, firstFull * kBlock);
    uint64_t loV = v[lo], hiV = v[hi];
    for (size_t b = firstFull; b < endFull; ++b) {
        const Block& k = blocks[b];
        if (k.minV < loV) {
            loV = k.minV;
            lo = k.minI;
        }
        if (k.maxV > hiV) {
            hiV = k.maxV;
            hi = k.maxI;
        }
    }
    scan(endFull * kBlock, j);
}

uint64_t Series::valueAt(int64_t ts) const {
    auto it = std::upper_bound(t.begin(), t.end(), ts);
    if (it == t.begin()) return 0;
    return v[static_cast<size_t>(it - t.begin()) - 1];
}

uint64_t Series::maxIn(int64_t t0, int64_t t1) const {
    uint64_t m = valueAt(t0);
    if (t1 <= t0) return m;
    auto b = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), t0) - t.begin());
    auto e = static_cast<size_t>(std::lower_bound(t.begin(), t.end(), t1) - t.begin());
    if (b < e) {
        size_t lo, hi;
        minMaxIndex(b, e, lo, hi);
        m = std::max(m, v[hi]);
    }
    return m;
}

uint64_t Series::max() const {
    if (v.empty()) return 0;
    size_t lo, hi;
    minMaxIndex(0, v.size(), lo, hi);
    return v[hi];
}

size_t downsampleBuckets(size_t maxPoints) { return (std::max<size_t>(maxPoints, 4) - 1) / 2; }

std::vector<Point> downsample(const Series& s, int64_t t0, int64_t t1, size_t maxPoints) {
    std::vector<Point> out;
    if (s.empty() || t1 <= t0) return out;
    const size_t buckets = downsampleBuckets(maxPoints);
    out.reserve(1 + 2 * buckets);
    out.push_back({t0, s.valueAt(t0)});

    // Bucket width rounded up so `buckets` of them cover [t0, t1); unsigned maths because the
    // span of two int64 times may not fit an int64.
    const uint64_t span = static_cast<uint64_t>(t1) - static_cast<uint64_t>(t0);
    const uint64_t width = std::max<uint64_t>(1, span / buckets + (span % buckets != 0));

    const auto tb = s.t.begin();
    // Points strictly after t0: the one at t0 (if any) is the value in force, emitted above.
    size_t i = static_cast<size_t>(std::upper_bound(tb, s.t.end(), t0) - tb);
    const size_t end = static_cast<size_t>(std::lower_bound(tb, s.t.end(), t1) - tb);
    while (i < end) {
        // The bucket holding point i; empty buckets are skipped, not walked.
        const uint64_t b = (static_cast<uint64_t>(s.t[i]) - static_cast<uint64_t>(t0)) / width;
        const uint64_t bEndOff = (b + 1) * width;
        size_t j = end;
        if (bEndOff < span) {
            const auto bEnd = static_cast<int64_t>(static_cast<uint64_t>(t0) + bEndOff);
            j = static_cast<size_t>(std::lower_bound(tb + static_cast<ptrdiff_t>(i),
                                                     tb + static_cast<ptrdiff_t>(end), bEnd) -
                                    tb);
        }
        size_t lo, hi;
        s.minMaxIndex(i, j, lo, hi);
        if (lo == hi) {
            out.push_back({s.t[lo], s.v[lo]});
        } else {
            const size_t a = std::min(lo, hi), c = std::max(lo, hi);
            out.push_back({s.t[a], s.v[a]});
            out.push_back({s.t[c], s.v[c]});
        }
        i = j;
    }
    return out;
}

} // namespace poolscope
