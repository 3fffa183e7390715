// Call sites in the trace and the report (issue #13): format 4's tables, traces from before
// them, and the sites holding memory at a pool's peak reserved. The traces here are hand-built
// (HandBuilt in the test names): events with the sites a test needs, stacks written directly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "TestTraces.h"
#include "poolscope/Report.h"
#include "poolscope/Schema.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/CallSites.h"

using namespace poolscope;

namespace {
std::string readFile(const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

constexpr uint64_t kPool = 0x5000, kStream = 0x7;

// Three sites: 1 = python forward, 2 = native, 3 = native with an NVTX path; module 1 has
// symbols for one frame only.
StackTables handBuiltStacks() {
    StackTables t;
    t.modules.push_back(ModuleInfo{1, "/opt/app/bin/train", "abcd", 0x400000, 0x10000});
    t.modules.push_back(ModuleInfo{2, "/usr/lib/libcudart.so.13", "ef01", 0x7f0000000000, 0x100000});
    t.nativeStacks[1] = {NativeFrame{2, 0x50}, NativeFrame{1, 0x1234}, NativeFrame{1, 0x2000}};
    t.nativeStacks[2] = {NativeFrame{1, 0x3000}};
    t.pythonStacks[1] = {PythonFrame{"/site-packages/transformers/models/gpt2/modeling_gpt2.py",
                                     "GPT2MLP.forward", 101},
                         PythonFrame{"/work/train.py", "step", 12}};
    t.nvtxPaths[1] = {"step", "forward"};
    t.sites[1] = SiteInfo{1, 0, 1, 0};
    t.sites[2] = SiteInfo{2, 1, 0, 0};
    t.sites[3] = SiteInfo{3, 2, 0, 1};
    t.symbols[{2, 0x50}] = Symbol{2, 0x50, "cudaMallocAsync", "", 0};
    t.symbols[{1, 0x1234}] = Symbol{1, 0x1234, "alloc_weights", "/src/callsites.cu", 31};
    t.ranges.push_back(NvtxRange{1, 42, "step", 10, 90, 0, NvtxRangeKind::PushPop});
    return t;
}

std::string writeHandBuilt(test::ScratchDir& dir) {
    test::Events ev;
    test::Events::wm(ev.alloc(10, kStream, kPool, 0xA000, 100), 100, 100).site = 1;
    test::Events::wm(ev.alloc(20, kStream, kPool, 0xB000, 300), 400, 400).site = 2;
    test::Events::wm(ev.alloc(25, kStream, kPool, 0xC000, 40), 440, 440).site = 2;
    test::Events::wm(ev.alloc(26, kStream, kPool, 0xD000, 8), 448, 448); // no site
    test::Events::wm(ev.free(30, kStream, kPool, 0xB000), 448, 148);
    test::Events::wm(ev.alloc(40, kStream, kPool, 0xE000, 200), 448, 348).site = 3;
    const std::string path = dir.file("handbuilt_sites.poolscope");
    // Codec 4, uncompressed: a test below relabels its chunks' format.
    WriterOptions options;
    options.compressEvents = false;
    auto w = TraceWriter::create(path, options);
    EXPECT_TRUE(w);
    // The pool's device is in the devices table: a pool naming a missing device is damage.
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "hand-built device (not a recording)", 80ull << 30, ""}));
    PoolInfo p;
    p.handle = kPool;
    p.device = 0;
    p.kind = PoolKind::Default;
    EXPECT_TRUE((*w)->addPool(p));
    EXPECT_TRUE((*w)->append(ev.all()));
    EXPECT_TRUE((*w)->addStacks(handBuiltStacks()));
    EXPECT_TRUE((*w)->close());
    return path;
}
} // namespace

TEST(CallSites, HandBuiltTraceTopSitesAtThePeakReserved) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir);
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ((*r)->schemaVersion(), schema::kVersion);
    auto tl = buildTimeline(**r);
    ASSERT_TRUE(tl) << tl.error().message;
    const Report rep = buildReport(**tl);
    auto stacks = (*r)->stacks();
    ASSERT_TRUE(stacks) << stacks.error().message;
    const auto pools = analysis::topSitesAtPeaks(**tl, rep, 10);
    ASSERT_EQ(pools.size(), 1u);
    const analysis::PoolSites& p = pools[0];
    // Reserved peaked (448) first at ts 26: A, B, C and the site-less D are live; E came later.
    EXPECT_TRUE(p.atPeakReserved);
    EXPECT_EQ(p.atTsNs, 26);
    EXPECT_EQ(p.reserved, 448u);
    EXPECT_EQ(p.liveBytes, 448u);
    EXPECT_EQ(p.liveCount, 4u);
    ASSERT_EQ(p.top.size(), 3u);
    EXPECT_EQ(p.top[0].site, 2u);
    EXPECT_EQ(p.top[0].bytes, 340u);
    EXPECT_EQ(p.top[0].count, 2u);
    EXPECT_EQ(p.top[1].site, 1u);
    EXPECT_EQ(p.top[1].bytes, 100u);
    EXPECT_EQ(p.top[2].site, 0u);
    EXPECT_EQ(p.top[2].bytes, 8u);
    // Shortened as a user reads them: the runtime's cudaMallocAsync frame left out, Python
    // files with their package directory, frames without symbols as module+offset.
    EXPECT_EQ(analysis::siteText(*stacks, 2),
              "alloc_weights (callsites.cu:31) < train+0x2000");
    EXPECT_EQ(analysis::siteText(*stacks, 1),
              "GPT2MLP.forward (gpt2/modeling_gpt2.py:101) < step (work/train.py:12)");
    EXPECT_EQ(analysis::siteText(*stacks, 3), "train+0x3000  [step/forward]");
    EXPECT_EQ(analysis::siteText(*stacks, 0), "(no stack)");
    EXPECT_EQ(analysis::siteFrames(*stacks, 2).size(), 3u); // nothing left out here
    EXPECT_EQ(analysis::topSitesAtPeaks(**tl, rep, 1)[0].top.size(), 1u);
}

