// A full disk while recording: the writer reports it in plain words and what was committed
// before stays readable. The disk is made "full" with RLIMIT_FSIZE in a forked child, which
// makes write(2) fail with EFBIG exactly as a full filesystem fails with ENOSPC.

#include <csignal>
#include <cstring>
#include <gtest/gtest.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "poolscope/EventCodec.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

using namespace poolscope;

namespace {

std::string tempPath(const char* name) {
    return ::testing::TempDir() + "/" + name + std::to_string(::getpid()) + ".poolscope";
}

std::vector<Event> churn(uint64_t firstSeq, size_t n) {
    std::vector<Event> v(n);
    for (size_t i = 0; i < n; ++i) {
        Event& e = v[i];
        e.seq = firstSeq + i;
        e.tsNs = static_cast<int64_t>(e.seq) * 1000;
        e.kind = (e.seq % 2) ? EventKind::Alloc : EventKind::Free;
        e.ptr = 0x7f0000000000ull + (e.seq * 7919 % 4096) * 4096; // poorly compressible
        e.size = 4096 + (e.seq * 31 % 1000) * 512;
        e.stream = 0x1000 + e.seq % 3;
        e.pool = 0x2000;
        e.correlation = static_cast<uint32_t>(e.seq * 3);
        e.flags = kHasWatermarks;
        e.reserved = 1ull << 30;
        e.used = e.seq * 4096;
    }
    return v;
}

} // namespace

TEST(WriterFault, FullDiskIsReportedAndCommittedEventsSurvive) {
    const std::string path = tempPath("full");
    constexpr size_t kBatch = 10000;
    int pipeFd[2];
    ASSERT_EQ(::pipe(pipeFd), 0);
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim {2 << 20, 2 << 20}; // 2 MiB "disk"
        ::setrlimit(RLIMIT_FSIZE, &lim);
        auto w = TraceWriter::create(path);
        if (!w) ::_exit(2);
        uint64_t committed = 0;
        std::string message;
        for (uint64_t seq = 1; seq < 10'000'000; seq += kBatch) {
            Status s = (*w)->append(churn(seq, kBatch));
            if (s) s = (*w)->commit();
            if (!s) {
                message = s.error().message;
                break;
            }
            committed = seq + kBatch - 1;
        }
        std::string report = std::to_string(committed) + "\n" + message;
        (void)!::write(pipeFd[1], report.data(), report.size());
        ::_exit(message.empty() ? 3 : 0);
    }
    ::close(pipeFd[1]);
    std::string report;
    char buf[512];
    ssize_t n;
    while ((n = ::read(pipeFd[0], buf, sizeof buf)) > 0) report.append(buf, static_cast<size_t>(n));
    ::close(pipeFd[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0) << "the writer never failed, or could not start";
    auto nl = report.find('\n');
    const uint64_t committed = std::stoull(report.substr(0, nl));
    const std::string message = report.substr(nl + 1);
    EXPECT_NE(message.find("disk"), std::string::npos) << message;
    EXPECT_NE(message.find("full"), std::string::npos) << message;
    ASSERT_GT(committed, 0u);

    // Everything committed before the failure is there, in order.
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    uint64_t expect = 1;
    Status st = (*r)->forEachEvent([&](const Event& e) {
        EXPECT_EQ(e.seq, expect);
        ++expect;
        return true;
    });
    ASSERT_TRUE(st) << st.error().message;
    EXPECT_GE(expect - 1, committed);
    ::unlink(path.c_str());
    ::unlink((path + "-wal").c_str());
    ::unlink((path + "-shm").c_str());
}

// Counts the events of a trace (-1 when it does not open or read).
long long eventsIn(const std::string& path) {
    auto r = TraceReader::open(path);
    if (!r) return -1;
    long long n = 0;
    Status st = (*r)->forEachEvent([&](const Event&) {
        ++n;
        return true;
    });
    return st ? n : -1;
}

void removeTrace(const std::string& path) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
}

// Issue #12: a full disk while recording replaced the good trace at the output path with a
// damaged 8 KiB file. With replaceAtClose the old trace stays until the new one is complete, and
// what the failed recording committed stays readable in <path>.partial.
TEST(WriterFault, FullDiskLeavesTheExistingTraceAndKeepsThePartialOne) {
    const std::string path = tempPath("keep");
    const std::string partial = partialPath(path);
    {
        WriterOptions options;
        options.replaceAtClose = true;
        auto w = TraceWriter::create(path, options);
        ASSERT_TRUE(w) << w.error().message;
        EXPECT_EQ((*w)->path(), partial);
        ASSERT_TRUE((*w)->append(churn(1, 1000)));
        ASSERT_TRUE((*w)->close());
    }
    ASSERT_NE(::access(path.c_str(), F_OK), -1) << "renamed into place at close";
    EXPECT_EQ(::access(partial.c_str(), F_OK), -1);
    ASSERT_EQ(eventsIn(path), 1000);

    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim {2 << 20, 2 << 20}; // 2 MiB "disk"
        ::setrlimit(RLIMIT_FSIZE, &lim);
        WriterOptions options;
        options.replaceAtClose = true;
        auto w = TraceWriter::create(path, options);
        if (!w) ::_exit(2);
        for (uint64_t seq = 1; seq < 10'000'000; seq += 10000) {
            Status s = (*w)->append(churn(seq, 10000));
            if (s) s = (*w)->commit();
            if (!s) ::_exit((*w)->close() ? 4 : 0); // close() must fail too: no rename
        }
        ::_exit(3);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0) << "the writer never failed, or closed after failing";
    EXPECT_EQ(eventsIn(path), 1000) << "the trace that was there is untouched";
    EXPECT_GT(eventsIn(partial), 0) << "what was committed before the disk filled reads";
    removeTrace(path);
    removeTrace(partial);
}

