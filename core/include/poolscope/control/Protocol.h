#pragma once
// The live-session control protocol: the ONE definition shared by the collector's control server,
// `poolscope ctl` and the GUI. Local only (a Unix domain socket between processes of one user on
// one host), so multi-byte fields travel in host byte order.
//
// Framing. Every message is a 16-byte FrameHeader followed by `length` payload bytes. The header
// layout is frozen across protocol versions so that any two versions can read each other's headers
// and report a version mismatch in plain words instead of misparsing. Payloads:
//   - control messages (hello, request, ack, error, notice) are UTF-8 JSON objects. They are small
//     and rare, and JSON keeps them extensible and readable in `ctl --json` and in bug reports;
//   - live events (EventBatch) are binary: an EventBatchHeader then `count` poolscope::Event
//     records (96 bytes each, the same struct the rings and the trace use), so the hot stream
//     never goes through a text encoder.
//
// Conversation.
//   client -> ClientHello (protocol version, who it is, origin, whether it wants live events)
//   server -> ServerHello (process, devices, pools with current attributes, streams)   or Error
//   client -> Request{op}          server -> Ack (value read back from the driver)    or Error
//   server -> EventBatch / Notice  (pushed while subscribed; Notice says "dropped N for display")
// A request's FrameHeader::requestId is echoed in its Ack or Error; pushed frames use id 0.
//
// Errors and robustness. A peer that sends bad magic, an oversized frame or a wrong version gets
// an Error and is disconnected (the byte stream cannot be trusted after that). A well-framed but
// malformed or out-of-order message gets an Error and the connection stays usable. Nothing a
// client sends can block the target: the server runs its own thread and never waits on a client.
//
// Back-pressure. Each subscribed client has a bounded event queue. When it is full, events are
// counted instead of queued and the client later receives a Notice with the count. The trace on
// disk is written separately by the collector and stays complete.
//
// Knob changes. Each applied Set/TrimTo/ResetWatermarks is also recorded into the trace as one
// Event of kind KnobChange, built by the server with makeKnobChange. What its fields mean is
// defined once, in poolscope/EventFields.h (KnobFields): read them with KnobFields::of(e).
// The Ack of the change carries the same requested / old / value triple.

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace poolscope::control {

inline constexpr uint32_t kMagic = 0x54435350; // "PSCT" in memory on little-endian hosts
inline constexpr uint16_t kProtocolVersion = 1;
// Hard limit for any frame; a larger length is a framing error.
inline constexpr uint32_t kMaxPayload = 4u << 20;
// Clients only send small JSON requests: the server refuses anything larger.
inline constexpr uint32_t kMaxRequestPayload = 64u << 10;
// Events per EventBatch frame (4096 * 96 B = 384 KiB, well under kMaxPayload).
inline constexpr uint32_t kMaxBatchEvents = 4096;

enum class MsgType : uint8_t {
    ClientHello = 1, // client -> server, JSON
    ServerHello = 2, // server -> client, JSON
    Request = 3,     // client -> server, JSON
    Ack = 4,         // server -> client, JSON
    Error = 5,       // either way, JSON
    EventBatch = 6,  // server -> client, binary
    Notice = 7,      // server -> client, JSON
};
std::string_view msgTypeName(MsgType t);

// Frozen layout (all protocol versions): magic, version, type, flags, requestId, length.
struct FrameHeader {
    uint32_t magic = kMagic;
    uint16_t version = kProtocolVersion; // the sender's protocol version
    MsgType type = MsgType::Error;
    uint8_t flags = 0;      // none defined yet; receivers ignore unknown bits
    uint32_t requestId = 0; // echoed in replies; 0 for pushed frames
    uint32_t length = 0;    // payload bytes following the header
};
static_assert(sizeof(FrameHeader) == 16, "FrameHeader is a wire format: keep its size fixed");

struct EventBatchHeader {
    uint32_t count = 0;
    uint16_t eventSize = sizeof(Event); // lets a receiver refuse a batch of another Event layout
    uint16_t reserved0 = 0;
};
static_assert(sizeof(EventBatchHeader) == 8);

// A pool as the target's driver reports it right now.
struct PoolState {
    PoolInfo info;
    uint64_t releaseThreshold = 0;
    bool reuseFollowEventDependencies = false;
    bool reuseAllowOpportunistic = false;
    bool reuseAllowInternalDependencies = false;
    uint64_t reservedCurrent = 0;
    uint64_t reservedHigh = 0;
    uint64_t usedCurrent = 0;
    uint64_t usedHigh = 0;

    uint64_t attribute(PoolAttr a) const; // kUnknown for attributes outside 1..8
};

struct ClientHello {
    uint16_t protocol = kProtocolVersion;
    std::string client;                  // "poolscope ctl 0.1.0", "poolscope-gui 0.1.0"
    KnobOrigin origin = KnobOrigin::Cli; // recorded in KnobChange events of this connection
    bool subscribeEvents = false;        // start the live event stream right after the hello
};

struct ServerHello {
    uint16_t protocol = kProtocolVersion;
    std::string server; // "poolscope collector 0.1.0"
    ProcessInfo process;
    std::vector<DeviceInfo> devices;
    std::vector<PoolState> pools;
    std::vector<StreamInfo> streams;
    std::string tracePath; // where the collector writes the trace ("" when not recording)
};

enum class Op : uint8_t {
    Get = 1,             // pool, attr -> Ack.value
    Set = 2,             // pool, attr, value -> Ack.oldValue, Ack.value (read back)
    TrimTo = 3,          // pool, value=minBytesToKeep -> Ack.oldValue/value: reserved before/after
    ResetWatermarks = 4, // pool -> Ack.state with the reset high watermarks
    ListPools = 5,       // -> Ack.pools
    Subscribe = 6,       // value=1 start / 0 stop the live event stream
    Ping = 7,            // -> Ack (liveness)
};
std::string_view opName(Op op);
bool opFromName(std::string_view name, Op& out);

struct Request {
    Op op = Op::Ping;
    uint64_t pool = 0;
    uint16_t attr = 0; // PoolAttr for Get/Set
    uint64_t value = 0;
};

struct Ack {
    Op op = Op::Ping;
    uint64_t pool = 0;
    uint16_t attr = 0;
    uint64_t requested = 0;
    bool hasOld = false;
    uint64_t oldValue = 0;
    uint64_t value = 0;             // what the driver reports after the operation
    std::optional<PoolState> state; // the pool after the operation, when it concerns one pool
    std::vector<PoolState> pools;   // ListPools
    // ListPools: the devices the target knows now. A target learns a device at its first CUDA
    // call there, often after a client's hello, whose device list then lacks it. Optional on
    // the wire ("devices"): a server before it sends none and a client before it ignores it, so
    // the protocol version did not change.
    std::vector<DeviceInfo> devices;
};

// Error codes travel as stable lower-case strings.
enum class RemoteError : uint8_t {
    Protocol = 1,   // malformed, oversized or out-of-order message
    Version = 2,    // protocol version mismatch
    Permission = 3, // peer of another user refused
    NoSuchPool = 4,
    BadRequest = 5, // well-formed but not allowed (read-only attribute, value out of range...)
    Driver = 6,     // the CUDA driver refused; the message has its words
    Busy = 7,       // too many clients
    Internal = 8,
};
std::string_view remoteErrorName(RemoteError e);

struct ErrorReply {
    RemoteError code = RemoteError::Protocol;
    std::string message; // plain words, shown to a person as is
};

struct Notice {
    uint64_t dropped = 0;      // events not delivered to this client since the last notice
    uint64_t totalDropped = 0; // over the connection
    std::string message;
};

// Helpers shared by the CLI and the GUI: the user-facing attribute names ("release-threshold",
// "reuse-allow-opportunistic", ...). Underscores are accepted too.
std::string_view attrCliName(PoolAttr a);
bool attrFromCliName(std::string_view name, PoolAttr& out);
bool attrIsSettable(PoolAttr a);
bool attrIsBoolean(PoolAttr a);

// ---- Encoding: each returns a complete frame (header + payload). ----
std::vector<uint8_t> encodeClientHello(const ClientHello& m);
std::vector<uint8_t> encodeServerHello(const ServerHello& m);
std::vector<uint8_t> encodeRequest(const Request& m, uint32_t requestId);
std::vector<uint8_t> encodeAck(const Ack& m, uint32_t requestId);
std::vector<uint8_t> encodeError(const ErrorReply& m, uint32_t requestId);
std::vector<uint8_t> encodeNotice(const Notice& m);
// Appends one EventBatch frame (events.size() <= kMaxBatchEvents) to out.
void appendEventBatch(std::vector<uint8_t>& out, std::span<const Event> events);

// A frame whose header passed the framing checks (magic, length).
struct Frame {
    FrameHeader header;
    std::vector<uint8_t> payload;
};

// ---- Decoding of payloads: Error{Protocol} with a plain message on anything malformed. ----
Result<ClientHello> decodeClientHello(std::span<const uint8_t> payload);
Result<ServerHello> decodeServerHello(std::span<const uint8_t> payload);
Result<Request> decodeRequest(std::span<const uint8_t> payload);
Result<Ack> decodeAck(std::span<const uint8_t> payload);
Result<ErrorReply> decodeError(std::span<const uint8_t> payload);
Result<Notice> decodeNotice(std::span<const uint8_t> payload);
Result<std::vector<Event>> decodeEventBatch(std::span<const uint8_t> payload);

// JSON text of a message for `ctl --json` (same field names as on the wire).
std::string poolStateJson(const PoolState& s);
std::string serverHelloJson(const ServerHello& h);
std::string ackJson(const Ack& a);

// The message a person sees for a version mismatch; used by both sides.
std::string versionMismatchMessage(uint16_t theirs, bool theyAreServer);

} // namespace poolscope::control
