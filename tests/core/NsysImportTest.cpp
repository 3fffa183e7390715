// `poolscope import nsys` (issue #16). Nsight Systems cannot record on the GPU machine, so every
// input here is BUILT by this test from NVIDIA's documented SQLite schema (Nsight Systems
// Post-Collection Analysis Guide, "SQLite Schema Reference": the CUDA_GPU_MEMORY_USAGE_EVENTS and
// CUDA_GPU_MEMORY_POOL_EVENTS columns and the ENUM_* tables' id/name/label layout). The files
// are named nsys_fixture_built_*.sqlite and are not recordings.
#include <gtest/gtest.h>

#include <fstream>

#include "TestTraces.h"
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/interop/NsysImport.h"

namespace poolscope {
namespace {

constexpr int64_t kPid = 4242;
constexpr int64_t kGlobalPid = kPid << 24; // the documented serialization: pid in bits 24..47
constexpr int64_t kPool = 0x7f0000000000;
constexpr int64_t kMiB = 1 << 20;

// The documented tables, with only the columns the schema reference lists for them.
const char* kSchema = R"sql(
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMPOOL_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMPOOL_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
  start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL,
  bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL,
  name TEXT, correlationId INTEGER, streamId INTEGER, localMemoryPoolAddress INTEGER,
  localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER,
  localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress INTEGER,
  importedMemoryPoolProcessId INTEGER);
CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (
  start INTEGER NOT NULL, globalPid INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  address INTEGER NOT NULL, operationType INTEGER NOT NULL, poolType INTEGER NOT NULL,
  correlationId INTEGER, minBytesToKeep INTEGER, localMemoryPoolReleaseThreshold INTEGER,
  localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
  totalMemory INTEGER, uuid TEXT, cuDevice INTEGER);
)sql";

// Enumeration ids: the docs give the tables, not the numbers, so the importer must read them from
// the export. `base` shifts every id to prove nothing is hard-coded.
std::string enums(int base) {
    auto id = [base](int i) { return std::to_string(base + i); };
    return "INSERT INTO ENUM_CUDA_MEM_KIND VALUES (" + id(0) +
           ", 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'), (" + id(1) +
           ", 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (" + id(2) +
           ", 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'), (" + id(5) +
           ", 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static');"
           "INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (" + id(0) +
           ", 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'), (" + id(1) +
           ", 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');"
           "INSERT INTO ENUM_CUDA_MEMPOOL_TYPE VALUES (" + id(1) + ", 'CUDA_MEMPOOL_TYPE_LOCAL', 'Local'), (" +
           id(2) + ", 'CUDA_MEMPOOL_TYPE_IMPORTED', 'Imported');"
           "INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (" + id(1) + ", 'CUDA_MEMPOOL_OPER_CREATED', 'Created'), (" +
           id(2) + ", 'CUDA_MEMPOOL_OPER_DESTROYED', 'Destroyed'), (" + id(3) +
           ", 'CUDA_MEMPOOL_OPER_TRIMMED', 'Trimmed');";
}

// One process, one explicit pool on stream 7: create, 1 + 2 + 4 MiB allocated (the pool grows
// to 8 MiB), the 2 MiB block freed, a trim to 0 (pool 6 MiB after), the rest freed, destroy.
// Beside it a pinned host allocation and a plain cudaMalloc (no pool): not pool memory.
std::string usage(int base, int64_t t, int64_t addr, int64_t bytes, bool free, int64_t size,
                  int64_t utilized, int64_t pool = kPool, int kind = 2, int64_t gpid = kGlobalPid) {
    auto n = [](int64_t v) { return std::to_string(v); };
    return "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (" + n(t) + ", " + n(gpid) + ", 0, 1, " +
           n(addr) + ", 0, " + n(bytes) + ", " + n(base + kind) + ", " + n(base + (free ? 1 : 0)) +
           ", NULL, " + n(t) + ", 7, " + (pool ? n(pool) : "NULL") + ", 0, " +
           (pool ? n(size) : "NULL") + ", " + (pool ? n(utilized) : "NULL") + ", NULL, NULL);";
}

std::string scenario(int base) {
    auto pe = [base](int64_t t, int op, int64_t keep, int64_t size, int64_t utilized) {
        auto n = [](int64_t v) { return std::to_string(v); };
        return "INSERT INTO CUDA_GPU_MEMORY_POOL_EVENTS VALUES (" + n(t) + ", " + n(kGlobalPid) + ", 0, " +
               n(kPool) + ", " + n(base + op) + ", " + n(base + 1) + ", 1, " + n(keep) + ", 0, " + n(size) +
               ", " + n(utilized) + ");";
    };
    return enums(base) + "INSERT INTO StringIds VALUES (1, 'cudaMallocAsync_v11020');" +
           "INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'hand-built GPU (not a recording)', 85899345920, 'GPU-0', 0);" +
           pe(100, 1, 0, 0, 0) + usage(base, 200, 0x1000, 1 * kMiB, false, 8 * kMiB, 1 * kMiB) +
           usage(base, 210, 0x2000, 2 * kMiB, false, 8 * kMiB, 3 * kMiB) +
           usage(base, 220, 0x3000, 4 * kMiB, false, 8 * kMiB, 7 * kMiB) +
           usage(base, 230, 0x9000, 1 * kMiB, false, 0, 0, 0, 1) +  // pinned host, no pool
           usage(base, 240, 0xA000, 16 * kMiB, false, 0, 0, 0, 2) + // cudaMalloc, no pool
           usage(base, 300, 0x2000, 2 * kMiB, true, 8 * kMiB, 5 * kMiB) + pe(400, 3, 0, 6 * kMiB, 5 * kMiB) +
           usage(base, 500, 0x1000, 1 * kMiB, true, 6 * kMiB, 4 * kMiB) +
           usage(base, 510, 0x3000, 4 * kMiB, true, 6 * kMiB, 0) + pe(600, 2, 0, 0, 0);
}

