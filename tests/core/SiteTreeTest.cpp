// The window's call-site analyses (analysis/SiteTree.h, issue #13): one allocation's stack in
// call order with Python and native frames interleaved, the NVTX ranges open on its thread, and
// the top-down / bottom-up trees of all allocations with their totals. HandBuilt tests use a
// Timeline and stack tables written here (not a recording); the Sample tests read the real
// callsites.poolscope recorded on an H100.
#include <gtest/gtest.h>

#include <numeric>

#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/analysis/SiteTree.h"
#include "poolscope/view/NvtxRows.h"

using namespace poolscope;
using namespace poolscope::analysis;

namespace {

constexpr uint64_t kPool = 0x5000, kOtherPool = 0x6000;

// Site 1: alloc_weights called from main (native only, cudaMallocAsync's frame on top).
// Site 2: alloc_workspace called from main.
// Site 3: a C++ extension called from Python (forward < step), which the interpreter runs
//         inside main: native and Python frames both recorded.
StackTables handBuiltStacks() {
    StackTables t;
    t.modules.push_back(ModuleInfo{1, "/opt/app/bin/train", "abcd", 0x400000, 0x10000});
    t.modules.push_back(ModuleInfo{2, "/usr/lib/libcudart.so.13", "ef01", 0x7f0000000000, 0x1000});
    t.modules.push_back(ModuleInfo{3, "/usr/lib/libpython3.11.so.1.0", "aa", 0x7f1000000000, 0x1000});
    t.modules.push_back(ModuleInfo{4, "/opt/ext/_ext.so", "bb", 0x7f2000000000, 0x1000});
    t.nativeStacks[1] = {NativeFrame{2, 0x50}, NativeFrame{1, 0x1234}, NativeFrame{1, 0x2000}};
    t.nativeStacks[2] = {NativeFrame{1, 0x3000}, NativeFrame{1, 0x2000}};
    t.nativeStacks[3] = {NativeFrame{2, 0x50},  NativeFrame{4, 0x10},  NativeFrame{3, 0x100},
                         NativeFrame{3, 0x200}, NativeFrame{3, 0x100}, NativeFrame{1, 0x2000}};
    t.pythonStacks[1] = {PythonFrame{"/src/model/model.py", "forward", 10},
                         PythonFrame{"/src/train.py", "step", 5}};
    t.sites[1] = SiteInfo{1, 1, 0, 0};
    t.sites[2] = SiteInfo{2, 2, 0, 0};
    t.sites[3] = SiteInfo{3, 3, 1, 0};
    t.symbols[{2, 0x50}] = Symbol{2, 0x50, "cudaMallocAsync", "", 0};
    t.symbols[{1, 0x1234}] = Symbol{1, 0x1234, "alloc_weights", "/src/callsites.cu", 31};
    t.symbols[{1, 0x3000}] = Symbol{1, 0x3000, "alloc_workspace", "/src/callsites.cu", 40};
    t.symbols[{4, 0x10}] = Symbol{4, 0x10, "ext::alloc_buffer", "/src/ext.cc", 7};
    t.symbols[{3, 0x100}] = Symbol{3, 0x100, "_PyEval_EvalFrameDefault", "", 0};
    t.symbols[{3, 0x200}] = Symbol{3, 0x200, "PyObject_Call", "", 0};
    t.ranges.push_back(NvtxRange{1, 42, "step", 10, 90, 0, NvtxRangeKind::PushPop});
    t.ranges.push_back(NvtxRange{2, 42, "forward", 30, 45, 1, NvtxRangeKind::PushPop});
    t.ranges.push_back(NvtxRange{3, 7, "io", 0, 100, 0, NvtxRangeKind::PushPop});
    t.ranges.push_back(NvtxRange{4, 42, "epoch", 1, 0, 0, NvtxRangeKind::StartEnd}); // never ended
    return t;
}

Allocation alloc(uint32_t site, uint64_t size, int64_t a, int64_t f, uint64_t pool = kPool) {
    static uint64_t ptr = 0x1000;
    Allocation x;
    x.ptr = ptr += 0x1000;
    x.size = size;
    x.pool = pool;
    x.allocTsNs = a;
    x.freeTsNs = f;
    x.site = site;
    x.tid = 42;
    return x;
}

Timeline handBuiltTimeline() {
    Timeline tl;
    tl.t0 = 0;
    tl.t1 = 100;
    tl.allocations = {alloc(1, 100, 10, 50),         alloc(1, 50, 20, kStillLive),
                      alloc(2, 300, 30, 40),         alloc(3, 70, 35, 60),
                      alloc(0, 8, 5, kStillLive),    alloc(2, 1000, 36, 37, kOtherPool)};
    Allocation failed = alloc(2, 1, 38, kStillLive);
    failed.ptr = 0; // no block: not counted
    tl.allocations.push_back(failed);
    return tl;
}

const SiteNode* childNamed(const SiteTree& t, uint32_t node, const std::string& frame) {
    for (uint32_t c : t.nodes[node].children)
        if (t.nodes[c].frame == frame) return &t.nodes[c];
    return nullptr;
}
uint32_t indexOf(const SiteTree& t, const SiteNode* n) {
    return uint32_t(n - t.nodes.data());
}

// Each node's children hold exactly its allocations, less those whose stack ends at it.
void expectConsistent(const SiteTree& t) {
    for (const SiteNode& n : t.nodes) {
        uint64_t bytes = 0, count = 0;
        for (uint32_t c : n.children) {
            EXPECT_EQ(t.nodes[c].parent, uint32_t(&n - t.nodes.data()));
            EXPECT_LE(t.nodes[c].peakLive, n.peakLive) << t.nodes[c].frame;
            bytes += t.nodes[c].bytesAllocated;
            count += t.nodes[c].count;
        }
        EXPECT_LE(bytes, n.bytesAllocated) << n.frame;
        EXPECT_LE(count, n.count) << n.frame;
    }
}

} // namespace

