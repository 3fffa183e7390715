// Each kind of bad file gets its own ErrorCode and a message for a person from the core, and the
// CLI turns it into that code's exit status (scripts tell the cases apart).
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sqlite3.h>
#include <sys/wait.h>

#include "TestTraces.h"
#include "poolscope/Entities.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

using test::execSql;

void writeValidTrace(const std::string& path, int events) {
    auto w = TraceWriter::create(path);
    ASSERT_TRUE(w) << w.error().message;
    test::Events ev;
    for (int i = 0; i < events; ++i)
        ev.alloc(i * 10, 0x10, 0x20, 0x1000 + 0x100 * static_cast<uint64_t>(i), 256);
    ASSERT_TRUE((*w)->append(ev.all()));
    ASSERT_TRUE((*w)->close());
}

using test::CliRun;
using test::runCli;

// Opens path, expects code, and checks both CLI verbs exit with that code's status and say why.
void expectRejected(const std::string& path, ErrorCode code, const std::string& words) {
    auto r = TraceReader::open(path);
    ASSERT_FALSE(r) << "opened a bad file: " << path;
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(path), std::string::npos) << "message names the file";
    for (const char* verb : {"info", "report", "report --json", "whatif", "advise --json"}) {
        CliRun run = runCli(std::string(verb) + " '" + path + "'");
        EXPECT_EQ(run.exitCode, exitCodeFor(code)) << verb << ": " << run.output;
        EXPECT_NE(run.output.find(r.error().message), std::string::npos)
            << verb << " printed: " << run.output;
    }
}

TEST(InvalidFile, DoesNotExist) {
    test::ScratchDir dir;
    expectRejected(dir.file("missing.poolscope"), ErrorCode::NotFound, "does not exist");
}

TEST(InvalidFile, RandomBytes) {
    test::ScratchDir dir;
    const std::string path = dir.file("random.poolscope");
    std::mt19937 rng(7);
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 64 * 1024; ++i) out.put(static_cast<char>(rng() & 0xFF));
    out.close();
    expectRejected(path, ErrorCode::NotSqlite, "not an SQLite database");
}

TEST(InvalidFile, Empty) {
    test::ScratchDir dir;
    const std::string path = dir.file("empty.poolscope");
    std::ofstream(path).close();
    expectRejected(path, ErrorCode::NotSqlite, "empty");
}

TEST(InvalidFile, TruncatedTrace) {
    test::ScratchDir dir;
    const std::string path = dir.file("truncated.poolscope");
    writeValidTrace(path, 20000);
    const auto size = std::filesystem::file_size(path);
    ASSERT_GT(size, 64u * 1024);
    std::filesystem::resize_file(path, size / 2);
    // A cut-off file still starts with SQLite's header: it is a damaged trace, not a foreign
    // file, and never a crash or a half-loaded trace.
    expectRejected(path, ErrorCode::Corrupt, "damaged");
}

TEST(InvalidFile, AnotherApplicationsDatabase) {
    test::ScratchDir dir;
    const std::string path = dir.file("other.db");
    execSql(path, "CREATE TABLE contacts(name TEXT, phone TEXT);"
                  "INSERT INTO contacts VALUES('ada','123');");
    expectRejected(path, ErrorCode::NotATrace, "not a PoolScope trace");
}

TEST(InvalidFile, NewerSchemaVersion) {
    test::ScratchDir dir;
    const std::string path = dir.file("newer.poolscope");
    writeValidTrace(path, 10);
    execSql(path, "PRAGMA user_version=" + std::to_string(schema::kVersion + 1));
    expectRejected(path, ErrorCode::NewerVersion, "newer PoolScope");
}

TEST(InvalidFile, MissingTable) {
    test::ScratchDir dir;
    const std::string path = dir.file("dropped.poolscope");
    writeValidTrace(path, 10);
    execSql(path, "DROP TABLE samples;");
    expectRejected(path, ErrorCode::MissingTables, "samples");
}

TEST(InvalidFile, EachCaseHasItsOwnExitCode) {
    // NotSqlite covers random bytes, empty files; the other cases must not share its status.
    const ErrorCode codes[] = {ErrorCode::NotFound, ErrorCode::NotSqlite, ErrorCode::NotATrace,
                               ErrorCode::NewerVersion, ErrorCode::MissingTables,
                               ErrorCode::Corrupt};
    for (size_t i = 0; i < std::size(codes); ++i) {
        EXPECT_NE(exitCodeFor(codes[i]), 0);
        EXPECT_NE(exitCodeFor(codes[i]), 1); // 1 is what a crash or an unmapped error gives
        for (size_t j = i + 1; j < std::size(codes); ++j)
            EXPECT_NE(exitCodeFor(codes[i]), exitCodeFor(codes[j]));
    }
}

