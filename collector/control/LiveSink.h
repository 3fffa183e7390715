#pragma once
// The one event feed from the collector's writer to the live control server. The collector's
// TraceSink holds a LiveSink* (hence the collector's namespace) and calls it with every event it
// writes; ControlServer implements it. Called on the collector's writer thread: copy and
// return, never block.

#include "poolscope/Entities.h"
#include "poolscope/Event.h"

#include <span>

namespace poolscope::collector {

class LiveSink {
public:
    virtual ~LiveSink() = default;
    // The events as written to the trace, in seq order per call (knob changes included).
    virtual void onEvents(std::span<const Event> events) = 0;
    // Entities as they become known (also called once at start with everything known).
    virtual void onPool(const PoolInfo&) {}
    virtual void onDevice(const DeviceInfo&) {}
    // The recording is ending (normal exit): flush and close connections.
    virtual void stop() = 0;
};

} // namespace poolscope::collector
