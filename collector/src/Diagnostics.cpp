// The diagnostic module's side of Diagnostics.h (poolscope_collector_diag only). Each variable
// isolates one part of the collector's cost in the overhead benchmark (tests/gpu/run.sh):
//   POOLSCOPE_BENCH_DISCARD=1  the writer drains the rings and drops the events (empty trace):
//                              the hot path's cost without the writer's.
//   POOLSCOPE_BENCH_DISCARD=2  the rings are never read until exit (size them for the whole run
//                              with POOLSCOPE_RING_EVENTS): the application's stores never meet
//                              the writer's core.
//   POOLSCOPE_BENCH_MEMORY2=1  also enables CUPTI MEMORY2 activity (its records are dropped): the
//                              cost of the other way to get watermarks.
//   POOLSCOPE_BENCH_EMPTY=1    CUPTI calls an empty callback on the same ids: the floor, what
//                              any callback-based recorder costs before doing anything.
//   POOLSCOPE_BENCH_SELFTIME=1 the callback is wrapped in two timestamp reads; the mean time of
//                              enter and exit callbacks goes to stderr at exit. Not thread-safe:
//                              for the single-threaded benchmark.
//   POOLSCOPE_BENCH_LEVELS=1   the callback does as much as poolscope_diag_level last chose:
//                              nothing (the floor), a minimal recorder (a timestamp and a 32-byte
//                              record into a per-thread buffer: what any recorder must do), the
//                              collector without watermark reads, the collector without call
//                              sites, the whole collector with the call sites `--stacks`
//                              asked for, or with Python frames only. One
//                              process then compares all of them between its own steps
//                              (tests/gpu/gpt2_levels.sh).
// And exported functions: poolscope_diag_level(level) (above), and poolscope_diag_record(on), that the program under test calls (found
// with dlopen/dlsym of this module's path) to turn the driver callbacks off and on between its
// own steps: recorded and unrecorded steps then alternate inside one process, which the GPU
// machine's run-to-run spread (+-15-25 %) cannot blur (tests/gpu/gpt2_ab.sh).

#include "Diagnostics.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "Clock.h"
#include "Decode.h"
#include "Runtime.h"
#include "TraceSink.h"

namespace poolscope::collector::diag {

namespace {

int g_discard = 0;
CUpti_CallbackFunc g_shipped = nullptr;

struct SelfTime {
    uint64_t ticks[2] = {}, calls[2] = {};
    uint64_t ticks0 = 0;
    int64_t ns0 = 0;
    bool on = false;

    ~SelfTime() {
        if (!on) return;
        const double ns = double(monoNowNs() - ns0);
        const double perTick = ns / double(Clock::ticks() - ticks0);
        auto per = [&](int i) {
            return calls[i] ? double(ticks[i]) * perTick / double(calls[i]) : 0.0;
        };
        std::fprintf(stderr,
                     "[selftime] enter %llu calls %.1f ns/call; exit %llu calls %.1f ns/call\n",
                     (unsigned long long)calls[0], per(0), (unsigned long long)calls[1], per(1));
    }
};
SelfTime g_self;

void CUPTIAPI timedCallback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) {
    const uint64_t t0 = Clock::ticks();
    g_shipped(user, domain, cbid, data);
    const auto* cb = static_cast<const CUpti_CallbackData*>(data);
    const int site = cb->callbackSite == CUPTI_API_ENTER ? 0 : 1;
    g_self.ticks[site] += Clock::ticks() - t0;
    ++g_self.calls[site];
}

void CUPTIAPI emptyCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// What a recorder cannot do without: a timestamp and a small record per call, into the thread's
// own buffer. The buffer is on the heap (the module's static TLS block must stay small).
struct MinimalRecord {
    uint64_t ticks;
    uint64_t params;
    uint32_t cbid, site;
    uint64_t correlation;
};
constexpr size_t kMinimalRecords = 1u << 16;
thread_local MinimalRecord* t_minimal __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local uint32_t t_minimalNext __attribute__((tls_model("initial-exec"))) = 0;

std::atomic<int> g_level{kLevelFullStacks};

void CUPTIAPI levelCallback(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) {
    const int level = g_level.load(std::memory_order_relaxed);
    if (level == kLevelEmpty) return;
    if (level == kLevelMinimal) {
        if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
        MinimalRecord* r = t_minimal;
        if (!r) [[unlikely]] {
            r = t_minimal = new MinimalRecord[kMinimalRecords];
        }
        const auto* cb = static_cast<const CUpti_CallbackData*>(data);
        MinimalRecord& m = r[t_minimalNext++ & (kMinimalRecords - 1)];
        m = {Clock::ticks(), reinterpret_cast<uint64_t>(cb->functionParams), cbid,
             uint32_t(cb->callbackSite), cb->correlationId};
        return;
    }
    g_shipped(user, domain, cbid, data);
}

bool envIs(const char* name, char value) {
    const char* v = std::getenv(name);
    return v && v[0] == value;
}

} // namespace