std::string build(const test::ScratchDir& dir, const std::string& name, const std::string& sql) {
    const std::string path = dir.file("nsys_fixture_built_" + name + ".sqlite");
    test::execSql(path, std::string(kSchema) + sql);
    return path;
}

class NsysImportIds : public ::testing::TestWithParam<int> {};

TEST_P(NsysImportIds, BuiltFixtureBecomesATrace) {
    test::ScratchDir dir;
    const std::string in = build(dir, "pool", scenario(GetParam()));
    const std::string out = dir.file("imported.poolscope");
    auto r = interop::importNsysSqlite(in, out);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->pid, kPid);
    EXPECT_EQ(r->allocations, 3u);
    EXPECT_EQ(r->frees, 3u);
    EXPECT_EQ(r->poolEvents, 3u);
    EXPECT_EQ(r->skippedNonPool, 2u);

    auto reader = TraceReader::open(out);
    ASSERT_TRUE(reader.ok()) << reader.error().message;
    auto meta = (*reader)->meta();
    ASSERT_TRUE(meta.ok());
    EXPECT_EQ(meta->at("imported_from"), "nsys");
    EXPECT_NE(meta->at("imported_lacks").find("event records and stream waits"), std::string::npos);
    EXPECT_EQ(meta->at("imported_skipped_non_pool"), "2");
    auto tl = buildTimeline(**reader);
    ASSERT_TRUE(tl.ok());
    const Report rep = buildReport(**tl);
    ASSERT_EQ(rep.pools.size(), 1u);
    const PoolReport& p = rep.pools[0];
    EXPECT_EQ(p.info.handle, uint64_t(kPool));
    EXPECT_EQ(p.info.kind, PoolKind::Explicit); // created during the capture
    EXPECT_EQ(p.peakReserved, uint64_t(8 * kMiB));
    EXPECT_EQ(p.peakUsed, uint64_t(7 * kMiB));
    EXPECT_EQ(p.allocCount, 3u);
    EXPECT_EQ(p.freeCount, 3u);
    EXPECT_EQ(p.finalReserved, 0u);
    EXPECT_EQ(rep.trims, 1u);
    EXPECT_EQ(rep.leakCount, 0u);
    EXPECT_EQ(rep.unmatchedFrees, 0u);
    ASSERT_EQ(rep.streams.size(), 1u);
    EXPECT_EQ(rep.streams[0].info.handle, 7u);
    ASSERT_EQ(rep.devices.size(), 1u);
    EXPECT_EQ(rep.devices[0].name, "hand-built GPU (not a recording)");
    auto proc = (*reader)->process();
    ASSERT_TRUE(proc.ok());
    EXPECT_EQ(proc->pid, kPid);
}

INSTANTIATE_TEST_SUITE_P(EnumIds, NsysImportIds, ::testing::Values(0, 14));

int cliImport(const std::string& in, const std::string& out, std::string* output = nullptr,
              const std::string& extra = "") {
    auto r = test::runCli("import nsys " + extra + " '" + in + "' -o '" + out + "'");
    if (output) *output = r.output;
    return r.exitCode;
}

TEST(NsysImport, CliWritesTheTraceAndInfoSaysItWasImported) {
    test::ScratchDir dir;
    const std::string in = build(dir, "cli", scenario(0));
    std::string text;
    EXPECT_EQ(cliImport(in, dir.file("t.poolscope"), &text), 0) << text;
    auto info = test::runCli("info '" + dir.file("t.poolscope") + "'");
    EXPECT_EQ(info.exitCode, 0) << info.output;
    EXPECT_NE(info.output.find("imported_from = nsys"), std::string::npos) << info.output;
    EXPECT_NE(info.output.find("imported_lacks"), std::string::npos);
    // The imported trace reads like any other.
    auto report = test::runCli("report '" + dir.file("t.poolscope") + "'");
    EXPECT_EQ(report.exitCode, 0) << report.output;
    auto exported = test::runCli("export '" + dir.file("t.poolscope") + "' -o '" + dir.file("t.json") + "'");
    EXPECT_EQ(exported.exitCode, 0) << exported.output;
    // The output naming the input is refused, and the export is left as it was.
    const auto size = std::filesystem::file_size(in);
    EXPECT_EQ(cliImport(in, in, &text), 2) << text;
    EXPECT_EQ(std::filesystem::file_size(in), size);
}

