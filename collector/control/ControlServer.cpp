#include "ControlServer.h"

#include "poolscope/control/Discovery.h"
#include "poolscope/control/FrameReader.h"
#include "poolscope/control/UnixSocket.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace poolscope::control {

namespace {
// Stop reading a client's requests while this much of its output is unsent (it is not reading).
constexpr size_t kReadPauseBytes = 1u << 20;
// Only add event batches while less than this is unsent, so a slow client backs up into its
// bounded queue (where overflow is counted) instead of into unbounded socket output.
constexpr size_t kEventLowWater = 256u << 10;
// A client that keeps sending garbage is cut off after this many error replies.
constexpr int kMaxErrorsPerClient = 64;
// Grace period for a closing client to read its final error.
constexpr int64_t kCloseGraceMs = 500;
} // namespace

struct ControlServer::LiveQueue {
    std::vector<Event> ring; // fixed capacity, allocated at subscribe
    size_t head = 0;         // oldest
    size_t count = 0;
    uint64_t dropped = 0; // since the last Notice
};

struct ControlServer::Client {
    int fd = -1;
    uint32_t uid = 0;
    int32_t pid = 0;
    FrameReader reader{kMaxRequestPayload};
    std::vector<uint8_t> out;
    size_t outPos = 0;
    bool helloDone = false;
    KnobOrigin origin = KnobOrigin::Cli;
    std::shared_ptr<LiveQueue> live; // set while subscribed
    uint64_t totalDropped = 0;
    int errors = 0;
    bool closing = false;
    int64_t helloDeadlineMs = 0;
    int64_t closeDeadlineMs = 0;
    size_t pending() const { return out.size() - outPos; }
};

ControlServer::ControlServer(PoolControl& target, ServerOptions options)
    : handler_(target), options_(std::move(options)) {
    if (options_.allowedUid < 0) options_.allowedUid = getuid();
}

ControlServer::~ControlServer() {
    stop();
}

void ControlServer::logLine(const std::string& s) {
    if (options_.log) options_.log(s);
}

Status ControlServer::createSocket() {
    if (options_.socketPath.empty()) {
        std::string dir = options_.directory.empty() ? defaultControlDir() : options_.directory;
        Status ok = ensurePrivateDir(dir);
        if (!ok) {
            // A safe private place still gives a usable (if not discoverable) socket.
            char tmpl[] = "/tmp/poolscope-ctl-XXXXXX";
            if (!mkdtemp(tmpl))
                return Error{ErrorCode::WriteFailed,
                             ok.error().message +
                                 "; no private fallback directory either: " + std::strerror(errno)};
            logLine(ok.error().message + "; using " + std::string(tmpl) +
                    " instead (not listed for attach by pid)");
            dir = tmpl;
            madeTempDir_ = dir;
        }
        path_ = socketPathForPid(dir, getpid());
    } else {
        path_ = options_.socketPath;
    }
    sockaddr_un addr;
    if (Status s = makeUnixAddress(path_, addr); !s) return s;

    struct stat st {};
    if (lstat(path_.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return Error{ErrorCode::WriteFailed, path_ + " exists and is not a socket"};
        // A socket left by a dead process (pid reuse, crash) is stale; a live one is not ours.
        if (auto fd = connectUnix(path_, 200)) {
            close(*fd);
            return Error{ErrorCode::WriteFailed, "another process already listens on " + path_};
        }
        unlink(path_.c_str());
    }
    listenFd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listenFd_ < 0)
        return Error{ErrorCode::Io, std::string("socket(): ") + std::strerror(errno)};
    if (bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        int e = errno;
        close(listenFd_);
        listenFd_ = -1;
        return Error{ErrorCode::WriteFailed,
                     "cannot create control socket " + path_ + ": " + std::strerror(e)};
    }
    // chmod after bind (not umask: that is process-wide and the target's). The directory is
    // 0700, so nobody else can reach the socket in between.
    chmod(path_.c_str(), 0600);
    if (listen(listenFd_, 16) != 0) {
        int e = errno;
        close(listenFd_);
        listenFd_ = -1;
        unlink(path_.c_str());
        return Error{ErrorCode::Io, std::string("listen(): ") + std::strerror(e)};
    }
    return {};
}

