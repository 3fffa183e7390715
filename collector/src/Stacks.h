#pragma once
// Call sites at allocations (issue #13): native stacks, Python stacks and NVTX range paths,
// captured on the hot path and interned into site ids that events carry (Event::site).
//
// Hot path (an allocating thread, inside the CUPTI callback): unw_backtrace (libunwind, loaded
// at run time; see collector/README.md for the measurement that chose it), the thread's Python
// frames read from CPython's memory (PyFrames.h: with or without the GIL, which is never taken),
// one hash over frames + Python (code, instruction) pairs + the thread's NVTX path, then a
// per-thread direct-mapped cache hash -> site id. Only a miss takes the recorder's mutex: the
// shared table gives the id, or a new one and the rows to write (a new stack's frames; Python
// names and lines are read then, while the frames are still live). Distinct stacks are few, so
// misses are rare after warm-up. Sites are identified by the 64-bit hash of their content.
//
// Writer thread: drain() turns what is new into StackTables rows (raw addresses to module +
// offset through a dl_iterate_phdr snapshot with each module's build-id) for TraceWriter.
// GPU-free: tests drive it on CPU.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "PyFrames.h"
#include "poolscope/Stacks.h"

namespace poolscope::collector {

enum class StackMode : uint8_t {
    Off,    // no sites, no NVTX
    Native, // native stacks
    Python, // Python stacks (threads without Python frames: NVTX path only)
    All,    // both
    Auto,   // default: Python where a Python interpreter is loaded (as Python), native
            // otherwise (C++ programs)
};
const char* stackModeName(StackMode m);
bool stackModeFromName(const std::string& s, StackMode& out);

inline constexpr int kDefaultStackDepth = 32;
inline constexpr int kMaxStackDepth = 256;
inline constexpr int kMaxNvtxDepth = 64;

// One thread's state: its site cache and NVTX push/pop stack. Allocated at the thread's first
// capture or push (cold), owned by the recorder (threads may end before the writer reads).
struct ThreadSites {
    static constexpr size_t kCache = 1024;
    struct Entry {
        uint64_t hash;
        uint32_t site;
    } cache[kCache] = {};
    uint32_t tid = 0;
    // Inside capture(): a nested capture on this thread (an allocation made from a signal
    // handler that interrupted one) records no site instead of re-entering the shared table's
    // mutex, which is not recursive.
    bool busy = false;
    int nvtxDepth = 0;            // ranges pushed; those beyond kMaxNvtxDepth are counted only
    uint64_t nvtxHash[kMaxNvtxDepth + 1] = {}; // path hash at each depth ([0] = no range)
    uint64_t nvtxId[kMaxNvtxDepth] = {};
    int64_t nvtxStart[kMaxNvtxDepth] = {};
    std::string nvtxName[kMaxNvtxDepth];
};

class StackRecorder {
public:
    struct Options {
        StackMode mode = StackMode::Auto;
        int depth = kDefaultStackDepth;
    };
    // Cold (InitializeInjection): loads libunwind, finds the Python API, notes the address
    // ranges of the modules whose frames lead up to the capture (this module, CUPTI, the driver)
    // so they are cut from the top of each stack. `internalModules`: substrings of their paths.
    void configure(const Options& o, const std::vector<std::string>& internalModules);
    StackMode mode() const { return opts_.mode; }
    bool enabled() const { return opts_.mode != StackMode::Off; }
    // The diagnostic module's levels (Diagnostics.cpp) switch modes between a program's steps,
    // when no capture runs.
    void setModeBetweenSteps(StackMode m) { opts_.mode = m; }
    // What configure() found, for the trace's meta and the log.
    std::string describe() const;
    bool pythonFound() const { return py_.ok(); }
    // Tests: the Python frame reader in use.
    PyFrameReader& pythonReader() { return py_; }

    // The recorder owns the entries newThread() hands out. The collector's recorder is never
    // destroyed (Runtime lives for the process), so this runs only where a test owns one.
    ~StackRecorder();
    ThreadSites* newThread(uint32_t tid); // cold

    // Hot path: the calling thread's site (0 = nothing captured). skipInternal: cut the frames
    // of the internal modules from the top (the capture runs inside the CUPTI callback).
    uint32_t capture(ThreadSites& ts);

    // NVTX (the calling thread's ranges). ticks: Clock::ticks() (the writer converts).
    void push(ThreadSites& ts, const char* name, int64_t ticks);
    void pop(ThreadSites& ts, int64_t ticks);
    void start(uint64_t key, uint32_t tid, const char* name, int64_t ticks);
    void end(uint64_t key, int64_t ticks);

    // Writer: the rows that are new since the last call, times converted with toNs.
    void drain(StackTables& out, const std::function<int64_t(int64_t)>& toNs);

    // fork() child: another thread may have held the mutex at the fork.
    void resetAfterFork();

    // Tests: capture native frames of the caller (no internal cut), as the hot path would.
    int captureNativeForTest(uintptr_t* out, int max);

private:
    struct PendingStack {
        uint32_t id;
        std::vector<uintptr_t> frames;
    };
    struct RawRange {
        uint64_t id;
        uint32_t tid;
        std::string name;
        int64_t startTicks, endTicks;
        uint16_t depth;
        NvtxRangeKind kind;
    };
    struct Module {
        uint32_t id;
        uintptr_t lo, hi;
    };

    int unwind(uintptr_t* out, int max);
    uint32_t intern(ThreadSites& ts, uint64_t hash, const uintptr_t* native, int nNative,
                    const PyRawFrame* python, int nPython);
    uint32_t moduleOf(uintptr_t addr, uint64_t& offset);
    void snapshotModules();

    Options opts_;
    PyFrameReader py_;
    int (*unwBacktrace_)(void**, int) = nullptr;
    bool usingLibunwind_ = false;
    struct Range {
        uintptr_t lo, hi;
    };
    Range internal_[16] = {};
    int internalCount_ = 0;

    std::mutex mutex_; // cold: interning misses, NVTX ranges, thread registration, drain
    std::unordered_map<uint64_t, uint32_t> sites_;  // content hash -> site
    std::unordered_map<uint64_t, uint32_t> native_; // frames hash -> native stack id
    std::unordered_map<uint64_t, uint32_t> python_; // frames' text hash -> Python stack id
    std::unordered_map<uint64_t, uint32_t> siteByContent_; // (native, python, nvtx ids) -> site
    std::unordered_map<uint64_t, uint32_t> nvtx_;
    std::vector<ThreadSites*> threads_;
    std::vector<PendingStack> pendingNative_;
    std::map<uint32_t, std::vector<PythonFrame>> pendingPython_;
    std::map<uint32_t, std::vector<std::string>> pendingNvtx_;
    std::map<uint32_t, SiteInfo> pendingSites_;
    std::vector<RawRange> pendingRanges_;
    std::unordered_map<uint64_t, RawRange> openStartEnd_; // start/end ranges by NVTX's id
    std::atomic<uint64_t> nextRangeId_{1};

    // Writer-side module table (only drain() touches it, under mutex_).
    std::vector<Module> modules_; // sorted by lo
    std::vector<ModuleInfo> newModules_;
    uint32_t nextModuleId_ = 1;
    std::unordered_map<std::string, uint32_t> moduleIds_; // path@load address -> id
    std::unordered_map<uint32_t, uint64_t> loadAddress_;  // modules already written
};

} // namespace poolscope::collector
