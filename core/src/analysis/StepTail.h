#pragma once
// A step series kept only at its newest end, for the streaming report (issue #15): the same rules
// as Series::push, and for a pool's `used` those of the Timeline builder's Series::capFrom at each
// driver high watermark, so the points it hands out are exactly those the Timeline's series would
// hold once built. Internal to core.
//
// Series::push may change the newest point (a timestamp not later than it replaces its value,
// and an equal neighbour then merges away), so points stay here until the caller's time frontier
// has passed them: a later event with a timestamp before the frontier is one that came more than
// the frontier's lag out of time order, and is the only kind that could need a point already
// handed out (push() returns false then). Capping: a pool's `used` points since its last sample
// with high watermarks are lowered to the next such sample's UsedMemHigh. That sample is known
// ahead (samples are read before the events), so points handed out before it arrives are capped
// with it already (setCapAhead).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace poolscope::detail {

// A queue in one vector used as a circle (points are added at the back, handed out from the
// front): no allocation per block as std::deque has, and nothing moved when the front goes.
template <class T> class Ring {
public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    T& operator[](size_t i) { return v_[(head_ + i) & mask_]; }
    const T& operator[](size_t i) const { return v_[(head_ + i) & mask_]; }
    T& back() { return (*this)[size_ - 1]; }
    const T& back() const { return (*this)[size_ - 1]; }
    void push_back(const T& x) {
        if (size_ == v_.size()) [[unlikely]]
            grow();
        v_[(head_ + size_) & mask_] = x;
        ++size_;
    }
    void pop_back() { --size_; }
    void drop_front(size_t n) {
        head_ = (head_ + n) & mask_;
        size_ -= n;
    }
    void truncate(size_t n) { size_ = n; }

private:
    void grow() {
        std::vector<T> w(v_.empty() ? 16 : 2 * v_.size());
        for (size_t i = 0; i < size_; ++i) w[i] = (*this)[i];
        v_.swap(w);
        head_ = 0;
        mask_ = v_.size() - 1;
    }
    std::vector<T> v_; // a power of two long
    size_t head_ = 0, size_ = 0, mask_ = 0;
};

class StepTail {
public:
    // Series::push(ts, value). False when the push would have changed a point already handed
    // out (the value is then appended as a new step just after that point instead), or added a
    // point before `merged`, the instant up to which the caller has used the points.
    bool push(int64_t ts, uint64_t value, int64_t merged = INT64_MIN) {
        if (!win_.empty()) {
            Pt& b = win_.back();
            if (ts > b.t) {
                if (b.v == value) return true;
                append(ts, value);
                return ts >= merged;
            }
            b.v = value; // the same instant, or a slightly earlier clock: the last word wins
            const uint64_t before = win_.size() >= 2 ? win_[win_.size() - 2].v : outRaw_;
            if ((win_.size() >= 2 || anyOut_) && before == value) {
                win_.pop_back();
                --size_;
            }
            return true;
        }
        if (!anyOut_ || ts > outT_) {
            if (anyOut_ && outRaw_ == value) return true;
            append(ts, value);
            return ts >= merged;
        }
        if (outRaw_ == value) return true; // what Series::push would do changes nothing
        append(outT_ + 1, value);
        return false;
    }

