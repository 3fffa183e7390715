// The control server in-process behind the fake driver: handshake, knob requests with read-back
// acks, KnobChange events, live events with back-pressure, and refusal of bad peers.
#include "ServerFixture.h"
#include "poolscope/EventFields.h"
#include "poolscope/control/Discovery.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>

using namespace poolscope;
using namespace poolscope::control;
using namespace poolscope::control::test;

TEST_F(ServerTest, SocketIsPrivateAndDiscoverable) {
    ControlServer& s = startServer();
    EXPECT_EQ(s.socketPath(), socketPathForPid(dir_, getpid()));
    struct stat st {};
    ASSERT_EQ(stat(s.socketPath().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    auto targets = listTargets(dir_);
    ASSERT_EQ(targets.size(), 1u);
    EXPECT_EQ(targets[0].pid, getpid());
    EXPECT_FALSE(targets[0].commandLine.empty());
    auto resolved = resolveTarget(std::to_string(getpid()), dir_);
    ASSERT_TRUE(resolved);
    EXPECT_EQ(*resolved, s.socketPath());
    s.stop();
    EXPECT_NE(stat(s.socketPath().c_str(), &st), 0) << "stop() removes the socket";
    EXPECT_TRUE(listTargets(dir_).empty());
}

TEST_F(ServerTest, HelloDescribesTheTarget) {
    startServer();
    auto c = connect();
    ASSERT_TRUE(c);
    const ServerHello& h = c->hello();
    EXPECT_EQ(h.protocol, kProtocolVersion);
    EXPECT_EQ(h.process.pid, 4242);
    EXPECT_EQ(h.devices.size(), 2u);
    ASSERT_EQ(h.pools.size(), 2u);
    EXPECT_EQ(h.pools[0].info.handle, 0x1000u);
    EXPECT_EQ(h.pools[0].info.kind, PoolKind::Default);
    EXPECT_TRUE(h.pools[0].reuseAllowOpportunistic);
    EXPECT_EQ(h.streams.size(), 1u);
    EXPECT_EQ(h.tracePath, "/tmp/fake.poolscope");
    auto pong = c->ping();
    EXPECT_TRUE(pong) << pong.error().message;
}

TEST_F(ServerTest, SetThresholdAcksReadBackAndRecordsKnobChange) {
    startServer();
    ClientOptions o;
    o.origin = KnobOrigin::Gui;
    auto c = connect(o);
    ASSERT_TRUE(c);
    driver_.alloc(0x1000, 100 << 20);
    driver_.free(0x1000, 100 << 20);

    auto a = c->set(0x1000, PoolAttr::ReleaseThreshold, ~uint64_t{0});
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->op, Op::Set);
    EXPECT_TRUE(a->hasOld);
    EXPECT_EQ(a->oldValue, 0u);
    EXPECT_EQ(a->value, ~uint64_t{0});
    ASSERT_TRUE(a->state);
    EXPECT_EQ(a->state->releaseThreshold, ~uint64_t{0});
    EXPECT_EQ(driver_.state(0x1000).releaseThreshold, ~uint64_t{0});

    // The threshold keeps the freed 100 MiB reserved across a sync...
    driver_.synchronize();
    EXPECT_EQ(driver_.state(0x1000).reservedCurrent, 100u << 20);
    // ...and 0 lets the next sync release it.
    a = c->set(0x1000, PoolAttr::ReleaseThreshold, 0);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->oldValue, ~uint64_t{0});
    EXPECT_EQ(a->value, 0u);
    driver_.synchronize();
    EXPECT_EQ(driver_.state(0x1000).reservedCurrent, 0u);

    auto ev = driver_.knobChanges();
    ASSERT_EQ(ev.size(), 2u);
    // The events the server hands the target to record, in EventFields.h's one meaning (the
    // collector's ControlTarget records exactly these, stamping only seq, time and thread).
    const Event& e = ev[0];
    EXPECT_EQ(e.kind, EventKind::KnobChange);
    EXPECT_EQ(e.pool, 0x1000u);
    EXPECT_EQ(e.device, 0);
    KnobFields k = KnobFields::of(e);
    EXPECT_TRUE(k.isAttribute());
    EXPECT_EQ(k.attr(), PoolAttr::ReleaseThreshold);
    EXPECT_EQ(k.value, ~uint64_t{0}); // read back
    EXPECT_EQ(k.old, 0u);
    EXPECT_EQ(k.requested, ~uint64_t{0});
    EXPECT_EQ(k.origin, KnobOrigin::Gui);
    EXPECT_EQ(e.result, 0);
    EXPECT_TRUE(e.has(kFromPoolScope));
    EXPECT_TRUE(e.has(kHasWatermarks));
    EXPECT_EQ(e.reserved, 100u << 20);
    EXPECT_GT(e.tsNs, 0);
    EXPECT_EQ(KnobFields::of(ev[1]).value, 0u);
    EXPECT_EQ(KnobFields::of(ev[1]).old, ~uint64_t{0});
}

