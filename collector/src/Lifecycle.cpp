// Start and end of a recording inside the target process: InitializeInjection (called by the
// driver at cuInit because CUDA_INJECTION64_PATH names this module), the writer and sampler
// threads, CUPTI activity buffers, the flush at exit, on fatal signals and after fork.

#include <cerrno>
#include <dlfcn.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "Clock.h"
#include "ControlHook.h"
#include "CudaLibs.h"
#include "Decode.h"
#include "Diagnostics.h"
#include "Log.h"
#include "Runtime.h"
#include "poolscope/control/LaunchEnv.h"

namespace poolscope::collector {

void samplerLoop();                               // Sampler.cpp

namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGSEGV, SIGABRT, SIGBUS};
struct sigaction g_previous[65];
std::atomic<bool> g_inSignal{false};
std::atomic<bool> g_shutDown{false};
std::atomic<pthread_t> g_writerThread{};

const char* cuptiError(CUptiResult r) {
    const char* s = nullptr;
    cuptiGetResultString(r, &s);
    return s ? s : "unknown CUPTI error";
}

std::string readFile(const char* path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

std::string commandLine() {
    std::string c = readFile("/proc/self/cmdline");
    for (char& ch : c)
        if (ch == '\0') ch = ' ';
    while (!c.empty() && c.back() == ' ') c.pop_back();
    return c;
}

// Starts a thread with every signal blocked: process-directed signals go to the application's
// threads, and the collector's threads never run the application's handlers.
template <class F> std::thread startBlocked(F&& f) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    std::thread t(std::forward<F>(f));
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return t;
}

uint64_t CUPTIAPI monotonicTimestamp() { return static_cast<uint64_t>(monoNowNs()); }

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
    constexpr size_t kSize = 64 * 1024;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kSize));
    *size = *buffer ? kSize : 0;
    *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize) {
    Runtime& rt = runtime();
    CUpti_Activity* rec = nullptr;
    while (validSize > 0 &&
           cuptiActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_MEMORY_POOL) continue;
        const auto* m = reinterpret_cast<const CUpti_ActivityMemoryPool3*>(rec);
        PoolActivity a;
        a.op = static_cast<PoolActivity::Op>(m->memoryPoolOperationType);
        a.correlation = m->correlationId;
        a.device = m->deviceId;
        a.address = m->address;
        a.size = m->size;
        a.utilized = m->utilizedSize;
        a.tsNs = static_cast<int64_t>(m->timestamp);
        if (rt.config.debug)
            logLine("activity memory_pool op=%d type=%d corr=%u dev=%u addr=0x%llx size=%llu "
                    "utilized=%llu threshold=%llu ts=%llu",
                    int(m->memoryPoolOperationType), int(m->memoryPoolType), m->correlationId,
                    m->deviceId, (unsigned long long)m->address, (unsigned long long)m->size,
                    (unsigned long long)m->utilizedSize, (unsigned long long)m->releaseThreshold,
                    (unsigned long long)m->timestamp);
        if (rt.sink && !g_shutDown.load()) rt.sink->addActivity(a);
    }
    size_t droppedRecords = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &droppedRecords) == CUPTI_SUCCESS &&
        droppedRecords)
        logOnce(LogKey::Activity, "CUPTI dropped %zu pool activity records", droppedRecords);
    std::free(buffer);
}

void writerLoop() {
    Runtime& rt = runtime();
    ownThreadState();
    g_writerThread.store(pthread_self());
    pthread_setname_np(pthread_self(), "poolscope-wr");
    auto lastActivityFlush = std::chrono::steady_clock::now();
    bool failed = false;
    while (!rt.stopping.load(std::memory_order_acquire)) {
        const auto now = std::chrono::steady_clock::now();
        // Forced: pool records are rare, a buffer would otherwise wait to fill for minutes, and
        // the sink places implicit releases only within its hold-back window.
        if (rt.config.activity && now - lastActivityFlush > std::chrono::milliseconds(50)) {
            cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
            lastActivityFlush = now;
        }
        const int req = rt.flushRequest.load(std::memory_order_acquire);
        if (!diag::writerPass(rt) && !failed && rt.sink) {
            // A fatal signal asked for a flush: write everything held back, and commit.
            Status s = rt.sink->pump(req != rt.flushDone.load(std::memory_order_relaxed));
            if (!s) {
                failed = true;
                logOnce(LogKey::Sqlite, "writing the trace failed (%s); recording stopped",
                        s.error().message.c_str());
                disableCollector("trace write failed");
            }
        }
        if (req) rt.flushDone.store(req, std::memory_order_release);
        timespec ts{0, 1'000'000};
        nanosleep(&ts, nullptr);
    }
}