TEST(Cli, ValidTraceSucceeds) {
    test::ScratchDir dir;
    const std::string path = dir.file("ok.poolscope");
    writeValidTrace(path, 100);
    CliRun info = runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
    EXPECT_NE(info.output.find("alloc"), std::string::npos) << info.output;
    CliRun infoJson = runCli("info --json '" + path + "'");
    EXPECT_EQ(infoJson.exitCode, 0) << infoJson.output;
    EXPECT_NE(infoJson.output.find("\"counts_by_kind\""), std::string::npos);
    CliRun report = runCli("report '" + path + "'");
    EXPECT_EQ(report.exitCode, 0) << report.output;
    EXPECT_NE(report.output.find("Leaks: 100 allocation(s)"), std::string::npos) << report.output;
    CliRun json = runCli("report --json --top 3 '" + path + "'");
    EXPECT_EQ(json.exitCode, 0) << json.output;
    EXPECT_NE(json.output.find("\"leaks\""), std::string::npos) << json.output;
}

TEST(Cli, DumpNamesAreTheReportsNames) {
    test::ScratchDir dir;
    const std::string path = dir.file("names.poolscope");
    writeValidTrace(path, 3); // stream 0x10, pool 0x20
    CliRun report = runCli("report '" + path + "'");
    ASSERT_EQ(report.exitCode, 0) << report.output;
    EXPECT_NE(report.output.find("stream #1 0x10"), std::string::npos) << report.output;
    EXPECT_NE(report.output.find("pool #1 (unknown) 0x20"), std::string::npos) << report.output;
    CliRun plain = runCli("dump '" + path + "'");
    ASSERT_EQ(plain.exitCode, 0) << plain.output;
    EXPECT_EQ(plain.output.find("stream_name"), std::string::npos) << "names only when asked";
    CliRun jsonl = runCli("dump --names '" + path + "'");
    ASSERT_EQ(jsonl.exitCode, 0) << jsonl.output;
    EXPECT_NE(jsonl.output.find("\"stream_name\":\"stream #1\""), std::string::npos) << jsonl.output;
    EXPECT_NE(jsonl.output.find("\"pool_name\":\"pool #1 (unknown)\""), std::string::npos)
        << jsonl.output;
    CliRun csv = runCli("dump --names --format csv '" + path + "'");
    ASSERT_EQ(csv.exitCode, 0) << csv.output;
    EXPECT_NE(csv.output.find(",used,site,details,stream_name,pool_name\n"), std::string::npos) << csv.output;
    EXPECT_NE(csv.output.find(",\"stream #1\",\"pool #1 (unknown)\"\n"), std::string::npos)
        << csv.output;
}

TEST(Cli, EmptyTraceReportsNothingUnusual) {
    // A recording in which the program never allocated is valid, not an error.
    test::ScratchDir dir;
    const std::string path = dir.file("empty-trace.poolscope");
    writeValidTrace(path, 0);
    CliRun info = runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
    CliRun report = runCli("report '" + path + "'");
    EXPECT_EQ(report.exitCode, 0) << report.output;
    EXPECT_NE(report.output.find("(none)"), std::string::npos) << report.output;
    EXPECT_NE(report.output.find("nothing unusual"), std::string::npos) << report.output;
    CliRun json = runCli("report --json '" + path + "'");
    EXPECT_EQ(json.exitCode, 0) << json.output;
    EXPECT_NE(json.output.find("\"pools\": []"), std::string::npos) << json.output;
}

TEST(Cli, BadArgumentsAreUsageErrors) {
    CliRun noFile = runCli("report");
    EXPECT_NE(noFile.exitCode, 0);
    CliRun badTop = runCli("report --top -3 x.poolscope");
    EXPECT_NE(badTop.exitCode, 0);
    EXPECT_NE(badTop.exitCode, exitCodeFor(ErrorCode::NotFound)) << "rejected before opening";
}

