#include "RequestHandler.h"

#include "poolscope/Units.h"
#include "poolscope/control/UnixSocket.h"

#include <cstdio>
#include <sys/syscall.h>
#include <unistd.h>

namespace poolscope::control {

Result<PoolState> PoolDriver::poolState(uint64_t pool) {
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

Event RequestHandler::knobChangeEvent(uint64_t pool, int device, uint16_t attr, uint64_t requested,
                                      uint64_t oldValue, uint64_t newValue, const PoolState* after,
                                      KnobOrigin origin) {
    Event e;
    e.kind = EventKind::KnobChange;
    e.tsNs = monotonicNs();
    e.tid = static_cast<uint32_t>(syscall(SYS_gettid));
    e.pool = pool;
    e.device = static_cast<int16_t>(device);
    e.attr = attr;
    e.ptr = requested;
    e.size = newValue;
    e.aux = oldValue;
    e.variant = static_cast<uint8_t>(origin);
    e.flags = kHasOldValue | kFromPoolScope;
    if (after) {
        e.reserved = after->reservedCurrent;
        e.used = after->usedCurrent;
        e.flags |= kHasWatermarks;
    }
    return e;
}

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
    TargetDescription d = driver_.describe();
    h.process = std::move(d.process);
    h.devices = std::move(d.devices);
    h.streams = std::move(d.streams);
    h.tracePath = std::move(d.tracePath);
    // A failing pool listing must not fail the hello: the client can still ask again later.
    if (auto pools = driver_.listPools()) h.pools = std::move(*pools);
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
        auto pools = driver_.listPools();
        if (!pools) return failFrom(pools.error(), "cannot list pools");
        o.ack = Ack{};
        o.ack->op = Op::ListPools;
        o.ack->value = pools->size();
        o.ack->pools = std::move(*pools);
        return o;
    }
    case Op::Get: {
        if (r.attr < 1 || r.attr > 8)
            return fail(RemoteError::BadRequest, "unknown pool attribute " +
                                                     std::to_string(r.attr) +
                                                     " (valid: 1-8, see PoolAttr)");
        auto v = driver_.getAttribute(r.pool, PoolAttr(r.attr));
        if (!v) return failFrom(v.error(), "");
        o.ack = Ack{};
        o.ack->op = Op::Get;
        o.ack->pool = r.pool;
        o.ack->attr = r.attr;
        o.ack->value = *v;
        if (auto s = driver_.poolState(r.pool)) o.ack->state = std::move(*s);
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
    auto before = driver_.getAttribute(r.pool, a);
    if (!before) return failFrom(before.error(), "");
    if (Status s = driver_.setAttribute(r.pool, a, r.value, origin); !s)
        return failFrom(s.error(), "the driver refused to set " + std::string(attrCliName(a)) +
                                       " of pool " + hex(r.pool) + " to " +
                                       describeValue(a, r.value));
    auto after = driver_.getAttribute(r.pool, a);
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
    if (auto s = driver_.poolState(pool)) ack.state = std::move(*s);
    int device = ack.state ? ack.state->info.device : -1;
    // The real collector records its own knob events (with the driver's watermarks); the
    // handler records them only for drivers that do not.
    if (!driver_.recordsKnobChanges())
        sink_.record(knobChangeEvent(pool, device, attr, requested, before, after,
                                     ack.state ? &*ack.state : nullptr, origin));
    return o;
}

RequestHandler::Outcome RequestHandler::applyTrim(const Request& r, KnobOrigin origin) {
    auto before = driver_.getAttribute(r.pool, PoolAttr::ReservedMemCurrent);
    if (!before) return failFrom(before.error(), "");
    if (Status s = driver_.trimTo(r.pool, r.value, origin); !s)
        return failFrom(s.error(), "the driver refused to trim pool " + hex(r.pool) + " to " +
                                       formatBytes(r.value));
    auto after = driver_.getAttribute(r.pool, PoolAttr::ReservedMemCurrent);
    if (!after) return failFrom(after.error(), "trimmed, but reading reserved back failed");
    return acknowledge(Op::TrimTo, r.pool, uint16_t(KnobAction::TrimTo), r.value, *before,
                       *after, origin);
}

RequestHandler::Outcome RequestHandler::applyReset(const Request& r, KnobOrigin origin) {
    auto before = driver_.getAttribute(r.pool, PoolAttr::ReservedMemHigh);
    if (!before) return failFrom(before.error(), "");
    if (Status s = driver_.resetHighWatermarks(r.pool, origin); !s)
        return failFrom(s.error(),
                        "the driver refused to reset the watermarks of pool " + hex(r.pool));
    auto after = driver_.getAttribute(r.pool, PoolAttr::ReservedMemHigh);
    if (!after) return failFrom(after.error(), "reset, but reading the watermark back failed");
    return acknowledge(Op::ResetWatermarks, r.pool, uint16_t(KnobAction::ResetHighWatermarks), 0,
                       *before, *after, origin);
}

} // namespace poolscope::control
