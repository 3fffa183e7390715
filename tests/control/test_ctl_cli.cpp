// `poolscope ctl` end to end: the built binary against an in-process server and the fake driver.
#include "ServerFixture.h"
#include "poolscope/control/Discovery.h"

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>

extern char** environ;

using namespace poolscope;
using namespace poolscope::control;
using namespace poolscope::control::test;

#ifdef POOLSCOPE_CLI_PATH

namespace {

struct CliRun {
    int exitCode = -1;
    std::string out;
    std::string err;
};

// Runs the CLI with a hard deadline: a hanging ctl fails the test instead of hanging it.
// asUid >= 0 (root only): the child drops to that uid before exec, to be a real other user.
CliRun runCli(const std::vector<std::string>& args, int timeoutMs = 20000, int asUid = -1) {
    CliRun r;
    int outPipe[2], errPipe[2];
    if (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0) return r;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, outPipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errPipe[1], 2);
    std::vector<std::string> argv{POOLSCOPE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (auto& a : argv)
        cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid;
    int rc = 0;
    if (asUid < 0) {
        rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, cargv.data(), environ);
    } else {
        pid = fork();
        if (pid == 0) { // only async-signal-safe calls until exec
            dup2(outPipe[1], 1);
            dup2(errPipe[1], 2);
            if (setgid(gid_t(asUid)) != 0 || setuid(uid_t(asUid)) != 0) _exit(120);
            execve(cargv[0], cargv.data(), environ);
            _exit(121);
        }
        rc = pid < 0 ? errno : 0;
    }
    posix_spawn_file_actions_destroy(&fa);
    close(outPipe[1]);
    close(errPipe[1]);
    if (rc != 0) return r;
    int64_t deadline = monotonicMs() + timeoutMs;
    pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
    int open = 2;
    char buf[4096];
    while (open > 0 && monotonicMs() < deadline) {
        if (poll(fds, 2, 100) <= 0) continue;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open;
            } else {
                (i == 0 ? r.out : r.err).append(buf, size_t(n));
            }
        }
    }
    for (auto& f : fds)
        if (f.fd >= 0) close(f.fd);
    if (open > 0) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    r.exitCode = open > 0 ? -2 : (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return r;
}

bool contains(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

} // namespace

