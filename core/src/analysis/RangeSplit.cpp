#include "poolscope/analysis/RangeSplit.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "poolscope/view/NvtxRows.h"

namespace poolscope::analysis {

namespace {

// The innermost range of each allocation, cached per call site: the collector stored the
// thread's push/pop path with the site, so one lookup serves every allocation of a site. The
// range table (the NVTX band's rows) is read only for allocations whose site has no path.
class RangeNamer {
public:
    explicit RangeNamer(const StackTables& t) : t_(t) {}

    // nullptr when no range was open.
    const std::string* of(const Allocation& a) {
        if (a.site != 0) {
            auto [it, added] = bySite_.try_emplace(a.site, nullptr);
            if (added) it->second = pathEnd(a.site);
            if (it->second) return it->second;
        }
        return fromTable(a.tid, a.allocTsNs);
    }

private:
    const std::string* pathEnd(uint32_t site) const {
        auto s = t_.sites.find(site);
        if (s == t_.sites.end() || s->second.nvtxPath == 0) return nullptr;
        auto p = t_.nvtxPaths.find(s->second.nvtxPath);
        if (p == t_.nvtxPaths.end() || p->second.empty()) return nullptr;
        return &p->second.back();
    }

    // Ranges a path does not carry (nvtxRangeStart/End): the latest-starting range open on the
    // thread at ts, deepest row first.
    const std::string* fromTable(uint32_t tid, int64_t ts) {
        if (t_.ranges.empty()) return nullptr;
        if (!rowsBuilt_) {
            rowsBuilt_ = true;
            // Ranges never ended stay open to the end of time: an allocation after the trace's
            // last range event is still inside them.
            rows_ = view::NvtxRows::build(t_, INT64_MAX);
            for (size_t r = 0; r < rows_.rows.size(); ++r) {
                auto [it, added] = threadRows_.try_emplace(rows_.rows[r].tid, r, r + 1);
                if (!added) it->second.second = r + 1; // a thread's rows are contiguous
            }
        }
        auto it = threadRows_.find(tid);
        if (it == threadRows_.end()) return nullptr;
        for (size_t r = it->second.second; r-- > it->second.first;) {
            const int64_t k = rows_.rangeAt(t_, r, ts);
            if (k >= 0) return &t_.ranges[size_t(k)].name;
        }
        return nullptr;
    }

