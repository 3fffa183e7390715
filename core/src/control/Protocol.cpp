#include "poolscope/control/Protocol.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "poolscope/JsonText.h"

namespace poolscope::control {

using nlohmann::json;

namespace {

std::vector<uint8_t> frame(MsgType type, uint32_t requestId, const std::string& payload) {
    FrameHeader h;
    h.type = type;
    h.requestId = requestId;
    h.length = static_cast<uint32_t>(payload.size());
    std::vector<uint8_t> out(sizeof h + payload.size());
    std::memcpy(out.data(), &h, sizeof h);
    if (!payload.empty()) std::memcpy(out.data() + sizeof h, payload.data(), payload.size());
    return out;
}

std::vector<uint8_t> frameJson(MsgType type, uint32_t requestId, const json& j) {
    // Replace invalid UTF-8 (a driver message, a command line) instead of throwing.
    return frame(type, requestId, dumpJson(j));
}

Error protocolError(std::string what) {
    return Error{ErrorCode::Protocol, std::move(what)};
}

json parse(std::span<const uint8_t> payload) {
    auto j = json::parse(payload.begin(), payload.end());
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    return j;
}

// Decoders run any JSON access inside this: a missing key or a wrong type becomes a Protocol error.
template <class T, class F> Result<T> guarded(const char* what, F&& f) {
    try {
        return f();
    } catch (const std::exception& e) {
        return protocolError(std::string("malformed ") + what + ": " + e.what());
    }
}

// nlohmann converts -1 to 2^64-1 and 3.7 to 3 without complaint: integers on the wire are
// checked explicitly so a hostile or buggy peer cannot smuggle a wrapped value into a knob.
uint64_t u64(const json& j, const char* key, std::optional<uint64_t> fallback = std::nullopt) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (fallback) return *fallback;
        throw std::runtime_error(std::string("missing field '") + key + "'");
    }
    if (!it->is_number_unsigned())
        throw std::runtime_error(std::string("field '") + key + "' must be a non-negative integer");
    return it->get<uint64_t>();
}

uint16_t u16(const json& j, const char* key, std::optional<uint16_t> fallback = std::nullopt) {
    uint64_t v = u64(j, key, fallback);
    if (v > 0xffff) throw std::runtime_error(std::string("field '") + key + "' is out of range");
    return uint16_t(v);
}

template <class T> T opt(const json& j, const char* key, T fallback) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return fallback;
    return it->get<T>();
}

json toJson(const ProcessInfo& p) {
    return json{{"pid", p.pid},
                {"command_line", p.commandLine},
                {"start_time_unix_ns", p.startTimeUnixNs},
                {"start_time_mono_ns", p.startTimeMonoNs},
                {"host", p.host},
                {"driver_version", p.driverVersion},
                {"runtime_version", p.runtimeVersion},
                {"collector_version", p.collectorVersion},
                {"parent_pid", p.parentPid}};
}

ProcessInfo processFromJson(const json& j) {
    ProcessInfo p;
    p.pid = opt<int64_t>(j, "pid", 0);
    p.commandLine = opt<std::string>(j, "command_line", "");
    p.startTimeUnixNs = opt<int64_t>(j, "start_time_unix_ns", 0);
    p.startTimeMonoNs = opt<int64_t>(j, "start_time_mono_ns", 0);
    p.host = opt<std::string>(j, "host", "");
    p.driverVersion = opt<int>(j, "driver_version", 0);
    p.runtimeVersion = opt<int>(j, "runtime_version", 0);
    p.collectorVersion = opt<std::string>(j, "collector_version", "");
    p.parentPid = opt<int64_t>(j, "parent_pid", 0);
    return p;
}

json toJson(const DeviceInfo& d) {
    return json{{"ordinal", d.ordinal},
                {"name", d.name},
                {"total_memory", d.totalMemory},
                {"uuid", d.uuid}};
}

DeviceInfo deviceFromJson(const json& j) {
    DeviceInfo d;
    d.ordinal = j.at("ordinal").get<int>();
    d.name = opt<std::string>(j, "name", "");
    d.totalMemory = opt<uint64_t>(j, "total_memory", 0);
    d.uuid = opt<std::string>(j, "uuid", "");
    return d;
}

