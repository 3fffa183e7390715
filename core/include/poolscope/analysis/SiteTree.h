#pragma once
// Who holds the memory, as the window shows it (issue #13): one allocation's call stack in call
// order with Python and native frames interleaved, the NVTX ranges open on its thread, and all
// allocations grouped by call stack into a tree (top-down from the outermost caller, or
// bottom-up from the allocating function) with peak live bytes, bytes allocated, count and
// what is still live at the end; and the bytes each node holds at one instant (the icicle).
// Qt-free so that it is tested here; ui/CallSiteTreeModel and ui/CallSitesView only show it.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "poolscope/Series.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"

namespace poolscope::analysis {

struct StackFrame {
    enum class Kind : uint8_t { Python, Native, None };
    Kind kind = Kind::Native;
    std::string text;     // as frameText() reads it: "forward (gpt2/modeling_gpt2.py:42)"
    std::string function; // "" when not known (a native frame without symbols)
    std::string location; // "gpt2/modeling_gpt2.py:42", "callsites.cu:36", "libfoo.so+0x1a2b"
};

struct CallStack {
    // Call order: the outermost caller (main, the Python script) first, the call that allocated
    // last. Python frames take the place of the interpreter's own native frames
    // (_PyEval_EvalFrameDefault...), so a native extension called from Python sits below the
    // Python function that called it.
    std::vector<StackFrame> frames;
    size_t runtimeFrames = 0;     // CUDA runtime / allocator frames left out at the allocating end
    size_t interpreterFrames = 0; // CPython's native frames the Python frames stand for
    bool empty() const { return frames.empty(); }
};

// The call stack of a site; empty for site 0 or a site the tables do not have.
CallStack callStack(const StackTables& t, uint32_t site);

// Whether a native frame is CPython's own (libpython, or the interpreter's evaluation and call
// functions linked into the python executable).
bool isInterpreterFrame(const StackTables& t, const NativeFrame& f);

// The NVTX ranges open on thread tid at time tsNs (started at or before it, not yet ended),
// outermost first.
std::vector<const NvtxRange*> openRanges(const StackTables& t, uint32_t tid, int64_t tsNs);

enum class SiteOrder : uint8_t {
    TopDown, // root -> outermost caller -> ... -> the allocating call
    BottomUp // root -> the allocating call -> its caller -> ...
};

struct SiteNode {
    uint32_t parent = 0;    // the root is its own parent
    uint32_t depth = 0;     // root 0
    StackFrame::Kind kind = StackFrame::Kind::None;
    std::string frame;      // "" for the root; "(no stack)" for allocations without a site
    std::string location;   // StackFrame::location
    std::vector<uint32_t> children; // by peak live bytes, largest first
    // Over the allocations whose stack passes through this node (each counted once):
    uint64_t peakLive = 0;     // the most bytes they held at one instant
    int64_t peakLiveTsNs = 0;  // the first instant they held peakLive
    uint64_t bytesAllocated = 0;
    uint64_t count = 0;
    uint64_t liveAtEndBytes = 0;
    uint64_t liveAtEndCount = 0;
    std::vector<uint32_t> sites; // the sites whose stacks pass through here, ascending
};

struct SiteTree {
    SiteOrder order = SiteOrder::TopDown;
    std::vector<SiteNode> nodes; // [0] = the root: every allocation
    // Where each site's path ends (a site that shares its whole path with another ends at the
    // same node). Allocations without a site end at the "(no stack)" node.
    std::unordered_map<uint32_t, uint32_t> leafOfSite;
    bool empty() const { return nodes.size() <= 1; }
};

// Groups the timeline's allocations (those with a pointer) by call stack.
SiteTree buildSiteTree(const Timeline& tl, const StackTables& t, SiteOrder order);

// Bytes live at tsNs (allocated at or before it, not freed at or before it: as
// topSitesAtPeaks counts them) in each node of the tree (indices as tree.nodes), only of pool
// `pool` when it is not 0.
std::vector<uint64_t> liveBytesAt(const SiteTree& tree, const Timeline& tl, int64_t tsNs,
                                  uint64_t pool = 0);

// The allocations (indices into tl.allocations, ascending) whose site is one of `sites`
// (ascending, as SiteNode::sites holds them).
std::vector<uint32_t> allocationsOfSites(const Timeline& tl, const std::vector<uint32_t>& sites);

// Bytes live over time in the given allocations (indices into tl.allocations): a step series
// with one point per alloc and free time, for the plot's highlight of a call site.
Series liveBytesSeries(const Timeline& tl, const std::vector<uint32_t>& allocations);

} // namespace poolscope::analysis
