#pragma once
// `poolscope import nsys REPORT.sqlite -o run.poolscope` (issue #16): an Nsight Systems SQLite
// export (`nsys export --type sqlite`, of a report recorded with `--cuda-memory-usage=true`)
// becomes a PoolScope trace, so an existing nsys report opens in the window and `report` /
// `diff` / `export` read it.
//
// What is read, from NVIDIA's documented schema (Nsight Systems Post-Collection Analysis Guide,
// "SQLite Schema Reference"; docs/INTEROP.md cites it and lists every column used):
//   CUDA_GPU_MEMORY_USAGE_EVENTS  allocations and frees (device memory from a pool: the rows with
//                                 a localMemoryPoolAddress or importedMemoryPoolAddress), with the
//                                 pool's size and utilized size at each (-> reserved / used)
//   CUDA_GPU_MEMORY_POOL_EVENTS   pool creation, destruction, trims (optional table)
//   ENUM_CUDA_DEV_MEM_EVENT_OPER, ENUM_CUDA_MEM_KIND, ENUM_CUDA_MEMPOOL_OPER,
//   ENUM_CUDA_MEMPOOL_TYPE        the ids of the enumerations above, read by symbol name from the
//                                 export itself (their numbers are not fixed by the docs)
//   TARGET_INFO_GPU, PROCESSES    device names and memory, the process' name (optional)
// What an nsys export lacks is written into the trace's meta (imported_lacks): event records
// and stream waits, synchronizes (so implicit releases show only as drops of reserved), call
// sites, thread ids, reuse policies, and pool kinds for pools not created during the capture.

#include <cstdint>
#include <string>

#include "poolscope/Result.h"

namespace poolscope::interop {

struct NsysImportOptions {
    int64_t pid = 0; // the process to import when the report has several (0: the only one)
};

struct NsysImportStats {
    uint64_t allocations = 0, frees = 0, poolEvents = 0;
    uint64_t skippedNonPool = 0; // device or host memory not from a stream-ordered pool
    uint64_t pools = 0, streams = 0;
    int64_t pid = 0;
};

// Errors (each with a message that says what to do): NotFound, NotReadable, NotSqlite; NotATrace
// for an SQLite file that is not an nsys export (or is already a PoolScope trace);
// MissingTables when the export has no memory usage table or enumeration; InvalidArgument for
// several processes without options.pid; Corrupt for values that cannot be true (negative
// sizes or times, utilized above the pool size, an unknown operation id); WriteFailed.
Result<NsysImportStats> importNsysSqlite(const std::string& sqlitePath, const std::string& outPath,
                                         const NsysImportOptions& options = {});

} // namespace poolscope::interop