json toJson(const StreamInfo& s) {
    return json{{"handle", s.handle},     {"device", s.device},
                {"priority", s.priority}, {"flags", s.flags},
                {"priority_known", s.priorityKnown}};
}

StreamInfo streamFromJson(const json& j) {
    StreamInfo s;
    s.handle = j.at("handle").get<uint64_t>();
    s.device = opt<int>(j, "device", -1);
    s.priority = opt<int>(j, "priority", 0);
    s.flags = opt<uint32_t>(j, "flags", 0);
    s.priorityKnown = opt<bool>(j, "priority_known", false);
    return s;
}

json toJson(const PoolState& s) {
    return json{{"handle", s.info.handle},
                {"device", s.info.device},
                {"kind", std::string(poolKindName(s.info.kind))},
                {"handle_types", s.info.handleTypes},
                {"location_type", s.info.locationType},
                {"location_id", s.info.locationId},
                {"max_size", s.info.maxSize},
                {"created_ts_ns", s.info.createdTsNs},
                {"release_threshold", s.releaseThreshold},
                {"reuse_follow_event_dependencies", s.reuseFollowEventDependencies},
                {"reuse_allow_opportunistic", s.reuseAllowOpportunistic},
                {"reuse_allow_internal_dependencies", s.reuseAllowInternalDependencies},
                {"reserved_mem_current", s.reservedCurrent},
                {"reserved_mem_high", s.reservedHigh},
                {"used_mem_current", s.usedCurrent},
                {"used_mem_high", s.usedHigh}};
}

PoolKind poolKindFromName(const std::string& n) {
    for (PoolKind k : {PoolKind::Default, PoolKind::Explicit, PoolKind::Imported})
        if (poolKindName(k) == n) return k;
    return PoolKind::Unknown;
}

PoolState poolFromJson(const json& j) {
    PoolState s;
    s.info.handle = j.at("handle").get<uint64_t>();
    s.info.device = opt<int>(j, "device", -1);
    s.info.kind = poolKindFromName(opt<std::string>(j, "kind", "unknown"));
    s.info.handleTypes = opt<uint32_t>(j, "handle_types", 0);
    s.info.locationType = opt<int>(j, "location_type", 0);
    s.info.locationId = opt<int>(j, "location_id", 0);
    s.info.maxSize = opt<uint64_t>(j, "max_size", 0);
    s.info.createdTsNs = opt<int64_t>(j, "created_ts_ns", 0);
    s.releaseThreshold = opt<uint64_t>(j, "release_threshold", 0);
    s.reuseFollowEventDependencies = opt<bool>(j, "reuse_follow_event_dependencies", false);
    s.reuseAllowOpportunistic = opt<bool>(j, "reuse_allow_opportunistic", false);
    s.reuseAllowInternalDependencies = opt<bool>(j, "reuse_allow_internal_dependencies", false);
    s.reservedCurrent = opt<uint64_t>(j, "reserved_mem_current", 0);
    s.reservedHigh = opt<uint64_t>(j, "reserved_mem_high", 0);
    s.usedCurrent = opt<uint64_t>(j, "used_mem_current", 0);
    s.usedHigh = opt<uint64_t>(j, "used_mem_high", 0);
    return s;
}

std::string_view originName(KnobOrigin o) {
    switch (o) {
    case KnobOrigin::Gui:
        return "gui";
    case KnobOrigin::Cli:
        return "cli";
    case KnobOrigin::Script:
        return "script";
    }
    return "cli";
}

json toJson(const ServerHello& m) {
    json pools = json::array(), devices = json::array(), streams = json::array();
    for (const auto& p : m.pools)
        pools.push_back(toJson(p));
    for (const auto& d : m.devices)
        devices.push_back(toJson(d));
    for (const auto& s : m.streams)
        streams.push_back(toJson(s));
    return json{{"protocol", m.protocol},   {"server", m.server}, {"process", toJson(m.process)},
                {"devices", devices},       {"pools", pools},     {"streams", streams},
                {"trace_path", m.tracePath}};
}