TEST(SiteTree, HandBuiltStackInCallOrderInterleavesPythonAndNative) {
    const StackTables t = handBuiltStacks();
    const CallStack s3 = callStack(t, 3);
    ASSERT_EQ(s3.frames.size(), 4u);
    // main (no symbols), then the Python frames where the interpreter's frames were, then the
    // extension Python called; cudaMallocAsync left out.
    EXPECT_EQ(s3.frames[0].text, "train+0x2000");
    EXPECT_EQ(s3.frames[0].kind, StackFrame::Kind::Native);
    EXPECT_EQ(s3.frames[0].function, "");
    EXPECT_EQ(s3.frames[1].text, "step (src/train.py:5)");
    EXPECT_EQ(s3.frames[1].kind, StackFrame::Kind::Python);
    EXPECT_EQ(s3.frames[2].function, "forward");
    EXPECT_EQ(s3.frames[2].location, "model/model.py:10");
    EXPECT_EQ(s3.frames[3].text, "ext::alloc_buffer (ext.cc:7)");
    EXPECT_EQ(s3.frames[3].location, "ext.cc:7");
    EXPECT_EQ(s3.runtimeFrames, 1u);
    EXPECT_EQ(s3.interpreterFrames, 3u);

    const CallStack s1 = callStack(t, 1);
    ASSERT_EQ(s1.frames.size(), 2u);
    EXPECT_EQ(s1.frames[0].text, "train+0x2000");
    EXPECT_EQ(s1.frames[1].text, "alloc_weights (callsites.cu:31)");
    EXPECT_EQ(s1.interpreterFrames, 0u);
    EXPECT_TRUE(callStack(t, 0).empty());
    EXPECT_TRUE(callStack(t, 99).empty());
}

TEST(SiteTree, HandBuiltPythonOnlyAndUnknownInterpreter) {
    StackTables t = handBuiltStacks();
    t.sites[4] = SiteInfo{4, 0, 1, 0}; // Python frames only
    const CallStack py = callStack(t, 4);
    ASSERT_EQ(py.frames.size(), 2u);
    EXPECT_EQ(py.frames[0].function, "step");
    EXPECT_EQ(py.frames[1].function, "forward");
    // Native frames and Python frames but no interpreter frame among the native ones (a
    // stripped python): the native frames are taken as called from Python.
    t.sites[5] = SiteInfo{5, 2, 1, 0};
    const CallStack mixed = callStack(t, 5);
    ASSERT_EQ(mixed.frames.size(), 4u);
    EXPECT_EQ(mixed.frames[0].function, "step");
    EXPECT_EQ(mixed.frames[3].function, "alloc_workspace");
}

