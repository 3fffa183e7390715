// Step series and their min/max downsampling. Series are columnar (t and v in separate vectors)
// because every query is a binary search on t followed by a scan of v.
#include <algorithm>

#include "poolscope/Timeline.h"

namespace poolscope {

void Series::push(int64_t ts, uint64_t value) {
    if (!t.empty()) {
        if (ts <= t.back()) {
            // Same instant (or a slightly earlier clock on another thread): the last word wins.
            v.back() = value;
            const size_t n = v.size();
            if (n >= 2 && v[n - 2] == value) {
                t.pop_back();
                v.pop_back();
            }
            return;
        }
        if (v.back() == value) return;
    }
    t.push_back(ts);
    v.push_back(value);
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
    for (size_t i = b; i < e; ++i) m = std::max(m, v[i]);
    return m;
}

uint64_t Series::max() const {
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
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

    const int64_t* t = s.t.data();
    const uint64_t* v = s.v.data();
    // Points strictly after t0: the one at t0 (if any) is the value in force, emitted above.
    size_t i = static_cast<size_t>(std::upper_bound(s.t.begin(), s.t.end(), t0) - s.t.begin());
    const size_t end =
        static_cast<size_t>(std::lower_bound(s.t.begin(), s.t.end(), t1) - s.t.begin());
    while (i < end) {
        // The bucket holding point i; empty buckets are skipped, not walked.
        const uint64_t b = (static_cast<uint64_t>(t[i]) - static_cast<uint64_t>(t0)) / width;
        const uint64_t bEndOff = (b + 1) * width;
        const size_t j =
            bEndOff >= span
                ? end
                : static_cast<size_t>(std::lower_bound(s.t.begin() + static_cast<ptrdiff_t>(i),
                                                       s.t.begin() + static_cast<ptrdiff_t>(end),
                                                       static_cast<int64_t>(
                                                           static_cast<uint64_t>(t0) + bEndOff)) -
                                      s.t.begin());
        size_t lo = i, hi = i;
        for (size_t k = i + 1; k < j; ++k) {
            if (v[k] < v[lo]) lo = k;
            if (v[k] > v[hi]) hi = k;
        }
        if (lo == hi) {
            out.push_back({t[lo], v[lo]});
        } else {
            const size_t a = std::min(lo, hi), c = std::max(lo, hi);
            out.push_back({t[a], v[a]});
            out.push_back({t[c], v[c]});
        }
        i = j;
    }
    return out;
}

} // namespace poolscope
