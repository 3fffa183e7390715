#pragma once
// Who holds the memory (issue #13): allocations grouped by call site at one instant, for
// `poolscope report --top-sites N` (at each pool's peak reserved) and the window.

#include <cstdint>
#include <string>
#include <vector>

#include "poolscope/Report.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"

namespace poolscope::analysis {

struct SiteBytes {
    uint32_t site = 0;       // 0 = allocations recorded without a site
    uint64_t bytes = 0;      // live at the instant
    uint64_t count = 0;
};

struct PoolSites {
    uint64_t pool = 0;
    int64_t atTsNs = 0;      // the instant: the pool's peak reserved (or peak live bytes)
    bool atPeakReserved = true;
    uint64_t reserved = 0;   // at that instant (0 when the trace has no watermarks)
    uint64_t liveBytes = 0;
    uint64_t liveCount = 0;
    std::vector<SiteBytes> top; // largest first, at most n (the rest is liveBytes - their sum)
};

// For each pool of the report: the allocations live at its peak reserved (the last allocation
// made at that instant included; a block freed at it is not), grouped by site.
std::vector<PoolSites> topSitesAtPeaks(const Timeline& tl, const Report& report, size_t n);

// The CUDA runtime's own frames between the program's call and the driver (cudaMallocAsync,
// cudart::..., static cudart's local symbols, anything in libcudart) and PyTorch's allocator,
// whose frames every PyTorch allocation shares: left out where a site is read.
bool isRuntimeFrame(const StackTables& t, const NativeFrame& f);

// A site as a person reads it, innermost first: Python frames (when recorded), then native
// frames; CUDA runtime frames at the top (cudaMallocAsync and what it calls) are left out, at
// most maxFrames frames, joined by " < ". The NVTX path follows in brackets. "(no stack)" for 0.
std::string siteText(const StackTables& t, uint32_t site, size_t maxFrames = 3);
// The frames of a site, innermost first, for JSON and `dump --stacks` (no frame left out).
std::vector<std::string> siteFrames(const StackTables& t, uint32_t site);
// The NVTX path, outermost first ("" when none).
std::string sitePath(const StackTables& t, uint32_t site);

} // namespace poolscope::analysis
