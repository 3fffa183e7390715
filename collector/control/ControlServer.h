#pragma once
// The control server that lives inside the target process (started by the collector when
// POOLSCOPE_LISTEN=1). One thread, poll()-based, owns every socket. It must never block, stall or
// crash the target: all sockets are non-blocking, each client has bounded buffers, malformed or
// hostile input gets an Error reply and at worst a disconnect, and writes use MSG_NOSIGNAL.
//
// Usage (collector, collector/src/PoolControl.cpp):
//   ControlServer server(target, options);
//   if (Status s = server.start(); !s) log(s.error().message);   // the target runs on regardless
//   ... writer thread, after each drain:  server.onEvents(events);  // LiveSink; never blocks
//   ... at shutdown (before CUDA teardown): server.stop();
// In a forked child: server.abandonAfterFork() (the thread does not exist there).

#include "LiveSink.h"
#include "PoolControl.h"
#include "RequestHandler.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace poolscope::control {

struct ServerOptions {
    // Explicit socket path. Empty: <directory>/<pid>.sock (see Discovery.h).
    std::string socketPath;
    // Discovery directory. Empty: defaultControlDir() ($POOLSCOPE_CONTROL_DIR,
    // $XDG_RUNTIME_DIR/poolscope or /tmp/poolscope-<uid>). If it is unsafe or cannot be created,
    // the server falls back to a private mkdtemp directory (not discoverable by pid; logged).
    std::string directory;
    // Peers whose SO_PEERCRED uid differs are refused. Default (-1): our own uid.
    int64_t allowedUid = -1;
    // Sessions: clients that said hello.
    size_t maxClients = 8;
    // Connections that have not said hello yet have their own budget, so idle ones cannot lock
    // sessions out until the hello timeout (issue #12); when it is full, a new connection
    // closes the oldest of them.
    size_t maxPendingClients = 16;
    // Per-client live queue, in events (96 B each). Overflow is counted and reported to that
    // client as "dropped N for display"; the trace is unaffected.
    size_t clientQueueEvents = 32768;
    // A connection that has not said hello by then is closed.
    int helloTimeoutMs = 5000;
    // Runs first on the server thread: the collector sets its thread_local "own call" guard here.
    std::function<void()> onThreadStart;
    // One line per problem, without prefix. The collector routes it to its own log
    // (collector/src/Log.h); without it the server stays silent (it runs inside the target).
    std::function<void(const std::string&)> log;
};

struct ServerStats {
    uint64_t connectionsAccepted = 0;
    uint64_t connectionsRefused = 0; // other uid, too many clients
    uint64_t requests = 0;
    uint64_t errorsSent = 0;
    uint64_t eventsPublished = 0;
    uint64_t eventsDroppedForDisplay = 0;
    size_t clients = 0;
};

class ControlServer final : public collector::LiveSink {
public:
    explicit ControlServer(PoolControl& target, ServerOptions options = {});
    ~ControlServer() override; // stop()
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Creates the socket (dir 0700, socket 0600) and starts the thread. The error says why in
    // plain words; the collector logs it and carries on recording without a control channel.
    Status start();
    // Stops the thread, closes every connection and removes the socket file. Idempotent.
    void stop() override;
    // In a child after fork(): close the inherited listening descriptors, leave the parent's
    // socket file alone. Safe to call in the child only (see the .cpp for why clients stay).
    void abandonAfterFork();

    bool running() const { return running_.load(); }
    const std::string& socketPath() const { return path_; }

    // Hands events to every subscribed client's bounded queue; never blocks on a client and never
    // allocates once queues exist. Thread-safe; meant for the collector's writer thread.
    void onEvents(std::span<const Event> events) override;

    ServerStats stats() const;

private:
    struct LiveQueue;
    struct Client;
    void run();
    void acceptClients();
    std::string busyMessage() const;
    void refuseBusy(int fd); // answers Busy and closes a connection not yet a client
    void readClient(Client& c);
    void handleFrame(Client& c, Frame& f);
    void handleRequest(Client& c, uint32_t id, const Request& r);
    void sendError(Client& c, uint32_t id, int code, const std::string& msg, bool thenClose);
    void fillEvents(Client& c);
    void flush(Client& c);
    void closeClient(Client& c);
    void subscribe(Client& c, bool on);
    void wake();
    void logLine(const std::string& s);
    Status createSocket();

    RequestHandler handler_;
    ServerOptions options_;
    std::string path_;
    std::string madeTempDir_; // removed at stop when we created it
    int listenFd_ = -1;
    int wakeFd_ = -1;
    std::thread thread_;
    std::atomic<bool> running_{false};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> wakePending_{false};

    std::vector<std::unique_ptr<Client>> clients_; // server thread only

    mutable std::mutex liveMutex_; // guards subscribers_ and every LiveQueue's content
    std::vector<std::shared_ptr<LiveQueue>> subscribers_;

    std::atomic<uint64_t> accepted_{0}, refused_{0}, requests_{0}, errorsSent_{0}, published_{0},
        dropped_{0};
    std::atomic<size_t> clientCount_{0};
};

} // namespace poolscope::control
