#include "poolscope/Event.h"

#include <array>

namespace poolscope {

namespace {
constexpr std::array<std::string_view, kEventKindCount> kKindNames = {
    "invalid",           "alloc",              "free",
    "pool_create",       "pool_destroy",       "pool_set_attribute",
    "device_set_mempool", "pool_trim_to",      "implicit_release",
    "event_record",      "stream_wait_event",  "stream_synchronize",
    "event_synchronize", "context_synchronize", "pool_export",
    "pool_import",       "pointer_export",     "pointer_import",
    "pool_set_access",   "knob_change",        "stream_create",
    "stream_destroy",    "sample",             "device_alloc",
    "device_free",       "host_alloc",         "host_free",
    "host_register",     "host_unregister",    "peer_copy",
};
} // namespace

std::string_view eventKindName(EventKind k) {
    auto i = static_cast<size_t>(k);
    return i < kKindNames.size() ? kKindNames[i] : std::string_view("unknown");
}

bool eventKindFromName(std::string_view name, EventKind& out) {
    for (size_t i = 1; i < kKindNames.size(); ++i) {
        if (kKindNames[i] == name) {
            out = static_cast<EventKind>(i);
            return true;
        }
    }
    return false;
}

std::string_view poolAttrName(uint16_t attr) {
    switch (attr) {
    case 1: return "reuse_follow_event_dependencies";
    case 2: return "reuse_allow_opportunistic";
    case 3: return "reuse_allow_internal_dependencies";
    case 4: return "release_threshold";
    case 5: return "reserved_mem_current";
    case 6: return "reserved_mem_high";
    case 7: return "used_mem_current";
    case 8: return "used_mem_high";
    case 1001: return "trim_to";
    case 1002: return "reset_high_watermarks";
    }
    return "unknown_attribute";
}

std::string_view allocApiName(AllocApi a) {
    switch (a) {
    case AllocApi::Async: return "async";
    case AllocApi::FromPool: return "from_pool";
    case AllocApi::AsyncPtsz: return "async_ptsz";
    case AllocApi::FromPoolPtsz: return "from_pool_ptsz";
    }
    return "unknown";
}

std::string_view poolKindName(PoolKind k) {
    switch (k) {
    case PoolKind::Unknown: return "unknown";
    case PoolKind::Default: return "default";
    case PoolKind::Explicit: return "explicit";
    case PoolKind::Imported: return "imported";
    }
    return "unknown";
}

std::string_view deviceAllocApiName(DeviceAllocApi a) {
    switch (a) {
    case DeviceAllocApi::Malloc: return "malloc";
    case DeviceAllocApi::Pitch: return "malloc_pitch";
    case DeviceAllocApi::Managed: return "malloc_managed";
    }
    return "unknown";
}

std::string_view hostAllocApiName(HostAllocApi a) {
    switch (a) {
    case HostAllocApi::HostAlloc: return "host_alloc";
    case HostAllocApi::AllocHost: return "alloc_host";
    }
    return "unknown";
}

} // namespace poolscope
