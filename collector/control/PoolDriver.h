#pragma once
// What the control server needs from the target, behind an interface so the server builds and is
// tested without CUDA. The collector implements it with the CUDA driver API
// (cuMemPoolGetAttribute / cuMemPoolSetAttribute / cuMemPoolTrimTo); tests use an in-memory fake.
// Every method is called on the control server's own thread only, never concurrently, and never
// from inside a CUPTI callback (the collector's thread_local guard is set for that thread through
// ServerOptions::onThreadStart, so these driver calls are not recorded as the application's).

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/control/Protocol.h"

#include <cstdint>
#include <string>
#include <vector>

namespace poolscope::control {

// What the hello carries besides the pools.
struct TargetDescription {
    ProcessInfo process;
    std::vector<DeviceInfo> devices;
    std::vector<StreamInfo> streams;
    std::string tracePath;
};

class PoolDriver {
public:
    virtual ~PoolDriver() = default;

    virtual TargetDescription describe() = 0;
    // Every pool the collector knows of (at least each device's default pool), with current
    // attributes read from the driver.
    virtual Result<std::vector<PoolState>> listPools() = 0;
    // One pool; NotFound (ErrorCode::NotFound) when the handle is unknown or destroyed.
    virtual Result<PoolState> poolState(uint64_t pool);

    // Errors: NotFound for an unknown pool, InvalidArgument for a value the driver refuses as
    // such, anything else for a driver failure; the message is shown to the user verbatim, so it
    // should carry the driver's own words (cuGetErrorString).
    virtual Result<uint64_t> getAttribute(uint64_t pool, PoolAttr attr) = 0;
    // origin is who asked; a driver that records its own KnobChange events needs it.
    virtual Status setAttribute(uint64_t pool, PoolAttr attr, uint64_t value,
                                KnobOrigin origin) = 0;
    virtual Status trimTo(uint64_t pool, uint64_t minBytesToKeep, KnobOrigin origin) = 0;
    // Resets both high watermarks (reserved and used) to their current values.
    virtual Status resetHighWatermarks(uint64_t pool, KnobOrigin origin) = 0;

    // True when the driver itself records each change into the trace (the collector's
    // CollectorApi does); the server then does not send KnobChange events to the EventSink.
    virtual bool recordsKnobChanges() const { return false; }
};

// Where applied knob changes go: the collector appends them to its trace (assigning seq) and,
// through its normal drain, publishes them back to live clients. Called on the server thread.
class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void record(const Event& e) = 0;
};

} // namespace poolscope::control
