// Lies in the tables no checksum covers (issue #12): process, devices, pools, streams, threads,
// samples and meta. Each kind of lie either gets a damage warning that names it (and the CLI's
// exit status for damage), or is shown harmless by checking that what is read is right.
// The trace every test starts from is hand-built here (written by TraceWriter from the events
// below), not recorded: "handbuilt" in its file name says so.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "TestTraces.h"
#include "poolscope/Entities.h"
#include "poolscope/Result.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace poolscope {
namespace {

using test::execSql;

constexpr uint64_t kPool = 0x20, kStream = 0x10;
constexpr uint64_t kMiB = 1 << 20;

// One device, one pool, one stream, one thread; an alloc and its free; two samples (reserved
// 2 MiB, used 256 B then 0), the first 1 ms after the recording started.
std::string writeHandbuilt(const test::ScratchDir& dir) {
    const std::string path = dir.file("handbuilt-tables.poolscope");
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w) << w.error().message;
    TraceWriter& t = **w;
    ProcessInfo p;
    p.pid = 4242;
    p.commandLine = "./train";
    p.startTimeMonoNs = 1'000'000'000;
    EXPECT_TRUE(t.setProcess(p));
    EXPECT_TRUE(t.addDevice({0, "GPU zero", 80 * 1024 * kMiB, "GPU-uuid"}));
    PoolInfo pool;
    pool.handle = kPool;
    pool.device = 0;
    pool.kind = PoolKind::Default;
    EXPECT_TRUE(t.addPool(pool));
    StreamInfo s;
    s.handle = kStream;
    s.device = 0;
    EXPECT_TRUE(t.addStream(s));
    EXPECT_TRUE(t.addThread({42, "main"}));
    EXPECT_TRUE(t.setMeta("dropped_events", "0"));
    const int64_t t0 = p.startTimeMonoNs;
    test::Events ev;
    test::Events::wm(ev.alloc(t0 + 1'000'000, kStream, kPool, 0x1000, 256), 2 * kMiB, 256);
    test::Events::wm(ev.free(t0 + 3'000'000, kStream, kPool, 0x1000), 2 * kMiB, 0);
    EXPECT_TRUE(t.append(ev.all()));
    for (auto [ts, used] : {std::pair{t0 + 2'000'000, uint64_t{256}}, {t0 + 4'000'000, uint64_t{0}}}) {
        Event smp;
        smp.kind = EventKind::Sample;
        smp.tsNs = ts;
        smp.pool = kPool;
        smp.reserved = 2 * kMiB;
        smp.size = 2 * kMiB; // reserved high
        smp.used = used;
        smp.aux = 256;       // used high
        smp.flags = kHasWatermarks;
        EXPECT_TRUE(t.append(smp));
    }
    EXPECT_TRUE(t.close());
    return path;
}

using test::CliRun;
using test::runCli;

// The JSON document in a CLI's output (warnings about damage come before it, on stderr).
nlohmann::json jsonOf(const std::string& output) {
    const size_t from = output.find('{'), to = output.rfind('}');
    if (from == std::string::npos || to == std::string::npos) return nlohmann::json::value_t::discarded;
    return nlohmann::json::parse(output.substr(from, to - from + 1), nullptr, false);
}

std::string allDamage(const TraceReader& r) {
    std::string s;
    for (const TraceDamage& d : r.damage()) s += d.what + "\n";
    return s;
}

// The lie must be named by the reader, in `info`'s text and JSON, with the damage exit status;
// and `report` and the timeline still work.
void expectNamed(const std::string& path, const std::string& words) {
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    const std::string damage = allDamage(**r);
    EXPECT_NE(damage.find(words), std::string::npos) << "damage was:\n" << damage;
    auto tl = buildTimeline(**r);
    EXPECT_TRUE(tl) << tl.error().message;
    const int damaged = exitCodeFor(ErrorCode::Corrupt);
    CliRun info = runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, damaged) << info.output;
    EXPECT_NE(info.output.find("DAMAGED  " + words.substr(0, 20)), std::string::npos)
        << info.output;
    CliRun json = runCli("info --json '" + path + "'");
    auto j = jsonOf(json.output);
    ASSERT_FALSE(j.is_discarded()) << json.output;
    bool found = false;
    for (const auto& d : j["damage"]) found |= d["what"].get<std::string>().find(words) != std::string::npos;
    EXPECT_TRUE(found) << json.output;
    CliRun report = runCli("report '" + path + "'");
    EXPECT_EQ(report.exitCode, damaged) << report.output;
    EXPECT_NE(report.output.find("warning: '" + path + "' is damaged: "), std::string::npos)
        << report.output;
}

TEST(UncheckedTables, HandbuiltTraceHasNoDamage) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(allDamage(**r), "");
    CliRun info = runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
}