// Empties the rings into the writer's spool every millisecond, and does nothing else, so that a
// slow writer pass (a checkpoint, a slow disk) does not fill the rings (Spool.h).
void drainerLoop() {
    Runtime& rt = runtime();
    ownThreadState();
    pthread_setname_np(pthread_self(), "poolscope-dr");
    while (!rt.stopping.load(std::memory_order_acquire)) {
        if (rt.sink && diag::drainerEnabled()) rt.sink->drainOnce();
        timespec ts{0, 1'000'000};
        nanosleep(&ts, nullptr);
    }
}

// One last sample of every pool at exit, with the driver's high watermarks: the trace's peaks
// are then the driver's own even when no synchronize or sampler tick came after the peak.
// close() drains it with the rest. A driver that already tore the pool down gives no sample.
void finalSamples(Runtime& rt) {
    if (!rt.sink) return;
    ThreadState* t = ownThreadState();
    if (!t || !t->ring) return;
    Guard g(t);
    const int n = rt.poolCount.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
        const uint64_t h = rt.pools[i].handle.load(std::memory_order_acquire);
        PoolWatermarks w;
        if (h && readWatermarks(h, w)) pushSample(t, h, rt.pools[i], Clock::ticks(), w);
    }
}

void finishRecording() {
    Runtime& rt = runtime();
    if (g_shutDown.exchange(true)) return;
    if (rt.forkPending.load()) return; // a forked child that never used CUDA: nothing to write
    rt.enabled.store(false);
    rt.stopping.store(true, std::memory_order_release);
    if (rt.sampler.joinable()) rt.sampler.join();
    if (rt.drainer.joinable()) rt.drainer.join();
    if (rt.writer.joinable()) rt.writer.join();
    if (rt.sink) rt.sink->setDrainerRunning(false);
    finalSamples(rt);
    if (rt.config.activity) {
        ThreadState* t = ownThreadState();
        (void)t;
        cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    }
    if (rt.live) rt.live->stop();
    if (rt.sink) {
        Status s = rt.sink->close();
        if (!s)
            logOnce(LogKey::Sqlite, "closing the trace failed: %s", s.error().message.c_str());
        else if (rt.config.debug)
            logLine("trace written: %s (%llu events, %llu dropped)", rt.config.output.c_str(),
                    (unsigned long long)rt.sink->written(), (unsigned long long)rt.sink->dropped());
    }
    if (rt.subscriber) cuptiUnsubscribe(rt.subscriber);
}

void onFatalSignal(int sig, siginfo_t* info, void* uctx) {
    Runtime& rt = runtime();
    // Ask the writer thread to commit what it has; never touch SQLite from the handler.
    if (!g_inSignal.exchange(true) && rt.writer.joinable() &&
        !pthread_equal(pthread_self(), g_writerThread.load())) {
        const int req = rt.flushRequest.fetch_add(1) + 1;
        for (int i = 0; i < 500 && rt.flushDone.load(std::memory_order_acquire) < req; ++i) {
            timespec ts{0, 2'000'000};
            nanosleep(&ts, nullptr);
        }
    }
    g_inSignal.store(false);
    const struct sigaction& prev = g_previous[sig];
    if (prev.sa_flags & SA_SIGINFO) {
        if (prev.sa_sigaction) prev.sa_sigaction(sig, info, uctx);
        return;
    }
    if (prev.sa_handler == SIG_IGN) return;
    if (prev.sa_handler == SIG_DFL) {
        // Back to the default action and re-raise: the process ends exactly as it would have.
        sigaction(sig, &prev, nullptr);
        if (sig != SIGSEGV && sig != SIGBUS) raise(sig);
        return; // a fault re-executes the faulting instruction and now takes the default
    }
    prev.sa_handler(sig);
}