    const StackTables& t_;
    std::unordered_map<uint32_t, const std::string*> bySite_;
    bool rowsBuilt_ = false;
    view::NvtxRows rows_;
    std::unordered_map<uint32_t, std::pair<size_t, size_t>> threadRows_; // [first, end) rows
};


// Each band's share of `used`: the recorded bands in order, each cut to what is left of used (the
// live allocations can add up to more than the driver's used), and the unrecorded band, if any,
// what none of them explains; the shares add up to used.
template <class ValueOf>
void sharesOf(const std::vector<RangeBand>& bands, uint64_t used, ValueOf valueOf,
              std::vector<uint64_t>& out) {
    out.assign(bands.size(), 0);
    uint64_t cum = 0;
    size_t rest = bands.size();
    for (size_t b = 0; b < bands.size(); ++b) {
        if (bands[b].kind == RangeBand::Kind::Unrecorded) {
            rest = b;
            continue;
        }
        out[b] = std::min(valueOf(b), used - cum);
        cum += out[b];
    }
    if (rest < bands.size()) out[rest] = used - cum;
}

} // namespace

bool UsedSplit::anyRange() const {
    return std::any_of(bands.begin(), bands.end(), [](const RangeBand& b) {
        return b.kind == RangeBand::Kind::Range;
    });
}

void UsedSplit::at(int64_t ts, uint64_t used, std::vector<uint64_t>& out) const {
    sharesOf(bands, used, [&](size_t b) { return bands[b].bytes.valueAt(ts); }, out);
}

uint64_t UsedSplit::recordedAt(int64_t ts) const {
    uint64_t sum = 0;
    for (const RangeBand& b : bands) sum += b.bytes.valueAt(ts);
    return sum;
}

std::string innermostRangeName(const StackTables& t, const Allocation& a) {
    RangeNamer namer(t);
    const std::string* n = namer.of(a);
    return n ? *n : std::string();
}

UsedSplit splitUsedByRange(const Timeline& tl, const StackTables& t, uint64_t pool,
                           size_t topRanges) {
    UsedSplit out;
    const PoolTimeline* p = tl.pool(pool);
    if (!p) return out;
    out.pool = pool;

    // Range names interned (index 0: no range); the views point into the stack tables.
    RangeNamer namer(t);
    std::unordered_map<std::string_view, uint32_t> nameIndex;
    std::vector<const std::string*> names{nullptr};
    struct Step {
        int64_t ts;
        uint64_t bytes;
        uint32_t name;
        bool free;
    };
    std::vector<Step> steps;
    for (const Allocation& a : tl.allocations) {
        if (a.pool != pool || a.ptr == 0) continue;
        uint32_t n = 0;
        if (const std::string* s = namer.of(a)) {
            auto [it, added] = nameIndex.try_emplace(*s, uint32_t(names.size()));
            if (added) names.push_back(s);
            n = it->second;
        }
        steps.push_back({a.allocTsNs, a.size, n, false});
        if (!a.live()) steps.push_back({a.freeTsNs, a.size, n, true});
    }
    // Each allocation's free follows its alloc (freeTsNs >= allocTsNs), so a running value
    // never goes below zero. Unsigned wrap-around keeps a damaged trace's huge sizes harmless:
    // a free takes back exactly what its alloc added.
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Step& x, const Step& y) { return x.ts < y.ts; });
    auto apply = [](uint64_t& run, const Step& s) { run = s.free ? run - s.bytes : run + s.bytes; };

    // Each name's peak, at the end of each instant (a step series keeps an instant's last value).
    std::vector<uint64_t> run(names.size(), 0), peak(names.size(), 0);
    {
        std::vector<uint32_t> touched;
        for (size_t i = 0; i < steps.size();) {
            const int64_t ts = steps[i].ts;
            for (; i < steps.size() && steps[i].ts == ts; ++i) {
                apply(run[steps[i].name], steps[i]);
                touched.push_back(steps[i].name);
            }
            for (uint32_t n : touched) peak[n] = std::max(peak[n], run[n]);
            touched.clear();
        }
    }

    // The names by peak, largest first (ties by name, so the order never depends on the
    // trace's order); the first topRanges get a band each, unless only one would be left.
    std::vector<uint32_t> order;
    for (uint32_t n = 1; n < names.size(); ++n) order.push_back(n);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
        return peak[a] != peak[b] ? peak[a] > peak[b] : *names[a] < *names[b];
    });
    const size_t own = order.size() <= topRanges + 1 ? order.size() : topRanges;
    std::vector<uint32_t> bandOf(names.size());
    for (size_t k = 0; k < own; ++k) {
        RangeBand b;
        b.kind = RangeBand::Kind::Range;
        b.name = *names[order[k]];
        bandOf[order[k]] = uint32_t(out.bands.size());
        out.bands.push_back(std::move(b));
    }
    const auto otherBand = uint32_t(out.bands.size());
    RangeBand other;
    other.kind = RangeBand::Kind::Other;
    other.ranges = uint32_t(order.size() - own);
    other.name = "other (" + std::to_string(other.ranges) + " ranges)";
    out.bands.push_back(std::move(other));
    for (size_t k = own; k < order.size(); ++k) bandOf[order[k]] = otherBand;
    bandOf[0] = uint32_t(out.bands.size());
    RangeBand none;
    none.kind = RangeBand::Kind::NoRange;
    none.name = "(no range)";
    none.ranges = 0;
    out.bands.push_back(std::move(none));
    const size_t restBand = out.bands.size();
    RangeBand rest;
    rest.kind = RangeBand::Kind::Unrecorded;
    rest.name = "(no recorded allocation)";
    rest.ranges = 0;
    out.bands.push_back(std::move(rest));

    // The bands' series, then one sweep over every instant where a band or `used` changes:
    // the peaks as drawn (cut to `used`, as at() does) and where the allocations exceed it.
    std::vector<uint64_t> bandRun(out.bands.size(), 0);
    for (const Step& s : steps) {
        const uint32_t b = bandOf[s.name];
        apply(bandRun[b], s);
        out.bands[b].bytes.push(s.ts, bandRun[b]);
    }
    for (RangeBand& b : out.bands) b.bytes.shrinkToFit();
    std::fill(bandRun.begin(), bandRun.end(), 0);
    const Series& used = p->used;
    size_t i = 0, u = 0;
    uint64_t usedNow = 0;
    while (i < steps.size() || u < used.size()) {
        const int64_t ts = i < steps.size() && (u >= used.size() || steps[i].ts <= used.t[u])
                               ? steps[i].ts
                               : used.t[u];
        for (; i < steps.size() && steps[i].ts == ts; ++i) apply(bandRun[bandOf[steps[i].name]], steps[i]);
        for (; u < used.size() && used.t[u] <= ts; ++u) usedNow = used.v[u];
        uint64_t cum = 0, want = 0;
        for (size_t b = 0; b < restBand; ++b) {
            const uint64_t v = std::min(bandRun[b], usedNow - cum);
            out.bands[b].peak = std::max(out.bands[b].peak, v);
            cum += v;
            want += bandRun[b];
        }
        out.bands[restBand].peak = std::max(out.bands[restBand].peak, usedNow - cum);
        if (want > usedNow) {
            out.overshootCount++;
            out.maxOvershoot = std::max(out.maxOvershoot, want - usedNow);
        }
    }
    return out;
}