json toJson(const Ack& m) {
    json j{{"op", std::string(opName(m.op))},
           {"pool", m.pool},
           {"attr", m.attr},
           {"attr_name", std::string(poolAttrName(m.attr))},
           {"requested", m.requested},
           {"value", m.value}};
    if (m.hasOld) j["old_value"] = m.oldValue;
    if (m.state) j["state"] = toJson(*m.state);
    if (m.op == Op::ListPools) {
        json pools = json::array();
        for (const auto& p : m.pools)
            pools.push_back(toJson(p));
        j["pools"] = pools;
        if (!m.devices.empty()) {
            json devices = json::array();
            for (const auto& d : m.devices)
                devices.push_back(toJson(d));
            j["devices"] = devices;
        }
    }
    return j;
}

} // namespace

uint64_t PoolState::attribute(PoolAttr a) const {
    switch (a) {
    case PoolAttr::ReuseFollowEventDependencies:
        return reuseFollowEventDependencies ? 1 : 0;
    case PoolAttr::ReuseAllowOpportunistic:
        return reuseAllowOpportunistic ? 1 : 0;
    case PoolAttr::ReuseAllowInternalDependencies:
        return reuseAllowInternalDependencies ? 1 : 0;
    case PoolAttr::ReleaseThreshold:
        return releaseThreshold;
    case PoolAttr::ReservedMemCurrent:
        return reservedCurrent;
    case PoolAttr::ReservedMemHigh:
        return reservedHigh;
    case PoolAttr::UsedMemCurrent:
        return usedCurrent;
    case PoolAttr::UsedMemHigh:
        return usedHigh;
    }
    return kUnknown;
}

std::string_view msgTypeName(MsgType t) {
    switch (t) {
    case MsgType::ClientHello:
        return "client_hello";
    case MsgType::ServerHello:
        return "server_hello";
    case MsgType::Request:
        return "request";
    case MsgType::Ack:
        return "ack";
    case MsgType::Error:
        return "error";
    case MsgType::EventBatch:
        return "event_batch";
    case MsgType::Notice:
        return "notice";
    }
    return "unknown";
}

namespace {
constexpr std::pair<Op, std::string_view> kOps[] = {
    {Op::Get, "get"},
    {Op::Set, "set"},
    {Op::TrimTo, "trim_to"},
    {Op::ResetWatermarks, "reset_watermarks"},
    {Op::ListPools, "list_pools"},
    {Op::Subscribe, "subscribe"},
    {Op::Ping, "ping"},
};
constexpr std::pair<PoolAttr, std::string_view> kAttrs[] = {
    {PoolAttr::ReleaseThreshold, "release-threshold"},
    {PoolAttr::ReuseFollowEventDependencies, "reuse-follow-event-dependencies"},
    {PoolAttr::ReuseAllowOpportunistic, "reuse-allow-opportunistic"},
    {PoolAttr::ReuseAllowInternalDependencies, "reuse-allow-internal-dependencies"},
    {PoolAttr::ReservedMemCurrent, "reserved-current"},
    {PoolAttr::ReservedMemHigh, "reserved-high"},
    {PoolAttr::UsedMemCurrent, "used-current"},
    {PoolAttr::UsedMemHigh, "used-high"},
};
} // namespace

std::string_view opName(Op op) {
    for (auto& [o, n] : kOps)
        if (o == op) return n;
    return "unknown";
}

bool opFromName(std::string_view name, Op& out) {
    for (auto& [o, n] : kOps)
        if (n == name) {
            out = o;
            return true;
        }
    return false;
}

std::string_view remoteErrorName(RemoteError e) {
    switch (e) {
    case RemoteError::Protocol:
        return "protocol";
    case RemoteError::Version:
        return "version";
    case RemoteError::Permission:
        return "permission";
    case RemoteError::NoSuchPool:
        return "no_such_pool";
    case RemoteError::BadRequest:
        return "bad_request";
    case RemoteError::Driver:
        return "driver";
    case RemoteError::Busy:
        return "busy";
    case RemoteError::Internal:
        return "internal";
    }
    return "internal";
}

std::string_view attrCliName(PoolAttr a) {
    for (auto& [x, n] : kAttrs)
        if (x == a) return n;
    return "unknown";
}