Status ControlServer::start() {
    if (running_) return {};
    if (Status s = createSocket(); !s) return s;
    wakeFd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeFd_ < 0) {
        close(listenFd_);
        listenFd_ = -1;
        unlink(path_.c_str());
        return Error{ErrorCode::Io, std::string("eventfd(): ") + std::strerror(errno)};
    }
    stopping_ = false;
    // The thread starts with every signal blocked: the target's handlers must not run on it.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::exception& e) {
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
        close(listenFd_);
        close(wakeFd_);
        listenFd_ = wakeFd_ = -1;
        unlink(path_.c_str());
        return Error{ErrorCode::Io, std::string("cannot start the control thread: ") + e.what()};
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    running_ = true;
    logLine("control socket: " + path_);
    return {};
}

void ControlServer::stop() {
    if (!running_.exchange(false)) return;
    stopping_ = true;
    wake();
    if (thread_.joinable()) thread_.join();
    for (auto& c : clients_)
        if (c->fd >= 0) close(c->fd);
    clients_.clear();
    {
        std::lock_guard lock(liveMutex_);
        subscribers_.clear();
    }
    clientCount_ = 0;
    if (listenFd_ >= 0) close(listenFd_);
    if (wakeFd_ >= 0) close(wakeFd_);
    listenFd_ = wakeFd_ = -1;
    unlink(path_.c_str());
    if (!madeTempDir_.empty()) rmdir(madeTempDir_.c_str());
}

void ControlServer::abandonAfterFork() {
    // No thread exists in the child and the parent still serves the socket file. clients_ is
    // deliberately left alone: fork() may have copied it in the middle of a change by the
    // server thread, and walking it could crash the child; its descriptors close at exit/exec.
    if (thread_.joinable()) thread_.detach();
    if (listenFd_ >= 0) close(listenFd_);
    if (wakeFd_ >= 0) close(wakeFd_);
    listenFd_ = wakeFd_ = -1;
    running_ = false;
}

void ControlServer::wake() {
    if (wakeFd_ < 0) return;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(wakeFd_, &one, sizeof one);
}

void ControlServer::onEvents(std::span<const Event> events) {
    if (events.empty() || !running_) return;
    bool any = false;
    {
        std::lock_guard lock(liveMutex_);
        for (auto& q : subscribers_) {
            size_t cap = q->ring.size();
            size_t room = cap - q->count;
            size_t n = std::min(room, events.size());
            for (size_t i = 0; i < n; ++i)
                q->ring[(q->head + q->count + i) % cap] = events[i];
            q->count += n;
            q->dropped += events.size() - n;
            dropped_ += events.size() - n;
            any = any || n > 0;
        }
    }
    published_ += events.size();
    // One wake-up per burst: the server clears the flag when it drains.
    if (any && !wakePending_.exchange(true)) wake();
}

ServerStats ControlServer::stats() const {
    ServerStats s;
    s.connectionsAccepted = accepted_;
    s.connectionsRefused = refused_;
    s.requests = requests_;
    s.errorsSent = errorsSent_;
    s.eventsPublished = published_;
    s.eventsDroppedForDisplay = dropped_;
    s.clients = clientCount_;
    return s;
}

