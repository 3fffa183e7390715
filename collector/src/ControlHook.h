#pragma once
// The seam between the collector and the live control server (collector/control/, owned by the
// control work). The collector knows nothing about sockets or the protocol: when POOLSCOPE_LISTEN
// is set it calls startControlServer() with an CollectorApi, and feeds the returned LiveSink with
// every event it writes. The server applies knobs through CollectorApi, which runs the driver
// call with the collector's guard set (so the application's trace never shows it as the
// application's own call) and records a KnobChange event.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"

namespace poolscope::collector {

// What the collector offers to the control server. All methods are thread-safe and may be
// called from the server's own threads.
class CollectorApi {
public:
    virtual ~CollectorApi() = default;
    virtual ProcessInfo process() const = 0;
    virtual std::vector<DeviceInfo> devices() const = 0;
    virtual std::vector<PoolInfo> pools() const = 0;
    // Reads one CUmemPool_attribute (PoolAttr numbering) now.
    virtual Result<uint64_t> poolAttribute(uint64_t pool, PoolAttr attr) = 0;
    // Sets a pool attribute (reuse policies take 0/1, ReleaseThreshold bytes, the two *High
    // attributes only 0 = reset). Records a KnobChange with the driver's read-back and old value.
    virtual Result<uint64_t> setPoolAttribute(uint64_t pool, PoolAttr attr, uint64_t value,
                                              KnobOrigin origin) = 0;
    // cuMemPoolTrimTo; records a KnobChange (attr = KnobAction::TrimTo) with watermarks after.
    virtual Status trimPool(uint64_t pool, uint64_t minBytesToKeep, KnobOrigin origin) = 0;
};

// Implemented by the control server: the event stream as written to the trace, in seq order per
// call. Called on the collector's writer thread: copy and return, never block.
class LiveSink {
public:
    virtual ~LiveSink() = default;
    virtual void onEvents(std::span<const Event> events) = 0;
    // Entities as they become known (also called once at start with everything known).
    virtual void onPool(const PoolInfo&) {}
    virtual void onDevice(const DeviceInfo&) {}
    // The recording is ending (normal exit): flush and close connections.
    virtual void stop() = 0;
};

// Provided by collector/control (library poolscope_control_server). listen is the value of
// POOLSCOPE_LISTEN (e.g. "unix:/tmp/x.sock" or "127.0.0.1:7700"). Returns nullptr, after logging
// one "[poolscope]" line, when the server cannot start; recording goes on without it.
std::unique_ptr<LiveSink> startControlServer(const std::string& listen, CollectorApi& api);

} // namespace poolscope::collector