TEST_F(ServerTest, CtlSetGetTrimResetList) {
    startServer();
    const std::string sock = server_->socketPath();
    driver_.alloc(0x1000, 300 << 20);
    driver_.free(0x1000, 200 << 20);

    CliRun r = runCli({"ctl", sock, "set", "default", "release-threshold", "max"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "release-threshold of pool 0x1000")) << r.out;
    EXPECT_TRUE(contains(r.out, "max (UINT64_MAX)")) << r.out;
    EXPECT_EQ(driver_.state(0x1000).releaseThreshold, ~uint64_t{0});

    r = runCli({"ctl", sock, "set", "0x1000", "release-threshold", "64MiB", "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["value"].get<uint64_t>(), 64u << 20);
    EXPECT_EQ(j["old_value"].get<uint64_t>(), ~uint64_t{0});
    EXPECT_EQ(j["op"], "set");

    r = runCli({"ctl", sock, "set", "default:1", "reuse-allow-opportunistic", "off"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "on -> off")) << r.out;
    EXPECT_FALSE(driver_.state(0x2000).reuseAllowOpportunistic);

    r = runCli({"ctl", sock, "get", "default", "release-threshold"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "64.0 MiB")) << r.out;

    r = runCli({"ctl", sock, "trim", "default", "0"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "reserved 300 MiB -> 100 MiB")) << r.out;

    r = runCli({"ctl", sock, "reset", "default"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "reserved high 300 MiB -> 100 MiB")) << r.out;

    r = runCli({"ctl", sock, "list"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "fake_workload")) << r.out;
    EXPECT_TRUE(contains(r.out, "pool 0x2000 (device 1, default)")) << r.out;

    r = runCli({"ctl", sock, "get", "default", "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["release_threshold"].get<uint64_t>(), 64u << 20);

    auto ev = driver_.knobChanges();
    ASSERT_EQ(ev.size(), 5u);
    for (const auto& e : ev)
        EXPECT_EQ(e.variant, uint8_t(KnobOrigin::Cli));
}

TEST_F(ServerTest, CtlByPidThroughDiscovery) {
    startServer();
    setenv(kEnvControlDir, dir_.c_str(), 1); // inherited by the spawned ctl
    CliRun r =
        runCli({"ctl", std::to_string(getpid()), "get", "default", "reuse-allow-opportunistic"});
    CliRun t = runCli({"ctl", "targets", "--json"});
    unsetenv(kEnvControlDir);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "reuse-allow-opportunistic = on")) << r.out;
    ASSERT_EQ(t.exitCode, 0) << t.err;
    auto j = nlohmann::json::parse(t.out);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["pid"].get<int64_t>(), getpid());
}

TEST_F(ServerTest, CtlErrorsAreClearAndDistinct) {
    startServer();
    const std::string sock = server_->socketPath();
    setenv(kEnvControlDir, dir_.c_str(), 1);
    CliRun noTarget = runCli({"ctl", "999999999", "get", "default"});
    unsetenv(kEnvControlDir);
    EXPECT_EQ(noTarget.exitCode, exitCodeFor(ErrorCode::NotFound));
    EXPECT_TRUE(contains(noTarget.err, "no such target")) << noTarget.err;

    CliRun badValue = runCli({"ctl", sock, "set", "default", "release-threshold", "lots"});
    EXPECT_EQ(badValue.exitCode, exitCodeFor(ErrorCode::InvalidArgument));
    EXPECT_TRUE(contains(badValue.err, "bad size 'lots'")) << badValue.err;

    CliRun badAttr = runCli({"ctl", sock, "set", "default", "color", "blue"});
    EXPECT_EQ(badAttr.exitCode, exitCodeFor(ErrorCode::InvalidArgument));
    EXPECT_TRUE(contains(badAttr.err, "unknown attribute 'color'")) << badAttr.err;

    CliRun readOnly = runCli({"ctl", sock, "set", "default", "reserved-high", "0"});
    EXPECT_EQ(readOnly.exitCode, exitCodeFor(ErrorCode::InvalidArgument));
    EXPECT_TRUE(contains(readOnly.err, "read-only")) << readOnly.err;

    CliRun noPool = runCli({"ctl", sock, "get", "0xdead", "release-threshold"});
    EXPECT_EQ(noPool.exitCode, exitCodeFor(ErrorCode::NotFound));
    EXPECT_TRUE(contains(noPool.err, "no pool")) << noPool.err;

    EXPECT_EQ(driver_.sets, 0) << "nothing was changed by failed commands";
}

TEST_F(ServerTest, CtlRefusedAndTimeout) {
    ServerOptions so;
    so.allowedUid = int64_t(getuid()) + 1;
    startServer(so);
    CliRun refused = runCli({"ctl", server_->socketPath(), "list"});
    EXPECT_EQ(refused.exitCode, exitCodeFor(ErrorCode::NotReadable));
    EXPECT_TRUE(contains(refused.err, "permission refused")) << refused.err;

    std::string path = dir_ + "/mute.sock";
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr;
    ASSERT_TRUE(makeUnixAddress(path, addr));
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(lfd, 4), 0);
    CliRun timeout = runCli({"ctl", path, "--timeout", "300", "list"});
    close(lfd);
    EXPECT_EQ(timeout.exitCode, exitCodeFor(ErrorCode::Io));
    EXPECT_TRUE(contains(timeout.err, "timed out")) << timeout.err;
}

