#pragma once
// Plain entity records of a trace: process, devices, pools, streams, threads. Pools, streams and
// devices are first-class: several GPUs and many pools per process are normal.

#include <cstdint>
#include <string>

#include "poolscope/Event.h"

namespace poolscope {

struct ProcessInfo {
    int64_t pid = 0;
    std::string commandLine;
    int64_t startTimeUnixNs = 0; // wall clock at collector start
    int64_t startTimeMonoNs = 0; // CLOCK_MONOTONIC at the same instant, to map event times
    std::string host;
    int driverVersion = 0;  // cuDriverGetVersion, e.g. 13000
    int runtimeVersion = 0; // 0 when unknown (the collector sees the driver API only)
    std::string collectorVersion;
    int64_t parentPid = 0;  // set for a forked child's own trace
};

struct DeviceInfo {
    int ordinal = 0;
    std::string name;
    uint64_t totalMemory = 0;
    std::string uuid;
};

struct PoolInfo {
    uint64_t handle = 0;
    int device = -1;
    PoolKind kind = PoolKind::Unknown;
    uint32_t handleTypes = 0;  // CUmemAllocationHandleType bits from the creation props
    int locationType = 0;      // CUmemLocationType
    int locationId = 0;
    uint64_t maxSize = 0;      // 0 = no limit
    int64_t createdTsNs = 0;   // 0 when it existed before the collector saw it
};

// A settable pool attribute as the driver reported it when the collector first saw the pool
// (the trace's pool_initial_attributes table). attr is ReleaseThreshold or a reuse policy.
struct PoolAttributeValue {
    uint64_t pool = 0;
    PoolAttr attr = PoolAttr::ReleaseThreshold;
    uint64_t value = 0;
};

struct StreamInfo {
    uint64_t handle = 0;
    int device = -1;
    int priority = 0;
    uint32_t flags = 0;
    bool priorityKnown = false;
};

struct ThreadInfo {
    uint32_t tid = 0;
    std::string name;
};

// Events the collector lost on one thread because its ring was full (the writer fell behind):
// from the first lost event's time to the last's. The trace's dropped_events meta is the total.
struct DropGap {
    int64_t tsNs = 0;
    int64_t durationNs = 0;
    uint32_t tid = 0;
    uint64_t count = 0;
};

} // namespace poolscope
