#include "Stacks.h"

#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <unistd.h>

namespace poolscope::collector {

namespace {
// Frames captured beyond the depth limit, so that the collector's, CUPTI's and the driver's own
// frames at the top of the stack can be cut and still leave `depth` frames of the program.
constexpr int kInternalSlack = 24;

inline uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xBF58476D1CE4E5B9ull;
}

uint64_t hashString(const char* s) {
    uint64_t h = 0xCBF29CE484222325ull; // FNV-1a
    for (; s && *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 0x100000001B3ull;
    return h;
}

inline size_t cacheSlot(uint64_t h) { return static_cast<size_t>(h ^ (h >> 29)) & (ThreadSites::kCache - 1); }

template <class T>
T sym(void* handle, const char* name) {
    return reinterpret_cast<T>(dlsym(handle, name));
}

std::string hexOf(const unsigned char* p, size_t n) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        s += d[p[i] >> 4];
        s += d[p[i] & 15];
    }
    return s;
}

// The NT_GNU_BUILD_ID note of a loaded object, read from its mapped PT_NOTE segments.
std::string buildIdOf(const dl_phdr_info* info) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        const unsigned char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            ElfW(Nhdr) nh;
            std::memcpy(&nh, p, sizeof nh);
            const unsigned char* name = p + sizeof nh;
            const unsigned char* desc = name + ((nh.n_namesz + 3) & ~3u);
            const unsigned char* next = desc + ((nh.n_descsz + 3) & ~3u);
            if (next > end || next <= p) break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0)
                return hexOf(desc, nh.n_descsz);
            p = next;
        }
    }
    return {};
}

std::string selfExe() {
    char buf[4096];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

struct LoadedObject {
    std::string path;
    std::string buildId;
    uintptr_t base, lo, hi;
};

std::vector<LoadedObject> loadedObjects() {
    std::vector<LoadedObject> out;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* arg) -> int {
            auto& v = *static_cast<std::vector<LoadedObject>*>(arg);
            uintptr_t lo = UINTPTR_MAX, hi = 0;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                lo = std::min<uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
                hi = std::max<uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
            }
            if (lo >= hi) return 0;
            std::string path = info->dlpi_name ? info->dlpi_name : "";
            // The main program is the one object the loader names "" (it comes first).
            if (path.empty()) {
                if (!v.empty()) return 0;
                path = selfExe();
            }
            v.push_back({path, buildIdOf(info), info->dlpi_addr, lo, hi});
            return 0;
        },
        &out);
    return out;
}
} // namespace

const char* stackModeName(StackMode m) {
    switch (m) {
    case StackMode::Off: return "off";
    case StackMode::Native: return "native";
    case StackMode::Python: return "python";
    case StackMode::All: return "all";
    case StackMode::Auto: return "auto";
    }
    return "auto";
}

bool stackModeFromName(const std::string& s, StackMode& out) {
    for (StackMode m : {StackMode::Off, StackMode::Native, StackMode::Python, StackMode::All,
                        StackMode::Auto})
        if (s == stackModeName(m)) {
            out = m;
            return true;
        }
    return false;
}

void StackRecorder::configure(const Options& o, const std::vector<std::string>& internalModules) {
    opts_ = o;
    opts_.depth = std::clamp(o.depth, 1, kMaxStackDepth);
    if (opts_.mode == StackMode::Off) return;
    // libunwind's unw_backtrace caches each return address's unwind rule: ~9 ns a frame where
    // libgcc's _Unwind_Backtrace (and glibc's backtrace(), built on it) re-reads the DWARF CFI,
    // ~230 ns a frame (tests/bench/StackBench.cpp, docs/PERFORMANCE.md). Loaded here, local to
    // this module, so the program's own unwinder (C++ exceptions) is never replaced; without it
    // the stacks still work, slower. Beside this module first: a build carried to a machine
    // without Debian's libunwind8 can bring its copy along.
    std::vector<std::string> candidates;
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&stackModeName), &self) && self.dli_fname) {
        const std::string me = self.dli_fname;
        const size_t slash = me.rfind('/');
        if (slash != std::string::npos) candidates.push_back(me.substr(0, slash) + "/libunwind.so.8");
    }
    candidates.push_back("libunwind.so.8");
    candidates.push_back("libunwind.so");
    for (const std::string& lib : candidates) {
        if (void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL)) {
            unwBacktrace_ = sym<int (*)(void**, int)>(h, "unw_backtrace");
            if (unwBacktrace_) break;
        }
    }
    usingLibunwind_ = unwBacktrace_ != nullptr;
    if (!unwBacktrace_) unwBacktrace_ = &::backtrace;
    if (opts_.mode != StackMode::Native) py_.init();
    internalCount_ = 0;
    for (const LoadedObject& m : loadedObjects()) {
        const bool internal = std::any_of(internalModules.begin(), internalModules.end(),
                                          [&](const std::string& s) {
                                              return !s.empty() && m.path.find(s) != std::string::npos;
                                          });
        if (internal && internalCount_ < int(std::size(internal_)))
            internal_[internalCount_++] = {m.lo, m.hi};
    }
}