TEST_F(ServerTest, AckCarriesTheDriverValueNotTheRequest) {
    startServer();
    auto c = connect();
    ASSERT_TRUE(c);
    driver_.clampThresholdTo(1 << 30);
    auto a = c->set(0x1000, PoolAttr::ReleaseThreshold, 4ull << 30);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->requested, 4ull << 30);
    EXPECT_EQ(a->value, 1u << 30);
    auto ev = driver_.knobChanges();
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(KnobFields::of(ev[0]).value, 1u << 30);
    EXPECT_EQ(KnobFields::of(ev[0]).requested, 4ull << 30);
}

TEST_F(ServerTest, ReusePolicyToggles) {
    startServer();
    auto c = connect();
    ASSERT_TRUE(c);
    for (PoolAttr a : {PoolAttr::ReuseAllowOpportunistic, PoolAttr::ReuseFollowEventDependencies,
                       PoolAttr::ReuseAllowInternalDependencies}) {
        auto off = c->set(0x2000, a, 0);
        ASSERT_TRUE(off) << off.error().message;
        EXPECT_EQ(off->oldValue, 1u);
        EXPECT_EQ(off->value, 0u);
        auto got = c->get(0x2000, a);
        ASSERT_TRUE(got);
        EXPECT_EQ(got->value, 0u);
        auto on = c->set(0x2000, a, 1);
        ASSERT_TRUE(on);
        EXPECT_EQ(on->value, 1u);
    }
    EXPECT_EQ(driver_.knobChanges().size(), 6u);
    EXPECT_EQ(driver_.knobChanges()[0].device, 1);
}

TEST_F(ServerTest, TrimAndResetWatermarks) {
    startServer();
    auto c = connect();
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->set(0x1000, PoolAttr::ReleaseThreshold, ~uint64_t{0}));
    driver_.alloc(0x1000, 300 << 20);
    driver_.free(0x1000, 200 << 20);
    driver_.synchronize();
    ASSERT_EQ(driver_.state(0x1000).reservedCurrent, 300u << 20);

    auto t = c->trimTo(0x1000, 0);
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->op, Op::TrimTo);
    EXPECT_EQ(t->oldValue, 300u << 20);
    EXPECT_EQ(t->value, 100u << 20) << "trim never releases memory in use";
    auto r = c->resetWatermarks(0x1000);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->oldValue, 300u << 20);
    EXPECT_EQ(r->value, 100u << 20);
    ASSERT_TRUE(r->state);
    EXPECT_EQ(r->state->usedHigh, 100u << 20);

    auto ev = driver_.knobChanges();
    ASSERT_EQ(ev.size(), 3u);
    // TrimTo: requested = minBytesToKeep, value = reserved after, old = reserved before.
    KnobFields trim = KnobFields::of(ev[1]);
    EXPECT_FALSE(trim.isAttribute());
    EXPECT_EQ(trim.action(), KnobAction::TrimTo);
    EXPECT_EQ(trim.requested, 0u);
    EXPECT_EQ(trim.old, 300u << 20);
    EXPECT_EQ(trim.value, 100u << 20);
    EXPECT_EQ(ev[1].reserved, 100u << 20);
    EXPECT_EQ(ev[1].used, 100u << 20);
    // One event for the reset, in reserved-high terms (not two attribute sets).
    KnobFields reset = KnobFields::of(ev[2]);
    EXPECT_EQ(reset.action(), KnobAction::ResetHighWatermarks);
    EXPECT_EQ(reset.requested, 0u);
    EXPECT_EQ(reset.old, 300u << 20);
    EXPECT_EQ(reset.value, 100u << 20);
    EXPECT_LT(ev[1].seq, ev[2].seq);
}

