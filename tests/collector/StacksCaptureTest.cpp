// Call sites (issue #13) on CPU: the collector's capture and interning (StackRecorder), the rows
// it hands the writer, their trip through a trace file, and symbolization of this binary (built
// with -g: the functions and lines below are known), NVTX paths, and Python frames of an
// embedded interpreter, read from its memory with and without the GIL (PyFrames.h). The other
// Python versions: pyframes_check.py, run by every interpreter the build found.

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <sys/mman.h>
#include <unistd.h>

#include "RingRegistry.h"
#include "Stacks.h"
#include "TraceSink.h"
#include "poolscope/Symbolizer.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/CallSites.h"

#ifdef POOLSCOPE_TEST_PYTHON
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

using namespace poolscope;
using namespace poolscope::collector;

namespace {

StackRecorder* g_rec = nullptr;
ThreadSites* g_ts = nullptr;
const std::thread::id g_mainThread = std::this_thread::get_id();
int g_leafLine = 0, g_middleLine = 0, g_outerLine = 0;

extern "C" __attribute__((noinline)) uint32_t stacks_test_leaf() {
    g_leafLine = __LINE__ + 1;
    uint32_t s = g_rec->capture(*g_ts);
    asm volatile("" ::: "memory"); // keeps the call from becoming a tail call
    return s;
}
extern "C" __attribute__((noinline)) uint32_t stacks_test_middle() {
    g_middleLine = __LINE__ + 1;
    uint32_t s = stacks_test_leaf();
    asm volatile("" ::: "memory");
    return s;
}
extern "C" __attribute__((noinline)) uint32_t stacks_test_outer() {
    g_outerLine = __LINE__ + 1;
    uint32_t s = stacks_test_middle();
    asm volatile("" ::: "memory");
    return s;
}
// Another call site for the same leaf: must intern as a different stack.
extern "C" __attribute__((noinline)) uint32_t stacks_test_other() {
    uint32_t s = stacks_test_leaf();
    asm volatile("" ::: "memory");
    return s;
}

int64_t identity(int64_t t) { return t; }

struct RecorderFixture : ::testing::Test {
    StackRecorder rec;
    ThreadSites* ts = nullptr;
    void setUp(StackMode mode, int depth = 32) {
        rec.configure({mode, depth}, {});
        ts = rec.newThread(1234);
        g_rec = &rec;
        g_ts = ts;
    }
};

int findFrame(const StackTables& t, const std::vector<NativeFrame>& frames, const std::string& fn) {
    for (size_t i = 0; i < frames.size(); ++i)
        if (const Symbol* s = t.symbol(frames[i]); s && s->function == fn) return int(i);
    return -1;
}

} // namespace

TEST_F(RecorderFixture, NativeStacksInternOncePerCallSite) {
    setUp(StackMode::Native);
    // One call site in this function (the loop): every frame of the stack counts, this
    // function's return address included.
    uint32_t ids[4];
    StackTables t, again;
#pragma GCC unroll 1 // one call instruction: unrolled copies would be other call sites
    for (int i = 0; i < 4; ++i) {
        ids[i] = i == 2 ? stacks_test_other() : stacks_test_outer();
        if (i == 2) rec.drain(t, identity);
        if (i == 3) rec.drain(again, identity);
    }
    const uint32_t a = ids[0], b = ids[1], c = ids[2];
    ASSERT_NE(a, 0u);
    EXPECT_EQ(a, b) << "the same stack must give the same site";
    EXPECT_NE(a, c) << "a different caller must give another site";
    EXPECT_EQ(t.sites.size(), 2u);
    EXPECT_EQ(t.nativeStacks.size(), 2u);
    EXPECT_TRUE(t.pythonStacks.empty());
    EXPECT_FALSE(t.modules.empty());
    // Drained once: the known site again adds nothing new and keeps its id.
    EXPECT_EQ(ids[3], a);
    EXPECT_TRUE(again.sites.empty());
    EXPECT_TRUE(again.nativeStacks.empty());
}

