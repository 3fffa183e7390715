#include "poolscope/view/Overview.h"

#include <algorithm>

namespace poolscope::view {

namespace {
// Column arithmetic in 128 bits: (t - t0) * columns overflows 64 bits for spans of a day.
__extension__ typedef unsigned __int128 U128;

OverviewBlock blockOf(const PoolChunkSummary& r) {
    return OverviewBlock{r.tMin,    r.tMax,    r.reservedMin,  r.reservedMax,
                         r.usedMin, r.usedMax, r.reservedLast, r.usedLast};
}

void merge(OverviewBlock& a, const OverviewBlock& b) {
    a.tMin = std::min(a.tMin, b.tMin);
    a.tMax = std::max(a.tMax, b.tMax);
    a.reservedMin = std::min(a.reservedMin, b.reservedMin);
    a.reservedMax = std::max(a.reservedMax, b.reservedMax);
    a.usedMin = std::min(a.usedMin, b.usedMin);
    a.usedMax = std::max(a.usedMax, b.usedMax);
    a.reservedLast = b.reservedLast; // b comes after a in seq order
    a.usedLast = b.usedLast;
}

void include(OverviewColumn& c, uint64_t rMin, uint64_t rMax, uint64_t uMin, uint64_t uMax) {
    if (!c.any) {
        c = OverviewColumn{true, rMin, rMax, uMin, uMax};
        return;
    }
    c.reservedMin = std::min(c.reservedMin, rMin);
    c.reservedMax = std::max(c.reservedMax, rMax);
    c.usedMin = std::min(c.usedMin, uMin);
    c.usedMax = std::max(c.usedMax, uMax);
}
} // namespace

Overview::Overview(const PoolSummaries& summaries) : present_(summaries.present) {
    std::map<uint64_t, std::vector<OverviewBlock>> base;
    for (const PoolChunkSummary& r : summaries.rows)
        if (r.pool != 0) base[r.pool].push_back(blockOf(r));
    for (auto& [pool, blocks] : base) {
        std::vector<Level>& levels = pools_[pool];
        levels.push_back(Level{std::move(blocks), {}, {}, 0});
        while (levels.back().blocks.size() > 1) {
            const std::vector<OverviewBlock>& below = levels.back().blocks;
            std::vector<OverviewBlock> up;
            up.reserve((below.size() + kFanout - 1) / kFanout);
            for (size_t i = 0; i < below.size(); i += kFanout) {
                OverviewBlock b = below[i];
                for (size_t j = i + 1; j < std::min(below.size(), i + kFanout); ++j)
                    merge(b, below[j]);
                up.push_back(b);
            }
            levels.push_back(Level{std::move(up), {}, {}, 0});
        }
        for (Level& l : levels) {
            const size_t n = l.blocks.size();
            l.prefixMaxT.resize(n);
            l.suffixMinT.resize(n);
            double width = 0;
            for (size_t i = 0; i < n; ++i) {
                l.prefixMaxT[i] = i ? std::max(l.prefixMaxT[i - 1], l.blocks[i].tMax)
                                    : l.blocks[i].tMax;
                width += double(l.blocks[i].tMax) - double(l.blocks[i].tMin);
            }
            for (size_t i = n; i-- > 0;)
                l.suffixMinT[i] = i + 1 < n ? std::min(l.suffixMinT[i + 1], l.blocks[i].tMin)
                                            : l.blocks[i].tMin;
            l.meanWidthNs = n ? width / double(n) : 0;
        }
    }
}

std::vector<uint64_t> Overview::pools() const {
    std::vector<uint64_t> out;
    for (const auto& [pool, levels] : pools_) out.push_back(pool);
    return out;
}

size_t Overview::levelCount(uint64_t pool) const {
    auto it = pools_.find(pool);
    return it == pools_.end() ? 0 : it->second.size();
}

const std::vector<OverviewBlock>& Overview::level(uint64_t pool, size_t level) const {
    static const std::vector<OverviewBlock> kNone;
    auto it = pools_.find(pool);
    if (it == pools_.end() || level >= it->second.size()) return kNone;
    return it->second[level].blocks;
}

std::optional<OverviewBlock> Overview::whole(uint64_t pool) const {
    auto it = pools_.find(pool);
    if (it == pools_.end() || it->second.empty() || it->second.back().blocks.empty())
        return std::nullopt;
    return it->second.back().blocks.front();
}

size_t Overview::levelFor(uint64_t pool, double columnNs) const {
    auto it = pools_.find(pool);
    if (it == pools_.end()) return 0;
    size_t best = 0;
    for (size_t l = 0; l < it->second.size(); ++l)
        if (it->second[l].meanWidthNs <= columnNs) best = l;
    return best;
}

size_t Overview::columnOf(int64_t t, int64_t t0, int64_t t1, size_t columns) {
    if (t <= t0 || t1 <= t0 || columns == 0) return 0;
    if (t >= t1) return columns - 1;
    const auto num = static_cast<U128>(static_cast<uint64_t>(t - t0)) * columns;
    return static_cast<size_t>(num / static_cast<uint64_t>(t1 - t0));
}

bool Overview::query(uint64_t pool, int64_t t0, int64_t t1, size_t columns, bool inForce,
                     std::vector<OverviewColumn>& out) const {
    const double columnNs = columns ? (double(t1) - double(t0)) / double(columns) : 0;
    return queryLevel(pool, levelFor(pool, columnNs), t0, t1, columns, inForce, out);
}

bool Overview::queryLevel(uint64_t pool, size_t levelIndex, int64_t t0, int64_t t1,
                          size_t columns, bool inForce, std::vector<OverviewColumn>& out) const {
    out.clear();
    auto it = pools_.find(pool);
    if (it == pools_.end() || levelIndex >= it->second.size()) return false;
    if (columns == 0 || t1 <= t0) return true;
    out.assign(columns, OverviewColumn{});
    const Level& l = it->second[levelIndex];
    const size_t n = l.blocks.size();
    // Blocks that can meet [t0, t1): from the first whose prefix reaches t0, up to the first
    // from which every block starts at or after t1 (both arrays are monotone).
    size_t i = static_cast<size_t>(
        std::lower_bound(l.prefixMaxT.begin(), l.prefixMaxT.end(), t0) - l.prefixMaxT.begin());
    for (; i < n && l.suffixMinT[i] < t1; ++i) {
        const OverviewBlock& b = l.blocks[i];
        if (b.tMax < t0 || b.tMin >= t1) continue;
        const size_t c0 = columnOf(std::max(b.tMin, t0), t0, t1, columns);
        const size_t c1 = columnOf(std::min(b.tMax, t1 - 1), t0, t1, columns);
        for (size_t c = c0; c <= c1; ++c)
            include(out[c], b.reservedMin, b.reservedMax, b.usedMin, b.usedMax);
    }
    if (inForce) {
        // The value at a column's start: the last block (in seq order) ending before it.
        for (size_t c = 0; c < columns; ++c) {
            const int64_t start =
                t0 + static_cast<int64_t>((static_cast<U128>(
                                               static_cast<uint64_t>(t1 - t0)) * c +
                                           columns - 1) / columns);
            const size_t k = static_cast<size_t>(
                std::lower_bound(l.prefixMaxT.begin(), l.prefixMaxT.end(), start) -
                l.prefixMaxT.begin());
            if (k == 0) continue;
            const OverviewBlock& b = l.blocks[k - 1];
            include(out[c], b.reservedLast, b.reservedLast, b.usedLast, b.usedLast);
        }
    }
    return true;
}

} // namespace poolscope::view