TEST_F(ServerTest, BadRequestsGetPlainErrorsAndTheConnectionSurvives) {
    startServer();
    auto c = connect();
    ASSERT_TRUE(c);
    auto e = c->set(0xdead, PoolAttr::ReleaseThreshold, 0);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, ErrorCode::NotFound);
    EXPECT_NE(e.error().message.find("no pool"), std::string::npos);

    e = c->set(0x1000, PoolAttr::ReservedMemHigh, 0);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(e.error().message.find("read-only"), std::string::npos);

    e = c->set(0x1000, PoolAttr::ReuseAllowOpportunistic, 2);
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("0 or 1"), std::string::npos);

    e = c->get(0x1000, PoolAttr(99));
    ASSERT_FALSE(e);

    driver_.failNextSet("CUDA_ERROR_NOT_SUPPORTED: operation not supported");
    e = c->set(0x1000, PoolAttr::ReleaseThreshold, 5);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, ErrorCode::Io);
    EXPECT_NE(e.error().message.find("CUDA_ERROR_NOT_SUPPORTED"), std::string::npos);
    EXPECT_NE(e.error().message.find("release-threshold"), std::string::npos);

    EXPECT_TRUE(driver_.knobChanges().empty()) << "failed changes are not recorded as applied";
    EXPECT_TRUE(c->ping());
    auto list = c->listPools();
    ASSERT_TRUE(list);
    EXPECT_EQ(list->pools.size(), 2u);
}

// ListPools also names the devices the target knows by then: a device first used after the
// hello (its default pool too) is learnt this way, name and all.
TEST_F(ServerTest, ListPoolsNamesTheDevicesKnownNow) {
    driver_.setDevices({});
    startServer();
    auto c = connect();
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->hello().devices.empty());
    driver_.setDevices({{0, "Fake GPU 0", 80ull << 30, "GPU-0"}});
    auto list = c->listPools();
    ASSERT_TRUE(list);
    ASSERT_EQ(list->devices.size(), 1u);
    EXPECT_EQ(list->devices[0].name, "Fake GPU 0");
    EXPECT_EQ(list->devices[0].totalMemory, 80ull << 30);
}

TEST_F(ServerTest, LiveEventsArriveInOrder) {
    ControlServer& s = startServer();
    ClientOptions o;
    o.subscribeEvents = true;
    auto c = connect(o);
    ASSERT_TRUE(c);
    std::vector<Event> ev(10000);
    for (size_t i = 0; i < ev.size(); ++i)
        ev[i].seq = i + 1;
    for (size_t i = 0; i < ev.size(); i += 1000)
        s.onEvents(std::span(ev).subspan(i, 1000));
    std::vector<uint64_t> seqs;
    int64_t deadline = monotonicMs() + 5000;
    while (seqs.size() < ev.size() && monotonicMs() < deadline) {
        ASSERT_TRUE(c->pump(100));
        Incoming in;
        while (c->nextIncoming(in)) {
            ASSERT_EQ(in.kind, Incoming::Kind::Events);
            for (auto& e : in.events)
                seqs.push_back(e.seq);
        }
    }
    ASSERT_EQ(seqs.size(), ev.size());
    EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
    EXPECT_EQ(seqs.back(), ev.size());
    // Unsubscribing stops the stream; requests still work.
    ASSERT_TRUE(c->subscribe(false));
    s.onEvents(ev);
    EXPECT_EQ(s.stats().eventsDroppedForDisplay, 0u);
}