TEST_F(RecorderFixture, OtherThreadsShareTheSiteIds) {
    setUp(StackMode::Native);
    // The same stack from another thread: the capture goes through the other thread's cache,
    // then the shared table, and must land on the same id. The thread entry is the same
    // function, so compare the frames above the thread start.
    uint32_t fromThread[2] = {};
#pragma GCC unroll 1
    for (int i = 0; i < 2; ++i) {
        std::thread th([&, i] {
            ThreadSites* mine = rec.newThread(99 + i);
            g_ts = mine;
            fromThread[i] = stacks_test_outer();
        });
        th.join();
    }
    EXPECT_NE(fromThread[0], 0u);
    EXPECT_EQ(fromThread[0], fromThread[1]);
}

TEST_F(RecorderFixture, FramesSymbolizeToTheKnownFunctionsAndLines) {
    setUp(StackMode::Native);
    const uint32_t site = stacks_test_outer();
    StackTables t;
    rec.drain(t, identity);
    ASSERT_TRUE(t.sites.count(site));
    const auto& frames = t.nativeStacks.at(t.sites.at(site).nativeStack);
    const SymbolizeResult r = symbolize(t);
    EXPECT_GT(r.resolved, 0u);
    const int leaf = findFrame(t, frames, "stacks_test_leaf");
    const int middle = findFrame(t, frames, "stacks_test_middle");
    const int outer = findFrame(t, frames, "stacks_test_outer");
    ASSERT_GE(leaf, 0) << "no frame named stacks_test_leaf";
    EXPECT_EQ(middle, leaf + 1);
    EXPECT_EQ(outer, leaf + 2);
    const Symbol* s = t.symbol(frames[size_t(leaf)]);
    EXPECT_EQ(moduleName(s->file), "StacksCaptureTest.cpp");
    EXPECT_EQ(s->line, g_leafLine);
    EXPECT_EQ(t.symbol(frames[size_t(middle)])->line, g_middleLine);
    EXPECT_EQ(t.symbol(frames[size_t(outer)])->line, g_outerLine);
    // The module is this test binary, identified by its build-id.
    const ModuleInfo* m = t.module(frames[size_t(leaf)].module);
    ASSERT_NE(m, nullptr);
    char exe[4096] = {};
    ASSERT_GT(readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
    EXPECT_EQ(m->path, exe);
    EXPECT_EQ(m->buildId, readBuildId(exe));
    EXPECT_FALSE(m->buildId.empty());
    EXPECT_EQ(frameText(t, frames[size_t(leaf)]),
              "stacks_test_leaf (StacksCaptureTest.cpp:" + std::to_string(g_leafLine) + ")");
}

TEST_F(RecorderFixture, DepthLimitHolds) {
    setUp(StackMode::Native, 2);
    const uint32_t site = stacks_test_outer();
    StackTables t;
    rec.drain(t, identity);
    EXPECT_EQ(t.nativeStacks.at(t.sites.at(site).nativeStack).size(), 2u);
}

namespace {
__attribute__((noinline)) void nvtxStep(int i) {
    if (i == 1) {
        g_rec->push(*g_ts, "step", 100);
        g_rec->push(*g_ts, "forward", 110);
    } else if (i == 2) {
        g_rec->pop(*g_ts, 150);
        g_rec->push(*g_ts, "backward", 160);
    } else if (i == 3) {
        g_rec->pop(*g_ts, 190);
        g_rec->pop(*g_ts, 200);
        g_rec->pop(*g_ts, 210); // a pop without a push (pushed before recording) is ignored
    }
}
__attribute__((noinline)) uint32_t captureAfter(int i) {
    nvtxStep(i);
    const uint32_t s = stacks_test_outer();
    asm volatile("" ::: "memory");
    return s;
}
} // namespace

TEST_F(RecorderFixture, NvtxPathIsPartOfTheSite) {
    setUp(StackMode::Native);
    // One call site for all four captures: the branches live in nvtxStep, so the compiler
    // has no reason to duplicate the capture's call (a copy would be another call site).
    uint32_t ids[4];
#pragma GCC unroll 1
    for (int i = 0; i < 4; ++i) ids[i] = captureAfter(i);
    const uint32_t none = ids[0], inForward = ids[1], inBackward = ids[2];
    EXPECT_EQ(ids[3], none);
    EXPECT_NE(inForward, none);
    EXPECT_NE(inForward, inBackward);

    StackTables t;
    rec.drain(t, [](int64_t ticks) { return ticks * 10; });
    EXPECT_EQ(analysis::sitePath(t, inForward), "step/forward");
    EXPECT_EQ(analysis::sitePath(t, inBackward), "step/backward");
    EXPECT_EQ(analysis::sitePath(t, none), "");
    // Each range: its open row, then its closed row (the writer replaces by id).
    std::map<std::string, NvtxRange> last;
    for (const NvtxRange& r : t.ranges) last[r.name] = r;
    ASSERT_EQ(last.size(), 3u);
    EXPECT_EQ(last["step"].startNs, 1000);
    EXPECT_EQ(last["step"].endNs, 2000);
    EXPECT_EQ(last["forward"].depth, 1);
    EXPECT_EQ(last["forward"].endNs, 1500);
    EXPECT_EQ(last["backward"].tid, 1234u);

    // Start/end ranges: listed with their times, matched by NVTX's id.
    rec.start(77, 5, "epoch", 300);
    rec.end(77, 400);
    rec.end(78, 401); // unknown id: ignored
    StackTables t2;
    rec.drain(t2, identity);
    ASSERT_EQ(t2.ranges.size(), 2u);
    EXPECT_EQ(t2.ranges.back().kind, NvtxRangeKind::StartEnd);
    EXPECT_EQ(t2.ranges.back().endNs, 400);
}

TEST_F(RecorderFixture, ANestedCaptureOnTheSameThreadRecordsNothing) {
    setUp(StackMode::Native);
    // As when a signal handler that allocates interrupts a capture.
    ts->busy = true;
    EXPECT_EQ(stacks_test_outer(), 0u);
    ts->busy = false;
    EXPECT_NE(stacks_test_outer(), 0u);
}

TEST_F(RecorderFixture, OffRecordsNothing) {
    setUp(StackMode::Off);
    EXPECT_EQ(stacks_test_outer(), 0u);
}

TEST_F(RecorderFixture, SitesTravelThroughATraceFile) {
    setUp(StackMode::Native);
    const uint32_t site = stacks_test_outer();
    rec.push(*ts, "phase", 10);
    const uint32_t inPhase = stacks_test_outer();
    rec.pop(*ts, 20);
    StackTables t;
    rec.drain(t, identity);
    symbolize(t);

    const std::string path = ::testing::TempDir() + "stacks_roundtrip.poolscope";
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w) << w.error().message;
        Event e;
        e.seq = 1;
        e.kind = EventKind::Alloc;
        e.size = 4096;
        e.ptr = 0x1000;
        e.site = inPhase;
        ASSERT_TRUE((*w)->append(e));
        ASSERT_TRUE((*w)->addStacks(t));
        ASSERT_TRUE((*w)->close());
    }
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    auto events = (*r)->events(INT64_MIN, INT64_MAX);
    ASSERT_TRUE(events);
    ASSERT_EQ(events->size(), 1u);
    EXPECT_EQ(events->front().site, inPhase);
    auto back = (*r)->stacks();
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->sites.size(), t.sites.size());
    EXPECT_EQ(back->modules.size(), t.modules.size());
    EXPECT_EQ(back->symbols.size(), t.symbols.size());
    EXPECT_EQ(analysis::siteFrames(*back, site), analysis::siteFrames(t, site));
    EXPECT_EQ(analysis::sitePath(*back, inPhase), "phase");
    ASSERT_EQ(back->ranges.size(), 1u); // the open row replaced by the closed one
    EXPECT_EQ(back->ranges[0].endNs, 20);
    EXPECT_NE(analysis::siteText(*back, site).find("stacks_test_leaf"), std::string::npos);

    // Symbols stored after the recording (what `record` does once the program exits).
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        StackTables unsymbolized = t;
        unsymbolized.symbols.clear();
        ASSERT_TRUE((*w)->addStacks(unsymbolized));
        ASSERT_TRUE((*w)->close());
    }
    auto stored = storeSymbols(path);
    ASSERT_TRUE(stored) << stored.error().message;
    EXPECT_GT(*stored, 0u);
    auto r2 = TraceReader::open(path);
    ASSERT_TRUE(r2);
    auto withSymbols = (*r2)->stacks();
    ASSERT_TRUE(withSymbols);
    EXPECT_EQ(withSymbols->symbols.size(), t.symbols.size());
    std::remove(path.c_str());
}