void ControlServer::run() {
    pthread_setname_np(pthread_self(), "poolscope-ctl");
    if (options_.onThreadStart) options_.onThreadStart();
    std::vector<pollfd> fds;
    while (!stopping_) {
        fds.clear();
        fds.push_back({listenFd_, POLLIN, 0});
        fds.push_back({wakeFd_, POLLIN, 0});
        int64_t now = monotonicMs();
        int timeout = 1000;
        for (auto& c : clients_) {
            short ev = 0;
            if (!c->closing && c->pending() < kReadPauseBytes) ev |= POLLIN;
            if (c->pending() > 0) ev |= POLLOUT;
            fds.push_back({c->fd, ev, 0});
            int64_t deadline =
                c->closing ? c->closeDeadlineMs : (c->helloDone ? 0 : c->helloDeadlineMs);
            if (deadline > 0) timeout = int(std::clamp<int64_t>(deadline - now, 0, timeout));
        }
        int n = poll(fds.data(), fds.size(), timeout);
        if (n < 0 && errno != EINTR) {
            logLine(std::string("control thread: poll failed: ") + std::strerror(errno));
            break;
        }
        if (stopping_) break;
        if (fds[1].revents & POLLIN) {
            uint64_t v;
            [[maybe_unused]] ssize_t r = read(wakeFd_, &v, sizeof v);
        }
        wakePending_ = false;
        // Clients first (fds index i+2 belongs to clients_[i] as of the poll), then new ones.
        size_t polled = fds.size() - 2;
        for (size_t i = 0; i < polled && i < clients_.size(); ++i) {
            Client& c = *clients_[i];
            short re = fds[i + 2].revents;
            if (c.fd < 0) continue;
            if (re & (POLLIN | POLLHUP | POLLERR)) readClient(c);
            // fill, send, then refill what the socket took, so queued events never wait for
            // the next wake-up while the client is keeping up.
            for (int pass = 0; pass < 2 && c.fd >= 0; ++pass) {
                fillEvents(c);
                if (c.fd >= 0 && c.pending() > 0) flush(c);
            }
        }
        if (fds[0].revents & POLLIN) acceptClients();
        now = monotonicMs();
        for (auto& c : clients_) {
            if (c->fd < 0) continue;
            if (!c->helloDone && !c->closing && now >= c->helloDeadlineMs)
                sendError(*c, 0, int(RemoteError::Protocol),
                          "no hello received within " + std::to_string(options_.helloTimeoutMs) +
                              " ms",
                          true);
            if (c->closing && (c->pending() == 0 || now >= c->closeDeadlineMs)) closeClient(*c);
        }
        clients_.erase(std::remove_if(clients_.begin(), clients_.end(),
                                      [](const auto& c) { return c->fd < 0; }),
                       clients_.end());
        clientCount_ = clients_.size();
    }
}

void ControlServer::acceptClients() {
    for (;;) {
        int fd = accept4(listenFd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            // EAGAIN: drained. EMFILE and friends: the target is short of descriptors; leave the
            // pending connection for later rather than spin.
            return;
        }
        ucred cred{};
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
            int64_t(cred.uid) != options_.allowedUid) {
            ++refused_;
            auto bytes = encodeError(
                {RemoteError::Permission,
                 "permission refused: this target only accepts control connections from uid " +
                     std::to_string(options_.allowedUid) + ", you are uid " +
                     std::to_string(cred.uid)},
                0);
            [[maybe_unused]] ssize_t w = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
            logLine("refused a control connection from uid " + std::to_string(cred.uid) + " (pid " +
                    std::to_string(cred.pid) + ")");
            close(fd);
            continue;
        }
        // Only sessions (hello said) count against maxClients; connections still to say hello
        // have their own budget, and the oldest of them makes room for a new one.
        size_t sessions = 0, pending = 0;
        Client* oldestPending = nullptr;
        for (auto& other : clients_) {
            if (other->fd < 0 || other->closing) continue;
            if (other->helloDone) {
                ++sessions;
            } else {
                ++pending;
                if (!oldestPending) oldestPending = other.get(); // clients_ is in accept order
            }
        }
        if (sessions >= options_.maxClients) {
            refuseBusy(fd);
            continue;
        }
        if (pending >= std::max<size_t>(options_.maxPendingClients, 1) && oldestPending) {
            auto bytes = encodeError({RemoteError::Protocol,
                                      "closed: no hello received, and newer connections were "
                                      "waiting"},
                                     0);
            [[maybe_unused]] ssize_t w =
                send(oldestPending->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            closeClient(*oldestPending);
        }
        ++accepted_;
        auto c = std::make_unique<Client>();
        c->fd = fd;
        c->uid = cred.uid;
        c->pid = cred.pid;
        c->helloDeadlineMs = monotonicMs() + options_.helloTimeoutMs;
        clients_.push_back(std::move(c));
    }
}

