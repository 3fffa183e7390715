#include "poolscope/control/ControlClient.h"

#include "poolscope/control/UnixSocket.h"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace poolscope::control {

namespace {
Error lost() {
    return Error{ErrorCode::Io, "connection to the target closed (did the target exit?)"};
}
} // namespace

ErrorCode ControlClient::errorCodeFor(RemoteError e) {
    switch (e) {
    case RemoteError::Protocol:
    case RemoteError::Version:
        return ErrorCode::Protocol;
    case RemoteError::Permission:
        return ErrorCode::NotReadable;
    case RemoteError::NoSuchPool:
        return ErrorCode::NotFound;
    case RemoteError::BadRequest:
        return ErrorCode::InvalidArgument;
    case RemoteError::Driver:
    case RemoteError::Busy:
    case RemoteError::Internal:
        return ErrorCode::Io;
    }
    return ErrorCode::Io;
}

Result<std::unique_ptr<ControlClient>> ControlClient::connect(const std::string& socketPath,
                                                              const ClientOptions& options) {
    auto fd = connectUnix(socketPath, options.timeoutMs);
    if (!fd) return fd.error();
    std::unique_ptr<ControlClient> c(new ControlClient());
    c->fd_ = *fd;
    c->path_ = socketPath;
    c->options_ = options;
    int64_t deadline = monotonicMs() + options.timeoutMs;
    ClientHello h;
    h.client = options.clientName;
    h.origin = options.origin;
    h.subscribeEvents = options.subscribeEvents;
    auto bytes = encodeClientHello(h);
    if (Status s = sendAll(c->fd_, bytes.data(), bytes.size(), deadline); !s) {
        // A refused peer may already have been disconnected: prefer the server's own words.
        c->pump(100);
        if (c->helloError_) return *c->helloError_;
        return s.error();
    }
    while (!c->helloDone_ && !c->helloError_) {
        int64_t left = deadline - monotonicMs();
        if (left <= 0)
            return Error{ErrorCode::Io, "timed out after " + std::to_string(options.timeoutMs) +
                                            " ms waiting for the target's hello on " + socketPath +
                                            " (is the target stopped?)"};
        Status s = c->pump(int(left));
        if (!s) return c->helloError_ ? *c->helloError_ : s.error();
    }
    if (c->helloError_) return *c->helloError_;
    return c;
}

ControlClient::~ControlClient() {
    fail();
}

void ControlClient::fail() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
}

Result<uint32_t> ControlClient::sendRequest(const Request& r) {
    if (fd_ < 0) return lost();
    uint32_t id = nextId_++;
    if (nextId_ == 0) nextId_ = 1; // 0 is reserved for pushed frames
    auto bytes = encodeRequest(r, id);
    if (Status s = sendAll(fd_, bytes.data(), bytes.size(), monotonicMs() + options_.timeoutMs);
        !s) {
        fail();
        return s.error();
    }
    return id;
}

Result<Ack> ControlClient::request(const Request& r) {
    auto id = sendRequest(r);
    if (!id) return id.error();
    int64_t deadline = monotonicMs() + options_.timeoutMs;
    for (;;) {
        for (auto it = incoming_.begin(); it != incoming_.end(); ++it) {
            if (it->kind != Incoming::Kind::Reply || it->requestId != *id) continue;
            Incoming in = std::move(*it);
            incoming_.erase(it);
            if (in.ack) return std::move(*in.ack);
            return in.error;
        }
        int64_t left = deadline - monotonicMs();
        if (left <= 0)
            return Error{ErrorCode::Io, "timed out after " + std::to_string(options_.timeoutMs) +
                                            " ms waiting for the target to answer '" +
                                            std::string(opName(r.op)) + "'"};
        if (Status s = pump(int(left)); !s) return s.error();
    }
}

Status ControlClient::pump(int timeoutMs) {
    if (fd_ < 0) return lost();
    pollfd p{fd_, POLLIN, 0};
    int n = poll(&p, 1, timeoutMs);
    if (n < 0 && errno != EINTR) return Error{ErrorCode::Io, std::strerror(errno)};
    if (n <= 0) return {};
    uint8_t buf[64 * 1024];
    // Bounded reads per pump so a flood of events cannot starve the caller's loop.
    for (int i = 0; i < 64; ++i) {
        ssize_t r = recv(fd_, buf, sizeof buf, 0);
        if (r > 0) {
            reader_.append(buf, size_t(r));
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        // EOF or error: process what did arrive (often an Error frame explaining why) first.
        Frame f;
        while (reader_.next(f) == FrameReader::Status::Frame)
            handleFrame(f);
        fail();
        if (!helloDone_ && helloError_) return *helloError_;
        return lost();
    }
    Frame f;
    for (;;) {
        auto st = reader_.next(f);
        if (st == FrameReader::Status::NeedMore) break;
        if (st == FrameReader::Status::Failed) {
            fail();
            return Error{ErrorCode::Protocol, reader_.error()};
        }
        if (Status s = handleFrame(f); !s) {
            fail();
            return s;
        }
    }
    return {};
}

Status ControlClient::handleFrame(Frame& f) {
    if (f.header.version != kProtocolVersion) {
        Error e{ErrorCode::Protocol, versionMismatchMessage(f.header.version, true)};
        helloError_ = e;
        return e;
    }
    std::span<const uint8_t> payload(f.payload);
    switch (f.header.type) {
    case MsgType::ServerHello: {
        auto h = decodeServerHello(payload);
        if (!h) return h.error();
        if (h->protocol != kProtocolVersion) {
            Error e{ErrorCode::Protocol, versionMismatchMessage(h->protocol, true)};
            helloError_ = e;
            return e;
        }
        hello_ = std::move(*h);
        helloDone_ = true;
        return {};
    }
    case MsgType::Error: {
        auto e = decodeError(payload);
        if (!e) return e.error();
        Error err{errorCodeFor(e->code), e->message};
        if (!helloDone_) {
            helloError_ = err;
            return {};
        }
        Incoming in;
        in.kind = Incoming::Kind::Reply;
        in.requestId = f.header.requestId;
        in.error = err;
        incoming_.push_back(std::move(in));
        return {};
    }
    case MsgType::Ack: {
        auto a = decodeAck(payload);
        if (!a) return a.error();
        Incoming in;
        in.kind = Incoming::Kind::Reply;
        in.requestId = f.header.requestId;
        in.ack = std::move(*a);
        incoming_.push_back(std::move(in));
        return {};
    }
    case MsgType::EventBatch: {
        auto ev = decodeEventBatch(payload);
        if (!ev) return ev.error();
        Incoming in;
        in.kind = Incoming::Kind::Events;
        in.events = std::move(*ev);
        incoming_.push_back(std::move(in));
        return {};
    }
    case MsgType::Notice: {
        auto n = decodeNotice(payload);
        if (!n) return n.error();
        Incoming in;
        in.kind = Incoming::Kind::Notice;
        in.notice = std::move(*n);
        incoming_.push_back(std::move(in));
        return {};
    }
    case MsgType::ClientHello:
    case MsgType::Request:
        break;
    }
    return Error{ErrorCode::Protocol, "the target sent an unexpected message of type " +
                                          std::to_string(int(f.header.type))};
}

bool ControlClient::nextIncoming(Incoming& out) {
    if (incoming_.empty()) return false;
    out = std::move(incoming_.front());
    incoming_.pop_front();
    return true;
}

} // namespace poolscope::control