// The writer thread's side: each pass writes the sites interned since the last one, in the
// same file as the events that name them.
TEST_F(RecorderFixture, TheSinkWritesSitesBesideTheirEvents) {
    setUp(StackMode::Native);
    const std::string path = ::testing::TempDir() + "stacks_sink.poolscope";
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto w = TraceWriter::create(path);
    ASSERT_TRUE(w);
    TraceSink sink(std::move(*w), rings, seq);
    sink.setStackRecorder(&rec);
    EventRing ring(64);
    rings.add(&ring);
    rec.push(*ts, "epoch", 5);
    Event a;
    a.kind = EventKind::Alloc;
    a.ptr = 0x10000;
    a.size = 1 << 20;
    a.pool = 0xabc;
    a.seq = seq.fetch_add(1);
    a.site = stacks_test_outer();
    ring.push(a);
    ASSERT_TRUE(sink.pump().ok());
    rec.pop(*ts, 9);
    ASSERT_TRUE(sink.close().ok());

    auto r = TraceReader::open(path);
    ASSERT_TRUE(r) << r.error().message;
    auto events = (*r)->events(INT64_MIN, INT64_MAX);
    ASSERT_TRUE(events);
    ASSERT_EQ(events->size(), 1u);
    auto t = (*r)->stacks();
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_TRUE(t->sites.count(events->front().site));
    EXPECT_EQ(analysis::sitePath(*t, events->front().site), "epoch");
    ASSERT_EQ(t->ranges.size(), 1u);
    EXPECT_NE(t->ranges[0].endNs, 0) << "the pop written by the final pass";
    symbolize(*t);
    EXPECT_NE(analysis::siteText(*t, events->front().site, 10).find("stacks_test_leaf"),
              std::string::npos);
    std::remove(path.c_str());
}