bool attrFromCliName(std::string_view name, PoolAttr& out) {
    std::string n(name);
    for (char& c : n)
        if (c == '_') c = '-';
    for (auto& [x, cli] : kAttrs)
        if (cli == n) {
            out = x;
            return true;
        }
    // The schema's names ("reserved_mem_current") are accepted as well.
    for (uint16_t v = 1; v <= 8; ++v) {
        std::string s(poolAttrName(v));
        for (char& c : s)
            if (c == '_') c = '-';
        if (s == n) {
            out = static_cast<PoolAttr>(v);
            return true;
        }
    }
    return false;
}

bool attrIsSettable(PoolAttr a) {
    return a == PoolAttr::ReleaseThreshold || attrIsBoolean(a);
}

bool attrIsBoolean(PoolAttr a) {
    return a == PoolAttr::ReuseFollowEventDependencies || a == PoolAttr::ReuseAllowOpportunistic ||
           a == PoolAttr::ReuseAllowInternalDependencies;
}

std::string versionMismatchMessage(uint16_t theirs, bool theyAreServer) {
    std::string who = theyAreServer ? "the target's collector" : "the client";
    return "protocol mismatch: " + who + " speaks PoolScope control protocol version " +
           std::to_string(theirs) + ", this side speaks version " +
           std::to_string(kProtocolVersion) +
           "; use the poolscope and collector of the same release";
}

// ---- encoders ----

std::vector<uint8_t> encodeClientHello(const ClientHello& m) {
    return frameJson(MsgType::ClientHello, 0,
                     json{{"protocol", m.protocol},
                          {"client", m.client},
                          {"origin", std::string(originName(m.origin))},
                          {"subscribe_events", m.subscribeEvents}});
}

std::vector<uint8_t> encodeServerHello(const ServerHello& m) {
    return frameJson(MsgType::ServerHello, 0, toJson(m));
}

std::vector<uint8_t> encodeRequest(const Request& m, uint32_t requestId) {
    return frameJson(MsgType::Request, requestId,
                     json{{"op", std::string(opName(m.op))},
                          {"pool", m.pool},
                          {"attr", m.attr},
                          {"value", m.value}});
}

std::vector<uint8_t> encodeAck(const Ack& m, uint32_t requestId) {
    return frameJson(MsgType::Ack, requestId, toJson(m));
}

std::vector<uint8_t> encodeError(const ErrorReply& m, uint32_t requestId) {
    return frameJson(MsgType::Error, requestId,
                     json{{"code", std::string(remoteErrorName(m.code))}, {"message", m.message}});
}

std::vector<uint8_t> encodeNotice(const Notice& m) {
    return frameJson(
        MsgType::Notice, 0,
        json{{"dropped", m.dropped}, {"total_dropped", m.totalDropped}, {"message", m.message}});
}

void appendEventBatch(std::vector<uint8_t>& out, std::span<const Event> events) {
    if (events.size() > kMaxBatchEvents) events = events.first(kMaxBatchEvents);
    EventBatchHeader b;
    b.count = static_cast<uint32_t>(events.size());
    FrameHeader h;
    h.type = MsgType::EventBatch;
    h.length = static_cast<uint32_t>(sizeof b + events.size_bytes());
    size_t at = out.size();
    out.resize(at + sizeof h + h.length);
    std::memcpy(out.data() + at, &h, sizeof h);
    std::memcpy(out.data() + at + sizeof h, &b, sizeof b);
    if (!events.empty())
        std::memcpy(out.data() + at + sizeof h + sizeof b, events.data(), events.size_bytes());
}

// ---- decoders ----

Result<ClientHello> decodeClientHello(std::span<const uint8_t> payload) {
    return guarded<ClientHello>("hello", [&]() -> Result<ClientHello> {
        json j = parse(payload);
        ClientHello m;
        m.protocol = u16(j, "protocol");
        m.client = opt<std::string>(j, "client", "");
        std::string origin = opt<std::string>(j, "origin", "cli");
        if (origin == "gui")
            m.origin = KnobOrigin::Gui;
        else if (origin == "script")
            m.origin = KnobOrigin::Script;
        else if (origin == "cli")
            m.origin = KnobOrigin::Cli;
        else
            return protocolError("malformed hello: unknown origin '" + origin + "'");
        m.subscribeEvents = opt<bool>(j, "subscribe_events", false);
        return m;
    });
}

