#pragma once
// NVTX ranges as rows for the timeline's band above the lanes (issue #13): one row per thread
// and nesting depth, the ranges of a row by start time with a running maximum of their ends so
// that the ranges reaching into a visible time span are found by binary search.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "poolscope/Stacks.h"

namespace poolscope::view {

struct NvtxRows {
    struct Row {
        uint32_t tid = 0;
        uint16_t depth = 0;
        std::vector<uint32_t> ranges; // indices into StackTables::ranges, by start time
        std::vector<int64_t> maxEnd;  // maxEnd[i]: the latest end among ranges[0..i]
    };
    std::vector<Row> rows; // threads in order of their first range, each thread's depths 0, 1...
    // A range still open when the recording ended is drawn to openEnd (the trace's end).
    int64_t openEnd = 0;
    // Each range name's colour slot (nameOrder below): the band and the plot's split by range
    // colour a name alike.
    std::unordered_map<std::string, uint32_t> colorSlots;
    uint32_t colorSlot(const std::string& name) const {
        auto it = colorSlots.find(name);
        return it == colorSlots.end() ? 0 : it->second;
    }

    static NvtxRows build(const StackTables& t, int64_t traceEnd);
    // The distinct range names numbered in order of their first range's start (ties by name),
    // then names only the call sites' paths carry: a name's colour slot, the same in every view
    // of one trace, and the first names of a trace far apart in colour.
    static std::unordered_map<std::string, uint32_t> nameOrder(const StackTables& t);
    int64_t endOf(const NvtxRange& r) const { return r.endNs ? r.endNs : openEnd; }
    // The first position in row.ranges whose range may reach t or later (every range before it
    // ended before t).
    static size_t firstReaching(const Row& row, int64_t t);
    // The range of row covering t (the innermost start at or before t), or -1.
    int64_t rangeAt(const StackTables& t, size_t row, int64_t ts) const;
};

} // namespace poolscope::view