TEST(Stacks, SymbolizerLeavesUnknownModulesAsOffsets) {
    StackTables t;
    t.modules.push_back(ModuleInfo{1, "/nonexistent/libgone.so", "00112233445566778899", 0x7000, 0x1000});
    t.nativeStacks[1] = {NativeFrame{1, 0x123}};
    t.sites[1] = SiteInfo{1, 1, 0, 0};
    const SymbolizeResult r = symbolize(t);
    EXPECT_EQ(r.resolved, 0u);
    EXPECT_EQ(r.unresolved, 1u);
    ASSERT_EQ(r.missing.size(), 1u);
    EXPECT_EQ(analysis::siteText(t, 1), "libgone.so+0x123");
    EXPECT_EQ(analysis::siteText(t, 0), "(no stack)");
}

// The reads that check a Python layout before it is trusted: a bad address is an answer, not a
// fault.
TEST(Stacks, CheckedReadsRefuseBadAddressesWithoutFaulting) {
    const uint64_t value = 0x1122334455667788ull;
    uint64_t got = 0;
    EXPECT_TRUE(checkedRead(&got, reinterpret_cast<uintptr_t>(&value), sizeof got));
    EXPECT_EQ(got, value);
    EXPECT_FALSE(checkedRead(&got, 0x10, sizeof got));
    EXPECT_FALSE(checkedRead(&got, ~uintptr_t(0) - 3, sizeof got)); // wraps around
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    EXPECT_FALSE(checkedRead(&got, reinterpret_cast<uintptr_t>(page), sizeof got));
    munmap(page, 4096);
}

