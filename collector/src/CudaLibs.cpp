// Run-time loading of the CUDA driver and CUPTI (see CudaLibs.h for why). Each cu*/cupti*
// function the collector calls is defined here with the header's own signature (so a mismatch
// is a compile error) and calls through a pointer resolved once by loadCudaLibraries(). The
// header's macros pick the symbol version (cuDeviceTotalMem is cuDeviceTotalMem_v2), exactly
// as linking against the library would.
#include "CudaLibs.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <glob.h>
#include <mutex>
#include <vector>

#include <cuda.h>
#include <cupti.h>

#ifndef POOLSCOPE_CUPTI_SONAME
#error "POOLSCOPE_CUPTI_SONAME (the SONAME of the CUPTI the collector was built against) must be set"
#endif
#ifndef POOLSCOPE_CUDA_BUILD_LIBDIR
#define POOLSCOPE_CUDA_BUILD_LIBDIR ""
#endif

#define POOLSCOPE_STR2(x) #x
#define POOLSCOPE_STR(x) POOLSCOPE_STR2(x)

namespace poolscope::collector {
namespace {

// X(name, parameter list, argument list) for each function, by library. Add a line here when
// the collector calls a new driver or CUPTI function (the module links with -z defs, so a
// missing one fails the link).
#define POOLSCOPE_DRIVER_FUNCTIONS(X)                                                              \
    X(cuCtxGetCurrent, (CUcontext * a), (a))                                                       \
    X(cuCtxGetDevice, (CUdevice * a), (a))                                                         \
    X(cuCtxPopCurrent, (CUcontext * a), (a))                                                       \
    X(cuCtxPushCurrent, (CUcontext a), (a))                                                        \
    X(cuCtxSetCurrent, (CUcontext a), (a))                                                         \
    X(cuDeviceGet, (CUdevice * a, int b), (a, b))                                                  \
    X(cuDeviceGetDefaultMemPool, (CUmemoryPool * a, CUdevice b), (a, b))                           \
    X(cuDeviceGetMemPool, (CUmemoryPool * a, CUdevice b), (a, b))                                  \
    X(cuDeviceGetName, (char* a, int b, CUdevice c), (a, b, c))                                    \
    X(cuDeviceGetUuid_v2, (CUuuid * a, CUdevice b), (a, b))                                        \
    X(cuDeviceTotalMem, (size_t * a, CUdevice b), (a, b))                                          \
    X(cuDriverGetVersion, (int* a), (a))                                                           \
    X(cuGetErrorName, (CUresult a, const char** b), (a, b))                                        \
    X(cuMemPoolGetAttribute, (CUmemoryPool a, CUmemPool_attribute b, void* c), (a, b, c))          \
    X(cuMemPoolSetAttribute, (CUmemoryPool a, CUmemPool_attribute b, void* c), (a, b, c))          \
    X(cuMemPoolTrimTo, (CUmemoryPool a, size_t b), (a, b))                                         \
    X(cuPointerGetAttribute, (void* a, CUpointer_attribute b, CUdeviceptr c), (a, b, c))          \
    X(cuStreamGetCtx, (CUstream a, CUcontext * b), (a, b))

// Functions of newer drivers only: a driver without them still records, and the caller falls
// back (cuStreamGetDevice, driver 12.8+: else the stream's context and that context's device).
// Their forwarders return CUDA_ERROR_NOT_SUPPORTED where the driver lacks them.
#define POOLSCOPE_DRIVER_OPTIONAL(X)                                                               \
    X(cuStreamGetDevice, (CUstream a, CUdevice * b), (a, b))

#define POOLSCOPE_CUPTI_FUNCTIONS(X)                                                               \
    X(cuptiActivityEnable, (CUpti_ActivityKind a), (a))                                            \
    X(cuptiActivityFlushAll, (uint32_t a), (a))                                                    \
    X(cuptiActivityGetNextRecord, (uint8_t * a, size_t b, CUpti_Activity * *c), (a, b, c))         \
    X(cuptiActivityGetNumDroppedRecords, (CUcontext a, uint32_t b, size_t * c), (a, b, c))         \
    X(cuptiActivityRegisterCallbacks,                                                              \
      (CUpti_BuffersCallbackRequestFunc a, CUpti_BuffersCallbackCompleteFunc b), (a, b))           \
    X(cuptiActivityRegisterTimestampCallback, (CUpti_TimestampCallbackFunc a), (a))                \
    X(cuptiEnableCallback, (uint32_t a, CUpti_SubscriberHandle b, CUpti_CallbackDomain c,          \
                            CUpti_CallbackId d),                                                   \
      (a, b, c, d))                                                                                \
    X(cuptiGetResultString, (CUptiResult a, const char** b), (a, b))                               \
    X(cuptiSubscribe, (CUpti_SubscriberHandle * a, CUpti_CallbackFunc b, void* c), (a, b, c))      \
    X(cuptiUnsubscribe, (CUpti_SubscriberHandle a), (a))

// Acquire loads: a callback thread may call before the loading thread's call_once returns.
#define POOLSCOPE_POINTER(name, params, args) std::atomic<decltype(&::name)> p_##name{nullptr};
POOLSCOPE_DRIVER_FUNCTIONS(POOLSCOPE_POINTER)
POOLSCOPE_DRIVER_OPTIONAL(POOLSCOPE_POINTER)
POOLSCOPE_CUPTI_FUNCTIONS(POOLSCOPE_POINTER)

std::once_flag g_once;
bool g_loaded = false;
std::string g_error;
std::string g_cuptiPath;
void* g_cupti = nullptr;

template <typename Fn>
bool resolve(void* lib, const char* symbol, std::atomic<Fn>& out, std::string& missing) {
    void* p = dlsym(lib, symbol);
    if (!p) {
        missing += missing.empty() ? symbol : std::string(", ") + symbol;
        return false;
    }
    out.store(reinterpret_cast<Fn>(p), std::memory_order_release);
    return true;
}

// Toolkit folders in the order a CUDA install makes them likely: the ones the user names first,
// then /usr/local/cuda (the default symlink), then every versioned toolkit, newest first.
std::vector<std::string> toolkitRoots() {
    std::vector<std::string> roots;
    for (const char* var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDAToolkit_ROOT"})
        if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v);
    roots.emplace_back("/usr/local/cuda");
    std::vector<std::string> versioned;
    for (const char* pattern : {"/usr/local/cuda-*", "/opt/cuda*", "/opt/nvidia/cuda*"}) {
        glob_t g{};
        if (::glob(pattern, 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; ++i) versioned.emplace_back(g.gl_pathv[i]);
        ::globfree(&g);
    }
    // Lexical order puts cuda-12.10 before cuda-12.9; compare the version numbers instead.
    std::sort(versioned.begin(), versioned.end(), [](const std::string& a, const std::string& b) {
        return ::strverscmp(a.c_str(), b.c_str()) > 0;
    });
    roots.insert(roots.end(), versioned.begin(), versioned.end());
    return roots;
}

void* openCupti(std::string& tried) {
    const char* soname = POOLSCOPE_CUPTI_SONAME;
    std::vector<std::string> seen;
    auto attempt = [&](const std::string& file, const std::string& label) -> void* {
        if (std::find(seen.begin(), seen.end(), file) != seen.end()) return nullptr;
        seen.push_back(file);
        if (void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
        tried += "\n  " + label;
        return nullptr;
    };
    // An explicit choice wins: a file, or a folder holding the library.
    if (const char* v = std::getenv("POOLSCOPE_CUPTI"); v && *v) {
        std::string p = v;
        if (void* h = attempt(p, p + " (POOLSCOPE_CUPTI)")) return h;
        if (void* h = attempt(p + "/" + soname, p + "/" + soname + " (POOLSCOPE_CUPTI)")) return h;
    }
    // Already in the process (PyTorch and others load their own CUPTI): one copy, not two.
    if (void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) return h;
    // LD_LIBRARY_PATH and the ld cache (distribution packages, /etc/ld.so.conf.d/cuda*.conf).
    if (void* h = attempt(soname, std::string(soname) + " in LD_LIBRARY_PATH and the ld.so cache"))
        return h;
    for (const std::string& root : toolkitRoots())
        for (const char* sub : {"/extras/CUPTI/lib64", "/lib64", "/lib", "/targets/x86_64-linux/lib",
                                "/targets/sbsa-linux/lib"}) {
            const std::string f = root + sub + "/" + soname;
            if (void* h = attempt(f, f)) return h;
        }
    // Where the build found it: right on the build machine, a last resort elsewhere.
    if (*POOLSCOPE_CUDA_BUILD_LIBDIR) {
        const std::string f = std::string(POOLSCOPE_CUDA_BUILD_LIBDIR) + "/" + soname;
        if (void* h = attempt(f, f)) return h;
    }
    return nullptr;
}

void load() {
    // The driver is normally loaded already: it is what loaded us (CUDA_INJECTION64_PATH).
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda) {
        const char* why = dlerror();
        g_error = "the NVIDIA driver library libcuda.so.1 cannot be loaded (" +
                  std::string(why ? why : "not found") + ")";
        return;
    }
    std::string missing;
    void* lib = cuda; // the library the next table's symbols come from
#define POOLSCOPE_RESOLVE(name, params, args) resolve(lib, POOLSCOPE_STR(name), p_##name, missing);
    POOLSCOPE_DRIVER_FUNCTIONS(POOLSCOPE_RESOLVE)
    if (!missing.empty()) {
        g_error = "the NVIDIA driver is too old for this collector (libcuda.so.1 lacks " + missing +
                  ")";
        return;
    }
    std::string absent; // optional: not an error
#define POOLSCOPE_RESOLVE_OPTIONAL(name, params, args)                                             \
    resolve(lib, POOLSCOPE_STR(name), p_##name, absent);
    POOLSCOPE_DRIVER_OPTIONAL(POOLSCOPE_RESOLVE_OPTIONAL)
#undef POOLSCOPE_RESOLVE_OPTIONAL

    std::string tried;
    void* cupti = openCupti(tried);
    if (!cupti) {
        g_error = std::string("CUPTI (") + POOLSCOPE_CUPTI_SONAME +
                  ", part of the CUDA toolkit) was not found. Looked for:" + tried +
                  "\nInstall the toolkit's CUPTI (e.g. the cuda-cupti-<version> package) or set "
                  "POOLSCOPE_CUPTI to the library file or its folder.";
        return;
    }
    char path[4096] = {};
    if (dlinfo(cupti, RTLD_DI_ORIGIN, path) == 0)
        g_cuptiPath = std::string(path) + "/" + POOLSCOPE_CUPTI_SONAME;
    lib = cupti;
    POOLSCOPE_CUPTI_FUNCTIONS(POOLSCOPE_RESOLVE)
#undef POOLSCOPE_RESOLVE
    if (!missing.empty()) {
        g_error = "the CUPTI library " + g_cuptiPath + " lacks " + missing;
        return;
    }
    g_cupti = cupti;
    g_loaded = true;
}

} // namespace

bool loadCudaLibraries() {
    std::call_once(g_once, load);
    return g_loaded;
}
const std::string& cudaLibrariesError() { return g_error; }
const std::string& cuptiPath() { return g_cuptiPath; }
void* cuptiHandle() { return g_loaded ? g_cupti : nullptr; }

} // namespace poolscope::collector

using namespace poolscope::collector;

// The forwarding definitions. A call before loading (or after a failed load) returns
// NOT_INITIALIZED instead of jumping through a null pointer.
#define POOLSCOPE_DEFINE(type, name, pointer, params, args, fail)                                  \
    extern "C" type name params {                                                                  \
        auto p = pointer.load(std::memory_order_acquire);                                          \
        if (!p) {                                                                                  \
            loadCudaLibraries();                                                                   \
            p = pointer.load(std::memory_order_acquire);                                           \
            if (!p) return fail;                                                                   \
        }                                                                                          \
        return p args;                                                                             \
    }
#define POOLSCOPE_DEFINE_DRIVER(name, params, args)                                                \
    POOLSCOPE_DEFINE(CUresult, name, p_##name, params, args, CUDA_ERROR_NOT_INITIALIZED)
#define POOLSCOPE_DEFINE_CUPTI(name, params, args)                                                 \
    POOLSCOPE_DEFINE(CUptiResult, name, p_##name, params, args, CUPTI_ERROR_NOT_INITIALIZED)
#define POOLSCOPE_DEFINE_OPTIONAL(name, params, args)                                              \
    POOLSCOPE_DEFINE(CUresult, name, p_##name, params, args,                                       \
                     g_loaded ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_NOT_INITIALIZED)
POOLSCOPE_DRIVER_FUNCTIONS(POOLSCOPE_DEFINE_DRIVER)
POOLSCOPE_DRIVER_OPTIONAL(POOLSCOPE_DEFINE_OPTIONAL)
POOLSCOPE_CUPTI_FUNCTIONS(POOLSCOPE_DEFINE_CUPTI)
