#pragma once
// Helpers shared by the core tests: scratch files and a small builder for event sequences.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <sqlite3.h>

#include "poolscope/Event.h"
#include "poolscope/Schema.h"

namespace poolscope::test {

// A per-test scratch directory, removed afterwards.
class ScratchDir {
public:
    ScratchDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = std::string("poolscope_") + (info ? info->test_suite_name() : "t") +
                           "_" + (info ? info->name() : "x") + "_" + std::to_string(::getpid());
        for (char& c : name)
            if (c == '/') c = '_';
        dir_ = std::filesystem::temp_directory_path() / name;
        std::filesystem::remove_all(dir_);
        std::filesystem::create_directories(dir_);
    }
    ~ScratchDir() { std::filesystem::remove_all(dir_); }
    std::string file(const std::string& name) const { return (dir_ / name).string(); }

private:
    std::filesystem::path dir_;
};

// Runs SQL on a trace file: the tests' way to damage one by hand.
inline void execSql(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
}

// Recomputes every chunk_headers row_crc over the row's own copied columns, as a writer would:
// a forger, not damage, whom only the index's times or the chunk's own columns or events can
// tell. (Run after the SQL that rewrites the rows.)
inline void forgeChunkHeaders(const std::string& path) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db,
                                 "SELECT chunk,first_seq,last_seq,prev_last_seq,t_min,t_max,count,"
                                 "kinds,codec,crc,data_bytes,kind_counts FROM chunk_headers",
                                 -1, &st, nullptr),
              SQLITE_OK);
    std::vector<std::pair<int64_t, uint32_t>> fixed;
    while (sqlite3_step(st) == SQLITE_ROW) {
        auto u = [&](int c) { return uint64_t(sqlite3_column_int64(st, c)); };
        const schema::ChunkHeader h{u(1), u(2), u(3), int64_t(u(4)), int64_t(u(5)), u(6), u(7),
                                    int64_t(u(8))};
        const std::string counts(static_cast<const char*>(sqlite3_column_blob(st, 11)),
                                 size_t(sqlite3_column_bytes(st, 11)));
        fixed.emplace_back(int64_t(u(0)),
                           schema::chunkHeaderRowChecksum(h, uint32_t(u(9)), u(10), counts));
    }
    sqlite3_finalize(st);
    for (const auto& [id, crc] : fixed)
        sqlite3_exec(db, ("UPDATE chunk_headers SET row_crc = " + std::to_string(crc) +
                          " WHERE chunk = " + std::to_string(id)).c_str(),
                     nullptr, nullptr, nullptr);
    sqlite3_close(db);
}

#ifdef POOLSCOPE_CLI
struct CliRun {
    int exitCode = -1;
    std::string output;
};

// Runs the built poolscope binary as a user runs it; stdout and stderr together.
inline CliRun runCli(const std::string& args) {
    CliRun r;
    const std::string cmd = std::string("'") + POOLSCOPE_CLI + "' " + args + " 2>&1";
    FILE* f = ::popen(cmd.c_str(), "r");
    if (!f) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.output.append(buf, n);
    const int status = ::pclose(f);
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}
#endif

// Builds events in seq order with the fields a test cares about.
class Events {
public:
    Event& add(EventKind kind, int64_t ts) {
        Event e;
        e.seq = nextSeq_++;
        e.tsNs = ts;
        e.kind = kind;
        e.device = 0;
        e.tid = 42;
        events_.push_back(e);
        return events_.back();
    }
    Event& alloc(int64_t ts, uint64_t stream, uint64_t pool, uint64_t ptr, uint64_t size) {
        Event& e = add(EventKind::Alloc, ts);
        e.stream = stream;
        e.pool = pool;
        e.ptr = ptr;
        e.size = size;
        return e;
    }
    Event& free(int64_t ts, uint64_t stream, uint64_t pool, uint64_t ptr) {
        Event& e = add(EventKind::Free, ts);
        e.stream = stream;
        e.pool = pool;
        e.ptr = ptr;
        return e;
    }
    static Event& wm(Event& e, uint64_t reserved, uint64_t used) {
        e.flags |= kHasWatermarks;
        e.reserved = reserved;
        e.used = used;
        return e;
    }
    // A sample; the driver's high watermarks only where a test gives them (0: not read).
    Event sample(int64_t ts, uint64_t pool, uint64_t reserved, uint64_t used,
                 uint64_t reservedHigh = 0, uint64_t usedHigh = 0) const {
        Event e;
        e.kind = EventKind::Sample;
        e.tsNs = ts;
        e.pool = pool;
        e.reserved = reserved;
        e.used = used;
        e.size = reservedHigh;
        e.aux = usedHigh;
        e.flags = kHasWatermarks;
        return e;
    }
    const std::vector<Event>& all() const { return events_; }

private:
    uint64_t nextSeq_ = 1;
    std::vector<Event> events_;
};

} // namespace poolscope::test