    // How many points emitBefore(frontier, all) would take from the window (an upper bound on
    // what it hands out: capped points may merge away). The window's times only rise.
    size_t dueBefore(int64_t frontier, bool all) const {
        if (all) return win_.size();
        size_t lo = 0, hi = win_.size();
        while (lo < hi) {
            const size_t mid = (lo + hi) / 2;
            if (win_[mid].t < frontier) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }

    // Hands the points older than `frontier` (or all) to sink(t, v), oldest first. Capped points that merge with the one before are not handed out.
    template <class Sink> void emitBefore(int64_t frontier, bool all, Sink&& sink) {
        const size_t n = win_.size();
        size_t i = 0;
        for (; i < n && (all || win_[i].t < frontier); ++i) {
            const Pt p = win_[i];
            uint64_t v = p.v;
            if (p.eligible && capAhead_) v = std::min(v, *capAhead_);
            outRaw_ = p.v;
            outT_ = p.t;
            if (anyOut_ && v == outV_) continue; // capFrom will merge it into the one before
            anyOut_ = true;
            outV_ = v;
            outKeptT_ = p.t;
            ++out_;
            if (p.eligible && v > runPeak_) {
                runPeak_ = v;
                runPeakTs_ = p.t;
            }
            sink(p.t, v);
        }
        win_.drop_front(i);
    }

    size_t size() const { return size_; } // Series::size() of the Timeline's series now
    bool empty() const { return size_ == 0; }
    uint64_t back() const { return win_.empty() ? outRaw_ : win_.back().v; } // Series::v.back()
    size_t buffered() const { return win_.size(); }
    template <class F> void forEachBuffered(F&& f) const {
        for (size_t i = 0; i < win_.size(); ++i) f(win_[i].t, win_[i].v);
    }

    // The UsedMemHigh of the next sample with high watermarks of this series' pool (none: no
    // such sample comes).
    void setCapAhead(std::optional<uint64_t> cap) { capAhead_ = cap; }

    // A sample with high watermarks, as the builder's driverHighs: Series::capFrom(from, cap) on
    // the points since the previous one, then the highest of those points above the peak kept
    // since then (HighWindow::peakUsed). Gives that peak and its time; the caller adds the
    // sample's own high watermark and hands the result back with setHighPeak.
    void capSinceHigh(uint64_t cap, uint64_t& peak, int64_t& peakTs) {
        // Handed-out points were capped with capAhead_, which is this cap. The points since
        // the last high watermark are the newest ones: only those are capped and may merge.
        size_t k = win_.size();
        while (k > 0 && win_[k - 1].eligible) --k;
        bool any = k > 0 || anyOut_;
        uint64_t prev = k > 0 ? win_[k - 1].v : outV_;
        size_t kept = k;
        for (size_t i = k; i < win_.size(); ++i) {
            Pt p = win_[i];
            p.v = std::min(p.v, cap);
            if (any && p.v == prev) continue;
            any = true;
            prev = p.v;
            if (p.v > runPeak_) {
                runPeak_ = p.v;
                runPeakTs_ = p.t;
            }
            p.eligible = false; // before the new `from`
            win_[kept++] = p;
        }
        win_.truncate(kept);
        peak = runPeak_;
        peakTs = runPeakTs_;
        size_ = out_ + win_.size();
        from_ = size_;
        // The handed-out part is capped in the Timeline's series now too.
        outRaw_ = outV_;
        outT_ = outKeptT_;
    }
    void setHighPeak(uint64_t peak, int64_t ts) {
        runPeak_ = peak;
        runPeakTs_ = ts;
    }

private:
    struct Pt {
        int64_t t;
        uint64_t v;
        bool eligible; // at or after HighWindow::from: capped at the next high watermark
    };

    void append(int64_t ts, uint64_t value) {
        win_.push_back(Pt{ts, value, size_ >= from_});
        ++size_;
    }

    Ring<Pt> win_;
    // The last point handed out: its time and value as the Timeline's series holds it (before
    // a coming cap), and the last one actually handed out (after capping and merging).
    bool anyOut_ = false;
    int64_t outT_ = 0;
    uint64_t outRaw_ = 0;
    int64_t outKeptT_ = 0;
    uint64_t outV_ = 0;
    size_t out_ = 0;   // points handed out and kept
    size_t size_ = 0;  // Series::size() of the Timeline's series
    size_t from_ = 0;  // HighWindow::from
    std::optional<uint64_t> capAhead_;
    uint64_t runPeak_ = 0; // HighWindow::peakUsed, raised by the eligible points handed out
    int64_t runPeakTs_ = 0;
};

} // namespace poolscope::detail