// A program killed by a signal: the collector commits but never closes, so the trace stays in
// <path>.partial (in WAL mode) until `poolscope record` finishes it and moves it into place.
TEST(WriterFault, UnclosedPartialTraceIsFinishedIntoPlace) {
    const std::string path = tempPath("killed");
    EXPECT_FALSE(*finishPartialTrace(path)) << "nothing to finish";
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        WriterOptions options;
        options.replaceAtClose = true;
        auto w = TraceWriter::create(path, options);
        if (!w || !(*w)->append(churn(1, 5000)) || !(*w)->commit()) ::_exit(2);
        ::_exit(0); // no close(): as if killed
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ(::access(path.c_str(), F_OK), -1);
    auto done = finishPartialTrace(path);
    ASSERT_TRUE(done) << done.error().message;
    EXPECT_TRUE(*done);
    EXPECT_EQ(eventsIn(path), 5000);
    EXPECT_EQ(::access(partialPath(path).c_str(), F_OK), -1);
    EXPECT_EQ(::access((path + "-wal").c_str(), F_OK), -1) << "the WAL was folded in";
    removeTrace(path);
}

TEST(WriterFault, UnwritableLocationIsAPlainError) {
    auto w = TraceWriter::create("/proc/poolscope-cannot-write-here/x.poolscope");
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code, ErrorCode::WriteFailed);
    EXPECT_NE(w.error().message.find("x.poolscope"), std::string::npos) << w.error().message;
}

TEST(EventCodec, RoundTripsExtremeValuesAndRejectsTruncation) {
    std::vector<Event> in(3);
    in[0].seq = 1;
    in[0].tsNs = INT64_MIN;
    in[0].result = -1;
    in[0].device = -1;
    in[0].size = UINT64_MAX;
    in[1].seq = UINT64_MAX;
    in[1].tsNs = INT64_MAX;
    in[1].kind = EventKind::KnobChange;
    in[1].attr = 1002;
    in[1].aux = 0x8000000000000000ull;
    in[2].seq = 2;
    in[2].kind = EventKind::Sample;
    in[2].reserved = 42;
    std::string data;
    encodeEvents(in, data);
    std::vector<Event> out;
    ASSERT_TRUE(decodeEvents(data, in.size(), out));
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i)
        EXPECT_EQ(0, std::memcmp(&in[i], &out[i], sizeof(Event))) << "event " << i;
    std::vector<Event> bad;
    EXPECT_FALSE(decodeEvents(std::string_view(data).substr(0, data.size() - 1), in.size(), bad));
    EXPECT_FALSE(decodeEvents(data, in.size() + 1, bad));
    EXPECT_FALSE(decodeEvents(data, in.size() - 1, bad)); // trailing bytes are an error too
}

TEST(EventCodec, ReadsVersion1Chunks) {
    // Version 1 had no presence mask: 17 varints per event in its own field order. Two events:
    // seq 1 (kind alloc, size 4096), then seq 2 with everything else unchanged.
    std::string v1;
    auto put = [&v1](uint64_t z) {
        while (z >= 0x80) {
            v1 += static_cast<char>(z | 0x80);
            z >>= 7;
        }
        v1 += static_cast<char>(z);
    };
    const uint64_t first[17] = {2, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 8192, 0, 0, 0, 0, 0};
    for (uint64_t z : first) put(z); // zigzag doubles: seq 1, kind 1, size 4096
    put(2);                          // seq +1
    for (int i = 1; i < 17; ++i) put(0);
    std::vector<Event> out;
    ASSERT_TRUE(decodeEvents(v1, 2, out, 1));
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].seq, 1u);
    EXPECT_EQ(out[0].kind, EventKind::Alloc);
    EXPECT_EQ(out[0].size, 4096u);
    EXPECT_EQ(out[1].seq, 2u);
    EXPECT_EQ(out[1].size, 4096u);
    EXPECT_FALSE(decodeEvents(v1, 2, out, 6)); // unknown version
}
