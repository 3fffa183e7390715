#include "poolscope/view/EntityNames.h"

#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "LanePlan.h"

namespace poolscope::view {

EntityNames EntityNames::fromTimeline(const Timeline& tl) {
    std::set<PoolStream> pairs = allocatingPairs(tl);
    const LanePlan plan = planLanes(tl, pairs);
    EntityNames names;
    numberInLaneOrder(tl, plan, names);
    return names;
}

std::string EntityNames::hexHandle(uint64_t h) {
    char buf[24] = {'0', 'x'};
    const auto r = std::to_chars(buf + 2, buf + sizeof buf, h, 16); // lower case, as "%" PRIx64
    return std::string(buf, r.ptr);
}

std::string EntityNames::streamLabel(uint64_t s) {
    if (s == 0) return "default stream (0)";
    if (s == 1) return "legacy stream (0x1)";
    if (s == 2) return "per-thread stream (0x2)";
    return hexHandle(s);
}

void EntityNames::numberPool(const Timeline& tl, uint64_t handle) {
    const PoolTimeline* p = nullptr;
    for (const PoolTimeline& pt : tl.pools) // the last record of the handle, as lanes pick it
        if (pt.info.handle == handle) p = &pt;
    const std::string kind = p ? std::string(poolKindName(p->info.kind)) : "unknown";
    // Every pool lane takes a number, the unknown-pool bucket included (it is shown unnumbered).
    const std::string name = "pool #" + std::to_string(++poolNo_);
    pools_[handle] = (handle == 0 ? std::string("unknown pool") : name) + " (" + kind + ")";
}

void EntityNames::numberStream(uint64_t handle) {
    if (!streams_.count(handle)) streams_[handle] = "stream #" + std::to_string(++streamNo_);
}

std::string EntityNames::pool(uint64_t handle) const {
    auto it = pools_.find(handle);
    return it == pools_.end() ? hexHandle(handle) : it->second;
}

std::string EntityNames::stream(uint64_t handle) const {
    auto it = streams_.find(handle);
    return it == streams_.end() ? streamLabel(handle) : it->second;
}

std::string EntityNames::poolWithHandle(uint64_t handle) const {
    std::string name = pool(handle);
    if (handle == 0 || name == hexHandle(handle)) return name;
    return name + " " + hexHandle(handle);
}

std::string EntityNames::streamWithHandle(uint64_t handle) const {
    std::string name = stream(handle);
    if (name == streamLabel(handle)) return name;
    return name + " " + hexHandle(handle);
}

} // namespace poolscope::view