Result<ServerHello> decodeServerHello(std::span<const uint8_t> payload) {
    return guarded<ServerHello>("server hello", [&]() -> Result<ServerHello> {
        json j = parse(payload);
        ServerHello m;
        m.protocol = u16(j, "protocol");
        m.server = opt<std::string>(j, "server", "");
        if (j.contains("process")) m.process = processFromJson(j.at("process"));
        for (const auto& d : j.value("devices", json::array()))
            m.devices.push_back(deviceFromJson(d));
        for (const auto& p : j.value("pools", json::array()))
            m.pools.push_back(poolFromJson(p));
        for (const auto& s : j.value("streams", json::array()))
            m.streams.push_back(streamFromJson(s));
        m.tracePath = opt<std::string>(j, "trace_path", "");
        return m;
    });
}

Result<Request> decodeRequest(std::span<const uint8_t> payload) {
    return guarded<Request>("request", [&]() -> Result<Request> {
        json j = parse(payload);
        Request m;
        std::string op = j.at("op").get<std::string>();
        if (!opFromName(op, m.op)) return protocolError("unknown request op '" + op + "'");
        m.pool = u64(j, "pool", 0);
        m.attr = u16(j, "attr", 0);
        m.value = u64(j, "value", 0);
        return m;
    });
}

Result<Ack> decodeAck(std::span<const uint8_t> payload) {
    return guarded<Ack>("acknowledgement", [&]() -> Result<Ack> {
        json j = parse(payload);
        Ack m;
        std::string op = j.at("op").get<std::string>();
        if (!opFromName(op, m.op)) return protocolError("unknown op '" + op + "' in ack");
        m.pool = u64(j, "pool", 0);
        m.attr = u16(j, "attr", 0);
        m.requested = u64(j, "requested", 0);
        m.value = u64(j, "value", 0);
        if (j.contains("old_value")) {
            m.hasOld = true;
            m.oldValue = u64(j, "old_value");
        }
        if (j.contains("state")) m.state = poolFromJson(j.at("state"));
        for (const auto& p : j.value("pools", json::array()))
            m.pools.push_back(poolFromJson(p));
        for (const auto& d : j.value("devices", json::array()))
            m.devices.push_back(deviceFromJson(d));
        return m;
    });
}

Result<ErrorReply> decodeError(std::span<const uint8_t> payload) {
    return guarded<ErrorReply>("error reply", [&]() -> Result<ErrorReply> {
        json j = parse(payload);
        ErrorReply m;
        std::string code = opt<std::string>(j, "code", "internal");
        m.code = RemoteError::Internal;
        for (int c = 1; c <= 8; ++c)
            if (remoteErrorName(static_cast<RemoteError>(c)) == code)
                m.code = static_cast<RemoteError>(c);
        m.message = opt<std::string>(j, "message", "");
        return m;
    });
}

Result<Notice> decodeNotice(std::span<const uint8_t> payload) {
    return guarded<Notice>("notice", [&]() -> Result<Notice> {
        json j = parse(payload);
        Notice m;
        m.dropped = opt<uint64_t>(j, "dropped", 0);
        m.totalDropped = opt<uint64_t>(j, "total_dropped", 0);
        m.message = opt<std::string>(j, "message", "");
        return m;
    });
}

Result<std::vector<Event>> decodeEventBatch(std::span<const uint8_t> payload) {
    EventBatchHeader b;
    if (payload.size() < sizeof b) return protocolError("event batch shorter than its header");
    std::memcpy(&b, payload.data(), sizeof b);
    if (b.eventSize != sizeof(Event))
        return protocolError("event batch carries " + std::to_string(b.eventSize) +
                             "-byte events, this build expects " + std::to_string(sizeof(Event)));
    if (b.count > kMaxBatchEvents || payload.size() != sizeof b + size_t(b.count) * sizeof(Event))
        return protocolError("event batch length does not match its event count");
    std::vector<Event> events(b.count);
    if (b.count) std::memcpy(events.data(), payload.data() + sizeof b, b.count * sizeof(Event));
    return events;
}

std::string poolStateJson(const PoolState& s) {
    return dumpJson(toJson(s), 2);
}
std::string serverHelloJson(const ServerHello& h) {
    return dumpJson(toJson(h), 2);
}
std::string ackJson(const Ack& a) {
    return dumpJson(toJson(a), 2);
}

} // namespace poolscope::control
