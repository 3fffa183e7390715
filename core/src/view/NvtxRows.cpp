#include "poolscope/view/NvtxRows.h"

#include <algorithm>
#include <map>

namespace poolscope::view {

std::unordered_map<std::string, uint32_t> NvtxRows::nameOrder(const StackTables& t) {
    std::vector<const NvtxRange*> byStart;
    byStart.reserve(t.ranges.size());
    for (const NvtxRange& r : t.ranges) byStart.push_back(&r);
    std::stable_sort(byStart.begin(), byStart.end(), [](const NvtxRange* a, const NvtxRange* b) {
        return a->startNs != b->startNs ? a->startNs < b->startNs : a->name < b->name;
    });
    std::unordered_map<std::string, uint32_t> out;
    for (const NvtxRange* r : byStart) out.try_emplace(r->name, uint32_t(out.size()));
    for (const auto& [id, path] : t.nvtxPaths) // std::map: in path id order
        for (const std::string& name : path) out.try_emplace(name, uint32_t(out.size()));
    return out;
}

NvtxRows NvtxRows::build(const StackTables& t, int64_t traceEnd) {
    NvtxRows out;
    out.openEnd = traceEnd;
    out.colorSlots = nameOrder(t);
    // Threads in order of their first range; rows of a thread by depth.
    std::map<uint32_t, int64_t> firstOfThread;
    for (const NvtxRange& r : t.ranges) {
        auto [it, added] = firstOfThread.try_emplace(r.tid, r.startNs);
        if (!added) it->second = std::min(it->second, r.startNs);
    }
    std::map<std::pair<uint32_t, uint16_t>, std::vector<uint32_t>> byRow;
    for (size_t i = 0; i < t.ranges.size(); ++i)
        byRow[{t.ranges[i].tid, t.ranges[i].depth}].push_back(uint32_t(i));
    std::vector<std::pair<uint32_t, uint16_t>> keys;
    for (const auto& [k, v] : byRow) keys.push_back(k);
    std::stable_sort(keys.begin(), keys.end(), [&](const auto& a, const auto& b) {
        const int64_t fa = firstOfThread[a.first], fb = firstOfThread[b.first];
        if (a.first != b.first) return fa != fb ? fa < fb : a.first < b.first;
        return a.second < b.second;
    });
    for (const auto& k : keys) {
        Row row;
        row.tid = k.first;
        row.depth = k.second;
        row.ranges = std::move(byRow[k]);
        std::stable_sort(row.ranges.begin(), row.ranges.end(), [&](uint32_t a, uint32_t b) {
            return t.ranges[a].startNs < t.ranges[b].startNs;
        });
        int64_t m = INT64_MIN;
        for (uint32_t i : row.ranges) {
            m = std::max(m, out.endOf(t.ranges[i]));
            row.maxEnd.push_back(m);
        }
        out.rows.push_back(std::move(row));
    }
    return out;
}

size_t NvtxRows::firstReaching(const Row& row, int64_t t) {
    return size_t(std::lower_bound(row.maxEnd.begin(), row.maxEnd.end(), t) - row.maxEnd.begin());
}

int64_t NvtxRows::rangeAt(const StackTables& t, size_t rowIndex, int64_t ts) const {
    if (rowIndex >= rows.size()) return -1;
    const Row& row = rows[rowIndex];
    int64_t found = -1;
    for (size_t k = firstReaching(row, ts); k < row.ranges.size(); ++k) {
        const NvtxRange& r = t.ranges[row.ranges[k]];
        if (r.startNs > ts) break;
        if (endOf(r) > ts) found = row.ranges[k]; // the latest start that still covers ts
    }
    return found;
}

} // namespace poolscope::view