TEST(SiteTree, HandBuiltOpenRangesOnTheThread) {
    const StackTables t = handBuiltStacks();
    auto names = [](const std::vector<const NvtxRange*>& v) {
        std::string s;
        for (const NvtxRange* r : v) s += (s.empty() ? "" : "/") + r->name;
        return s;
    };
    EXPECT_EQ(names(openRanges(t, 42, 35)), "epoch/step/forward");
    EXPECT_EQ(names(openRanges(t, 42, 45)), "epoch/step"); // forward ended at 45
    EXPECT_EQ(names(openRanges(t, 42, 10)), "epoch/step");  // step started at 10
    EXPECT_EQ(names(openRanges(t, 42, 0)), "");
    EXPECT_EQ(names(openRanges(t, 7, 35)), "io");
    EXPECT_EQ(names(openRanges(t, 8, 35)), "");
}

TEST(SiteTree, HandBuiltTopDownTotals) {
    const Timeline tl = handBuiltTimeline();
    const SiteTree tree = buildSiteTree(tl, handBuiltStacks(), SiteOrder::TopDown);
    expectConsistent(tree);
    const SiteNode& root = tree.nodes[0];
    EXPECT_EQ(root.bytesAllocated, 1528u);
    EXPECT_EQ(root.count, 6u);
    EXPECT_EQ(root.liveAtEndBytes, 58u);
    EXPECT_EQ(root.liveAtEndCount, 2u);
    // 5: +8, 10: +100, 20: +50, 30: +300, 35: +70, 36: +1000 (other pool) -> 1528 at 36.
    EXPECT_EQ(root.peakLive, 1528u);
    EXPECT_EQ(root.peakLiveTsNs, 36);
    ASSERT_EQ(root.children.size(), 2u);
    const SiteNode* main = childNamed(tree, 0, "train+0x2000");
    ASSERT_NE(main, nullptr);
    EXPECT_EQ(root.children[0], indexOf(tree, main)); // largest first
    EXPECT_EQ(main->bytesAllocated, 1520u);
    EXPECT_EQ(main->count, 5u);
    EXPECT_EQ(main->peakLive, 1520u);
    EXPECT_EQ(main->sites, (std::vector<uint32_t>{1, 2, 3}));
    const SiteNode* noStack = childNamed(tree, 0, "(no stack)");
    ASSERT_NE(noStack, nullptr);
    EXPECT_EQ(noStack->bytesAllocated, 8u);
    EXPECT_EQ(noStack->liveAtEndBytes, 8u);
    EXPECT_EQ(noStack->kind, StackFrame::Kind::None);

    ASSERT_EQ(main->children.size(), 3u);
    const SiteNode& first = tree.nodes[main->children[0]];
    EXPECT_EQ(first.frame, "alloc_workspace (callsites.cu:40)");
    EXPECT_EQ(first.peakLive, 1300u); // 300 and the other pool's 1000 at 36
    EXPECT_EQ(first.count, 2u);
    const SiteNode* weights = childNamed(tree, indexOf(tree, main), "alloc_weights (callsites.cu:31)");
    ASSERT_NE(weights, nullptr);
    EXPECT_EQ(weights->peakLive, 150u);
    EXPECT_EQ(weights->peakLiveTsNs, 20);
    EXPECT_EQ(weights->bytesAllocated, 150u);
    EXPECT_EQ(weights->liveAtEndBytes, 50u);
    EXPECT_EQ(weights->liveAtEndCount, 1u);
    const SiteNode* step = childNamed(tree, indexOf(tree, main), "step (src/train.py:5)");
    ASSERT_NE(step, nullptr);
    EXPECT_EQ(step->kind, StackFrame::Kind::Python);
    const SiteNode* fwd = childNamed(tree, indexOf(tree, step), "forward (model/model.py:10)");
    ASSERT_NE(fwd, nullptr);
    const SiteNode* ext = childNamed(tree, indexOf(tree, fwd), "ext::alloc_buffer (ext.cc:7)");
    ASSERT_NE(ext, nullptr);
    EXPECT_EQ(ext->peakLive, 70u);
    EXPECT_TRUE(ext->children.empty());
    EXPECT_EQ(tree.leafOfSite.at(3), indexOf(tree, ext));
}

