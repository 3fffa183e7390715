// Cost of a native stack at an allocation (issue #13; target: at most 1 µs per allocation).
// Candidates for the walk, each through the same recursion (callers 20 and 40 frames deep,
// 32 frames kept): a frame-pointer walk (fast, but wrong through the CUDA and PyTorch libraries,
// built without frame pointers), libgcc's _Unwind_Backtrace, glibc's backtrace() (libgcc's
// unwinder underneath), libunwind's unw_backtrace (looked up with dlopen, as the collector does),
// and the collector's whole capture (StackRecorder::capture: unwind + hash + per-thread cache
// hit), the number that counts. Results: docs/PERFORMANCE.md ("Call stacks").
// Python frames (where the build found python3-embed): an embedded interpreter recurses 20 and
// 40 Python frames deep into a C function that releases the GIL, as PyTorch does before it
// allocates, and measures there: the bare frame walk (PyFrameReader::walk) and the collector's
// capture in --stacks python (walk + hash + cache hit) and all (Python + native).
//   cmake --build BUILD --target poolscope_bench_stacks && BUILD/tests/bench/poolscope_bench_stacks
#include <benchmark/benchmark.h>

#include <algorithm>
#include <dlfcn.h>
#include <execinfo.h>
#include <unwind.h>

#include "Stacks.h"

#ifdef POOLSCOPE_BENCH_PYTHON
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

namespace {

using Walk = int (*)(void**, int);
Walk g_walk = nullptr;
void* g_buf[256];
int g_max = 32;
poolscope::collector::StackRecorder* g_rec = nullptr;
poolscope::collector::ThreadSites* g_ts = nullptr;

struct UnwindState {
    void** out;
    int n, max;
};
_Unwind_Reason_Code onFrame(_Unwind_Context* c, void* arg) {
    auto* s = static_cast<UnwindState*>(arg);
    if (s->n >= s->max) return _URC_END_OF_STACK;
    s->out[s->n++] = reinterpret_cast<void*>(_Unwind_GetIP(c));
    return _URC_NO_REASON;
}
__attribute__((noinline)) int libgccUnwind(void** out, int max) {
    UnwindState s{out, 0, max};
    _Unwind_Backtrace(onFrame, &s);
    return s.n;
}
// Trusts every frame to keep rbp as a frame pointer: what a build without them breaks.
__attribute__((noinline)) int framePointers(void** out, int max) {
    void** fp = static_cast<void**>(__builtin_frame_address(0));
    int n = 0;
    while (fp && n < max) {
        void* ret = fp[1];
        if (!ret) break;
        out[n++] = ret;
        void** next = static_cast<void**>(fp[0]);
        if (next <= fp) break;
        fp = next;
    }
    return n;
}
int glibcBacktrace(void** out, int max) { return backtrace(out, max); }
Walk libunwind() {
    void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    return h ? reinterpret_cast<Walk>(dlsym(h, "unw_backtrace")) : nullptr;
}
int recorderCapture(void**, int) { return static_cast<int>(g_rec->capture(*g_ts)); }

__attribute__((noinline)) int recurse(int depth) {
    if (depth == 0) return g_walk(g_buf, g_max);
    const int r = recurse(depth - 1);
    benchmark::DoNotOptimize(r);
    return r + 1;
}

void run(benchmark::State& st, Walk w) {
    if (!w) {
        st.SkipWithError("not available");
        return;
    }
    g_walk = w;
    g_max = 32;
    for (auto _ : st) benchmark::DoNotOptimize(recurse(static_cast<int>(st.range(0))));
}

void BM_FramePointers(benchmark::State& st) { run(st, framePointers); }
void BM_LibgccUnwindBacktrace(benchmark::State& st) { run(st, libgccUnwind); }
void BM_GlibcBacktrace(benchmark::State& st) { run(st, glibcBacktrace); }
void BM_LibunwindBacktrace(benchmark::State& st) { run(st, libunwind()); }
void BM_CollectorCapture(benchmark::State& st) {
    poolscope::collector::StackRecorder rec;
    rec.configure({poolscope::collector::StackMode::Native, 32}, {});
    g_rec = &rec;
    g_ts = rec.newThread(1);
    run(st, recorderCapture);
}

#ifdef POOLSCOPE_BENCH_PYTHON
// The measuring loop runs inside bench.run(), called at the bottom of a Python recursion.
benchmark::State* g_state = nullptr;
int (*g_measure)() = nullptr;
int g_framesSeen = 0;
int pyWalk();
PyObject* pyRun(PyObject*, PyObject*) {
    Py_BEGIN_ALLOW_THREADS
    g_framesSeen = pyWalk();
    for (auto _ : *g_state) benchmark::DoNotOptimize(g_measure());
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
PyMethodDef kMethods[] = {{"run", pyRun, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "bench", nullptr, -1, kMethods, nullptr, nullptr, nullptr, nullptr};
PyObject* initBench() { return PyModule_Create(&kModule); }

poolscope::collector::PyFrameReader* g_reader = nullptr;
int pyWalk() {
    poolscope::collector::PyRawFrame f[32];
    return g_reader->walk(f, 32);
}
int pyCapture() { return static_cast<int>(g_rec->capture(*g_ts)); }

void runPython(benchmark::State& st, poolscope::collector::StackMode mode, int (*measure)()) {
    if (!Py_IsInitialized()) {
        PyImport_AppendInittab("bench", initBench);
        Py_Initialize();
    }
    poolscope::collector::StackRecorder rec;
    rec.configure({mode, 32}, {});
    g_rec = &rec;
    g_ts = rec.newThread(1);
    g_reader = &rec.pythonReader();
    if (!rec.pythonFound()) {
        st.SkipWithError(rec.describe().c_str());
        return;
    }
    g_state = &st;
    g_measure = measure;
    const std::string code = "import bench\ndef r(n):\n    return bench.run() if n == 0 else r(n - 1)\nr(" +
                             std::to_string(st.range(0)) + ")\n";
    if (PyRun_SimpleString(code.c_str()) != 0) st.SkipWithError("the Python code failed");
    // The walk must have seen the recursion (32 frames kept at most).
    if (g_framesSeen < std::min<int>(int(st.range(0)), 32)) st.SkipWithError("the walk saw no recursion");
}
void BM_PythonWalk(benchmark::State& st) { runPython(st, poolscope::collector::StackMode::Python, pyWalk); }
void BM_CollectorCapturePython(benchmark::State& st) {
    runPython(st, poolscope::collector::StackMode::Python, pyCapture);
}
void BM_CollectorCaptureAll(benchmark::State& st) { runPython(st, poolscope::collector::StackMode::All, pyCapture); }
#endif

} // namespace

#ifdef POOLSCOPE_BENCH_PYTHON
BENCHMARK(BM_PythonWalk)->Arg(20)->Arg(40);
BENCHMARK(BM_CollectorCapturePython)->Arg(20)->Arg(40);
BENCHMARK(BM_CollectorCaptureAll)->Arg(20)->Arg(40);
#endif
BENCHMARK(BM_FramePointers)->Arg(20)->Arg(40);
BENCHMARK(BM_LibgccUnwindBacktrace)->Arg(20)->Arg(40);
BENCHMARK(BM_GlibcBacktrace)->Arg(20)->Arg(40);
BENCHMARK(BM_LibunwindBacktrace)->Arg(20)->Arg(40);
BENCHMARK(BM_CollectorCapture)->Arg(20)->Arg(40);
BENCHMARK_MAIN();
