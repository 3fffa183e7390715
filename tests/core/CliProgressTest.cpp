// The CLI's long passes say how far they are on a terminal (TtyProgress), and print nothing of it
// where the output is not one (a script's pipe). Run as a user runs them: under a pseudo-terminal.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <cstdlib>
#include <pty.h>
#include <random>
#include <span>
#include <sys/wait.h>
#include <unistd.h>

#include "TestTraces.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

// Allocations and frees on two streams of one pool, in a few chunks.
std::string writeTrace(const std::string& path) {
    std::mt19937_64 rng(3);
    test::Events ev;
    std::vector<uint64_t> live;
    uint64_t nextPtr = 0x7f4000000000;
    int64_t ts = 1'000'000'000;
    for (int i = 0; i < 20000; ++i) {
        ts += 100 + int64_t(rng() % 1000);
        const uint64_t stream = 0x7000 + 0x100 * (rng() % 2);
        if (live.empty() || rng() % 2) {
            live.push_back(nextPtr += 0x200000);
            ev.alloc(ts, stream, 0x55aa00, live.back(), 1 << 20);
        } else {
            ev.free(ts, stream, 0x55aa00, live.back());
            live.pop_back();
        }
    }
    WriterOptions o;
    o.wal = false;
    auto w = TraceWriter::create(path, o);
    EXPECT_TRUE(w);
    if (!w) return path;
    EXPECT_TRUE((*w)->append(std::span<const Event>(ev.all())));
    EXPECT_TRUE((*w)->close());
    return path;
}

// What a terminal shows of `poolscope ARGS` (stdout and stderr both), with progress lines asked
// for at once; the exit code.
std::pair<std::string, int> onTerminal(const std::string& args) {
    const std::string cmd = std::string("'") + POOLSCOPE_CLI + "' " + args;
    int master = -1;
    const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
    if (pid < 0) return {"forkpty failed", -1};
    if (pid == 0) {
        ::setenv("POOLSCOPE_PROGRESS_AFTER_MS", "0", 1);
        ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n > 0) {
            out.append(buf, size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break; // EIO once the child's side is closed
    }
    ::close(master);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST(CliProgress, WhatifAdviseAndReportShowTheirPassesOnATerminalAndNothingElsewhere) {
    test::ScratchDir dir;
    const std::string trace = writeTrace(dir.file("t.poolscope"));
    struct Case {
        std::string args;
        std::vector<std::string> lines; // progress lines the terminal must show
        std::string answer;             // text of the answer itself
    };
    const std::vector<Case> cases = {
        // The names are read beside the models (no line of their own) where they only label
        // the answer, and first where --pool names a pool by them.
        {"whatif --release-threshold 0 '" + trace + "'", {"predicting: "}, "pool #1"},
        {"whatif --release-threshold 0 --pool '#1' '" + std::string(POOLSCOPE_SAMPLES_DIR) + "/churn.poolscope'",
         {"reading the trace for the names: ", "predicting: "},
         "pool #1"},
        {"advise '" + trace + "'", {"advising: "}, "pool #1"},
        // The read, then the what-if questions on the same line (the sample has advice).
        {"report '" + std::string(POOLSCOPE_SAMPLES_DIR) + "/churn.poolscope'",
         {"reading events: ", "what-if questions: "},
         "what-if model"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.args);
        const auto [shown, code] = onTerminal(c.args);
        EXPECT_EQ(code, 0) << shown;
        for (const std::string& line : c.lines) {
            const size_t at = shown.find("\r" + line);
            ASSERT_NE(at, std::string::npos) << "no progress line '" << line << "' in:\n" << shown;
            // A percentage follows, and the line is cleared before anything else is written.
            const size_t pct = shown.find('%', at);
            ASSERT_NE(pct, std::string::npos);
            EXPECT_LT(pct - at, line.size() + 6);
        }
        // The answer comes after the last progress line was wiped, not on top of it.
        const size_t lastWipe = shown.rfind(std::string(60, ' ') + "\r");
        ASSERT_NE(lastWipe, std::string::npos) << shown;
        EXPECT_NE(shown.find(c.answer, lastWipe), std::string::npos) << shown;

        // A pipe gets the same answer and no progress.
        const test::CliRun piped = test::runCli(c.args);
        EXPECT_EQ(piped.exitCode, 0);
        EXPECT_EQ(piped.output.find('\r'), std::string::npos) << piped.output;
        EXPECT_EQ(piped.output.find("predicting"), std::string::npos);
        EXPECT_NE(piped.output.find(c.answer), std::string::npos) << piped.output;
    }
}

// whatif and advise split their models over several replays on threads of their own: the
// answers are the same on any number of them (POOLSCOPE_PREDICT_REPLAYS; one per CPU in two by
// default, one below 4 CPUs).
TEST(CliProgress, WhatifAndAdviseAnswerTheSameOnAnyNumberOfReplays) {
    test::ScratchDir dir;
    std::vector<std::string> traces = {writeTrace(dir.file("t.poolscope"))};
    for (const auto& f : std::filesystem::directory_iterator(POOLSCOPE_SAMPLES_DIR))
        if (f.path().extension() == ".poolscope") traces.push_back(f.path().string());
    ASSERT_GT(traces.size(), 5u);
    for (const std::string& t : traces)
        for (const std::string& args : {"whatif --json --release-threshold 0 '" + t + "'",
                                        "whatif --json --reuse-opportunistic off '" + t + "'",
                                        "advise --json '" + t + "'"}) {
            SCOPED_TRACE(args);
            ::setenv("POOLSCOPE_PREDICT_REPLAYS", "1", 1);
            const test::CliRun one = test::runCli(args);
            EXPECT_EQ(one.exitCode, 0) << one.output;
            EXPECT_NE(one.output.find('{'), std::string::npos);
            for (const char* n : {"2", "5"}) {
                ::setenv("POOLSCOPE_PREDICT_REPLAYS", n, 1);
                const test::CliRun many = test::runCli(args);
                EXPECT_EQ(many.exitCode, one.exitCode);
                EXPECT_TRUE(many.output == one.output) << n << " replays:\n" << many.output << "\none:\n" << one.output;
            }
        }
    ::unsetenv("POOLSCOPE_PREDICT_REPLAYS");
}

} // namespace
} // namespace poolscope
