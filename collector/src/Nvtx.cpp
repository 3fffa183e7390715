// The collector's NVTX domain: range pushes and pops become the allocating thread's range
// path (Stacks.h), start/end ranges are listed, registered strings give ranges named by handle
// their text. Cold: NVTX callbacks come only where a program marks phases.
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include <generated_nvtx_meta.h>

#include "Clock.h"
#include "Runtime.h"

namespace poolscope::collector {

namespace {
const char* wideName(const wchar_t* w, std::string& buf) {
    buf.clear();
    for (; w && *w && buf.size() < 256; ++w) buf += *w < 128 ? static_cast<char>(*w) : '?';
    return buf.c_str();
}

// Strings a library registered with nvtxDomainRegisterString, by handle, so that ranges named
// by handle get their text. Bounded: a program registering without end keeps its first ones.
struct RegisteredStrings {
    static constexpr size_t kMax = 65536;
    std::mutex mutex;
    std::unordered_map<uint64_t, std::string> text;
};
RegisteredStrings& registeredStrings() {
    static RegisteredStrings r;
    return r;
}

void registerString(const void* handle, const char* text) {
    if (!handle || !text) return;
    RegisteredStrings& r = registeredStrings();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.text.size() < RegisteredStrings::kMax)
        r.text.try_emplace(reinterpret_cast<uint64_t>(handle), text, strnlen(text, 256));
}

const char* nvtxMessage(const nvtxEventAttributes_t* a, std::string& buf) {
    if (!a) return "";
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE:
        return wideName(a->message.unicode, buf);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
        RegisteredStrings& r = registeredStrings();
        std::lock_guard<std::mutex> lock(r.mutex);
        auto it = r.text.find(reinterpret_cast<uint64_t>(a->message.registered));
        if (it == r.text.end()) return "(registered string)"; // registered before we subscribed
        buf = it->second;
        return buf.c_str();
    }
    default:
        return "";
    }
}
} // namespace

// NVTX_INJECTION64_PATH must name CUPTI for these callbacks to come.
__attribute__((cold, noinline)) void onNvtx(ThreadState* t, CUpti_CallbackId cbid,
                                            const CUpti_NvtxData* d) {
    Runtime& rt = runtime();
    if (!d || !d->functionParams) return;
    if (!t->sites) {
        t->sites = rt.stacks.newThread(t->tid);
        if (!t->sites) return;
    }
    const int64_t ticks = static_cast<int64_t>(Clock::ticks());
    std::string buf;
    const void* p = d->functionParams;
    auto rangeId = [d]() -> uint64_t {
        return d->functionReturnValue ? *static_cast<const nvtxRangeId_t*>(d->functionReturnValue) : 0;
    };
    switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
        rt.stacks.push(*t->sites, static_cast<const nvtxRangePushA_params*>(p)->message, ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangePushW:
        rt.stacks.push(*t->sites, wideName(static_cast<const nvtxRangePushW_params*>(p)->message, buf), ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
        rt.stacks.push(*t->sites, nvtxMessage(static_cast<const nvtxRangePushEx_params*>(p)->eventAttrib, buf), ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
        rt.stacks.push(*t->sites, nvtxMessage(static_cast<const nvtxDomainRangePushEx_params*>(p)->core.eventAttrib, buf), ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
        rt.stacks.pop(*t->sites, ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
        rt.stacks.start(rangeId(), t->tid, static_cast<const nvtxRangeStartA_params*>(p)->message, ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartW:
        rt.stacks.start(rangeId(), t->tid, wideName(static_cast<const nvtxRangeStartW_params*>(p)->message, buf), ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
        rt.stacks.start(rangeId(), t->tid, nvtxMessage(static_cast<const nvtxRangeStartEx_params*>(p)->eventAttrib, buf), ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
        rt.stacks.start(rangeId(), t->tid, nvtxMessage(static_cast<const nvtxDomainRangeStartEx_params*>(p)->core.eventAttrib, buf), ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
        rt.stacks.end(static_cast<const nvtxRangeEnd_params*>(p)->id, ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
        rt.stacks.end(static_cast<const nvtxDomainRangeEnd_params*>(p)->core.id, ticks);
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringA:
        if (d->functionReturnValue)
            registerString(*static_cast<void* const*>(d->functionReturnValue),
                           static_cast<const nvtxDomainRegisterStringA_params*>(p)->string);
        break;
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringW:
        // CUPTI's parameter struct declares the W string as char*; NVTX passed a wchar_t*.
        if (d->functionReturnValue)
            registerString(*static_cast<void* const*>(d->functionReturnValue),
                           wideName(reinterpret_cast<const wchar_t*>(
                                        static_cast<const nvtxDomainRegisterStringW_params*>(p)->string),
                                    buf));
        break;
    default:
        break;
    }
}

} // namespace poolscope::collector
