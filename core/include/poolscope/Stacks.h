#pragma once
// Call sites (issue #13): who holds the memory. An Alloc's Event::site names one row of the
// trace's sites table: the interned native stack (frames as module + offset, so a trace
// recorded on one machine is symbolized on another that has the same binaries, found by
// build-id), the Python stack (file, function, line, read through CPython's C API while the
// allocating thread held the GIL) and the NVTX range path open on the thread (outermost first).
// Each distinct stack is stored once. Tables and columns: core/src/schema.sql (format 4).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace poolscope {

struct ModuleInfo {
    uint32_t id = 0;        // 1.. (0 = an address in no known module)
    std::string path;       // as the dynamic loader named it ("" = the main program, resolved)
    std::string buildId;    // lower-case hex of NT_GNU_BUILD_ID, "" when the file has none
    uint64_t loadAddress = 0; // dlpi_addr: what an address minus it gives the file's address
    uint64_t size = 0;        // span of its loaded segments
};

struct NativeFrame {
    uint32_t module = 0;  // ModuleInfo::id, 0 = none (offset is then the absolute address)
    uint64_t offset = 0;  // return address minus the module's load address
};

struct PythonFrame {
    std::string file;
    std::string function;
    int line = 0;
};

struct SiteInfo {
    uint32_t id = 0;
    uint32_t nativeStack = 0; // 0 = none
    uint32_t pythonStack = 0;
    uint32_t nvtxPath = 0;
};

enum class NvtxRangeKind : uint8_t { PushPop = 1, StartEnd = 2 };

struct NvtxRange {
    uint64_t id = 0;
    uint32_t tid = 0;        // the thread that opened it
    std::string name;
    int64_t startNs = 0;     // CLOCK_MONOTONIC, like events
    int64_t endNs = 0;       // 0 = still open when the recording ended
    uint16_t depth = 0;      // push/pop nesting on its thread (0 = outermost)
    NvtxRangeKind kind = NvtxRangeKind::PushPop;
};

// Function, file and line of one native frame (file "" and line 0 without debug info).
struct Symbol {
    uint32_t module = 0;
    uint64_t offset = 0;
    std::string function;
    std::string file;
    int line = 0;
};

// What the collector's writer adds to a trace in one pass (only what is new), and what a reader
// gets back (everything).
struct StackTables {
    std::vector<ModuleInfo> modules;
    std::map<uint32_t, std::vector<NativeFrame>> nativeStacks; // frame 0 = innermost
    std::map<uint32_t, std::vector<PythonFrame>> pythonStacks; // frame 0 = innermost
    std::map<uint32_t, std::vector<std::string>> nvtxPaths;    // [0] = outermost range
    std::map<uint32_t, SiteInfo> sites;
    std::vector<NvtxRange> ranges;
    std::map<std::pair<uint32_t, uint64_t>, Symbol> symbols;   // by (module, offset)

    bool empty() const {
        return modules.empty() && nativeStacks.empty() && pythonStacks.empty() &&
               nvtxPaths.empty() && sites.empty() && ranges.empty() && symbols.empty();
    }
    const ModuleInfo* module(uint32_t id) const {
        for (const ModuleInfo& m : modules)
            if (m.id == id) return &m;
        return nullptr;
    }
    const Symbol* symbol(const NativeFrame& f) const {
        auto it = symbols.find({f.module, f.offset});
        return it == symbols.end() ? nullptr : &it->second;
    }
};

// A frame as a person reads it: "forward (model.py:42)", "alloc_weights (callsites.cu:31)",
// "libfoo.so+0x1a2b" without symbols. Directories are cut to the file name, except the last
// package directory of a Python file ("models/gpt2/modeling_gpt2.py" keeps "gpt2/").
std::string frameText(const StackTables& t, const NativeFrame& f);
std::string frameText(const PythonFrame& f);
// Module name without its directories ("libcuda.so.1").
std::string moduleName(const std::string& path);

} // namespace poolscope
