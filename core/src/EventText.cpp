#include "poolscope/EventText.h"

#include <cstdio>

#include "poolscope/EventFields.h"
#include "poolscope/Units.h"

namespace poolscope {

namespace {

bool isBoolAttr(uint16_t a) {
    return a == uint16_t(PoolAttr::ReuseFollowEventDependencies) ||
           a == uint16_t(PoolAttr::ReuseAllowOpportunistic) ||
           a == uint16_t(PoolAttr::ReuseAllowInternalDependencies);
}

std::string attrValue(uint16_t a, uint64_t v) {
    if (isBoolAttr(a)) return v ? "on" : "off";
    return formatBytes(v);
}

// "name: old → new", the old value only when it was read.
std::string attrChange(uint16_t a, const std::optional<uint64_t>& old, uint64_t value) {
    std::string s = std::string(poolAttrName(a)) + ": ";
    if (old) s += attrValue(a, *old) + " → ";
    return s + attrValue(a, value);
}

std::string hex(uint64_t h) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(h));
    return buf;
}

std::string hostAllocFlags(uint32_t f) {
    std::string s;
    auto add = [&](uint32_t bit, const char* name) {
        if (!(f & bit)) return;
        if (!s.empty()) s += '|';
        s += name;
    };
    add(kHostAllocPortable, "portable");
    add(kHostAllocMapped, "mapped");
    add(kHostAllocWriteCombined, "write-combined");
    if (f & ~uint32_t{7}) s += (s.empty() ? "" : "|") + hex(f & ~uint32_t{7});
    return s.empty() ? "default" : s;
}

std::string hostRegisterFlags(uint32_t f) {
    std::string s;
    auto add = [&](uint32_t bit, const char* name) {
        if (!(f & bit)) return;
        if (!s.empty()) s += '|';
        s += name;
    };
    add(kHostRegisterPortable, "portable");
    add(kHostRegisterMapped, "mapped");
    add(kHostRegisterIoMemory, "io-memory");
    add(kHostRegisterReadOnly, "read-only");
    if (f & ~uint32_t{15}) s += (s.empty() ? "" : "|") + hex(f & ~uint32_t{15});
    return s.empty() ? "default" : s;
}

std::string releasedBytes(const ReleaseMemFields& r) {
    return r.bytes ? formatBytes(*r.bytes) : std::string("size unknown");
}

} // namespace

std::string describePinnedFlags(EventKind kind, uint32_t flags) {
    return kind == EventKind::HostRegister ? hostRegisterFlags(flags) : hostAllocFlags(flags);
}

std::string describeAccessFlags(uint32_t flags) {
    switch (flags) {
    case 0: return "no access";
    case 1: return "read-only";
    case 3: return "read-write";
    default: return "access flags " + std::to_string(flags);
    }
}

std::string deviceLabel(int device) {
    return device >= 0 ? "GPU " + std::to_string(device) : std::string("unknown device");
}

std::string describeMarkerValues(EventKind kind, uint16_t attr, uint64_t value) {
    Event e;
    e.kind = kind;
    if (kind == EventKind::PeerCopy) {
        e.attr = attr;
        e.size = value;
        e.variant = static_cast<uint8_t>(PeerCopyApi::Async);
        return describeEvent(e);
    }
    if (kind == EventKind::PoolSetAccess)
        return (value ? deviceLabel(static_cast<int>(value) - 1) : std::string("not a device")) +
               ": " + describeAccessFlags(attr);
    return {};
}

