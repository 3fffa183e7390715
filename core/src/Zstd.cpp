#include "poolscope/Zstd.h"

#include <atomic>
#include <dlfcn.h>
#include <mutex>

namespace poolscope::zstd {

namespace {

// The subset of zstd.h used, declared here so that building needs no zstd header: these
// signatures are part of zstd's stable API since 1.3.0 (ZSTD_getFrameContentSize).
constexpr unsigned long long kContentSizeUnknown = 0ULL - 1;
constexpr unsigned long long kContentSizeError = 0ULL - 2;

struct Api {
    void* (*createCCtx)() = nullptr;
    size_t (*freeCCtx)(void*) = nullptr;
    size_t (*compressCCtx)(void*, void*, size_t, const void*, size_t, int) = nullptr;
    size_t (*compressBound)(size_t) = nullptr;
    void* (*createDCtx)() = nullptr;
    size_t (*freeDCtx)(void*) = nullptr;
    size_t (*decompressDCtx)(void*, void*, size_t, const void*, size_t) = nullptr;
    unsigned long long (*getFrameContentSize)(const void*, size_t) = nullptr;
    unsigned (*isError)(size_t) = nullptr;
    const char* (*getErrorName)(size_t) = nullptr;
    std::string reason;
    bool ok = false;
};

const Api& api() {
    static const Api a = [] {
        Api r;
        void* h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            r.reason = "libzstd.so.1 was not found (Debian package libzstd1)";
            return r;
        }
        bool all = true;
        auto get = [&](auto& fn, const char* name) {
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
            all &= fn != nullptr;
        };
        get(r.createCCtx, "ZSTD_createCCtx");
        get(r.freeCCtx, "ZSTD_freeCCtx");
        get(r.compressCCtx, "ZSTD_compressCCtx");
        get(r.compressBound, "ZSTD_compressBound");
        get(r.createDCtx, "ZSTD_createDCtx");
        get(r.freeDCtx, "ZSTD_freeDCtx");
        get(r.decompressDCtx, "ZSTD_decompressDCtx");
        get(r.getFrameContentSize, "ZSTD_getFrameContentSize");
        get(r.isError, "ZSTD_isError");
        get(r.getErrorName, "ZSTD_getErrorName");
        r.ok = all;
        if (!all) r.reason = "libzstd.so.1 is too old (zstd 1.3 or newer is needed)";
        return r; // the handle stays open for the life of the process
    }();
    return a;
}

std::atomic<bool> gSimulateMissing{false};

// One decompression context per thread (chunks are decoded on the loader's threads).
struct DCtx {
    void* p = nullptr;
    ~DCtx() {
        if (p) api().freeDCtx(p);
    }
};

} // namespace

bool available() { return !gSimulateMissing.load(std::memory_order_relaxed) && api().ok; }

const std::string& unavailableReason() {
    static const std::string simulated = "libzstd is missing (simulated by a test)";
    static const std::string none;
    if (gSimulateMissing.load(std::memory_order_relaxed)) return simulated;
    return api().ok ? none : api().reason;
}

Compressor::Compressor(int level) : level_(level) {
    if (available()) cctx_ = api().createCCtx();
}

Compressor::~Compressor() {
    if (cctx_) api().freeCCtx(cctx_);
}

bool Compressor::compress(std::string_view src, std::string& out) {
    if (!cctx_ || !available()) return false;
    const Api& a = api();
    out.resize(a.compressBound(src.size()));
    const size_t n = a.compressCCtx(cctx_, out.data(), out.size(), src.data(), src.size(), level_);
    if (a.isError(n)) return false;
    out.resize(n);
    return true;
}

namespace {
// Checks the frame's declared size against maxBytes (bounded allocation whatever it claims).
bool checkedFrame(std::string_view src, size_t maxBytes, unsigned long long& declared,
                  std::string& why) {
    if (!available()) {
        why = unavailableReason();
        return false;
    }
    declared = api().getFrameContentSize(src.data(), src.size());
    if (declared == kContentSizeError) {
        why = "not a zstd frame";
        return false;
    }
    if (declared == kContentSizeUnknown) {
        why = "the zstd frame does not state its size";
        return false;
    }
    if (declared > maxBytes) {
        why = "the zstd frame claims " + std::to_string(declared) + " bytes, more than its " +
              "events can take (" + std::to_string(maxBytes) + ")";
        return false;
    }
    return true;
}

// Decompresses the frame into dst, which has room for exactly what it declares: a frame that
// produces more (or further frames appended) fails with "destination buffer too small" instead
// of growing anything.
bool frameInto(std::string_view src, char* dst, unsigned long long declared, std::string& why) {
    const Api& a = api();
    thread_local DCtx dctx;
    if (!dctx.p) dctx.p = a.createDCtx();
    if (!dctx.p) {
        why = "out of memory";
        return false;
    }
    const size_t n = a.decompressDCtx(dctx.p, dst, static_cast<size_t>(declared), src.data(), src.size());
    if (a.isError(n)) {
        why = std::string("zstd: ") + a.getErrorName(n);
        return false;
    }
    if (n != declared) {
        why = "the zstd frame holds " + std::to_string(n) + " bytes, not the " +
              std::to_string(declared) + " it declares";
        return false;
    }
    return true;
}
} // namespace

bool decompress(std::string_view src, size_t maxBytes, std::string& out, std::string& why) {
    unsigned long long declared = 0;
    if (!checkedFrame(src, maxBytes, declared, why)) return false;
    out.resize(static_cast<size_t>(declared));
    return frameInto(src, out.data(), declared, why);
}

bool decompressInto(std::string_view src, size_t maxBytes, std::string& buf, size_t slack,
                    size_t& n, std::string& why) {
    unsigned long long declared = 0;
    if (!checkedFrame(src, maxBytes, declared, why)) return false;
    if (buf.size() < declared + slack) buf.resize(static_cast<size_t>(declared) + slack);
    n = static_cast<size_t>(declared);
    return frameInto(src, buf.data(), declared, why);
}

namespace detail {
void simulateMissing(bool missing) { gSimulateMissing.store(missing); }
} // namespace detail

} // namespace poolscope::zstd