std::string StackRecorder::describe() const {
    std::string s = stackModeName(opts_.mode);
    if (opts_.mode == StackMode::Off) return s;
    s += ", depth " + std::to_string(opts_.depth);
    s += usingLibunwind_ ? ", native: libunwind" : ", native: glibc backtrace (libunwind.so.8 not found)";
    if (opts_.mode != StackMode::Native) s += ", python: " + py_.status();
    return s;
}

StackRecorder::~StackRecorder() {
    for (ThreadSites* ts : threads_) delete ts;
}

ThreadSites* StackRecorder::newThread(uint32_t tid) {
    auto* ts = new (std::nothrow) ThreadSites();
    if (!ts) return nullptr;
    ts->tid = tid;
    std::lock_guard lock(mutex_);
    threads_.push_back(ts);
    return ts;
}

int StackRecorder::unwind(uintptr_t* out, int max) {
    return unwBacktrace_ ? unwBacktrace_(reinterpret_cast<void**>(out), max) : 0;
}

int StackRecorder::captureNativeForTest(uintptr_t* out, int max) { return unwind(out, max); }

uint32_t StackRecorder::capture(ThreadSites& ts) {
    const StackMode mode = opts_.mode;
    if (mode == StackMode::Off || ts.busy) return 0;
    struct Busy {
        bool& b;
        explicit Busy(bool& f) : b(f) { b = true; }
        ~Busy() { b = false; }
    } busy(ts.busy);
    const int depth = opts_.depth;

    PyRawFrame py[kMaxStackDepth];
    const int nPy = mode != StackMode::Native ? py_.walk(py, depth) : 0;

    uintptr_t raw[kMaxStackDepth + kInternalSlack];
    const uintptr_t* native = raw;
    int nNative = 0;
    // Auto: Python frames where a Python interpreter is loaded, native stacks otherwise. A
    // Python program's threads that run no Python code (PyTorch's autograd thread) get their
    // NVTX path only: unwinding them costs 2-3 % of a GPT-2 step (docs/PERFORMANCE.md), which
    // `--stacks all` pays for.
    const bool wantNative = mode == StackMode::Native || mode == StackMode::All ||
                            (mode == StackMode::Auto && !py_.ok());
    if (wantNative) {
        nNative = unwind(raw, depth + kInternalSlack);
        // The top frames are this module's, CUPTI's and the driver's: the stack the user wrote
        // starts at the first frame outside them (the CUDA runtime's entry point, when it is a
        // separate library, or the program's call).
        int first = 0;
        if (internalCount_ > 0) {
            int lastInternal = -1;
            for (int i = 0; i < nNative && i < kInternalSlack; ++i)
                for (int k = 0; k < internalCount_; ++k)
                    if (raw[i] >= internal_[k].lo && raw[i] < internal_[k].hi) {
                        lastInternal = i;
                        break;
                    }
            first = lastInternal + 1;
        }
        native = raw + first;
        nNative = std::min(nNative - first, depth);
        if (nNative < 0) nNative = 0;
    }

    const int nvDepth = std::min(ts.nvtxDepth, kMaxNvtxDepth);
    uint64_t h = mix(0x5157, ts.nvtxHash[nvDepth]);
    for (int i = 0; i < nNative; ++i) h = mix(h, native[i]);
    h = mix(h, 0xFFFF'0000'0000ull | uint64_t(nNative));
    for (int i = 0; i < nPy; ++i) h = mix(mix(h, py[i].code), uint64_t(uint32_t(py[i].addr)));
    h = mix(h, uint64_t(nPy));

    uint32_t site = 0;
    if (nNative == 0 && nPy == 0 && nvDepth == 0) {
        site = 0;
    } else {
        ThreadSites::Entry& e = ts.cache[cacheSlot(h)];
        if (e.hash == h && e.site) {
            site = e.site;
        } else {
            site = intern(ts, h, native, nNative, py, nPy);
            e = {h, site};
        }
    }
    return site;
}

