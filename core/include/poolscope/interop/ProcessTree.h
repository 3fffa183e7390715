#pragma once
// Several traces of one process tree (issue #16): `record` writes one trace per process (the IPC
// parent and its child, DataLoader workers, torchrun ranks). This groups them (parent pid ->
// child pid) and links the pools and blocks one process exported and another imported, for
// `poolscope merge` and the multi-process Perfetto export.
//
// A trace records the export and import calls (PoolExport/PointerExport, PoolImport/
// PointerImport) but not the shareable handle's bytes, so a link is inferred, and says how:
//   PointerValue  the importing process mapped a block at the same device address the exporter
//                 exported from the pool (one host, unified addressing: the usual case on Linux),
//                 import after export;
//   HandleType    otherwise, a pool import and the latest earlier pool export of the same
//                 handle type in the importer's parent process (or, with no parent among the
//                 inputs, in any other input).
// Times compare across traces because traces of one host share CLOCK_MONOTONIC.

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace poolscope {
class TraceReader;
}

namespace poolscope::interop {

struct ProcessEvents {
    ProcessInfo process;
    std::vector<Event> ipc; // the trace's PoolExport, PoolImport, PointerExport, PointerImport
};

struct IpcLink {
    enum class Kind { Pool, Pointer } kind = Kind::Pool;
    enum class Basis { PointerValue, HandleType } basis = Basis::PointerValue;
    size_t exporter = 0, importer = 0; // indices of the inputs
    uint64_t exportPool = 0, importPool = 0;
    uint64_t ptr = 0;                  // Pointer links: the block's address
    int64_t exportTsNs = 0, importTsNs = 0;
    uint64_t exportSeq = 0, importSeq = 0;
};

struct ProcessNode {
    size_t input = 0;
    int depth = 0;       // 0 = no parent among the inputs
    size_t parent = SIZE_MAX;
};

// The inputs as a tree, parents before children, siblings by pid.
std::vector<ProcessNode> processTree(const std::vector<ProcessEvents>& inputs);
std::vector<IpcLink> findIpcLinks(const std::vector<ProcessEvents>& inputs);

std::string basisName(IpcLink::Basis b);

// The trace's PoolExport, PoolImport, PointerExport and PointerImport events, in seq order. Reads
// the events only when the trace's summary counts any (most traces have none).
Result<std::vector<Event>> readIpcEvents(const TraceReader& reader);

// "ipc (pid 526)": the program's file name (the command line's first word, without its folder)
// and the pid, how the window names a process's lane group.
std::string processTitle(const ProcessInfo& p);

// One time axis for several traces (the window's lanes per process, issue #16). Each input's
// event times plus its offset give the shared time:
//   Monotonic   every trace was recorded on the same host (ProcessInfo::host): event times are
//               that host's CLOCK_MONOTONIC in all of them, so they compare as they are
//               (offsets 0); the wall-clock starts, where recorded, are only reported;
//   WallClock   different (or unnamed) hosts, each trace with its wall-clock start: event time
//               - startTimeMonoNs + startTimeUnixNs, relative to the first input, as exact as
//               the hosts' clocks agreed;
//   FirstEvent  some trace records no wall-clock start: the first events are lined up.
struct AlignInput {
    ProcessInfo process;
    int64_t t0 = 0, t1 = 0; // the trace's first and last times (Timeline::t0 / t1)
};

struct TimeAlignment {
    enum class Basis { Monotonic, WallClock, FirstEvent } basis = Basis::Monotonic;
    std::vector<int64_t> offsetNs; // per input
    int64_t begin = 0, end = 0;    // the shared axis' extent: the earliest t0, the latest t1
    // Wall clock (Unix ns) at shared time `begin`, 0 when not known.
    int64_t beginUnixNs = 0;
    // Monotonic basis: how far the traces' wall-clock starts disagree with their monotonic
    // starts (the largest difference between two inputs; -1 when not all record one).
    int64_t wallClockSpreadNs = -1;
    std::string description; // one sentence for the window: how, and how exact
};

TimeAlignment alignProcesses(const std::vector<AlignInput>& inputs);

} // namespace poolscope::interop