void installSignalHandlers() {
    for (int sig : kSignals) {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = onFatalSignal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, &g_previous[sig]);
        // Respect an application that ignores SIGINT/SIGTERM.
        if (!(g_previous[sig].sa_flags & SA_SIGINFO) && g_previous[sig].sa_handler == SIG_IGN)
            sigaction(sig, &g_previous[sig], nullptr);
    }
}

// NVTX delivers ranges to the one library NVTX_INJECTION64_PATH names, and CUPTI's NVTX callbacks
// reach only subscribers of that same copy. A Python program usually has its own CUPTI loaded
// (PyTorch's wheel) and the collector uses that copy, so a launcher's toolkit CUPTI would be a
// second copy with no subscriber: PyTorch's ranges were lost that way. Naming this module instead
// lets InitializeInjectionNvtx2 below forward to whichever copy the collector loaded. A tool the
// user chose (not a CUPTI) is left alone.
bool sameFile(const char* a, const char* b) {
    struct stat sa{}, sb{};
    return ::stat(a, &sa) == 0 && ::stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

void pointNvtxHere(Runtime& rt, const char* self) {
    if (!self) return;
    const char* current = std::getenv(control::kEnvNvtxInjection);
    std::string note;
    if (!current || !*current) {
        note = "this collector (was unset)";
    } else if (sameFile(current, self)) {
        note = "this collector";
    } else if (std::strstr(current, "libcupti") && !sameFile(current, cuptiPath().c_str())) {
        note = std::string("this collector (was ") + current + ", another CUPTI copy)";
    } else {
        rt.sink->setMeta("nvtx_injection", current);
        return;
    }
    setenv(control::kEnvNvtxInjection, self, 1);
    rt.sink->setMeta("nvtx_injection", note + ", forwarding to " + cuptiPath());
}

// Call sites and NVTX ranges (issue #13). Cold, once, before the callback is switched on.
void startStacks(Runtime& rt) {
    if (rt.config.stacks == StackMode::Off) {
        rt.sink->setMeta("stacks", "off");
        return;
    }
    // The frames above the program's call are this module's, CUPTI's and the driver's.
    std::vector<std::string> internal = {"libcupti.so", "libcuda.so"};
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&startStacks), &self) && self.dli_fname)
        internal.emplace_back(self.dli_fname);
    rt.stacks.configure({rt.config.stacks, rt.config.stackDepth}, internal);
    rt.sink->setStackRecorder(&rt.stacks);
    rt.sink->setMeta("stacks", rt.stacks.describe());
    rt.stacksOn = true;
    pointNvtxHere(rt, self.dli_fname);
    for (CUpti_CallbackId id :
         {CUPTI_CBID_NVTX_nvtxRangePushA, CUPTI_CBID_NVTX_nvtxRangePushW,
          CUPTI_CBID_NVTX_nvtxRangePushEx, CUPTI_CBID_NVTX_nvtxRangePop,
          CUPTI_CBID_NVTX_nvtxRangeStartA, CUPTI_CBID_NVTX_nvtxRangeStartW,
          CUPTI_CBID_NVTX_nvtxRangeStartEx, CUPTI_CBID_NVTX_nvtxRangeEnd,
          CUPTI_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxDomainRangePop,
          CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
          CUPTI_CBID_NVTX_nvtxDomainRegisterStringA, CUPTI_CBID_NVTX_nvtxDomainRegisterStringW}) {
        const CUptiResult r = cuptiEnableCallback(1, rt.subscriber, CUPTI_CB_DOMAIN_NVTX, id);
        if (r != CUPTI_SUCCESS) {
            logOnce(LogKey::Info, "NVTX ranges unavailable (%s)", cuptiError(r));
            rt.sink->setMeta("nvtx_disabled", cuptiError(r));
            break;
        }
    }
    if (rt.config.debug) logLine("stacks: %s", rt.stacks.describe().c_str());
}