TEST_F(ServerTest, CtlFromAnotherRealUserIsRefusedByPeerCred) {
    if (getuid() != 0) GTEST_SKIP() << "needs root to act as another user";
    startServer();
    // Open the directory and socket up, so only SO_PEERCRED stands between the other user and
    // the target (normally mode 0700/0600 refuses them earlier, at connect()).
    chmod(dir_.c_str(), 0755);
    chmod(server_->socketPath().c_str(), 0666);
    const int nobody = 65534;
    CliRun r = runCli({"ctl", server_->socketPath(), "list"}, 20000, nobody);
    if (r.exitCode == 120 || r.exitCode == 121)
        GTEST_SKIP() << "uid " << nobody << " cannot run " << POOLSCOPE_CLI_PATH;
    EXPECT_EQ(r.exitCode, exitCodeFor(ErrorCode::NotReadable)) << r.err;
    EXPECT_TRUE(contains(r.err, "permission refused")) << r.err;
    EXPECT_TRUE(contains(r.err, "you are uid 65534")) << r.err;
    EXPECT_EQ(server_->stats().connectionsRefused, 1u);

    // With the normal modes, the filesystem already refuses them.
    chmod(dir_.c_str(), 0700);
    chmod(server_->socketPath().c_str(), 0600);
    r = runCli({"ctl", server_->socketPath(), "list"}, 20000, nobody);
    EXPECT_EQ(r.exitCode, exitCodeFor(ErrorCode::NotReadable)) << r.err;
    EXPECT_TRUE(contains(r.err, "permission refused")) << r.err;
}

TEST_F(ServerTest, CtlWatchPrintsLiveEvents) {
    ControlServer& s = startServer();
    std::atomic<bool> done{false};
    std::thread feeder([&] {
        // Keep publishing until ctl has connected and printed enough.
        uint64_t seq = 1;
        while (!done) {
            Event e;
            e.seq = seq++;
            e.kind = EventKind::Alloc;
            e.pool = 0x1000;
            e.size = 4096;
            s.onEvents(std::span(&e, 1));
            usleep(2000);
        }
    });
    CliRun r = runCli({"ctl", s.socketPath(), "watch", "--count", "5", "--json"});
    done = true;
    feeder.join();
    ASSERT_EQ(r.exitCode, 0) << r.err;
    int lines = 0;
    size_t pos = 0;
    while ((pos = r.out.find('\n', pos)) != std::string::npos)
        ++lines, ++pos;
    EXPECT_EQ(lines, 5) << r.out;
    EXPECT_TRUE(contains(r.out, "\"kind\":\"alloc\"")) << r.out;
}

// Bad numbers used to be taken: "--count -1" wrapped to 2^64-1 and "--duration nan" never ended,
// so watch ran until killed (issue #12). They are usage errors that name the value.
TEST_F(ServerTest, CtlWatchRejectsBadCountsAndDurations) {
    ControlServer& s = startServer();
    const std::vector<std::vector<std::string>> bad = {
        {"--count", "-1"},       {"--count", "abc"},     {"--count", ""},
        {"--duration", "-1"},    {"--duration", "nan"},  {"--duration", "inf"},
        {"--duration", "1e309"}, {"--duration", "0x10"}, {"--duration", "1e12"}};
    for (const auto& opt : bad) {
        CliRun r = runCli({"ctl", s.socketPath(), "watch", opt[0], opt[1]}, 5000);
        EXPECT_NE(r.exitCode, -2) << opt[0] << " " << opt[1] << ": ran until killed";
        EXPECT_NE(r.exitCode, 0) << opt[0] << " " << opt[1];
        EXPECT_TRUE(contains(r.err, opt[0] + ": '" + opt[1] + "'")) << r.err;
    }
    // Good ones still work: a short duration ends the watch by itself.
    CliRun ok = runCli({"ctl", s.socketPath(), "watch", "--duration", "0.2"}, 5000);
    EXPECT_EQ(ok.exitCode, 0) << ok.err;
}