TEST_F(ServerTest, SlowClientGetsDroppedNoticeAndNeverBlocksPublish) {
    ServerOptions so;
    so.clientQueueEvents = 100;
    ControlServer& s = startServer(so);
    ClientOptions o;
    o.subscribeEvents = true;
    auto c = connect(o);
    ASSERT_TRUE(c);
    // The client does not read while far more than its socket buffer and queue can hold is
    // published; publish must return every time (a blocking publish would hang this test).
    std::vector<Event> ev(4096);
    for (size_t i = 0; i < ev.size(); ++i)
        ev[i].seq = i + 1;
    for (int round = 0; round < 200; ++round)
        s.onEvents(ev);
    EXPECT_GT(s.stats().eventsDroppedForDisplay, 0u);

    uint64_t received = 0, dropped = 0;
    std::string message;
    int64_t deadline = monotonicMs() + 5000;
    while (received + dropped < 200ull * ev.size() && monotonicMs() < deadline) {
        ASSERT_TRUE(c->pump(100));
        Incoming in;
        while (c->nextIncoming(in)) {
            if (in.kind == Incoming::Kind::Events) received += in.events.size();
            if (in.kind == Incoming::Kind::Notice) {
                dropped += in.notice.dropped;
                message = in.notice.message;
            }
        }
    }
    EXPECT_EQ(received + dropped, 200ull * ev.size()) << "every event is delivered or counted";
    EXPECT_GT(dropped, 0u);
    EXPECT_NE(message.find("dropped"), std::string::npos);
    EXPECT_NE(message.find("trace on disk is complete"), std::string::npos);
    EXPECT_TRUE(c->ping()) << "the slow client is still served";
}

TEST_F(ServerTest, OtherUidIsRefusedThroughPeerCred) {
    ServerOptions so;
    so.allowedUid = int64_t(getuid()) + 1; // we are "another user" to this server
    ControlServer& s = startServer(so);
    auto c = ControlClient::connect(s.socketPath(), {});
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, ErrorCode::NotReadable);
    EXPECT_NE(c.error().message.find("permission refused"), std::string::npos);
    // The server thread closes the socket and logs the refusal; the client may see the close
    // first, so give the log line a (bounded) moment to land.
    auto logged = [this] {
        auto lines = logLines();
        return std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
            return l.find("refused a control connection from uid") != std::string::npos;
        });
    };
    for (int i = 0; i < 200 && !logged(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(logged());
    EXPECT_EQ(s.stats().connectionsRefused, 1u);
}

TEST_F(ServerTest, TooManyClientsIsACleanError) {
    ServerOptions so;
    so.maxClients = 1;
    startServer(so);
    auto first = connect();
    ASSERT_TRUE(first);
    auto second = ControlClient::connect(server_->socketPath(), {});
    ASSERT_FALSE(second);
    EXPECT_NE(second.error().message.find("too many"), std::string::npos);
    EXPECT_TRUE(first->ping());
}

// Idle connections that never say hello used to take the session slots (8) until the hello
// timeout, locking every real client out. They have their own budget now, and the oldest of them
// makes room for a newer one.
TEST_F(ServerTest, SilentConnectionsDoNotLockClientsOut) {
    ServerOptions so;
    so.maxClients = 2;
    so.maxPendingClients = 4;
    so.helloTimeoutMs = 60000; // far beyond the test: only the budgets can let clients in
    startServer(so);
    std::vector<std::unique_ptr<RawConn>> silent;
    for (int i = 0; i < 8; ++i) {
        silent.push_back(std::make_unique<RawConn>(server_->socketPath()));
        ASSERT_GE(silent.back()->fd, 0);
    }
    auto a = ControlClient::connect(server_->socketPath(), {});
    ASSERT_TRUE(a) << a.error().message;
    auto b = ControlClient::connect(server_->socketPath(), {});
    ASSERT_TRUE(b) << b.error().message;
    EXPECT_TRUE((*a)->ping());
    EXPECT_TRUE((*b)->ping());
    // The oldest silent connections were closed with a reason; the newest still wait.
    bool closed = false;
    auto frames = silent.front()->receive(2000, &closed);
    EXPECT_TRUE(closed);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_NE(decodeError(frames[0].payload)->message.find("no hello"), std::string::npos);
    silent.back()->receive(200, &closed);
    EXPECT_FALSE(closed) << "the newest pending connection keeps its chance to say hello";
    // Sessions still have their own limit: a third client is refused, cleanly.
    auto c = ControlClient::connect(server_->socketPath(), {});
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("too many"), std::string::npos) << c.error().message;
    EXPECT_TRUE((*a)->ping());
}

