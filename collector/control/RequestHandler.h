#pragma once
// Applies control requests through the PoolControl and records each applied change as a KnobChange
// event, built here (and only here) with makeKnobChange, so every target, the collector's and the
// tests' fake alike, records the same meaning (poolscope/EventFields.h). Knows nothing about
// sockets: the server feeds it decoded requests, which also makes it the piece the tests
// exercise most directly.

#include "PoolControl.h"
#include "poolscope/control/Protocol.h"

#include <optional>

namespace poolscope::control {

class RequestHandler {
public:
    explicit RequestHandler(PoolControl& target) : target_(target) {}

    struct Outcome {
        std::optional<Ack> ack; // set on success
        ErrorReply error;       // otherwise
    };

    ServerHello hello();
    // Handles Get, Set, TrimTo, ResetWatermarks, ListPools and Ping (Subscribe is the server's).
    Outcome handle(const Request& r, KnobOrigin origin);

private:
    Outcome fail(RemoteError code, std::string message);
    Outcome failFrom(const Error& e, const std::string& context);
    Outcome applySet(const Request& r, KnobOrigin origin);
    Outcome applyTrim(const Request& r, KnobOrigin origin);
    Outcome applyReset(const Request& r, KnobOrigin origin);
    // The ack for an applied change, with the driver's read-back; records the KnobChange.
    Outcome acknowledge(Op op, uint64_t pool, uint16_t attr, uint64_t requested, uint64_t before,
                        uint64_t after, KnobOrigin origin);

    PoolControl& target_;
};

} // namespace poolscope::control
