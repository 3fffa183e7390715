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

#include <cstdint>
#include <string>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"

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

} // namespace poolscope::interop