CUpti_CallbackFunc start(CUpti_CallbackFunc shipped) {
    if (const char* d = std::getenv("POOLSCOPE_BENCH_DISCARD")) g_discard = std::atoi(d);
    g_shipped = shipped;
    if (envIs("POOLSCOPE_BENCH_EMPTY", '1')) return emptyCallback;
    if (envIs("POOLSCOPE_BENCH_LEVELS", '1')) return levelCallback;
    if (!envIs("POOLSCOPE_BENCH_SELFTIME", '1')) return shipped;
    g_self.on = true;
    g_self.ticks0 = Clock::ticks();
    g_self.ns0 = monoNowNs();
    return timedCallback;
}

CUptiResult enableActivity() {
    return envIs("POOLSCOPE_BENCH_MEMORY2", '1') ? cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2)
                                                 : CUPTI_SUCCESS;
}

bool writerPass(Runtime& rt) {
    if (g_discard == 0) return false;
    // The drainer thread keeps emptying the rings into the spool; the writer throws it away.
    if (g_discard == 1 && rt.sink) rt.sink->discardSpool();
    return true;
}

bool drainerEnabled() { return g_discard != 2; }

int setLevel(int level) {
    if (level < kLevelOff || level > kLevelFullPython) return -1;
    Runtime& rt = runtime();
    // Between steps, with the device synchronized: no callback reads them half-way.
    rt.watermarks = level == kLevelNoWatermarks ? WatermarkMode::Off : rt.config.watermarks;
    if (rt.config.stacks != StackMode::Off)
        rt.stacks.setModeBetweenSteps(level == kLevelFullPython ? StackMode::Python
                                                                : rt.config.stacks);
    rt.stacksOn = level >= kLevelFullStacks && rt.stacks.enabled();
    g_level.store(level, std::memory_order_relaxed);
    return 0;
}

} // namespace poolscope::collector::diag

// Off: the driver no longer calls the collector at all (as if it were not there, save its idle
// threads); on: the same callbacks as at start. The program calls it between steps, with the
// device synchronized, so that no call is caught between its enter and its exit. 0 when done.
extern "C" __attribute__((visibility("default"))) int poolscope_diag_record(int on) {
    using namespace poolscope::collector;
    Runtime& rt = runtime();
    if (!rt.subscriber) return -1;
    for (CUpti_CallbackId id : tracedCallbackIds())
        if (cuptiEnableCallback(on ? 1 : 0, rt.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id) !=
            CUPTI_SUCCESS)
            return -1;
    return 0;
}

// Off (0) as poolscope_diag_record(0); 1..6 the callbacks on, doing as much as diag::Level says
// (with POOLSCOPE_BENCH_LEVELS=1; without it every level above 0 is the whole collector).
extern "C" __attribute__((visibility("default"))) int poolscope_diag_level(int level) {
    using namespace poolscope::collector;
    if (diag::setLevel(level) != 0) return -1;
    return poolscope_diag_record(level == diag::kLevelOff ? 0 : 1);
}
