#pragma once
// Reading one trace file into what the window shows, on the calling thread: the reader (damaged
// parts skipped and listed), the Timeline, the lane layout and the symbolized call sites, plus,
// on request, what only some views need (the IPC calls that link processes, the Report a
// comparison is made of). TraceLoader runs it for one file with progress and a partial
// snapshot; MultiTraceLoader runs it for several files at once.

#include "TraceSnapshot.h"
#include "poolscope/Report.h"
#include "poolscope/interop/Diff.h"
#include "poolscope/TimelineBuilder.h"

#include <QString>
#include <atomic>
#include <functional>
#include <memory>
#include <vector>

namespace poolscope::ui {

struct TraceLoadOptions {
    bool ipc = false;    // read the PoolExport / PoolImport / PointerExport / PointerImport calls
    // Build the Report and the diff's facts (interop::reportForDiff and diffFacts, or where the
    // timeline holds only part of the trace, the streaming report's read of all of it).
    bool report = false;
    // Progress and a partial timeline while building (BuildOptions); the partial's snapshot
    // carries the path, title and process already read.
    std::function<void(uint64_t done, uint64_t total)> progress;
    std::chrono::milliseconds partialAfter{-1};
    uint64_t partialAfterEvents = 0;
    std::function<void(const TraceSnapshot& partial)> onPartial;
    std::atomic<int>* phase = nullptr; // 0 opening, 1 reading, 2 lanes, 3 call sites
    // The most events one trace's timeline may hold (BuildOptions::maxEvents): a larger trace
    // opens with its beginning (Timeline::limited). 0 = windowEventLimit().
    uint64_t maxEvents = 0;
    // With maxEvents 0: a trace over windowEventLimit() that has pool summaries opens with its
    // first windowFirstLoadEvents() only (the single-trace window, which reads the rest by
    // range as the user zooms; several traces at once keep the whole limit).
    bool shortFirstLoad = false;
};

// How many events the window builds a timeline of: the timeline, lane layout and views take
// about 100 bytes an event (the process's peak, docs/PERFORMANCE.md), and they get at most
// 1.75 GiB, or half of the physical memory where that is less, so the window stays under 2 GiB
// on any trace (~18 M events; a larger trace is read by range, RangeLoader.h).
// POOLSCOPE_WINDOW_MAX_EVENTS sets it (tests, or a user with memory to spare); never below
// 100,000.
uint64_t windowEventLimit();

// How many events a trace larger than windowEventLimit() opens with (its beginning): 2 M, about
// 1 s of reading here, or POOLSCOPE_WINDOW_FIRST_EVENTS; never above windowEventLimit(), nor
// below 100,000. Zoomed in, such a trace is read by range, up to windowRangeEventLimit().
uint64_t windowFirstLoadEvents();

// The most events of a range RangeLoader builds: 45 % of windowEventLimit(), as the window
// builds a range beside the timeline it shows (a range, or the first load) and lets that go
// only when the new one is ready, so the two stay within the budget. Never below 100,000.
uint64_t windowRangeEventLimit();

struct TraceLoadResult {
    TraceSnapshot snap;
    QString error; // set when the file could not be shown at all
    bool cancelled = false;
    std::vector<Event> ipc;
    std::shared_ptr<const Report> report;
    std::shared_ptr<const interop::DiffFacts> diffFacts; // with report
};

// Never throws: an internal error becomes `error`.
TraceLoadResult loadTraceFile(const QString& path, const std::atomic<bool>& cancel,
                              const TraceLoadOptions& options = {});

} // namespace poolscope::ui
