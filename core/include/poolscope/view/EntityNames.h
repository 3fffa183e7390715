#pragma once
// The short, stable names a person reads for pools and streams ("pool #1 (default)",
// "stream #2", "default stream (0)"): one numbering, shared by the window, the CLI and exports,
// so every view of a trace calls a pool by the same name.

#include "poolscope/Timeline.h"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace poolscope::view {

class EntityNames {
public:
    // Numbers pools in lane order (device, then the timeline's pools, then pools only seen in
    // allocations) and streams in Timeline::streams order, then the streams only seen in lanes
    // (allocations, failures, wait edges). The same names LaneLayout::build gives.
    static EntityNames fromTimeline(const Timeline& tl);

    // "pool #N (kind)", "unknown pool (kind)" for handle 0; the hex handle when the pool has
    // no lane.
    std::string pool(uint64_t handle) const;
    // "stream #N"; streamLabel(handle) when the stream has no number.
    std::string stream(uint64_t handle) const;
    // For text tables and sentences: the name, then the hex handle unless the name already
    // says it ("pool #1 (explicit) 0x100", "stream #2 0xb", "default stream (0)").
    std::string poolWithHandle(uint64_t handle) const;
    std::string streamWithHandle(uint64_t handle) const;
    // "0x2a"
    static std::string hexHandle(uint64_t handle);
    // The runtime's special handles by their meaning: 0 = default stream, 1 = cudaStreamLegacy,
    // 2 = cudaStreamPerThread; any other handle in hex.
    static std::string streamLabel(uint64_t handle);

    // Numbering, in the order the caller meets the entities (LaneLayout's lane walk).
    void numberPool(const Timeline& tl, uint64_t handle);
    void numberStream(uint64_t handle); // no-op when it already has a number

private:
    std::unordered_map<uint64_t, std::string> pools_, streams_;
    int poolNo_ = 0, streamNo_ = 0;
};

} // namespace poolscope::view