std::string describeEvent(const Event& e) {
    switch (e.kind) {
    case EventKind::Alloc:
        if (e.failed()) return "FAILED: " + formatCuResult(int(e.result));
        return std::string(allocApiName(AllocFields::of(e).api));
    case EventKind::PoolSetAttribute: {
        const AttributeFields a = AttributeFields::of(e);
        return attrChange(static_cast<uint16_t>(a.attr), a.old, a.value);
    }
    case EventKind::KnobChange: {
        // A trim's requested value is what to keep; its old value and value are reserved bytes.
        const KnobFields k = KnobFields::of(e);
        std::string s;
        if (!k.isAttribute() && k.action() == KnobAction::TrimTo)
            s = "trim to keep at least " + formatBytes(k.requested) + ": reserved ";
        else if (!k.isAttribute() && k.action() == KnobAction::ResetHighWatermarks)
            s = "reset high watermarks: reserved high ";
        else
            return attrChange(k.target, k.old, k.value) + " (set by PoolScope)";
        if (k.old) s += formatBytes(*k.old) + " → ";
        return s + formatBytes(k.value) + " (set by PoolScope)";
    }
    case EventKind::PoolTrimTo:
        return "keep at least " + formatBytes(TrimFields::of(e).minBytesToKeep);
    case EventKind::ImplicitRelease:
        return "pool size after release " + formatBytes(ReleaseFields::of(e).reservedAfter);
    case EventKind::PoolCreate: {
        const PoolCreateFields p = PoolCreateFields::of(e);
        return std::string(poolKindName(p.kind)) + " pool, max size " +
               (p.maxSize ? formatBytes(p.maxSize) : std::string("unlimited"));
    }
    case EventKind::EventRecord:
    case EventKind::StreamWaitEvent:
    case EventKind::EventSynchronize:
        return "event " + hex(CuEventFields::of(e).event);
    case EventKind::DeviceSetMempool:
        return "device " + std::to_string(e.device) + " current pool";
    case EventKind::Sample: {
        const SampleFields s = SampleFields::of(e);
        return "reserved high " + formatBytes(s.reservedHigh) + ", used high " +
               formatBytes(s.usedHigh);
    }
    case EventKind::DeviceAlloc: {
        const DeviceAllocFields a = DeviceAllocFields::of(e);
        std::string s = std::string(deviceAllocApiName(a.api));
        if (e.failed()) return "FAILED: " + formatCuResult(int(e.result)) + " (" + s + ")";
        if (a.api == DeviceAllocApi::Pitch) s += ", pitch " + std::to_string(a.detail) + " B";
        if (a.api == DeviceAllocApi::Managed)
            s += a.detail == 2 ? ", attach host" : a.detail == 4 ? ", attach single" : ", attach global";
        return s + ", outside the pools";
    }
    case EventKind::DeviceFree: {
        const ReleaseMemFields r = ReleaseMemFields::of(e);
        if (e.failed()) return "FAILED: " + formatCuResult(int(e.result));
        std::string s = releasedBytes(r);
        if (e.pool) return s + ", a pool block freed with cudaFree";
        s += ", synchronizes the device";
        if (r.callNs) s += " (call took " + formatDuration(static_cast<int64_t>(r.callNs)) + ")";
        return s;
    }
    case EventKind::HostAlloc:
    case EventKind::HostRegister: {
        const PinnedFields p = PinnedFields::of(e);
        std::string s = e.kind == EventKind::HostAlloc
                            ? std::string(hostAllocApiName(p.api)) + ", flags "
                            : std::string("flags ");
        s += describePinnedFlags(e.kind, p.flags);
        if (e.failed()) return "FAILED: " + formatCuResult(int(e.result)) + " (" + s + ")";
        return s;
    }
    case EventKind::HostFree:
    case EventKind::HostUnregister:
        if (e.failed()) return "FAILED: " + formatCuResult(int(e.result));
        return releasedBytes(ReleaseMemFields::of(e));
    case EventKind::PoolSetAccess: {
        const SetAccessFields a = SetAccessFields::of(e);
        // Location type 1 is a device (CU_MEM_LOCATION_TYPE_DEVICE); 0: not recorded (older
        // traces, whose device field was always a device's).
        std::string who = a.locationType <= 1 ? deviceLabel(e.device)
                                              : "location type " + std::to_string(a.locationType);
        std::string s = who + ": " + describeAccessFlags(a.accessFlags);
        if (a.descriptors > 1) s += " (one of " + std::to_string(a.descriptors) + " in the call)";
        if (e.failed()) return "FAILED: " + formatCuResult(int(e.result)) + " (" + s + ")";
        return s;
    }
    case EventKind::PeerCopy: {
        const PeerCopyFields c = PeerCopyFields::of(e);
        std::string s = formatBytes(c.bytes) + " " + deviceLabel(c.srcDevice) + " → " +
                        deviceLabel(c.dstDevice);
        const bool runtime = c.api == PeerCopyApi::RuntimeSync || c.api == PeerCopyApi::RuntimeAsync;
        if (c.api == PeerCopyApi::Sync || c.api == PeerCopyApi::RuntimeSync) s += " (synchronous)";
        if (runtime) s += " (seen at the runtime call)";
        if (e.failed())
            return "FAILED: " +
                   (runtime ? "cudaError " + std::to_string(e.result) : formatCuResult(int(e.result))) +
                   " (" + s + ")";
        return s;
    }
    default:
        return {};
    }
}

} // namespace poolscope