// The collector copies /proc/self/cmdline as it is: a Latin-1 argument is not UTF-8, and JSON
// output used to abort on it (nlohmann type_error.316). Each invalid byte becomes U+FFFD.
TEST(Cli, JsonOutputSurvivesTextThatIsNotUtf8) {
    test::ScratchDir dir;
    const std::string path = dir.file("latin1.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        ProcessInfo p;
        p.pid = 7;
        p.commandLine = "./train --name=caf\xE9 \xFF";
        p.host = "h\xE9te";
        ASSERT_TRUE((*w)->setProcess(p));
        ASSERT_TRUE((*w)->setMeta("note\xFF", "\xE9t\xE9"));
        test::Events ev;
        ev.alloc(10, 0x10, 0x20, 0x1000, 256);
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    const std::string replaced = "./train --name=caf\xEF\xBF\xBD \xEF\xBF\xBD"; // U+FFFD each
    for (const char* verb : {"info --json", "report --json"}) {
        CliRun run = runCli(std::string(verb) + " '" + path + "'");
        ASSERT_EQ(run.exitCode, 0) << verb << ": " << run.output;
        nlohmann::json j = nlohmann::json::parse(run.output, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << verb << " printed invalid JSON: " << run.output;
        EXPECT_EQ(j["process"]["command_line"], replaced) << verb;
        EXPECT_EQ(j["process"]["host"], "h\xEF\xBF\xBDte") << verb;
        EXPECT_EQ(j["meta"]["note\xEF\xBF\xBD"], "\xEF\xBF\xBDt\xEF\xBF\xBD") << verb;
    }
    CliRun dump = runCli("dump --names '" + path + "'");
    EXPECT_EQ(dump.exitCode, 0) << dump.output;
}

// Durations from timestamps at the ends of int64 overflowed (undefined behaviour, and a negative
// duration in practice). The span fits uint64: JSON gives it exactly, text never goes negative.
// The window reads with BuildOptions::boundTimes (issue #12, hostile.window under the debug
// preset): a trace with times no clock gives (hand-built here, not recorded) is bounded once,
// where it is read, and each change is said.
TEST(BoundTimes, ImpossibleTimesAreMovedOrLeftOutAndSaid) {
    test::ScratchDir dir;
    const std::string path = dir.file("handbuilt-impossible-times.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        test::Events ev;
        ev.alloc(INT64_MIN + 1, 0x10, 0x20, 0x1000, 256);
        ev.alloc(5'000, 0x10, 0x20, 0x3000, 128); // a possible time between them
        ev.free(INT64_MAX - 1, 0x10, 0x20, 0x1000);
        ev.alloc(INT64_MAX, 0x10, 0x20, 0x2000, 512);
        ASSERT_TRUE((*w)->append(ev.all()));
        for (int64_t ts : {INT64_MIN, int64_t{6'000}, int64_t{-1}}) {
            Event smp;
            smp.kind = EventKind::Sample;
            smp.tsNs = ts;
            smp.pool = 0x20;
            smp.reserved = smp.size = 2 << 20;
            smp.flags = kHasWatermarks;
            ASSERT_TRUE((*w)->append(smp));
        }
        ASSERT_TRUE((*w)->close());
    }
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    // As read by the CLI (no bound): the times as they are.
    auto plain = buildTimeline(**r);
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_EQ((*plain)->t0, INT64_MIN);
    EXPECT_EQ((*plain)->t1, INT64_MAX);

    std::vector<TraceDamage> damage;
    BuildOptions o;
    o.boundTimes = &damage;
    auto tl = buildTimeline(**r, o);
    ASSERT_TRUE(tl) << tl.error().message;
    const Timeline& t = **tl;
    EXPECT_EQ(t.t0, 0);
    EXPECT_EQ(t.t1, BuildOptions::kLatestPlausibleNs - 1);
    // Every event is kept (the replay needs the free of 0x1000), at the nearer end.
    EXPECT_EQ(t.eventCount, 4u);
    ASSERT_EQ(t.allocations.size(), 3u);
    EXPECT_EQ(t.allocations[0].allocTsNs, 0);
    EXPECT_EQ(t.allocations[0].freeTsNs, BuildOptions::kLatestPlausibleNs - 1);
    EXPECT_EQ(t.allocations[1].allocTsNs, 5'000);
    EXPECT_EQ(t.allocations[2].allocTsNs, BuildOptions::kLatestPlausibleNs - 1);
    EXPECT_TRUE(t.allocations[2].live());
    // Only the sample at a possible time is kept.
    EXPECT_EQ(t.sampleCount, 1u);
    ASSERT_EQ(damage.size(), 2u);
    EXPECT_NE(damage[0].what.find("2 watermark sample(s)"), std::string::npos) << damage[0].what;
    EXPECT_NE(damage[0].what.find(std::to_string(INT64_MIN)), std::string::npos) << damage[0].what;
    EXPECT_NE(damage[0].what.find("left out"), std::string::npos) << damage[0].what;
    EXPECT_EQ(damage[0].events, 0u);
    EXPECT_NE(damage[1].what.find("events dated at a time no recording has"), std::string::npos)
        << damage[1].what;
    EXPECT_EQ(damage[1].events, 3u);
}

// The bound changes nothing in a real trace: every bundled sample reads the same with it, and
// nothing is said.
TEST(BoundTimes, EveryBundledSampleReadsTheSame) {
    int files = 0;
    for (const auto& f : std::filesystem::directory_iterator(POOLSCOPE_SAMPLES_DIR)) {
        if (f.path().extension() != ".poolscope") continue;
        ++files;
        SCOPED_TRACE(f.path().filename().string());
        auto r = TraceReader::open(f.path().string());
        ASSERT_TRUE(r) << r.error().message;
        auto plain = buildTimeline(**r);
        ASSERT_TRUE(plain) << plain.error().message;
        std::vector<TraceDamage> damage;
        BuildOptions o;
        o.boundTimes = &damage;
        auto bounded = buildTimeline(**r, o);
        ASSERT_TRUE(bounded) << bounded.error().message;
        const Timeline &a = **plain, &b = **bounded;
        EXPECT_TRUE(damage.empty()) << damage.front().what;
        EXPECT_EQ(a.t0, b.t0);
        EXPECT_EQ(a.t1, b.t1);
        EXPECT_EQ(a.eventCount, b.eventCount);
        EXPECT_EQ(a.sampleCount, b.sampleCount);
        ASSERT_EQ(a.allocations.size(), b.allocations.size());
        for (size_t i = 0; i < a.allocations.size(); ++i) {
            EXPECT_EQ(a.allocations[i].allocTsNs, b.allocations[i].allocTsNs);
            EXPECT_EQ(a.allocations[i].freeTsNs, b.allocations[i].freeTsNs);
        }
        ASSERT_EQ(a.pools.size(), b.pools.size());
        for (size_t i = 0; i < a.pools.size(); ++i) {
            EXPECT_EQ(a.pools[i].peakReserved, b.pools[i].peakReserved);
            EXPECT_EQ(a.pools[i].peakUsed, b.pools[i].peakUsed);
        }
    }
    EXPECT_GE(files, 8);
}

TEST(Cli, DurationsAtTheEndsOfInt64) {
    test::ScratchDir dir;
    const std::string path = dir.file("extremes.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        test::Events ev;
        ev.alloc(INT64_MIN + 1, 0x10, 0x20, 0x1000, 256);
        ev.free(INT64_MAX - 1, 0x10, 0x20, 0x1000); // (INT64_MAX is "never freed" in Timeline)
        ev.alloc(INT64_MAX, 0x10, 0x20, 0x2000, 512); // a leak at the very end
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    const uint64_t span = UINT64_MAX - 1; // INT64_MAX - (INT64_MIN + 1)
    CliRun info = runCli("info --json '" + path + "'");
    ASSERT_EQ(info.exitCode, 0) << info.output;
    auto ij = nlohmann::json::parse(info.output, nullptr, false);
    ASSERT_FALSE(ij.is_discarded()) << info.output;
    // is_number_unsigned: a wrapped -2 would also read back as 2^64 - 2 through get<uint64_t>.
    EXPECT_TRUE(ij["duration_ns"].is_number_unsigned()) << info.output;
    EXPECT_EQ(ij["duration_ns"].get<uint64_t>(), span) << info.output;
    CliRun report = runCli("report --json '" + path + "'");
    ASSERT_EQ(report.exitCode, 0) << report.output;
    auto rj = nlohmann::json::parse(report.output, nullptr, false);
    ASSERT_FALSE(rj.is_discarded()) << report.output;
    EXPECT_EQ(rj["t0_ns"].get<int64_t>(), INT64_MIN + 1);
    EXPECT_TRUE(rj["duration_ns"].is_number_unsigned()) << report.output;
    EXPECT_EQ(rj["duration_ns"].get<uint64_t>(), span) << report.output;
    ASSERT_EQ(rj["leaks"]["top"].size(), 1u) << report.output;
    EXPECT_TRUE(rj["leaks"]["top"][0]["alloc_ns"].is_number_unsigned()) << report.output;
    EXPECT_EQ(rj["leaks"]["top"][0]["alloc_ns"].get<uint64_t>(), span) << report.output;
    for (const char* verb : {"info", "report"}) {
        CliRun text = runCli(std::string(verb) + " '" + path + "'");
        ASSERT_EQ(text.exitCode, 0) << verb << ": " << text.output;
        for (const char* negative : {"duration -", "over -", "at -"})
            EXPECT_EQ(text.output.find(negative), std::string::npos)
                << "a negative duration: " << text.output;
        EXPECT_NE(text.output.find("153722867 min"), std::string::npos)
            << "saturated at INT64_MAX ns: " << text.output;
    }
}

} // namespace
} // namespace poolscope
