#include "RequestHandler.h"

#include "poolscope/EventFields.h"
#include "poolscope/Units.h"

#include <cstdio>

namespace poolscope::control {

Result<PoolState> PoolControl::poolState(uint64_t pool) {
    auto pools = listPools();
    if (!pools) return pools.error();
    for (auto& p : *pools)
        if (p.info.handle == pool) return p;
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(pool));
    return Error{ErrorCode::NotFound, std::string("no pool with handle ") + buf};
}

namespace {

std::string hex(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string describeValue(PoolAttr a, uint64_t v) {
    if (attrIsBoolean(a)) return v ? "on" : "off";
    return formatBytes(v);
}

} // namespace

RequestHandler::Outcome RequestHandler::fail(RemoteError code, std::string message) {
    Outcome o;
    o.error = ErrorReply{code, std::move(message)};
    return o;
}

RequestHandler::Outcome RequestHandler::failFrom(const Error& e, const std::string& context) {
    RemoteError code = RemoteError::Driver;
    if (e.code == ErrorCode::NotFound)
        code = RemoteError::NoSuchPool;
    else if (e.code == ErrorCode::InvalidArgument)
        code = RemoteError::BadRequest;
    return fail(code, context.empty() ? e.message : context + ": " + e.message);
}

ServerHello RequestHandler::hello() {
    ServerHello h;
    h.server = std::string("poolscope collector ") + POOLSCOPE_VERSION;
    TargetDescription d = target_.describe();
    h.process = std::move(d.process);
    h.devices = std::move(d.devices);
    h.streams = std::move(d.streams);
    h.tracePath = std::move(d.tracePath);
    // A failing pool listing must not fail the hello: the client can still ask again later.
    if (auto pools = target_.listPools()) h.pools = std::move(*pools);
    return h;
}

RequestHandler::Outcome RequestHandler::handle(const Request& r, KnobOrigin origin) {
    Outcome o;
    switch (r.op) {
    case Op::Ping:
        o.ack = Ack{};
        o.ack->op = Op::Ping;
        return o;
    case Op::ListPools: {
        auto pools = target_.listPools();
        if (!pools) return failFrom(pools.error(), "cannot list pools");
        o.ack = Ack{};
        o.ack->op = Op::ListPools;
        o.ack->value = pools->size();
        o.ack->pools = std::move(*pools);
        o.ack->devices = target_.describe().devices;
        return o;
    }
    case Op::Get: {
        if (r.attr < 1 || r.attr > 8)
            return fail(RemoteError::BadRequest, "unknown pool attribute " +
                                                     std::to_string(r.attr) +
                                                     " (valid: 1-8, see PoolAttr)");
        auto v = target_.getAttribute(r.pool, PoolAttr(r.attr));
        if (!v) return failFrom(v.error(), "");
        o.ack = Ack{};
        o.ack->op = Op::Get;
        o.ack->pool = r.pool;
        o.ack->attr = r.attr;
        o.ack->value = *v;
        if (auto s = target_.poolState(r.pool)) o.ack->state = std::move(*s);
        return o;
    }
    case Op::Set:
        return applySet(r, origin);
    case Op::TrimTo:
        return applyTrim(r, origin);
    case Op::ResetWatermarks:
        return applyReset(r, origin);
    case Op::Subscribe:
        break; // the server's business; reaching here is a server bug
    }
    return fail(RemoteError::Internal,
                "request '" + std::string(opName(r.op)) + "' is not handled here");
}

RequestHandler::Outcome RequestHandler::applySet(const Request& r, KnobOrigin origin) {
    PoolAttr a = PoolAttr(r.attr);
    if (r.attr < 1 || r.attr > 8)
        return fail(RemoteError::BadRequest, "unknown pool attribute " + std::to_string(r.attr));
    if (!attrIsSettable(a)) {
        std::string msg = std::string(attrCliName(a)) + " is read-only";
        if (a == PoolAttr::ReservedMemHigh || a == PoolAttr::UsedMemHigh)
            msg += "; use 'reset' to reset the high watermarks";
        return fail(RemoteError::BadRequest, msg);
    }
    if (attrIsBoolean(a) && r.value > 1)
        return fail(RemoteError::BadRequest, std::string(attrCliName(a)) +
                                                 " is on or off: the value must be 0 or 1, not " +
                                                 std::to_string(r.value));
    auto before = target_.getAttribute(r.pool, a);
    if (!before) return failFrom(before.error(), "");
    if (Status s = target_.setAttribute(r.pool, a, r.value); !s)
        return failFrom(s.error(), "the driver refused to set " + std::string(attrCliName(a)) +
                                       " of pool " + hex(r.pool) + " to " +
                                       describeValue(a, r.value));
    auto after = target_.getAttribute(r.pool, a);
    if (!after) return failFrom(after.error(), "set, but reading it back failed");
    return acknowledge(Op::Set, r.pool, r.attr, r.value, *before, *after, origin);
}

RequestHandler::Outcome RequestHandler::acknowledge(Op op, uint64_t pool, uint16_t attr,
                                                    uint64_t requested, uint64_t before,
                                                    uint64_t after, KnobOrigin origin) {
    Outcome o;
    o.ack = Ack{};
    Ack& ack = *o.ack;
    ack.op = op;
    ack.pool = pool;
    ack.attr = attr;
    ack.requested = requested;
    ack.hasOld = true;
    ack.oldValue = before;
    ack.value = after;
    if (auto s = target_.poolState(pool)) ack.state = std::move(*s);
    // What each field means is EventFields.h's KnobFields; only applied changes are recorded
    // (a refusal reaches the client as an error, and the trace keeps what happened).
    std::optional<KnobWatermarks> marks;
    if (ack.state) marks = KnobWatermarks{ack.state->reservedCurrent, ack.state->usedCurrent};
    target_.recordKnobChange(makeKnobChange(pool, ack.state ? ack.state->info.device : -1,
                                            KnobFields{attr, requested, after, before, origin}, 0,
                                            marks));
    return o;
}

RequestHandler::Outcome RequestHandler::applyTrim(const Request& r, KnobOrigin origin) {
    auto before = target_.getAttribute(r.pool, PoolAttr::ReservedMemCurrent);
    if (!before) return failFrom(before.error(), "");
    if (Status s = target_.trimTo(r.pool, r.value); !s)
        return failFrom(s.error(), "the driver refused to trim pool " + hex(r.pool) + " to " +
                                       formatBytes(r.value));
    auto after = target_.getAttribute(r.pool, PoolAttr::ReservedMemCurrent);
    if (!after) return failFrom(after.error(), "trimmed, but reading reserved back failed");
    return acknowledge(Op::TrimTo, r.pool, uint16_t(KnobAction::TrimTo), r.value, *before,
                       *after, origin);
}

RequestHandler::Outcome RequestHandler::applyReset(const Request& r, KnobOrigin origin) {
    auto before = target_.getAttribute(r.pool, PoolAttr::ReservedMemHigh);
    if (!before) return failFrom(before.error(), "");
    if (Status s = target_.resetHighWatermarks(r.pool); !s)
        return failFrom(s.error(),
                        "the driver refused to reset the watermarks of pool " + hex(r.pool));
    auto after = target_.getAttribute(r.pool, PoolAttr::ReservedMemHigh);
    if (!after) return failFrom(after.error(), "reset, but reading the watermark back failed");
    return acknowledge(Op::ResetWatermarks, r.pool, uint16_t(KnobAction::ResetHighWatermarks), 0,
                       *before, *after, origin);
}

} // namespace poolscope::control
