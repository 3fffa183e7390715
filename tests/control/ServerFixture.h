#pragma once
// A control server on a private temporary directory with the fake driver, plus raw-socket helpers
// for tests that must speak below the ControlClient (bad frames, other versions).

#include "ControlServer.h"
#include "FakePoolDriver.h"
#include "poolscope/control/ControlClient.h"
#include "poolscope/control/FrameReader.h"
#include "poolscope/control/UnixSocket.h"

#include <cstdlib>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace poolscope::control::test {

class ServerTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/pscp-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        server_.reset();
        std::string cmd = "rm -rf '" + dir_ + "'";
        [[maybe_unused]] int r = std::system(cmd.c_str());
    }
    ControlServer& startServer(ServerOptions o = {}) {
        o.directory = dir_;
        o.log = [this](const std::string& s) {
            std::lock_guard lock(logMutex_);
            log_.push_back(s);
        };
        server_ = std::make_unique<ControlServer>(driver_, std::move(o));
        Status s = server_->start();
        EXPECT_TRUE(s) << (s ? "" : s.error().message);
        return *server_;
    }
    std::unique_ptr<ControlClient> connect(ClientOptions o = {}) {
        o.timeoutMs = 3000;
        auto c = ControlClient::connect(server_->socketPath(), o);
        EXPECT_TRUE(c) << (c ? "" : c.error().message);
        return c ? std::move(*c) : nullptr;
    }
    std::vector<std::string> logLines() {
        std::lock_guard lock(logMutex_);
        return log_;
    }

    std::string dir_;
    FakePoolDriver driver_;
    std::unique_ptr<ControlServer> server_;
    std::mutex logMutex_;
    std::vector<std::string> log_;
};

// A raw connection: send bytes, collect frames until EOF or a quiet period.
struct RawConn {
    int fd = -1;
    explicit RawConn(const std::string& path) {
        auto r = connectUnix(path, 2000);
        if (r) fd = *r;
    }
    ~RawConn() {
        if (fd >= 0) close(fd);
    }
    bool send(const std::vector<uint8_t>& b) {
        return sendAll(fd, b.data(), b.size(), monotonicMs() + 2000).ok();
    }
    // Frames received until the peer closes or nothing arrives for quietMs. `closed` tells which.
    std::vector<Frame> receive(int quietMs, bool* closed = nullptr) {
        std::vector<Frame> out;
        FrameReader reader;
        if (closed) *closed = false;
        uint8_t buf[65536];
        for (;;) {
            pollfd p{fd, POLLIN, 0};
            if (poll(&p, 1, quietMs) <= 0) break;
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) {
                if (closed) *closed = true;
                break;
            }
            reader.append(buf, size_t(n));
            Frame f;
            while (reader.next(f) == FrameReader::Status::Frame)
                out.push_back(f);
        }
        return out;
    }
};

} // namespace poolscope::control::test