TEST(UncheckedTables, NegativeOrHugeSampleValuesAreSkippedAndNamed) {
    for (const char* lie : {"reserved = -1", "used = -4096", "reserved_high = 9223372036854775807",
                            "used_high = 1125899906842625", "ts_ns = 'noon'", "reserved = 1e300"}) {
        SCOPED_TRACE(lie);
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, std::string("UPDATE samples SET ") + lie + " WHERE id = 2");
        expectNamed(path, "1 watermark sample(s) hold negative, impossible (over 1 PiB) or "
                          "non-numeric values (from sample row 2; skipped)");
        auto r = TraceReader::open(path);
        ASSERT_TRUE(r);
        auto s = (*r)->samples(0, INT64_MIN, INT64_MAX);
        ASSERT_TRUE(s);
        ASSERT_EQ(s->size(), 1u) << "the damaged sample is not read";
        EXPECT_EQ((*s)[0].reserved, 2 * kMiB);
        EXPECT_EQ((*s)[0].used, 256u);
        auto sum = (*r)->summary();
        ASSERT_TRUE(sum);
        EXPECT_EQ(sum->sampleCount, 1u);
        // The report's peak is the real one, not 16 EiB.
        CliRun json = runCli("report --json '" + path + "'");
        auto j = jsonOf(json.output);
        ASSERT_FALSE(j.is_discarded()) << json.output;
        ASSERT_EQ(j["pools"].size(), 1u) << json.output;
        EXPECT_EQ(j["pools"][0]["peak_reserved"].get<uint64_t>(), 2 * kMiB) << json.output;
    }
}

TEST(UncheckedTables, SampleOfAPoolThatIsNotThereIsNamed) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "UPDATE samples SET pool = 2457 WHERE id = 1");
    expectNamed(path, "1 watermark sample(s) name a pool that is not in the pools table (0x999)");
}

TEST(UncheckedTables, SampleBeforeTheRecordingStartedIsNamed) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "UPDATE samples SET ts_ns = -9223372036854775807 WHERE id = 2");
    expectNamed(path, "1 watermark sample(s) are dated before the recording started (e.g. at "
                      "-9223372036854775807 ns)");
}

// Samples stored out of time order (real traces have some: the sampler and the writer race) are
// read in time order with their own values: harmless.
TEST(UncheckedTables, SamplesOutOfTimeOrderReadInTimeOrder) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "UPDATE samples SET ts_ns = CASE id WHEN 1 THEN 1004000000 ELSE 1002000000 END,"
                  " used = CASE id WHEN 1 THEN 0 ELSE 256 END");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(allDamage(**r), "");
    auto s = (*r)->samples(0, INT64_MIN, INT64_MAX);
    ASSERT_TRUE(s);
    ASSERT_EQ(s->size(), 2u);
    EXPECT_EQ((*s)[0].tsNs, 1'002'000'000);
    EXPECT_EQ((*s)[0].used, 256u);
    EXPECT_EQ((*s)[1].tsNs, 1'004'000'000);
    EXPECT_EQ((*s)[1].used, 0u);
    auto tl = buildTimeline(**r);
    ASSERT_TRUE(tl) << tl.error().message;
    const Series& used = (*tl)->pools.at(0).used;
    ASSERT_GE(used.size(), 2u);
    for (size_t i = 1; i < used.size(); ++i)
        EXPECT_LE(used.t[i - 1], used.t[i]) << "the used series is in time order";
    EXPECT_EQ(used.v.back(), 0u);
    CliRun info = runCli("info '" + path + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
}

TEST(UncheckedTables, PoolOrStreamOnADeviceThatIsNotThereIsNamed) {
    {
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, "UPDATE pools SET device = 7");
        expectNamed(path, "the pools table has 1 row(s) naming a device that is not in the "
                          "devices table (0x20 names device 7)");
    }
    {
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, "UPDATE streams SET device = 32768");
        expectNamed(path, "the streams table has 1 row(s) naming a device that is not in the "
                          "devices table (0x10 names device 32768)");
    }
    { // -1 is "unknown", which the collector writes: not a lie
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, "UPDATE pools SET device = -1; UPDATE streams SET device = -1");
        auto r = TraceReader::open(path);
        ASSERT_TRUE(r);
        EXPECT_EQ(allDamage(**r), "");
    }
}

TEST(UncheckedTables, ImpossibleDeviceRowsAreNamed) {
    {
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, "INSERT INTO devices(ordinal, name) VALUES (1099511627776, 'far')");
        expectNamed(path, "the devices table has 1 row(s) with an impossible ordinal (e.g. "
                          "1099511627776");
    }
    {
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, "UPDATE devices SET total_memory = -8");
        expectNamed(path, "the devices table gives 1 device(s) a negative or non-numeric memory "
                          "size (device 0)");
    }
}

TEST(UncheckedTables, UnknownPoolKindOrNegativeLimitIsNamed) {
    for (const char* lie : {"kind = 9", "kind = -1", "max_size = -1", "kind = 'default'"}) {
        SCOPED_TRACE(lie);
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, std::string("UPDATE pools SET ") + lie);
        expectNamed(path, "the pools table has 1 row(s) with an unknown kind or a negative size "
                          "limit (pool 0x20)");
    }
}