std::vector<std::vector<uint64_t>> stackedTops(const UsedSplit& split,
                                               const std::vector<Point>& points) {
    const auto& bands = split.bands;
    std::vector<std::vector<uint64_t>> tops(bands.size(), std::vector<uint64_t>(points.size(), 0));
    // The points come in time order: each band's position in its series moves forward by
    // galloping from the last one instead of a binary search over the whole series per point
    // (a zoomed-out view of millions of steps is fed a few thousand points per frame).
    std::vector<size_t> pos(bands.size(), 0); // the first point of the band's series after t
    auto valueAt = [&](size_t b, int64_t t) -> uint64_t {
        const std::vector<int64_t>& ts = bands[b].bytes.t;
        size_t lo = pos[b], step = 1, hi = lo;
        while (hi < ts.size() && ts[hi] <= t) {
            lo = hi + 1;
            hi += step;
            step *= 2;
        }
        hi = std::min(hi, ts.size());
        pos[b] = size_t(std::upper_bound(ts.begin() + ptrdiff_t(lo), ts.begin() + ptrdiff_t(hi), t) -
                        ts.begin());
        return pos[b] == 0 ? 0 : bands[b].bytes.v[pos[b] - 1];
    };
    std::vector<uint64_t> share;
    for (size_t i = 0; i < points.size(); ++i) {
        if (i > 0 && points[i].t < points[i - 1].t) std::fill(pos.begin(), pos.end(), 0);
        const uint64_t used = points[i].v;
        sharesOf(bands, used, [&](size_t b) { return valueAt(b, points[i].t); }, share);
        uint64_t cum = 0;
        for (size_t b = 0; b < bands.size(); ++b) {
            // The unmatched rest is the top band: its top is used itself.
            const bool rest = bands[b].kind == RangeBand::Kind::Unrecorded;
            cum += rest ? 0 : share[b];
            tops[b][i] = rest ? used : cum;
        }
    }
    return tops;
}

} // namespace poolscope::analysis
