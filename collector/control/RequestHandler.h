#pragma once
// Applies control requests through the PoolDriver and records each applied change as a
// KnobChange event. Knows nothing about sockets: the server feeds it decoded requests, which also
// makes it the piece the GUI-side fake and the tests exercise most directly.

#include "PoolDriver.h"
#include "poolscope/control/Protocol.h"

#include <optional>

namespace poolscope::control {

class RequestHandler {
public:
    RequestHandler(PoolDriver& driver, EventSink& sink) : driver_(driver), sink_(sink) {}

    struct Outcome {
        std::optional<Ack> ack; // set on success
        ErrorReply error;       // otherwise
    };

    ServerHello hello();
    // Handles Get, Set, TrimTo, ResetWatermarks, ListPools and Ping (Subscribe is the server's).
    Outcome handle(const Request& r, KnobOrigin origin);

    // The KnobChange event for an applied change (field meanings in Protocol.h).
    static Event knobChangeEvent(uint64_t pool, int device, uint16_t attr, uint64_t requested,
                                 uint64_t oldValue, uint64_t newValue, const PoolState* after,
                                 KnobOrigin origin);

private:
    Outcome fail(RemoteError code, std::string message);
    Outcome failFrom(const Error& e, const std::string& context);
    Outcome applySet(const Request& r, KnobOrigin origin);
    Outcome applyTrim(const Request& r, KnobOrigin origin);
    Outcome applyReset(const Request& r, KnobOrigin origin);
    // The ack for an applied change, with the driver's read-back; records the knob event.
    Outcome acknowledge(Op op, uint64_t pool, uint16_t attr, uint64_t requested, uint64_t before,
                        uint64_t after, KnobOrigin origin);

    PoolDriver& driver_;
    EventSink& sink_;
};

} // namespace poolscope::control
