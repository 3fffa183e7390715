#pragma once
// Client side of the control protocol, shared by `poolscope ctl` and the GUI. Blocking calls
// (connect, request) always carry a deadline: a stopped or wedged target gives a timeout error,
// never a hang. For an event loop (the GUI), use fd() with a socket notifier, then pump(0) and
// nextIncoming(); sendRequest() returns the id its Reply will carry.

#include "poolscope/Result.h"
#include "poolscope/control/FrameReader.h"
#include "poolscope/control/Protocol.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace poolscope::control {

struct ClientOptions {
    std::string clientName = "poolscope";
    KnobOrigin origin = KnobOrigin::Cli;
    bool subscribeEvents = false;
    int timeoutMs = 5000; // for connect, the handshake and each blocking request
};

// Something the server sent that is not the reply a blocking call waits for.
struct Incoming {
    enum class Kind { Events, Notice, Reply };
    Kind kind = Kind::Events;
    std::vector<Event> events; // Events
    Notice notice;             // Notice ("dropped N for display")
    uint32_t requestId = 0;    // Reply
    std::optional<Ack> ack;    // Reply: the ack, or
    Error error;               // Reply: the error when !ack
};

class ControlClient {
public:
    // Connects and does the handshake. Errors: NotFound (no target), NotReadable (permission
    // refused), Protocol (version mismatch, garbage), Io (timeout, connection lost).
    static Result<std::unique_ptr<ControlClient>> connect(const std::string& socketPath,
                                                          const ClientOptions& options = {});
    ~ControlClient();
    ControlClient(const ControlClient&) = delete;
    ControlClient& operator=(const ControlClient&) = delete;

    const ServerHello& hello() const { return hello_; }
    const std::string& socketPath() const { return path_; }
    bool connected() const { return fd_ >= 0; }
    int fd() const { return fd_; }

    // Blocking request: the Ack, or the server's error in plain words, or a timeout.
    Result<Ack> request(const Request& r);
    Result<Ack> get(uint64_t pool, PoolAttr attr) {
        return request({Op::Get, pool, uint16_t(attr), 0});
    }
    Result<Ack> set(uint64_t pool, PoolAttr attr, uint64_t value) {
        return request({Op::Set, pool, uint16_t(attr), value});
    }
    Result<Ack> trimTo(uint64_t pool, uint64_t minBytesToKeep) {
        return request({Op::TrimTo, pool, 0, minBytesToKeep});
    }
    Result<Ack> resetWatermarks(uint64_t pool) {
        return request({Op::ResetWatermarks, pool, 0, 0});
    }
    Result<Ack> listPools() { return request({Op::ListPools, 0, 0, 0}); }
    Result<Ack> subscribe(bool on) { return request({Op::Subscribe, 0, 0, on ? 1u : 0u}); }
    Result<Ack> ping() { return request({Op::Ping, 0, 0, 0}); }

    // Non-blocking use.
    Result<uint32_t> sendRequest(const Request& r);
    // Reads what arrives within timeoutMs (0: only what is already there) into the queue.
    // An error means the connection is gone (the target exited, or it sent garbage).
    Status pump(int timeoutMs);
    bool nextIncoming(Incoming& out);

    // The RemoteError of the last failed request, for callers that branch on it.
    static ErrorCode errorCodeFor(RemoteError e);

private:
    ControlClient() = default;
    Status handleFrame(Frame& f);
    void fail();

    int fd_ = -1;
    std::string path_;
    ClientOptions options_;
    ServerHello hello_;
    bool helloDone_ = false;
    std::optional<Error> helloError_;
    uint32_t nextId_ = 1;
    FrameReader reader_;
    std::deque<Incoming> incoming_;
};

} // namespace poolscope::control
