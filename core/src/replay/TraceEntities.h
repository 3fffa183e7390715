#pragma once
// How every replay of a trace file starts: the trace's tables declared to it. Internal to core.

#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Result.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::detail {

// The devices, pools and streams tables, as every pass reads them first.
struct TraceTables {
    std::vector<DeviceInfo> devices;
    std::vector<PoolInfo> pools;
    std::vector<StreamInfo> streams;
};
inline Result<TraceTables> readTraceTables(const TraceReader& reader) {
    auto devices = reader.devices();
    if (!devices) return devices.error();
    auto pools = reader.pools();
    if (!pools) return pools.error();
    auto streams = reader.streams();
    if (!streams) return streams.error();
    return TraceTables{std::move(*devices), std::move(*pools), std::move(*streams)};
}

// Those tables declared to `replay` and, with `knobs`, the pools' attributes as the collector
// first read them (a table that cannot be read declares none). Returns the devices, which some
// passes name too.
inline Result<std::vector<DeviceInfo>> declareTraceEntities(const TraceReader& reader, replay::Replay& replay,
                                                            bool knobs) {
    auto tables = readTraceTables(reader);
    if (!tables) return tables.error();
    replay.setDevices(tables->devices);
    for (const PoolInfo& p : tables->pools) replay.declarePool(p);
    for (const StreamInfo& s : tables->streams) replay.declareStream(s);
    if (knobs)
        if (auto attrs = reader.poolAttributes(); attrs)
            for (const PoolAttributeValue& a : *attrs) replay.declareKnob(a.pool, a.attr, a.value);
    return std::move(tables->devices);
}

// The events a pass over the trace will meet, for its progress: the summary's count, or the
// chunks' own where the summary cannot be read.
inline uint64_t progressTotal(const TraceReader& reader) {
    uint64_t total = 0;
    if (auto s = reader.summary(); s) total = s->eventCount;
    return total ? total : reader.chunkedEventCount();
}

} // namespace poolscope::detail