std::string ControlServer::busyMessage() const {
    return "too many control clients (limit " + std::to_string(options_.maxClients) +
           "); close another session first";
}

void ControlServer::refuseBusy(int fd) {
    ++refused_;
    auto bytes = encodeError({RemoteError::Busy, busyMessage()}, 0);
    [[maybe_unused]] ssize_t w = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    close(fd);
}

void ControlServer::readClient(Client& c) {
    uint8_t buf[16 * 1024];
    // Bounded work per wake-up: one noisy client cannot monopolise the thread.
    for (int i = 0; i < 8 && !c.closing; ++i) {
        ssize_t r = recv(c.fd, buf, sizeof buf, 0);
        if (r > 0) {
            c.reader.append(buf, size_t(r));
            Frame f;
            for (;;) {
                auto st = c.reader.next(f);
                if (st == FrameReader::Status::NeedMore) break;
                if (st == FrameReader::Status::Failed) {
                    sendError(c, 0, int(RemoteError::Protocol), c.reader.error(), true);
                    return;
                }
                handleFrame(c, f);
                if (c.closing || c.fd < 0) return;
            }
            continue;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        closeClient(c); // EOF or reset
        return;
    }
}

void ControlServer::handleFrame(Client& c, Frame& f) {
    const uint32_t id = f.header.requestId;
    if (f.header.version != kProtocolVersion) {
        sendError(c, id, int(RemoteError::Version), versionMismatchMessage(f.header.version, false),
                  true);
        return;
    }
    std::span<const uint8_t> payload(f.payload);
    if (!c.helloDone) {
        if (f.header.type != MsgType::ClientHello) {
            sendError(c, id, int(RemoteError::Protocol),
                      "expected a hello first, got a message of type " +
                          std::to_string(int(f.header.type)),
                      true);
            return;
        }
        auto h = decodeClientHello(payload);
        if (!h) {
            sendError(c, id, int(RemoteError::Protocol), h.error().message, true);
            return;
        }
        if (h->protocol != kProtocolVersion) {
            sendError(c, id, int(RemoteError::Version), versionMismatchMessage(h->protocol, false),
                      true);
            return;
        }
        size_t sessions = 0;
        for (auto& other : clients_)
            sessions += other->fd >= 0 && !other->closing && other->helloDone;
        if (sessions >= options_.maxClients) { // the last slot went to another hello first
            sendError(c, id, int(RemoteError::Busy), busyMessage(), true);
            return;
        }
        c.helloDone = true;
        c.origin = h->origin;
        auto bytes = encodeServerHello(handler_.hello());
        c.out.insert(c.out.end(), bytes.begin(), bytes.end());
        if (h->subscribeEvents) subscribe(c, true);
        return;
    }
    switch (f.header.type) {
    case MsgType::Request: {
        auto r = decodeRequest(payload);
        if (!r) {
            sendError(c, id, int(RemoteError::Protocol), r.error().message, false);
            return;
        }
        handleRequest(c, id, *r);
        return;
    }
    case MsgType::ClientHello:
        sendError(c, id, int(RemoteError::Protocol), "hello received twice", false);
        return;
    default:
        sendError(c, id, int(RemoteError::Protocol),
                  "unexpected message type " + std::to_string(int(f.header.type)) +
                      " from a client",
                  false);
        return;
    }
}

void ControlServer::handleRequest(Client& c, uint32_t id, const Request& r) {
    ++requests_;
    if (r.op == Op::Subscribe) {
        if (r.value > 1) {
            sendError(c, id, int(RemoteError::BadRequest), "subscribe takes 0 or 1", false);
            return;
        }
        subscribe(c, r.value == 1);
        Ack a;
        a.op = Op::Subscribe;
        a.requested = a.value = r.value;
        auto bytes = encodeAck(a, id);
        c.out.insert(c.out.end(), bytes.begin(), bytes.end());
        return;
    }
    RequestHandler::Outcome o = handler_.handle(r, c.origin);
    if (!o.ack) {
        sendError(c, id, int(o.error.code), o.error.message, false);
        return;
    }
    auto bytes = encodeAck(*o.ack, id);
    c.out.insert(c.out.end(), bytes.begin(), bytes.end());
}

void ControlServer::sendError(Client& c, uint32_t id, int code, const std::string& msg,
                              bool thenClose) {
    ++errorsSent_;
    auto bytes = encodeError({RemoteError(code), msg}, id);
    c.out.insert(c.out.end(), bytes.begin(), bytes.end());
    if (++c.errors >= kMaxErrorsPerClient && !thenClose) {
        auto more = encodeError({RemoteError::Protocol, "too many bad messages; disconnecting"}, 0);
        c.out.insert(c.out.end(), more.begin(), more.end());
        thenClose = true;
    }
    if (thenClose && !c.closing) {
        c.closing = true;
        c.closeDeadlineMs = monotonicMs() + kCloseGraceMs;
        subscribe(c, false);
        shutdown(c.fd, SHUT_RD);
    }
}

void ControlServer::subscribe(Client& c, bool on) {
    std::lock_guard lock(liveMutex_);
    if (on && !c.live) {
        c.live = std::make_shared<LiveQueue>();
        c.live->ring.resize(std::max<size_t>(options_.clientQueueEvents, 1));
        subscribers_.push_back(c.live);
    } else if (!on && c.live) {
        subscribers_.erase(std::remove(subscribers_.begin(), subscribers_.end(), c.live),
                           subscribers_.end());
        c.live.reset();
    }
}

void ControlServer::fillEvents(Client& c) {
    if (!c.live || c.closing) return;
    std::vector<Event> batch;
    while (c.pending() < kEventLowWater) {
        uint64_t dropped = 0;
        {
            std::lock_guard lock(liveMutex_);
            LiveQueue& q = *c.live;
            dropped = q.dropped;
            q.dropped = 0;
            size_t n = std::min<size_t>(q.count, kMaxBatchEvents);
            batch.resize(n);
            for (size_t i = 0; i < n; ++i)
                batch[i] = q.ring[(q.head + i) % q.ring.size()];
            q.head = (q.head + n) % q.ring.size();
            q.count -= n;
        }
        // The notice goes before the events that follow the gap, so the client can mark it.
        if (dropped > 0) {
            c.totalDropped += dropped;
            Notice nt;
            nt.dropped = dropped;
            nt.totalDropped = c.totalDropped;
            nt.message = "dropped " + std::to_string(dropped) +
                         " events for display (this client reads too slowly); the trace on disk "
                         "is complete";
            auto bytes = encodeNotice(nt);
            c.out.insert(c.out.end(), bytes.begin(), bytes.end());
        }
        if (batch.empty()) return;
        appendEventBatch(c.out, batch);
    }
}

void ControlServer::flush(Client& c) {
    while (c.pending() > 0) {
        ssize_t w = send(c.fd, c.out.data() + c.outPos, c.pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c.outPos += size_t(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        closeClient(c); // EPIPE, ECONNRESET: the client went away
        return;
    }
    if (c.outPos == c.out.size()) {
        c.out.clear();
        c.outPos = 0;
    } else if (c.outPos > (1u << 20)) {
        c.out.erase(c.out.begin(), c.out.begin() + std::ptrdiff_t(c.outPos));
        c.outPos = 0;
    }
}

void ControlServer::closeClient(Client& c) {
    if (c.fd < 0) return;
    subscribe(c, false);
    close(c.fd);
    c.fd = -1;
}

} // namespace poolscope::control