__attribute__((cold, noinline)) uint32_t StackRecorder::intern(ThreadSites& ts, uint64_t hash,
                                                               const uintptr_t* native, int nNative,
                                                               const PyRawFrame* py, int nPy) {
    std::lock_guard lock(mutex_);
    if (auto it = sites_.find(hash); it != sites_.end()) return it->second;
    SiteInfo si;
    if (nNative > 0) {
        uint64_t hn = 0x4E41;
        for (int i = 0; i < nNative; ++i) hn = mix(hn, native[i]);
        hn = mix(hn, uint64_t(nNative));
        auto [it, added] = native_.try_emplace(hn, uint32_t(native_.size() + 1));
        if (added) pendingNative_.push_back({it->second, std::vector<uintptr_t>(native, native + nNative)});
        si.nativeStack = it->second;
    }
    if (nPy > 0) {
        // Names and lines are read now: the frames are live until this capture returns, a
        // code object may be gone by the time the writer runs. Several instructions on one
        // line give the same stack.
        std::vector<PythonFrame> frames(static_cast<size_t>(nPy));
        uint64_t hp = 0x5059;
        for (int i = 0; i < nPy; ++i) {
            PythonFrame& f = frames[size_t(i)];
            if (!py_.resolve(py[i], f)) f = PythonFrame{"?", "?", 0};
            hp = mix(mix(mix(hp, hashString(f.file.c_str())), hashString(f.function.c_str())),
                     uint64_t(uint32_t(f.line)));
        }
        hp = mix(hp, uint64_t(nPy));
        auto [it, added] = python_.try_emplace(hp, uint32_t(python_.size() + 1));
        if (added) pendingPython_[it->second] = std::move(frames);
        si.pythonStack = it->second;
    }
    const int nvDepth = std::min(ts.nvtxDepth, kMaxNvtxDepth);
    if (nvDepth > 0) {
        auto [it, added] = nvtx_.try_emplace(ts.nvtxHash[nvDepth], uint32_t(nvtx_.size() + 1));
        if (added) pendingNvtx_[it->second] = std::vector<std::string>(ts.nvtxName, ts.nvtxName + nvDepth);
        si.nvtxPath = it->second;
    }
    // Two hashes of the hot path can name one site (two instructions of one line).
    const uint64_t content = mix(mix(mix(0x5154, si.nativeStack), si.pythonStack), si.nvtxPath);
    auto [it, added] = siteByContent_.try_emplace(content, uint32_t(siteByContent_.size() + 1));
    sites_[hash] = it->second;
    if (added) {
        si.id = it->second;
        pendingSites_[si.id] = si;
    }
    return it->second;
}

void StackRecorder::push(ThreadSites& ts, const char* name, int64_t ticks) {
    const int d = ts.nvtxDepth++;
    if (d >= kMaxNvtxDepth) return;
    ts.nvtxName[d] = name ? name : "";
    ts.nvtxHash[d + 1] = mix(ts.nvtxHash[d], hashString(name));
    ts.nvtxId[d] = nextRangeId_.fetch_add(1, std::memory_order_relaxed);
    ts.nvtxStart[d] = ticks;
    std::lock_guard lock(mutex_);
    pendingRanges_.push_back({ts.nvtxId[d], ts.tid, ts.nvtxName[d], ticks, 0, uint16_t(d),
                              NvtxRangeKind::PushPop});
}

void StackRecorder::pop(ThreadSites& ts, int64_t ticks) {
    if (ts.nvtxDepth == 0) return; // a pop without its push (pushed before recording began)
    const int d = --ts.nvtxDepth;
    if (d >= kMaxNvtxDepth) return;
    std::lock_guard lock(mutex_);
    pendingRanges_.push_back({ts.nvtxId[d], ts.tid, ts.nvtxName[d], ts.nvtxStart[d], ticks,
                              uint16_t(d), NvtxRangeKind::PushPop});
}