// The id columns are primary keys: only a table rebuilt without its key holds an id twice.
TEST(UncheckedTables, IdsListedTwiceAreNamedAndCountedOnce) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "CREATE TABLE p2 AS SELECT * FROM pools; DROP TABLE pools;"
                  " CREATE TABLE pools(handle INTEGER, device INTEGER, kind INTEGER,"
                  " handle_types INTEGER, location_type INTEGER, location_id INTEGER,"
                  " max_size INTEGER, created_ns INTEGER);"
                  " INSERT INTO pools SELECT * FROM p2; INSERT INTO pools SELECT * FROM p2;"
                  " DROP TABLE p2");
    expectNamed(path, "the pools table lists 1 handle(s) more than once (0x20; one row of each "
                      "is used)");
    CliRun json = runCli("report --json '" + path + "'");
    auto j = jsonOf(json.output);
    ASSERT_FALSE(j.is_discarded()) << json.output;
    EXPECT_EQ(j["pools"].size(), 1u) << "one pool, not two: " << json.output;
}

TEST(UncheckedTables, ThreadIdBeyond32BitsIsNamed) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "INSERT INTO threads(tid, name) VALUES (4294967338, 'wraps to 42')");
    expectNamed(path, "the threads table has 1 thread id(s) outside 0..2^32-1 (e.g. 4294967338)");
}

TEST(UncheckedTables, ProcessTableLiesAreNamed) {
    const std::pair<const char*, const char*> cases[] = {
        {"INSERT INTO process(pid) VALUES (99)",
         "the process table has 2 rows, one expected (the first is shown)"},
        {"UPDATE process SET pid = -5", "the process table's pid '-5' is not a process id"},
        {"UPDATE process SET pid = 'abc'", "the process table's pid 'abc' is not a process id"},
    };
    for (const auto& [lie, words] : cases) {
        SCOPED_TRACE(lie);
        test::ScratchDir dir;
        const std::string path = writeHandbuilt(dir);
        execSql(path, lie);
        expectNamed(path, words);
    }
}

// No process row is "unknown" (TraceWriter writes none unless given one): pid 0, no damage.
TEST(UncheckedTables, NoProcessRowIsAnUnknownProcess) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "DELETE FROM process");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(allDamage(**r), "");
    CliRun json = runCli("info --json '" + path + "'");
    ASSERT_EQ(json.exitCode, 0) << json.output;
    auto j = jsonOf(json.output);
    ASSERT_FALSE(j.is_discarded()) << json.output;
    EXPECT_EQ(j["process"]["pid"], 0) << json.output;
    EXPECT_EQ(j["process"]["command_line"], "") << json.output;
}

TEST(UncheckedTables, DroppedEventsThatIsNotACountIsNamed) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "UPDATE meta SET value = '-3 or so' WHERE key = 'dropped_events'");
    expectNamed(path, "meta dropped_events is '-3 or so', not a count: events may have been "
                      "dropped");
    CliRun report = runCli("report '" + path + "'");
    EXPECT_NE(report.output.find("the trace's dropped-event count is damaged"), std::string::npos)
        << report.output;
    EXPECT_EQ(report.output.find("dropped -3 or so"), std::string::npos) << report.output;
}

// Names that are not UTF-8 (a device or thread name as the driver or the program set it) are
// shown with U+FFFD in JSON, and nothing else changes: harmless. (Process and meta text: see
// Cli.JsonOutputSurvivesTextThatIsNotUtf8.)
TEST(UncheckedTables, DeviceAndThreadNamesThatAreNotUtf8) {
    test::ScratchDir dir;
    const std::string path = writeHandbuilt(dir);
    execSql(path, "UPDATE devices SET name = CAST(X'47505520E9FF' AS TEXT);"
                  " UPDATE threads SET name = CAST(X'6D61EF6E' AS TEXT);"
                  " UPDATE streams SET flags = 0");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(allDamage(**r), "");
    CliRun json = runCli("info --json '" + path + "'");
    ASSERT_EQ(json.exitCode, 0) << json.output;
    auto j = nlohmann::json::parse(json.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << json.output;
    EXPECT_EQ(j["devices"][0]["name"], "GPU \xEF\xBF\xBD\xEF\xBF\xBD") << json.output;
    EXPECT_EQ(j["threads"][0]["name"], "ma\xEF\xBF\xBDn") << json.output;
    EXPECT_EQ(j["threads"][0]["tid"], 42) << json.output;
    CliRun report = runCli("report --json '" + path + "'");
    EXPECT_EQ(report.exitCode, 0) << report.output;
    EXPECT_FALSE(nlohmann::json::parse(report.output, nullptr, false).is_discarded())
        << report.output;
}

} // namespace
} // namespace poolscope