TEST_F(ServerTest, VersionMismatchIsAClearError) {
    startServer();
    RawConn raw(server_->socketPath());
    ASSERT_GE(raw.fd, 0);
    auto hello = encodeClientHello({});
    FrameHeader h;
    std::memcpy(&h, hello.data(), sizeof h);
    h.version = kProtocolVersion + 1;
    std::memcpy(hello.data(), &h, sizeof h);
    ASSERT_TRUE(raw.send(hello));
    bool closed = false;
    auto frames = raw.receive(2000, &closed);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].header.type, MsgType::Error);
    auto e = decodeError(frames[0].payload);
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, RemoteError::Version);
    EXPECT_NE(e->message.find("protocol mismatch"), std::string::npos);
    EXPECT_TRUE(closed);
}

TEST_F(ServerTest, ClientReportsServerOfAnotherVersion) {
    // A fake "server" of a newer protocol: the client must say so, not misparse.
    std::string path = dir_ + "/fake.sock";
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr;
    ASSERT_TRUE(makeUnixAddress(path, addr));
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(lfd, 1), 0);
    std::thread t([lfd] {
        int fd = accept(lfd, nullptr, nullptr);
        auto bytes = encodeServerHello({});
        FrameHeader h;
        std::memcpy(&h, bytes.data(), sizeof h);
        h.version = 9;
        std::memcpy(bytes.data(), &h, sizeof h);
        usleep(50000);
        [[maybe_unused]] ssize_t w = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        usleep(200000);
        close(fd);
    });
    auto c = ControlClient::connect(path, {});
    t.join();
    close(lfd);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, ErrorCode::Protocol);
    EXPECT_NE(c.error().message.find("version 9"), std::string::npos) << c.error().message;
}

TEST_F(ServerTest, OutOfOrderAndTimeouts) {
    ServerOptions so;
    so.helloTimeoutMs = 200;
    startServer(so);
    {
        RawConn raw(server_->socketPath());
        ASSERT_TRUE(raw.send(encodeRequest({Op::Ping, 0, 0, 0}, 3)));
        bool closed = false;
        auto frames = raw.receive(2000, &closed);
        ASSERT_EQ(frames.size(), 1u);
        EXPECT_EQ(frames[0].header.requestId, 3u);
        EXPECT_NE(decodeError(frames[0].payload)->message.find("hello first"), std::string::npos);
        EXPECT_TRUE(closed);
    }
    {
        RawConn silent(server_->socketPath()); // connects and says nothing
        bool closed = false;
        auto frames = silent.receive(3000, &closed);
        EXPECT_TRUE(closed) << "a silent peer is dropped after the hello timeout";
    }
    {
        // A server that never answers: the client times out instead of hanging.
        std::string path = dir_ + "/mute.sock";
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr;
        ASSERT_TRUE(makeUnixAddress(path, addr));
        ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        ASSERT_EQ(listen(lfd, 1), 0);
        ClientOptions o;
        o.timeoutMs = 300;
        auto c = ControlClient::connect(path, o);
        close(lfd);
        ASSERT_FALSE(c);
        EXPECT_EQ(c.error().code, ErrorCode::Io);
        EXPECT_NE(c.error().message.find("timed out"), std::string::npos);
    }
    auto c = connect();
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->ping());
}

TEST_F(ServerTest, NoSuchTargetMessages) {
    auto r = resolveTarget("999999999", dir_);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::NotFound);
    EXPECT_NE(r.error().message.find("no such target"), std::string::npos);
    auto c = ControlClient::connect(dir_ + "/nothing.sock", {});
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code, ErrorCode::NotFound);
}

TEST_F(ServerTest, StaleSocketIsReplaced) {
    // A socket file left by a crashed process with our pid (pid reuse) must not block start.
    std::string path = socketPathForPid(dir_, getpid());
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr;
    ASSERT_TRUE(makeUnixAddress(path, addr));
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd); // bound, never listened: nobody answers
    startServer();
    EXPECT_TRUE(server_->running());
    EXPECT_TRUE(connect());
}

TEST_F(ServerTest, ForkedChildLeavesTheParentsServerAlone) {
    ControlServer& s = startServer();
    pid_t pid = fork();
    if (pid == 0) {
        // The child: no server thread exists here. Dropping the copy must not unlink the
        // parent's socket or disturb its clients.
        s.abandonAfterFork();
        _exit(s.running() ? 1 : 0);
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st {};
    EXPECT_EQ(stat(s.socketPath().c_str(), &st), 0) << "the parent's socket is still there";
    auto c = connect();
    ASSERT_TRUE(c);
    EXPECT_TRUE(c->ping());
}