// Line tables of 3.10 cannot come from the embedded interpreter when it is newer: a hand-built
// table in 3.10's format ((address delta, line delta) pairs; -128: no line), lines as 3.10's
// PyCode_Addr2Line gives them.
TEST(Stacks, HandBuiltPython310LineTableDecodes) {
    // Lines from first line 10: [0,6) +0 -> 10; [6,10) +2 -> 12; [10,14) no line; [14,14) +1
    // (empty: only moves the line); [14,20) -2 -> 11.
    const uint8_t t[] = {6, 0, 4, 2, 4, uint8_t(-128), 0, 1, 6, uint8_t(-2)};
    auto line = [&](int addr) { return pyLineFromTable(t, sizeof t, 10, addr, false); };
    EXPECT_EQ(line(-1), 10);
    EXPECT_EQ(line(0), 10);
    EXPECT_EQ(line(4), 10);
    EXPECT_EQ(line(6), 12);
    EXPECT_EQ(line(12), 0);
    EXPECT_EQ(line(14), 11);
    EXPECT_EQ(line(19), 11);
    EXPECT_EQ(line(20), 0); // past the end
}

#ifdef POOLSCOPE_TEST_PYTHON
namespace {
// The calling thread's ThreadSites in g_rec (the main thread's is g_ts).
ThreadSites& sitesOfThisThread() {
    thread_local StackRecorder* owner = nullptr;
    thread_local ThreadSites* mine = nullptr;
    if (std::this_thread::get_id() == g_mainThread) return *g_ts;
    if (owner != g_rec) {
        owner = g_rec;
        mine = g_rec->newThread(uint32_t(gettid()));
    }
    return *mine;
}
PyObject* pyCapture(PyObject*, PyObject*) { return PyLong_FromUnsignedLong(g_rec->capture(*g_ts)); }
// As PyTorch allocates: the GIL released first.
PyObject* pyCaptureNoGil(PyObject*, PyObject*) {
    uint32_t site = 0;
    Py_BEGIN_ALLOW_THREADS
    site = g_rec->capture(sitesOfThisThread());
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLong(site);
}
// The collector's line of a code object's instruction at a byte offset.
PyObject* pyLineOf(PyObject*, PyObject* args) {
    PyObject* code = nullptr;
    int addr = 0;
    if (!PyArg_ParseTuple(args, "Oi", &code, &addr)) return nullptr;
    return PyLong_FromLong(g_rec->pythonReader().lineOf(reinterpret_cast<uintptr_t>(code), addr));
}
PyMethodDef kMethods[] = {{"capture", pyCapture, METH_NOARGS, nullptr},
                          {"capture_nogil", pyCaptureNoGil, METH_NOARGS, nullptr},
                          {"line_of", pyLineOf, METH_VARARGS, nullptr},
                          {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "pstest", nullptr, -1, kMethods};
PyObject* initModule() { return PyModule_Create(&kModule); }

// Runs code as the file "callsites_test.py" and returns the value of `result` (an int).
long runPython(const char* code) {
    PyObject* compiled = Py_CompileString(code, "/work/app/callsites_test.py", Py_file_input);
    if (!compiled) {
        PyErr_Print();
        return -1;
    }
    PyObject* globals = PyDict_New();
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    PyObject* r = PyEval_EvalCode(compiled, globals, globals);
    long v = -1;
    if (!r) PyErr_Print();
    else if (PyObject* res = PyDict_GetItemString(globals, "result")) v = PyLong_AsLong(res);
    Py_XDECREF(r);
    Py_DECREF(globals);
    Py_DECREF(compiled);
    return v;
}
} // namespace

void startPython() {
    if (Py_IsInitialized()) return;
    PyImport_AppendInittab("pstest", initModule);
    Py_Initialize();
}

TEST_F(RecorderFixture, PythonFramesUnderTheGil) {
    startPython();
    setUp(StackMode::Auto);
    ASSERT_TRUE(rec.pythonFound());
    const char* code = "import pstest, sys\n"          // 1
                       "class Model:\n"                // 2
                       "    def forward(self):\n"      // 3
                       "        return pstest.capture()\n" // 4
                       "def step():\n"                 // 5
                       "    return Model().forward()\n" // 6
                       "before = sys.getrefcount(Model.forward.__code__)\n" // 7
                       "sites = {step() for _ in range(1000)}\n" // 8
                       "after = sys.getrefcount(Model.forward.__code__)\n" // 9
                       "assert len(sites) == 1, sites\n"
                       "assert before == after, (before, after)\n"
                       "result = sites.pop()\n";
    const long site = runPython(code);
    ASSERT_GT(site, 0) << "the Python code failed (reference leak or several sites?)";
    StackTables t;
    rec.drain(t, identity);
    const SiteInfo& si = t.sites.at(uint32_t(site));
    EXPECT_EQ(si.nativeStack, 0u) << "auto mode: the Python stack where Python code runs";
    const auto& frames = t.pythonStacks.at(si.pythonStack);
    ASSERT_GE(frames.size(), 3u);
    EXPECT_EQ(frames[0].function, PY_VERSION_HEX >= 0x030B0000 ? "Model.forward" : "forward");
    EXPECT_EQ(frames[0].line, 4);
    EXPECT_EQ(frames[0].file, "/work/app/callsites_test.py");
    EXPECT_EQ(frames[1].function, "step");
    EXPECT_EQ(frames[1].line, 6);
    // A set comprehension has its own frame up to 3.11 (3.12 inlines it: PEP 709).
    EXPECT_EQ(frames[2].function, PY_VERSION_HEX < 0x030C0000 ? "<setcomp>" : "<module>");
    EXPECT_EQ(frameText(frames[0]), frames[0].function + " (app/callsites_test.py:4)");

    // From C++ with no Python frame running on this thread (the GIL released, as a C++ thread
    // of the program would run): no Python frames, and in a Python process auto takes no
    // native stack either (`all` does, below), so nothing is captured.
    PyThreadState* saved = PyEval_SaveThread();
    const uint32_t noGil = stacks_test_outer();
    PyEval_RestoreThread(saved);
    EXPECT_EQ(noGil, 0u) << "auto unwound the native stack of a thread running no Python";
    // The same thread in mode "native": the stack auto leaves out is there to take.
    {
        StackRecorder native;
        native.configure({StackMode::Native, 32}, {});
        ThreadSites* nts = native.newThread(8);
        StackRecorder* savedRec = g_rec;
        ThreadSites* savedTs = g_ts;
        g_rec = &native;
        g_ts = nts;
        saved = PyEval_SaveThread();
        const uint32_t nativeSite = stacks_test_outer();
        PyEval_RestoreThread(saved);
        g_rec = savedRec;
        g_ts = savedTs;
        StackTables t2;
        native.drain(t2, identity);
        ASSERT_TRUE(t2.sites.count(nativeSite));
        EXPECT_EQ(t2.sites.at(nativeSite).pythonStack, 0u);
        EXPECT_NE(t2.sites.at(nativeSite).nativeStack, 0u);
    }

    // Mode "all": both stacks for one allocation.
    StackRecorder both;
    both.configure({StackMode::All, 32}, {});
    ThreadSites* bts = both.newThread(7);
    g_rec = &both;
    g_ts = bts;
    const long s2 = runPython("import pstest\ndef f():\n    return pstest.capture()\nresult = f()\n");
    StackTables t3;
    both.drain(t3, identity);
    ASSERT_GT(s2, 0);
    EXPECT_NE(t3.sites.at(uint32_t(s2)).nativeStack, 0u);
    EXPECT_NE(t3.sites.at(uint32_t(s2)).pythonStack, 0u);
    EXPECT_EQ(t3.pythonStacks.at(t3.sites.at(uint32_t(s2)).pythonStack)[0].function, "f");
}

// PyTorch releases the GIL before it allocates: the frames must come from the thread's own
// frame chain without the GIL, without taking it and without touching reference counts.
TEST_F(RecorderFixture, PythonFramesWithoutTheGil) {
    startPython();
    setUp(StackMode::Auto);
    ASSERT_TRUE(rec.pythonFound()) << rec.describe();
    const char* code = "import pstest, sys\n"                        // 1
                       "class Model:\n"                              // 2
                       "    def forward(self, x):\n"                 // 3
                       "        y = x + 1\n"                         // 4
                       "        return pstest.capture_nogil()\n"     // 5
                       "def layer(m):\n"                             // 6
                       "    z = 3\n"                                 // 7
                       "    return m.forward(z)\n"                   // 8
                       "def step():\n"                               // 9
                       "    return layer(Model())\n"                 // 10
                       "before = sys.getrefcount(Model.forward.__code__)\n"
                       "sites = [step() for _ in range(100)]\n"      // 12
                       "after = sys.getrefcount(Model.forward.__code__)\n"
                       "assert len(set(sites)) == 1, sites\n"
                       "assert before == after, (before, after)\n"
                       "result = sites[0]\n";
    const long site = runPython(code);
    ASSERT_GT(site, 0) << "the Python code failed (see its error above)";
    EXPECT_NE(rec.describe().find("checked"), std::string::npos) << rec.describe();
    StackTables t;
    rec.drain(t, identity);
    const SiteInfo& si = t.sites.at(uint32_t(site));
    EXPECT_EQ(si.nativeStack, 0u) << "auto mode: the Python stack where Python frames run";
    ASSERT_NE(si.pythonStack, 0u);
    const auto& frames = t.pythonStacks.at(si.pythonStack);
    ASSERT_GE(frames.size(), 4u);
    const bool qual = PY_VERSION_HEX >= 0x030B0000; // co_qualname
    EXPECT_EQ(frames[0].function, qual ? "Model.forward" : "forward");
    EXPECT_EQ(frames[0].line, 5);
    EXPECT_EQ(frames[1].function, "layer");
    EXPECT_EQ(frames[1].line, 8);
    EXPECT_EQ(frames[2].function, "step");
    EXPECT_EQ(frames[2].line, 10);
    EXPECT_EQ(frames[3].function, PY_VERSION_HEX < 0x030C0000 ? "<listcomp>" : "<module>");
    EXPECT_EQ(frames[3].line, 12);
    for (const PythonFrame& f : frames) EXPECT_EQ(f.file, "/work/app/callsites_test.py");

    // Another Python thread: its own frames (threading's bootstrap at the bottom), while this
    // thread keeps running Python code beside it.
    const char* threaded = "import pstest, threading\n"
                           "out = []\n"
                           "def worker():\n"
                           "    out.append(pstest.capture_nogil())\n" // 4
                           "t = threading.Thread(target=worker)\n"
                           "t.start()\n"
                           "while t.is_alive():\n"
                           "    sum(range(100))\n"
                           "t.join()\n"
                           "result = out[0]\n";
    const long tsite = runPython(threaded);
    ASSERT_GT(tsite, 0);
    StackTables t2;
    rec.drain(t2, identity);
    const auto& tf = t2.pythonStacks.at(t2.sites.at(uint32_t(tsite)).pythonStack);
    ASSERT_GE(tf.size(), 2u);
    EXPECT_EQ(tf[0].function, "worker");
    EXPECT_EQ(tf[0].line, 4);
    EXPECT_NE(tf.back().file.find("threading.py"), std::string::npos) << tf.back().file;
    for (const PythonFrame& f : tf) EXPECT_NE(f.function, "<module>") << "the main thread's frame";

    // Depth limit: the innermost frames are kept.
    StackRecorder shallow;
    shallow.configure({StackMode::Python, 3}, {});
    g_rec = &shallow;
    g_ts = shallow.newThread(9);
    const long ds = runPython("import pstest\ndef r(n):\n    return pstest.capture_nogil() if n == 0 else r(n - 1)\n"
                              "result = r(50)\n");
    g_rec = &rec;
    g_ts = ts;
    StackTables t3;
    shallow.drain(t3, identity);
    ASSERT_GT(ds, 0);
    const auto& df = t3.pythonStacks.at(t3.sites.at(uint32_t(ds)).pythonStack);
    ASSERT_EQ(df.size(), 3u);
    for (const PythonFrame& f : df) EXPECT_EQ(f.function, "r");
    EXPECT_EQ(df[0].line, 3);
}

// The line table decoder against the interpreter's own co_lines(), for every instruction of
// every function of a few standard modules.
TEST_F(RecorderFixture, PythonLineTablesMatchTheInterpreter) {
    startPython();
    setUp(StackMode::Python);
    ASSERT_TRUE(rec.pythonFound()) << rec.describe();
    const char* code =
        "import pstest, types, json.decoder, email.message, collections, argparse\n"
        "def codes(obj, seen):\n"
        "    for v in vars(obj).values():\n"
        "        if isinstance(v, types.FunctionType) and v.__code__ not in seen:\n"
        "            seen.add(v.__code__)\n"
        "        elif isinstance(v, type) and v.__module__ == obj.__name__:\n"
        "            for w in vars(v).values():\n"
        "                if isinstance(w, types.FunctionType): seen.add(w.__code__)\n"
        "    return seen\n"
        "seen = set()\n"
        "for m in (json.decoder, email.message, collections, argparse): codes(m, seen)\n"
        "stack = list(seen)\n"
        "while stack:\n" // nested code objects (lambdas, comprehensions, inner functions)
        "    c = stack.pop()\n"
        "    for k in c.co_consts:\n"
        "        if isinstance(k, types.CodeType) and k not in seen: seen.add(k); stack.append(k)\n"
        "bad, checked = [], 0\n"
        "for c in seen:\n"
        "    for start, end, line in c.co_lines():\n"
        "        for off in range(start, end, 2):\n"
        "            got = pstest.line_of(c, off)\n"
        "            checked += 1\n"
        "            if got != (line or 0): bad.append((c.co_qualname if hasattr(c, 'co_qualname') else c.co_name, off, got, line))\n"
        "assert not bad, bad[:10]\n"
        "assert len(seen) > 300 and checked > 20000, (len(seen), checked)\n"
        "result = checked\n";
    const long checked = runPython(code);
    EXPECT_GT(checked, 20000) << "see the Python error above";
}
// A layout that does not match the interpreter (as an unknown build of a known version would
// be) must turn Python frames off with a reason, never fault: the first walks read through
// checked reads.
TEST_F(RecorderFixture, AWrongPythonLayoutTurnsFramesOffWithoutCrashing) {
    startPython();
    setUp(StackMode::Python);
    ASSERT_TRUE(rec.pythonFound()) << rec.describe();
    PyFrameReader& reader = rec.pythonReader();
    const PyLayout good = reader.layout();
    const char* code = "import pstest\ndef f():\n    return pstest.capture_nogil()\nresult = f()\n";

    // The frame pointer and code read 1 MiB past the frame: usually unmapped (a wild address,
    // refused by the checked read, off at the first walk); where the heap is mapped there (the
    // debug preset's ASan allocator serves Python's mallocs), readable words that are no frame,
    // off after a few walks. Either way no site and no fault.
    PyLayout wild = good;
    wild.frPrevious = wild.frCode = 1 << 20;
    reader.useLayoutForTest(wild);
    for (int i = 0; i < 20 && rec.pythonFound(); ++i)
        EXPECT_EQ(runPython(code), 0) << "no site: nothing readable";
    EXPECT_FALSE(rec.pythonFound());
    EXPECT_NE(rec.describe().find("python: off: Python 3."), std::string::npos) << rec.describe();

    // Readable memory that is no code object: off after a few walks.
    PyLayout shifted = good;
    shifted.frCode = good.frPrevious;
    reader.useLayoutForTest(shifted);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(runPython(code), 0);
    EXPECT_FALSE(rec.pythonFound());
    EXPECT_NE(rec.describe().find("no code object"), std::string::npos) << rec.describe();

    // The right layout reads again.
    reader.useLayoutForTest(good);
    EXPECT_GT(runPython(code), 0);
    EXPECT_NE(rec.describe().find("checked"), std::string::npos) << rec.describe();
}
#endif
