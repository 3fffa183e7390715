#pragma once
// The one interface between the collector and the control server: what the server needs from
// the target process. The collector implements it directly with the CUDA driver API
// (collector/src/PoolControl.cpp); tests implement it in memory (tests/control/FakePoolDriver.h),
// so the server builds and is tested without CUDA.
//
// Every method is called on the control server's own thread only, never concurrently, and never
// from inside a CUPTI callback. The server (RequestHandler) decides what a knob change means and
// builds its KnobChange event with makeKnobChange (poolscope/EventFields.h); the target only
// applies changes and appends the finished event to its trace.

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

class PoolControl {
public:
    virtual ~PoolControl() = default;

    virtual TargetDescription describe() = 0;
    // Every pool the collector knows of (at least each device's default pool), with current
    // attributes read from the driver.
    virtual Result<std::vector<PoolState>> listPools() = 0;
    // One pool; NotFound (ErrorCode::NotFound) when the handle is unknown or destroyed.
    virtual Result<PoolState> poolState(uint64_t pool);

    // Errors: NotFound for an unknown pool, InvalidArgument for a value the driver refuses as
    // such, anything else for a driver failure; the message is shown to the user verbatim, so it
    // should carry the driver's own words (cuGetErrorName).
    virtual Result<uint64_t> getAttribute(uint64_t pool, PoolAttr attr) = 0;
    virtual Status setAttribute(uint64_t pool, PoolAttr attr, uint64_t value) = 0;
    virtual Status trimTo(uint64_t pool, uint64_t minBytesToKeep) = 0;
    // Resets both high watermarks (reserved and used) to their current values.
    virtual Status resetHighWatermarks(uint64_t pool) = 0;

    // Appends an applied change's KnobChange event (built by makeKnobChange) to the trace. The
    // target sets what only the recorder knows (seq, tsNs, tid); the collector's normal drain
    // then publishes it back to live clients like any other event.
    virtual void recordKnobChange(const Event& e) = 0;
};

} // namespace poolscope::control