void StackRecorder::start(uint64_t key, uint32_t tid, const char* name, int64_t ticks) {
    RawRange r{nextRangeId_.fetch_add(1, std::memory_order_relaxed), tid, name ? name : "", ticks,
               0, 0, NvtxRangeKind::StartEnd};
    std::lock_guard lock(mutex_);
    pendingRanges_.push_back(r);
    if (key) openStartEnd_[key] = std::move(r);
}

void StackRecorder::end(uint64_t key, int64_t ticks) {
    std::lock_guard lock(mutex_);
    auto it = openStartEnd_.find(key);
    if (it == openStartEnd_.end()) return;
    it->second.endTicks = ticks;
    pendingRanges_.push_back(std::move(it->second));
    openStartEnd_.erase(it);
}

void StackRecorder::snapshotModules() {
    for (const LoadedObject& o : loadedObjects()) {
        const std::string key = o.path + "@" + std::to_string(o.base);
        auto [it, added] = moduleIds_.try_emplace(key, nextModuleId_);
        if (added) {
            ++nextModuleId_;
            newModules_.push_back(ModuleInfo{it->second, o.path, o.buildId, o.base, o.hi - o.lo});
        }
        const bool known = std::any_of(modules_.begin(), modules_.end(),
                                       [&](const Module& m) { return m.id == it->second; });
        if (!known) modules_.push_back({it->second, o.lo, o.hi});
    }
    std::sort(modules_.begin(), modules_.end(), [](const Module& a, const Module& b) { return a.lo < b.lo; });
}

uint32_t StackRecorder::moduleOf(uintptr_t addr, uint64_t& offset) {
    auto find = [&]() -> const Module* {
        auto it = std::upper_bound(modules_.begin(), modules_.end(), addr,
                                   [](uintptr_t a, const Module& m) { return a < m.lo; });
        if (it == modules_.begin()) return nullptr;
        --it;
        return addr < it->hi ? &*it : nullptr;
    };
    const Module* m = find();
    if (!m) {
        // Loaded since the last snapshot (dlopen): look again once.
        snapshotModules();
        m = find();
    }
    if (!m) {
        offset = addr;
        return 0;
    }
    for (const ModuleInfo& info : newModules_)
        if (info.id == m->id) {
            offset = addr - info.loadAddress;
            return m->id;
        }
    offset = addr - loadAddress_.at(m->id);
    return m->id;
}

void StackRecorder::drain(StackTables& out, const std::function<int64_t(int64_t)>& toNs) {
    std::vector<PendingStack> native;
    std::vector<RawRange> ranges;
    {
        std::lock_guard lock(mutex_);
        native.swap(pendingNative_);
        ranges.swap(pendingRanges_);
        out.pythonStacks.merge(pendingPython_);
        out.nvtxPaths.merge(pendingNvtx_);
        out.sites.merge(pendingSites_);
        pendingPython_.clear();
        pendingNvtx_.clear();
        pendingSites_.clear();
    }
    // Module lookups off the lock: the hot path's misses never wait on dl_iterate_phdr.
    if (!native.empty() && modules_.empty()) snapshotModules();
    for (PendingStack& s : native) {
        std::vector<NativeFrame> frames;
        frames.reserve(s.frames.size());
        for (uintptr_t a : s.frames) {
            NativeFrame f;
            f.module = moduleOf(a, f.offset);
            frames.push_back(f);
        }
        out.nativeStacks[s.id] = std::move(frames);
    }
    for (ModuleInfo& m : newModules_) {
        loadAddress_[m.id] = m.loadAddress;
        out.modules.push_back(std::move(m));
    }
    newModules_.clear();
    for (RawRange& r : ranges)
        out.ranges.push_back(NvtxRange{r.id, r.tid, std::move(r.name), toNs(r.startTicks),
                                       r.endTicks ? toNs(r.endTicks) : 0, r.depth, r.kind});
}

void StackRecorder::resetAfterFork() {
    new (&mutex_) std::mutex();
}

} // namespace poolscope::collector