TEST(SiteTree, HandBuiltBottomUpStartsAtTheAllocatingCall) {
    const Timeline tl = handBuiltTimeline();
    const SiteTree up = buildSiteTree(tl, handBuiltStacks(), SiteOrder::BottomUp);
    const SiteTree down = buildSiteTree(tl, handBuiltStacks(), SiteOrder::TopDown);
    expectConsistent(up);
    EXPECT_EQ(up.nodes[0].bytesAllocated, down.nodes[0].bytesAllocated);
    EXPECT_EQ(up.nodes[0].peakLive, down.nodes[0].peakLive);
    // Every stack is one chain: the first level holds every allocation once.
    uint64_t bytes = 0;
    for (uint32_t c : up.nodes[0].children) bytes += up.nodes[c].bytesAllocated;
    EXPECT_EQ(bytes, up.nodes[0].bytesAllocated);
    ASSERT_EQ(up.nodes[0].children.size(), 4u);
    EXPECT_EQ(up.nodes[up.nodes[0].children[0]].frame, "alloc_workspace (callsites.cu:40)");
    const SiteNode* ext = childNamed(up, 0, "ext::alloc_buffer (ext.cc:7)");
    ASSERT_NE(ext, nullptr);
    const SiteNode* fwd = childNamed(up, indexOf(up, ext), "forward (model/model.py:10)");
    ASSERT_NE(fwd, nullptr);
    const SiteNode* step = childNamed(up, indexOf(up, fwd), "step (src/train.py:5)");
    ASSERT_NE(step, nullptr);
    const SiteNode* main = childNamed(up, indexOf(up, step), "train+0x2000");
    ASSERT_NE(main, nullptr);
    EXPECT_EQ(main->bytesAllocated, 70u); // only site 3 under this path
    // main appears once per caller chain bottom-up, once in total top-down.
    size_t mains = 0;
    for (const SiteNode& n : up.nodes) mains += n.frame == "train+0x2000";
    EXPECT_EQ(mains, 3u);
}

TEST(SiteTree, HandBuiltLiveBytesAtAnInstant) {
    const Timeline tl = handBuiltTimeline();
    const SiteTree tree = buildSiteTree(tl, handBuiltStacks(), SiteOrder::TopDown);
    const uint32_t main = indexOf(tree, childNamed(tree, 0, "train+0x2000"));
    const uint32_t weights = indexOf(tree, childNamed(tree, main, "alloc_weights (callsites.cu:31)"));
    auto at35 = liveBytesAt(tree, tl, 35);
    ASSERT_EQ(at35.size(), tree.nodes.size());
    EXPECT_EQ(at35[0], 528u);
    EXPECT_EQ(at35[main], 520u);
    EXPECT_EQ(at35[weights], 150u);
    // Freed at 40: not live at 40.
    EXPECT_EQ(liveBytesAt(tree, tl, 40)[main], 220u);
    // Only the other pool.
    auto other = liveBytesAt(tree, tl, 36, kOtherPool);
    EXPECT_EQ(other[0], 1000u);
    EXPECT_EQ(other[weights], 0u);
    EXPECT_EQ(liveBytesAt(tree, tl, 36, kPool)[0], 528u);
}

TEST(SiteTree, HandBuiltAllocationsAndSeriesOfASite) {
    const Timeline tl = handBuiltTimeline();
    const auto idx = allocationsOfSites(tl, {1});
    EXPECT_EQ(idx, (std::vector<uint32_t>{0, 1}));
    const Series s = liveBytesSeries(tl, idx);
    EXPECT_EQ(s.valueAt(5), 0u);
    EXPECT_EQ(s.valueAt(15), 100u);
    EXPECT_EQ(s.valueAt(25), 150u);
    EXPECT_EQ(s.valueAt(55), 50u);
    EXPECT_EQ(s.max(), 150u);
    EXPECT_EQ(allocationsOfSites(tl, {2}).size(), 2u); // the failed one (no pointer) is not
    EXPECT_TRUE(liveBytesSeries(tl, {}).empty());
}

TEST(SiteTree, HandBuiltEmptyTimeline) {
    Timeline tl;
    const SiteTree tree = buildSiteTree(tl, StackTables{}, SiteOrder::TopDown);
    EXPECT_TRUE(tree.empty());
    EXPECT_EQ(tree.nodes[0].peakLive, 0u);
    EXPECT_EQ(liveBytesAt(tree, tl, 0).size(), 1u);
}