bool openTrace(Runtime& rt) {
    // Written beside the output and renamed over it when closed: a recording that fails (a full
    // disk) never destroys the trace that was there, and keeps what it committed in .partial.
    WriterOptions options;
    options.replaceAtClose = true;
    auto w = TraceWriter::create(rt.config.output, options);
    if (!w) {
        logOnce(LogKey::Output, "cannot write the trace %s: %s; not recording",
                rt.config.output.c_str(), w.error().message.c_str());
        return false;
    }
    rt.sink = std::make_unique<TraceSink>(std::move(w.value()), rt.rings, rt.seq,
                                          rt.config.spoolEvents);
    // Without watermark reads the implicit releases come only from late activity records.
    if (rt.config.watermarks == WatermarkMode::Off) rt.sink->setHoldBackMs(kHoldBackForActivityMs);
    ProcessInfo p;
    p.pid = getpid();
    p.parentPid = rt.config.parentPid;
    p.commandLine = commandLine();
    timespec rtc;
    clock_gettime(CLOCK_REALTIME, &rtc);
    p.startTimeMonoNs = monoNowNs();
    p.startTimeUnixNs = int64_t(rtc.tv_sec) * 1'000'000'000 + rtc.tv_nsec;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    p.host = host;
    int dv = 0;
    if (cuDriverGetVersion(&dv) == CUDA_SUCCESS) p.driverVersion = dv;
    p.collectorVersion = POOLSCOPE_VERSION;
    rt.sink->setProcess(p);
    rt.process = p;
    rt.sink->setMeta("collector", "poolscope collector " POOLSCOPE_VERSION);
    rt.sink->setMeta("clock", Clock::usesTsc() ? "tsc" : "monotonic");
    rt.sink->setMeta("watermarks", rt.config.watermarks == WatermarkMode::Exit   ? "exit"
                                   : rt.config.watermarks == WatermarkMode::Full ? "full"
                                                                                 : "off");
    rt.sink->setMeta("sample_period_ms", std::to_string(rt.config.samplePeriodMs));
    rt.sink->setMeta("ring_events", std::to_string(rt.config.ringEvents));
    rt.sink->setMeta("spool_events", std::to_string(rt.config.spoolEvents));
    return true;
}

void startThreads(Runtime& rt) {
    rt.stopping.store(false);
    if (rt.sink) rt.sink->setDrainerRunning(true);
    rt.drainer = startBlocked(drainerLoop);
    rt.writer = startBlocked(writerLoop);
    if (rt.config.samplePeriodMs > 0) rt.sampler = startBlocked(samplerLoop);
}

void startControl(Runtime& rt) {
    if (rt.config.listen.empty()) return;
#ifdef POOLSCOPE_HAVE_CONTROL
    rt.live = startControlServer(rt.config.listen);
    if (rt.live && rt.sink) rt.sink->setLiveSink(rt.live.get());
#else
    logOnce(LogKey::Info, "POOLSCOPE_LISTEN is set but this collector was built without the "
                          "live control server; recording to the file only");
#endif
}

// A child of fork() keeps only the forking thread. It must not write into the parent's file, and
// most children never touch CUDA again (PyTorch DataLoader workers, helpers that exec): so the
// child only forgets the parent's writer here and starts its own trace (pid in the name, no
// sampler: CUDA after fork is the application's gamble, not ours to add to) at its first traced
// call, from startForkedChild().
void atforkChild() {
    Runtime& rt = runtime();
    if (!rt.enabled.load() || g_shutDown.load()) return;
    rt.enabled.store(false);
    // The parent's objects are abandoned, never destroyed: its threads do not exist here (a
    // joinable std::thread must not be assigned or destroyed), and closing its SQLite handle
    // would checkpoint the parent's WAL from the child.
    (void)rt.sink.release();
    new (&rt.writer) std::thread();
    new (&rt.drainer) std::thread();
    new (&rt.sampler) std::thread();
    (void)rt.live.release();
    new (&rt.coldMutex) std::mutex(); // another thread may have held it at the fork
    rt.stacks.resetAfterFork();
    rt.rings.resetKeeping(threadState() ? threadState()->ring : nullptr);
    rt.forkPending.store(true);
}

} // namespace

// First traced call in a forked child (see atforkChild).
void startForkedChild() {
    Runtime& rt = runtime();
    if (!rt.forkPending.exchange(false) || g_shutDown.load()) return;
    rt.config.parentPid = getppid();
    rt.config.output = pathForPid(rt.config.output, getpid());
    rt.config.samplePeriodMs = 0;
    if (!openTrace(rt)) return;
    rt.enabled.store(true);
    startThreads(rt);
}

} // namespace poolscope::collector