TEST(CallSites, TracesBeforeFormat4HaveNoStacks) {
    // The bundled samples were recorded before call sites existed.
    const std::string path = std::string(POOLSCOPE_SAMPLES_DIR) + "/churn.poolscope";
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    ASSERT_LT((*r)->schemaVersion(), schema::kStacksVersion);
    auto t = (*r)->stacks();
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_TRUE(t->empty());
}

TEST(CallSites, HandBuiltDamagedFrameTableIsAnError) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir);
    test::execSql(path, "DELETE FROM native_frames WHERE stack=1 AND depth=1");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r);
    auto t = (*r)->stacks();
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error().code, ErrorCode::Corrupt);
    EXPECT_NE(t.error().message.find("stack 1"), std::string::npos) << t.error().message;
}

TEST(CallSites, CliReportAndDumpSayNoStacksForOldTraces) {
    const std::string sample = std::string(POOLSCOPE_SAMPLES_DIR) + "/churn.poolscope";
    const std::string cli = POOLSCOPE_CLI;
    test::ScratchDir dir;
    const std::string out = dir.file("out.txt"), err = dir.file("err.txt");
    ASSERT_EQ(std::system((cli + " report --top-sites 3 " + sample + " > " + out).c_str()), 0);
    std::string text = readFile(out);
    EXPECT_NE(text.find("Call sites at each pool's peak reserved"), std::string::npos);
    EXPECT_NE(text.find("no stacks recorded"), std::string::npos) << text;
    ASSERT_EQ(std::system((cli + " dump --stacks " + sample + " > " + out + " 2> " + err).c_str()), 0);
    EXPECT_EQ(readFile(out), "");
    EXPECT_NE(readFile(err).find("no stacks recorded"), std::string::npos);
}

TEST(CallSites, CliHandBuiltTraceListsTopSitesAndDumpsStacks) {
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir);
    const std::string cli = POOLSCOPE_CLI;
    const std::string out = dir.file("out.txt");
    ASSERT_EQ(std::system((cli + " report --top-sites 2 " + path + " > " + out).c_str()), 0);
    const std::string text = readFile(out);
    EXPECT_NE(text.find("340 B"), std::string::npos) << text;
    EXPECT_NE(text.find("alloc_weights (callsites.cu:31) < train+0x2000"), std::string::npos) << text;
    EXPECT_EQ(text.find("(no stack)"), std::string::npos) << "top 2 only:\n" << text;
    ASSERT_EQ(std::system((cli + " dump --stacks " + path + " > " + out + " 2>/dev/null").c_str()), 0);
    const std::string stacks = readFile(out);
    EXPECT_NE(stacks.find("\"nvtx\":\"step/forward\""), std::string::npos) << stacks;
    EXPECT_NE(stacks.find("cudaMallocAsync"), std::string::npos) << "dump keeps every frame";
    ASSERT_EQ(std::system((cli + " dump " + path + " > " + out).c_str()), 0);
    EXPECT_NE(readFile(out).find("\"site\":2"), std::string::npos);
}

TEST(CallSites, HandBuiltCodec4ChunkInAnOlderFormatIsDamage) {
    // Codec 4 decodes every codec-3 chunk, so in a format without checksums (1, 2) a chunk
    // relabelled 3 -> 4 would read unnoticed: codec 4 outside format 4 is damage.
    test::ScratchDir dir;
    const std::string path = writeHandBuilt(dir);
    test::execSql(path, "PRAGMA user_version=2");
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    (*r)->setSkipDamaged(true);
    ASSERT_TRUE((*r)->verifyChunks());
    const auto damage = (*r)->damage();
    ASSERT_FALSE(damage.empty());
    EXPECT_NE(damage.front().what.find("codec 4 cannot occur in a format 2 trace"), std::string::npos)
        << damage.front().what;
}