TEST(CtlCli, UnknownVerbIsNamed) {
    CliRun withTarget = runCli({"ctl", "42", "frob"});
    EXPECT_NE(withTarget.exitCode, 0);
    EXPECT_TRUE(contains(withTarget.err, "unknown verb 'frob'")) << withTarget.err;
    EXPECT_TRUE(contains(withTarget.err, "watch")) << "lists the verbs: " << withTarget.err;
    CliRun alone = runCli({"ctl", "frob"});
    EXPECT_NE(alone.exitCode, 0);
    EXPECT_TRUE(contains(alone.err, "unknown verb 'frob'")) << alone.err;
    CliRun none = runCli({"ctl", "42"});
    EXPECT_NE(none.exitCode, 0);
    EXPECT_TRUE(contains(none.err, "a verb is required")) << none.err;
}

// `record` checks its arguments before anything runs: the sample period is finite, plain decimal
// and in range (inf reached the sampler as int64, undefined behaviour), and a --collector that
// does not exist is named as given.
TEST(RecordCli, RejectsBadSamplePeriodsAndNamesAMissingCollector) {
    for (const char* v : {"nan", "inf", "-1", "1e309", "0x10", "", "1e-9", "1e10"}) {
        CliRun r = runCli({"record", "--sample-period", v, "--", "/bin/true"}, 10000);
        EXPECT_NE(r.exitCode, 0) << "'" << v << "' accepted: " << r.err;
        EXPECT_TRUE(contains(r.err, std::string("--sample-period: '") + v + "'")) << r.err;
    }
    const std::string missing = "/nonexistent/poolscope-test/libcollector.so";
    for (const char* v : {"0", "2.5", "1e3"}) { // accepted: the run stops at the collector
        CliRun r = runCli(
            {"record", "--sample-period", v, "--collector", missing, "--", "/bin/true"}, 10000);
        EXPECT_EQ(r.exitCode, 2) << v << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "--collector " + missing)) << r.err;
    }
}

// A socket in the control directory not named after a pid used to be listed as target "0". A
// stale one is skipped (and left alone); one something listens on is shown without a pid.
TEST_F(ServerTest, CtlTargetsSkipsStaleSocketsNotNamedAfterAPid) {
    startServer();
    auto bindAt = [](const std::string& path, bool keepListening) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr;
        EXPECT_TRUE(makeUnixAddress(path, addr));
        EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        EXPECT_EQ(listen(fd, 4), 0);
        if (!keepListening) {
            close(fd);
            return -1;
        }
        return fd;
    };
    const std::string stale = dir_ + "/old-session.sock";
    const std::string live = dir_ + "/custom.sock";
    bindAt(stale, false);
    const int liveFd = bindAt(live, true);
    setenv(kEnvControlDir, dir_.c_str(), 1);
    CliRun json = runCli({"ctl", "targets", "--json"});
    CliRun text = runCli({"ctl", "targets"});
    unsetenv(kEnvControlDir);
    close(liveFd);
    ASSERT_EQ(json.exitCode, 0) << json.err;
    auto j = nlohmann::json::parse(json.out);
    ASSERT_EQ(j.size(), 2u) << json.out;
    EXPECT_EQ(j[0]["pid"], nullptr) << "not a pid: null, not 0";
    EXPECT_EQ(j[0]["socket"], live);
    EXPECT_EQ(j[1]["pid"].get<int64_t>(), getpid());
    EXPECT_FALSE(contains(json.out, "old-session")) << json.out;
    EXPECT_FALSE(text.out.rfind("0 ", 0) == 0 || contains(text.out, "\n0 ")) << text.out;
    EXPECT_FALSE(contains(text.out, "old-session")) << text.out;
    EXPECT_TRUE(contains(text.out, "custom.sock")) << text.out;
    struct stat st {};
    EXPECT_EQ(stat(stale.c_str(), &st), 0) << "a file PoolScope did not name is left alone";
}

#endif