// The real sample recorded on the H100: the tree's live bytes at each pool's peak agree with
// what `report --top-sites` computes independently, and the workload's three functions are
// there.
TEST(SiteTree, SampleCallsitesAgreesWithTopSites) {
    const std::string path = std::string(POOLSCOPE_SAMPLES_DIR) + "/callsites.poolscope";
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    auto tl = buildTimeline(**r);
    ASSERT_TRUE(tl) << tl.error().message;
    auto stacks = (*r)->stacks();
    ASSERT_TRUE(stacks) << stacks.error().message;
    ASSERT_FALSE(stacks->sites.empty());
    const Timeline& T = **tl;
    for (SiteOrder order : {SiteOrder::TopDown, SiteOrder::BottomUp}) {
        const SiteTree tree = buildSiteTree(T, *stacks, order);
        expectConsistent(tree);
        uint64_t bytes = 0, count = 0;
        for (const Allocation& a : T.allocations)
            if (a.ptr) {
                bytes += a.size;
                ++count;
            }
        EXPECT_EQ(tree.nodes[0].bytesAllocated, bytes);
        EXPECT_EQ(tree.nodes[0].count, count);
        const Report rep = buildReport(T);
        for (const PoolSites& ps : topSitesAtPeaks(T, rep, 100)) {
            const auto live = liveBytesAt(tree, T, ps.atTsNs, ps.pool);
            EXPECT_EQ(live[0], ps.liveBytes);
            for (const SiteBytes& sb : ps.top) {
                // A leaf may be shared by sites with the same frames: at least this site's bytes.
                EXPECT_GE(live[tree.leafOfSite.at(sb.site)], sb.bytes);
            }
        }
    }
    const SiteTree up = buildSiteTree(T, *stacks, SiteOrder::BottomUp);
    std::string firstLevel;
    for (uint32_t c : up.nodes[0].children) firstLevel += up.nodes[c].frame + "\n";
    for (const char* fn : {"alloc_weights", "alloc_workspace", "alloc_activations"})
        EXPECT_NE(firstLevel.find(fn), std::string::npos) << fn << " in\n" << firstLevel;
}

// Colour slots: names by their first range's start, then names only a site's path carries.
TEST(NvtxRows, HandBuiltColorSlotsByFirstStart) {
    StackTables t = handBuiltStacks();
    t.nvtxPaths[1] = {"step", "optimizer"};
    const auto rows = view::NvtxRows::build(t, 100);
    EXPECT_EQ(rows.colorSlot("io"), 0u);
    EXPECT_EQ(rows.colorSlot("epoch"), 1u);
    EXPECT_EQ(rows.colorSlot("step"), 2u);
    EXPECT_EQ(rows.colorSlot("forward"), 3u);
    EXPECT_EQ(rows.colorSlot("optimizer"), 4u);
    EXPECT_EQ(view::NvtxRows::nameOrder(t), rows.colorSlots);
}

// The timeline's NVTX band (view/NvtxRows.h) on the hand-built ranges.
TEST(NvtxRows, HandBuiltRowsPerThreadAndDepth) {
    const StackTables t = handBuiltStacks();
    const auto rows = view::NvtxRows::build(t, 100);
    // Thread 7 opened its first range at 0, thread 42 at 1: 7 first; 42 has depths 0 and 1.
    ASSERT_EQ(rows.rows.size(), 3u);
    EXPECT_EQ(rows.rows[0].tid, 7u);
    EXPECT_EQ(rows.rows[1].tid, 42u);
    EXPECT_EQ(rows.rows[1].depth, 0u);
    EXPECT_EQ(rows.rows[2].depth, 1u);
    ASSERT_EQ(rows.rows[1].ranges.size(), 2u); // epoch (1, open) and step (10-90), by start
    EXPECT_EQ(t.ranges[rows.rows[1].ranges[0]].name, "epoch");
    EXPECT_EQ(rows.endOf(t.ranges[rows.rows[1].ranges[0]]), 100); // open: to the trace's end
    EXPECT_EQ(rows.rows[1].maxEnd, (std::vector<int64_t>{100, 100}));
    EXPECT_EQ(t.ranges[size_t(rows.rangeAt(t, 1, 50))].name, "step"); // the later start
    EXPECT_EQ(t.ranges[size_t(rows.rangeAt(t, 1, 5))].name, "epoch");
    EXPECT_EQ(t.ranges[size_t(rows.rangeAt(t, 2, 30))].name, "forward");
    EXPECT_EQ(rows.rangeAt(t, 2, 50), -1);
    EXPECT_EQ(rows.rangeAt(t, 9, 50), -1);
    EXPECT_EQ(view::NvtxRows::firstReaching(rows.rows[2], 46), 1u); // forward ended at 45
    EXPECT_TRUE(view::NvtxRows::build(StackTables{}, 100).rows.empty());
}