using namespace poolscope::collector;

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    static std::atomic<bool> once{false};
    if (once.exchange(true)) return 1;
    Runtime& rt = runtime();
    rt.config = Config::fromEnvironment();
    rt.watermarks = rt.config.watermarks;
    if (rt.config.disabled) return 1;
    Clock::init(rt.config.allowTsc);
    const CUpti_CallbackFunc callback = diag::start(onCallback);
    if (!openTrace(rt)) return 1;

    // Not recording after all: the trace says why, and nothing of ours runs again (the exit
    // handlers would otherwise close the trace a second time or call into CUPTI).
    auto giveUp = [&rt](const std::string& why) {
        rt.sink->setMeta("collector_disabled_reason", why);
        rt.sink->close();
        rt.sink.reset();
        rt.config.activity = false;
        g_shutDown.store(true);
        return 1;
    };
    if (!loadCudaLibraries()) {
        logLine("not recording: %s", cudaLibrariesError().c_str());
        return giveUp(cudaLibrariesError());
    }
    rt.sink->setMeta("cupti_library", cuptiPath());
    CUptiResult r = cuptiSubscribe(&rt.subscriber, callback, nullptr);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
        logOnce(LogKey::Subscribe,
                "another CUPTI profiler is already attached to this process (Nsight Systems, "
                "Nsight Compute, PyTorch's profiler/Kineto...). CUDA allows only one; PoolScope "
                "is not recording. Run without the other profiler to record.");
        rt.subscriber = nullptr;
        return giveUp("another CUPTI subscriber");
    }
    if (r != CUPTI_SUCCESS) {
        logOnce(LogKey::Cupti, "cuptiSubscribe failed: %s; not recording", cuptiError(r));
        rt.subscriber = nullptr;
        return giveUp(std::string("cuptiSubscribe: ") + cuptiError(r));
    }
    for (CUpti_CallbackId id : tracedCallbackIds()) {
        r = cuptiEnableCallback(1, rt.subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
        if (r != CUPTI_SUCCESS) {
            logOnce(LogKey::Cupti, "cuptiEnableCallback(%u) failed: %s; not recording", id,
                    cuptiError(r));
            cuptiUnsubscribe(rt.subscriber);
            rt.subscriber = nullptr;
            return giveUp(std::string("cuptiEnableCallback: ") + cuptiError(r));
        }
    }
    // cudaMemcpyPeer(Async) at the runtime too: optional, the driver's peer copies stand alone.
    for (CUpti_CallbackId id : tracedRuntimeCallbackIds()) {
        r = cuptiEnableCallback(1, rt.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, id);
        if (r != CUPTI_SUCCESS) {
            logOnce(LogKey::Info, "runtime peer copies not traced (%s)", cuptiError(r));
            break;
        }
    }
    if (rt.config.activity) {
        r = cuptiActivityRegisterTimestampCallback(monotonicTimestamp);
        if (r == CUPTI_SUCCESS) r = cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted);
        if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL);
        if (r == CUPTI_SUCCESS) r = diag::enableActivity();
        if (r != CUPTI_SUCCESS) {
            // Degraded, not off: events and exact watermarks still work; implicit releases
            // then show only through the synchronize's watermarks.
            logOnce(LogKey::Activity, "pool activity unavailable (%s): implicit releases are "
                                      "seen only through watermarks",
                    cuptiError(r));
            rt.sink->setMeta("activity_disabled", cuptiError(r));
            rt.config.activity = false;
        }
    }
    startStacks(rt);
    rt.enabled.store(true);
    startThreads(rt);
    startControl(rt);
    installSignalHandlers();
    pthread_atfork(nullptr, nullptr, atforkChild);
    std::atexit(finishRecording);
    return 1;
}

// Fallback for exits that skip atexit handlers registered late (e.g. a dlclose'd host).
__attribute__((destructor)) static void poolscopeCollectorFini() { finishRecording(); }

// NVTX's injection entry point (see pointNvtxHere). NVTX may call it before cuInit, so it loads
// the CUDA libraries itself; the CUPTI it finds is the one InitializeInjection will subscribe to.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    const void* (*getExportTable)(uint32_t)) {
    if (Config::fromEnvironment().disabled || !loadCudaLibraries()) return 0;
    using Init = int (*)(const void* (*)(uint32_t));
    auto init = reinterpret_cast<Init>(dlsym(cuptiHandle(), "InitializeInjectionNvtx2"));
    return init ? init(getExportTable) : 0;
}