TEST(NsysImport, BadInputsGetClearErrors) {
    test::ScratchDir dir;
    const std::string out = dir.file("out.poolscope");
    std::string text;
    // Not a file / not SQLite.
    EXPECT_EQ(cliImport(dir.file("missing.sqlite"), out, &text), 3) << text;
    {
        std::ofstream(dir.file("random.sqlite")) << "definitely not an sqlite database, just bytes";
        EXPECT_EQ(cliImport(dir.file("random.sqlite"), out, &text), 5) << text;
        EXPECT_NE(text.find("not an SQLite file"), std::string::npos) << text;
    }
    // An SQLite file of another application.
    test::execSql(dir.file("other.sqlite"), "CREATE TABLE t (x INTEGER);");
    EXPECT_EQ(cliImport(dir.file("other.sqlite"), out, &text), 6) << text;
    EXPECT_NE(text.find("not an Nsight Systems export"), std::string::npos) << text;
    // A PoolScope trace.
    EXPECT_EQ(cliImport(std::string(POOLSCOPE_SAMPLES_DIR) + "/pools.poolscope", out, &text), 6) << text;
    EXPECT_NE(text.find("already a PoolScope trace"), std::string::npos);
    // An nsys export recorded without memory usage tracing.
    test::execSql(dir.file("nsys_fixture_built_nomem.sqlite"), "CREATE TABLE StringIds (id INTEGER, value TEXT);");
    EXPECT_EQ(cliImport(dir.file("nsys_fixture_built_nomem.sqlite"), out, &text), 8) << text;
    EXPECT_NE(text.find("--cuda-memory-usage=true"), std::string::npos) << text;
    // The operation enumeration missing: allocations cannot be told from frees.
    const std::string noEnum = build(dir, "noenum", usage(0, 200, 0x1000, kMiB, false, kMiB, kMiB));
    EXPECT_EQ(cliImport(noEnum, out, &text), 8) << text;
    EXPECT_NE(text.find("ENUM_CUDA_DEV_MEM_EVENT_OPER"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(NsysImport, LyingValuesAreRefused) {
    test::ScratchDir dir;
    const std::string out = dir.file("out.poolscope");
    std::string text;
    const std::string over = build(dir, "over", enums(0) + usage(0, 200, 0x1000, kMiB, false, kMiB, 2 * kMiB));
    EXPECT_EQ(cliImport(over, out, &text), 9) << text;
    EXPECT_NE(text.find("above its size"), std::string::npos) << text;
    const std::string negative = build(dir, "negative", enums(0) + usage(0, 200, 0x1000, -5, false, kMiB, 0));
    EXPECT_EQ(cliImport(negative, out, &text), 9) << text;
    EXPECT_NE(text.find("negative size"), std::string::npos) << text;
    const std::string unknownOp =
        build(dir, "unknownop", enums(0) + usage(0, 200, 0x1000, kMiB, false, kMiB, kMiB) +
                                    "UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET memoryOperationType = 99;");
    EXPECT_EQ(cliImport(unknownOp, out, &text), 9) << text;
    EXPECT_NE(text.find("operation type 99"), std::string::npos) << text;
    const std::string early = build(dir, "early", enums(0) + usage(0, -7, 0x1000, kMiB, false, kMiB, kMiB));
    EXPECT_EQ(cliImport(early, out, &text), 9) << text;
    EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(NsysImport, SeveralProcessesNeedPid) {
    test::ScratchDir dir;
    const std::string in =
        build(dir, "twoproc", enums(0) + usage(0, 200, 0x1000, kMiB, false, kMiB, kMiB) +
                                  usage(0, 210, 0x5000, 2 * kMiB, false, 2 * kMiB, 2 * kMiB, kPool + 0x1000000, 2,
                                        int64_t(77) << 24));
    std::string text;
    EXPECT_EQ(cliImport(in, dir.file("a.poolscope"), &text), 2) << text;
    EXPECT_NE(text.find("--pid"), std::string::npos) << text;
    EXPECT_NE(text.find("77"), std::string::npos) << text;
    EXPECT_EQ(cliImport(in, dir.file("b.poolscope"), &text, "--pid 77"), 0) << text;
    auto r = TraceReader::open(dir.file("b.poolscope"));
    ASSERT_TRUE(r.ok());
    auto s = (*r)->summary();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->eventCount, 1u);
    EXPECT_EQ(cliImport(in, dir.file("c.poolscope"), &text, "--pid 5"), 2) << text;
}

TEST(NsysImport, UnwritableOutput) {
    test::ScratchDir dir;
    const std::string in = build(dir, "out", scenario(0));
    std::string text;
    EXPECT_EQ(cliImport(in, dir.file("no/such/dir/t.poolscope"), &text), 10) << text;
}

} // namespace
} // namespace poolscope
