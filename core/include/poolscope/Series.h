#pragma once
// Step series in columnar form, and their downsampling for drawing: the storage every watermark
// and live-bytes curve of a Timeline uses.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace poolscope {

// A step series in columnar form (fast range scans): value v[i] holds from t[i] until t[i+1].
// t is strictly increasing and no two consecutive points hold the same value (push() keeps
// both true), so a watermark read at every event costs memory only when it changes.
// Build it with push() only: push() also maintains a min/max summary per block of kBlock
// points, which lets downsample() cross a zoomed-out range of millions of points in
// O(buckets x (kBlock + blocks per bucket)) instead of touching every point. (A series whose
// t/v were filled directly still works; it is just scanned point by point.)
struct Series {
    static constexpr size_t kBlock = 64;
    struct Block {         // values inline so a walk over blocks reads one contiguous array
        uint64_t minV, maxV;
        uint32_t minI, maxI; // indices of the block's first minimum and first maximum
    };
    std::vector<int64_t> t;
    std::vector<uint64_t> v;
    std::vector<Block> blocks;
    size_t size() const { return t.size(); }
    bool empty() const { return t.empty(); }
    // Appends a step. Equal timestamps keep the last value; a timestamp earlier than the last
    // point (threads' clocks interleave slightly in seq order) is treated as equal to it; a
    // value equal to the one in force adds nothing.
    void push(int64_t ts, uint64_t value); // inline below: called at nearly every event
    uint64_t valueAt(int64_t ts) const;        // the step value at ts (0 before the first point)
    uint64_t maxIn(int64_t t0, int64_t t1) const; // max value in force anywhere in [t0, t1)
    uint64_t max() const;                      // max over all points (0 when empty)
    // Indices of the first minimum and first maximum among points [i, j) (i < j).
    void minMaxIndex(size_t i, size_t j, size_t& lo, size_t& hi) const;
    // Lowers every value of points [from, size()) above cap to cap (keeping the series' rules:
    // equal neighbours merge). Returns whether anything changed. For a bound learnt after the
    // points were pushed (a driver high watermark read later).
    bool capFrom(size_t from, uint64_t cap);
    void shrinkToFit(); // after the last push, return growth slack to the allocator
    // Room for n points in one allocation per column (huge pages where available), for a
    // builder that knows an upper bound: no copies while growing, and the unwritten rest of
    // the reservation is never faulted in.
    void reserve(size_t n);

private:
    void pushSlow(int64_t ts, uint64_t value);
    void refreshLastBlock();
};

inline void Series::push(int64_t ts, uint64_t value) {
    // Fast path: a later time, a new value, inside the current (summarised) block.
    const size_t n = t.size();
    if (n != 0 && ts > t.back()) [[likely]] {
        if (v.back() == value) return;
        if (n % kBlock != 0 && blocks.size() == n / kBlock + 1) {
            t.push_back(ts);
            v.push_back(value);
            Block& b = blocks.back();
            const auto idx = static_cast<uint32_t>(n);
            if (value < b.minV) {
                b.minV = value;
                b.minI = idx;
            } else if (value > b.maxV) {
                b.maxV = value;
                b.maxI = idx;
            }
            return;
        }
    }
    pushSlow(ts, value);
}

struct Point {
    int64_t t;
    uint64_t v;
};

// At most maxPoints points covering [t0, t1): the value in force at t0 (at t0), then [t0, t1) is
// cut into downsampleBuckets(maxPoints) equal buckets (the last may be shorter) and each bucket
// contributes the points holding its min and its max, in time order (one point when they are
// the same). A peak inside a bucket is therefore never hidden. maxPoints below 4 counts as 4.
// Cost: O(points in range); empty result when t1 <= t0 or the series is empty.
std::vector<Point> downsample(const Series& s, int64_t t0, int64_t t1, size_t maxPoints);
size_t downsampleBuckets(size_t maxPoints); // (max(maxPoints, 4) - 1) / 2

} // namespace poolscope
