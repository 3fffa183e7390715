#pragma once
// Exports for the tools people already have (issue #16): the Chrome / Perfetto JSON trace-event
// format (`poolscope export --format perfetto`) and one CSV row per event (`--format csv`).
//
// Both give what a finished Timeline holds (the one truth the window and the report draw
// from), so names ("pool #1 (default)", "stream #2") and lifetimes match the window's; `export`
// streams them from the trace (writePerfettoJsonStreaming, writeEventsCsv), `merge` and the
// tests build the Timeline (writePerfettoJson). The JSON is written as it
// is produced, never held as a document: its size is that of the file, not of memory. What the
// JSON contains, and which facts of the format it relies on, is in docs/INTEROP.md.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "poolscope/ChunksInOrder.h"
#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"
#include "poolscope/view/EntityNames.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope {
class TraceReader;
}

namespace poolscope::interop {

// One trace to export: its timeline, its call sites (empty when none were recorded) and its
// process. Several inputs become several processes of one JSON trace (`poolscope merge`).
struct ExportInput {
    std::shared_ptr<const Timeline> timeline;
    StackTables stacks;
    ProcessInfo process;
    std::vector<ThreadInfo> threads;
    std::string label; // the trace's file name, for the process name
    // The trace's PoolExport, PoolImport, PointerExport and PointerImport events: drawn on an
    // "IPC" track per pool, and linked across inputs (interop/ProcessTree.h) by flows.
    std::vector<Event> ipc;
    // The names to give pools and streams instead of the timeline's own (a range's timeline
    // numbers only what it holds; the whole trace's names are those of the window and report).
    std::optional<view::EntityNames> names;
    // Only what happens in [clipFromNs, clipUntilNs] (`export --from/--to` of a range's
    // timeline): slices cut to it, each counter from its value at its start, calls, instants,
    // IPC and NVTX ranges inside it (ranges cut to it).
    int64_t clipFromNs = INT64_MIN, clipUntilNs = INT64_MAX;
    // A range's timeline: the blocks live just before its first chunk (traceNamesAndStart's
    // LiveBlocksBefore). The timeline's allocations made before the range (beforeLoaded) take
    // their alloc's seq, thread, API and call site from here by pointer; the others, which the
    // range never sees freed, are drawn over the whole clip on their streams.
    std::vector<Allocation> liveAtStart;
};

// What a Perfetto export wrote, counted as it was written (tests compare these with counts
// derived from the trace by other means).
struct PerfettoStats {
    uint64_t events = 0;           // entries of traceEvents
    uint64_t processes = 0;
    uint64_t tracks = 0;           // thread_name metadata entries (one per track)
    uint64_t allocationSlices = 0; // X slices of cat "allocation"
    uint64_t allocationRows = 0;   // tracks holding them
    uint64_t callSlices = 0;       // X slices of cat "call" (event records and waits)
    uint64_t flows = 0;            // flow_in ends written (record -> wait)
    uint64_t ipcSlices = 0;        // X slices of cat "ipc" (exports and imports)
    uint64_t ipcLinks = 0;         // flow_in ends written across processes (export -> import)
    uint64_t counterPoints = 0;    // C events
    uint64_t instants = 0;         // i events
    uint64_t nvtxRanges = 0;       // B/E pairs and b/e pairs
    uint64_t clampedTimestamps = 0; // marks moved forward to keep a track's time order
    uint64_t clampedRanges = 0;     // NVTX ends cut to nest in their parent range
    // Streamed export only: events more than its horizon out of time order, after which its
    // output may differ from the Timeline-based one (written to the JSON's meta when not 0).
    uint64_t outOfOrderEvents = 0;
};

// Writes the JSON object {"traceEvents": [...], "displayTimeUnit": "ns", "poolscope": {...}}.
// Timestamps are microseconds (3 decimals: nanoseconds) since the earliest event of all inputs.
// Fails with WriteFailed when the stream fails.
Status writePerfettoJson(const std::vector<ExportInput>& inputs, std::FILE* out,
                         PerfettoStats* stats = nullptr);

// One trace for the streaming export: its reader, read twice and never held. names: left
// empty, the export's first pass finds them (the streaming report pass's, analysis/TraceReport.h,
// which the Timeline's would equal); given, they are used instead.
struct StreamInput {
    const TraceReader* reader = nullptr;
    std::optional<view::EntityNames> names;
    StackTables stacks;
    ProcessInfo process;
    std::vector<ThreadInfo> threads;
    std::string label;
    std::vector<Event> ipc; // as ExportInput::ipc
};

// writePerfettoJson's document, read from the traces in two passes instead of from Timelines:
// a first one finds the time base, which tracks exist and how many allocation rows each stream
// needs (so that track ids are the same); the second writes each entry once it is final (a
// slice at its free, a counter point once no later event or sample can change it), keeping
// only what is live (open allocations, the newest points, pending waits). Its entries are the
// Timeline-based export's, in another order (docs/INTEROP.md); the two differ only on a trace
// whose clocks disagree by more than the pass's horizon (PerfettoStats::outOfOrderEvents).
Status writePerfettoJsonStreaming(const std::vector<StreamInput>& inputs, std::FILE* out,
                                  PerfettoStats* stats = nullptr);

// A stretch of one trace, [fromNs, untilNs) in the trace's clock (`export --from/--to`): the
// names and the blocks live before it from one names pass over the whole trace
// (traceNamesAndStart), the chunks that overlap it built as the window's range is
// (buildTimelineRange, at most maxEvents of them: InvalidArgument in words beyond), written by
// writePerfettoJson cut to it. `parts` holds the input's process, threads, call sites, label
// and IPC calls; the rest of it is filled here. The reader is set to skip damaged chunks and to
// reuse its header scan.
// The most events a stretch's chunks may hold for `export --from/--to` and the window's export:
// its timeline (about 80 bytes an event) is held while it is written.
inline constexpr uint64_t kMaxStretchEvents = 4'000'000;
struct StretchExport {
    PerfettoStats stats;
    int64_t clipFromNs = 0, clipUntilNs = 0; // what was written: inside the stretch and the build
    uint64_t blocksBefore = 0, bytesBefore = 0; // allocated before it, not freed in it: drawn over it
    uint64_t unaccountedBytes = 0;              // in use at its start in no block the trace recorded
};
// `control` follows the names pass (the long part) and may cancel it or the range build.
Result<StretchExport> writePerfettoStretch(TraceReader& reader, ExportInput parts, int64_t fromNs,
                                           int64_t untilNs, std::FILE* out, uint64_t maxEvents,
                                           const NamesPassControl& control = {});

// One row per event (samples excluded), seq order, columns documented in docs/INTEROP.md:
// human-readable ones (time since the first event, names, sizes in KiB/MiB, call site,
// details) next to the raw values (ns, handles, bytes). Reads the trace's events once and holds
// one row at a time: names and t0 (the trace's first timestamp, events and samples) come from a
// streaming pass (analysis/TraceReport.h), so that a trace of any size exports in bounded memory.
// The rows are formatted on `threads` (ChunksInOrder.h) where the reader skips damaged chunks.
Status writeEventsCsv(TraceReader& reader, const view::EntityNames& names, int64_t t0,
                      const StackTables& stacks, std::FILE* out, const ChunkTextOptions& threads = {});
// The same, with the names and t0 of a finished Timeline.
Status writeEventsCsv(TraceReader& reader, const Timeline& timeline, const StackTables& stacks,
                      std::FILE* out, const ChunkTextOptions& threads = {});

// The CSV header line (without the newline), for tests and the docs.
std::string eventsCsvHeader();

} // namespace poolscope::interop
