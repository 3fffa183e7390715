#pragma once
// `poolscope report` of a trace file: the Report (Report.h) with the what-if advisor's findings
// and, when asked, the call sites at each pool's peak (CallSites.h).
//
// reportTrace reads the events once, in order, through the allocator replay and keeps running
// figures instead of a Timeline (issue #15): its memory is bounded by the live allocations, the
// entities and the samples table, not by the number of events. What needs a finished step series
// (largest and mean idle bytes, used bytes at the peak, device-wide sums, the instant of a pool's
// peak for its call sites) is computed from points held until a time frontier a second behind
// the newest event (less while a trace is very dense: ReportReducer::kMaxHeld) has passed them:
// the same figures the Timeline gives, unless an event comes
// more than that out of time order, which Report::outOfOrderEvents then counts. The what-if
// advice reads the trace a second time, and only for a trace where it can suggest something
// (its candidate thresholds depend on the whole trace's peaks).
//
// reportTraceViaTimeline is the same report computed the former way, from a whole Timeline: the
// reference the tests and benchmarks compare the streaming one against.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "poolscope/Report.h"
#include "poolscope/Result.h"
#include "poolscope/analysis/CallSites.h"

namespace poolscope {

class TraceReader;
namespace interop {
struct DiffFacts;
}

struct TraceReportOptions {
    ReportOptions report;
    size_t topSites = 0;  // > 0: the call sites at each pool's peak reserved (`--top-sites N`)
    bool advice = true;   // the what-if advisor's findings
    std::function<void(uint64_t, uint64_t)> progress; // (done, total) events, after each chunk
    const std::atomic<bool>* cancel = nullptr;
    // Decode chunks on a second thread (BuildOptions::readAhead: on with 4 or more hardware
    // threads).
    bool parallel = defaultParallel();
    static bool defaultParallel();
    // Threads for the advisor's questions after the read (whatif::adviseAfter's `threads`; the
    // same report whatever the number). 0: one plus the CPUs left idle while the first read ran
    // (/proc/stat), at most whatif::kMaxAdviceThreads.
    unsigned adviceThreads = 0;
    // After the read, while the advisor's questions run (where they do): (steps done, steps).
    std::function<void(uint64_t, uint64_t)> adviceProgress;
    // The advisor's models during the read on a thread of their own (with a second replay):
    // Auto where the machine has 2 or more hardware threads. The same report either way.
    enum class FeedThread : uint8_t { Auto, On, Off };
    FeedThread adviceFeedThread = FeedThread::Auto;
    // With the advisor's models on their thread: the report's replay analyses (pending frees,
    // hazards, fragmentation) on another, with a third replay (Auto: with 4 or more hardware
    // threads), else on the models' thread.
    FeedThread analysesThread = FeedThread::Auto;
    // With the analyses on a thread of their own: the stream hazards there, the pending frees,
    // the fragmentation and the racing threads' ranges on another with a replay of its own,
    // which takes the ranges off the models' thread. Auto: off, with the live set kept once or
    // not: on a 16-core host the extra replay's CPU competes with the questions asked during the
    // read (1.05 of the default's time without the live set kept once, 1.06 with it;
    // docs/PERFORMANCE.md).
    FeedThread analysesSplit = FeedThread::Auto;
    // The report's replay analyses kept on the report's own replay (no replay of their own,
    // none lent to the models' thread): the read's threads have a replay fewer, the report's
    // thread their work (on this VM it became the busiest). Auto: off, not measured on a host.
    // The same report either way.
    FeedThread analysesOnReport = FeedThread::Auto;
    // The advisor's models on the report's own replay instead of a replay of their own, their
    // follower (spillThread) and the racing threads' ranges (racesThread) on their threads as
    // before, the analyses on a replay of their own (analysesThread): the read's threads have a
    // replay fewer, and the report's thread, which waited for the models' on the 16-core hosts,
    // records their ops. Auto: off. The same report either way.
    FeedThread modelsOnReport = FeedThread::Auto;
    // The report's time merge (the figures taken over time: idle bytes, device sums, call sites
    // at a peak) on a thread of its own, fed by the report's (Auto: with 6 or more hardware
    // threads, where decoding, the report's replay, the models' and the analyses' have theirs).
    FeedThread mergeThread = FeedThread::Auto;
    // With the models on their thread: the spill of their ops and the never-releasing model that
    // follows them on another (Auto: with 6 or more hardware threads).
    FeedThread spillThread = FeedThread::Auto;
    // With the spill's follower: the racing threads' ranges on a thread of their own, following
    // what the models' replay records for them (whatif::RaceRecord) instead of on the models'
    // thread, the read's busiest on the 16-core hosts. Auto: off: on this project's 2-vCPU VM
    // it took the models' thread from 1.08 to 0.75 s of CPU at 10.5 M events, but on a 16-core
    // host `report` of 105.9 M events took 0.96 of the time (within the spread) for 8 % more
    // CPU, the models' thread no lighter there (docs/PERFORMANCE.md). The same report either way.
    FeedThread racesThread = FeedThread::Auto;
    // With the spill: the advisor's questions asked during the read too, on the cores it leaves
    // idle (Auto: with 12 or more hardware threads, on all but the read's 6, at most
    // whatif::kMaxAdviceThreads; On: at least 4). The same report either way.
    FeedThread askAhead = FeedThread::Auto;
    // The questions asked during the read giving way to the read's threads: None, Nice (a nice
    // value of 10) or Idle (SCHED_IDLE: only on CPUs nothing else wants). On the 16-core hosts
    // the read's 8 threads and a wave's 10 share the CPUs, and the read is as slow as its
    // busiest replay, which a question's thread may hold up; the questions have the rest of the
    // read, and all the CPUs after it, to finish in. Not measured yet: None.
    enum class AheadYield : uint8_t { None, Nice, Idle };
    AheadYield aheadYield = AheadYield::None;
    // The candidates asked during the read as lanes of LaneModels of at most this many in the
    // first wave and in the second (0: the advisor's own, 8 and 3). 12 and 8 took 6-12 % of a
    // 105.9 M-event report's CPU off on a 16-core host, its time within the spread (1.04: the
    // models' replay bounds the read there, docs/PERFORMANCE.md). The same report either way.
    size_t aheadLanes[2] = {0, 0};
    // With the models on their thread: the live set kept once, on a thread of its own
    // (replay::LiveLead), the report's, the models' and the analyses' replays following its
    // record of each chunk (Replay::followLive) instead of each looking every block up again.
    // Auto: with 12 or more hardware threads: on a 16-core host `report` of 105.9 M events took
    // 0.88 of the time without it (docs/PERFORMANCE.md). The same report either way.
    FeedThread leadThread = FeedThread::Auto;
    // Without it, with the read's replays on threads: the report's own replay, which looks every
    // block up anyway, writes down each chunk's live-set operations (Replay::leadLive) and the
    // models' and the analyses' replays follow that record, a chunk behind. Auto: off: on a
    // 16-core host it took 0.98 of the default's time at 105.9 M events (within the spread) for
    // 7 % more CPU (docs/PERFORMANCE.md). The same report either way.
    FeedThread reportLeads = FeedThread::Auto;
    // With the analyses on a replay of their own that does nothing else (analysesThread, the
    // models' follower on its thread): the analyses also read in this many pieces at once
    // beside the read (0: off), on every hardware thread, and where the pieces end exact their
    // replay stops and their results are taken; where not (a bound a single read hits, a start
    // only guessed), that replay's. Off: it did not pay on the hosts measured (docs/PERFORMANCE.md).
    // The same report either way. analysesPiecesThreads: the pieces' threads (0: every one).
    size_t analysesPieces = 0;
    unsigned analysesPiecesThreads = 0;
    // The analyses and the advisor's models (its recording, the racing threads' ranges) read in
    // this many pieces beside the read instead of on replays of their own (0: off): each
    // piece's replay drives them all, the pieces joined in order, the models' follower (the
    // spill, the recorded settings' and never-releasing predictions) and the ranges fed from
    // them as they are. Where a piece is not exact (a start only guessed), the analyses are read
    // whole after the read and the advisor reads the trace itself. The same report either way.
    // readPiecesThreads: the pieces' threads (0: every one). Takes the place of analysesPieces.
    size_t readPieces = 0;
    unsigned readPiecesThreads = 0;
    // `poolscope diff`: its facts (interop/Diff.h) gathered in the same read (keepSites set
    // beforehand where the trace's sites are compared).
    interop::DiffFacts* diffFacts = nullptr;
};

struct TraceReport {
    Report report;
    std::vector<analysis::PoolSites> sites; // with topSites > 0
    // Where the time went (`report --timings`, for measuring): the read, and the advisor's
    // questions after it on adviceThreads threads (0: not asked; of the hardware's where the
    // count could not be chosen).
    double readSeconds = 0, adviceSeconds = 0;
    unsigned adviceThreads = 0;
    // Threads asking the advisor's questions during the read (0: none did), and of the
    // questions after it, those answered there and those asked after it.
    unsigned aheadThreads = 0;
    uint64_t aheadGiven = 0, aheadAsked = 0;
    // With replays on threads of their own during the read (the advisor's models, the
    // analyses): how long the report's thread waited for them, and they for it, summed.
    double readWaitedForThreads = 0, threadsWaitedForRead = 0;
    // With analysesPieces or readPieces: the pieces' wall time, and whether their analyses were used (else
    // why not; both empty where no pieces were read).
    double piecesSeconds = 0;
    bool piecesUsed = false;
    bool piecesStoppedReplay = false; // done before the read ended: the analyses' replay stopped
    std::string piecesInexact;
    size_t piecesMostWaiting = 0; // readPieces: the most pieces ended at once and not joined yet
    // CPU seconds during the read: the calling thread's, each other thread's that had one (the
    // models' and the analyses' replays, the models' follower, the time merge), and the whole
    // process's (decoding included).
    double readCallerCpu = 0, readProcessCpu = 0;
    struct ThreadCpu {
        const char* name;
        double seconds;
    };
    std::vector<ThreadCpu> readThreadCpu;
};

Result<TraceReport> reportTrace(const TraceReader& reader, const TraceReportOptions& options,
                                std::string tracePath = {}, ProcessInfo process = {},
                                std::map<std::string, std::string> meta = {});

// The names the window and the report give pools and streams ("pool #1 (default)",
// view::EntityNames), for verbs that need only the names (`dump --names`, `export --format
// csv`, `whatif`, `advise`): the report's names from a pass that replays the trace and keeps
// nothing else of it. t0: the report's, the first timestamp of the events and samples (0 for
// none).
struct TraceNames {
    view::EntityNames names;
    int64_t t0 = 0;
    bool filtered = false; // replayed only the events the names depend on (NamesPassControl)
    // What the names were made from, in words, with NamesPassControl::describe (tests compare
    // passes by it): the pools seen allocating and with reserved bytes, the (pool, stream)
    // pairs that allocated, the streams waits joined, each stream's first failure.
    std::string madeFrom;
};
// Asked of the names pass by a range's export (`export --from/--to`): the pool blocks live just
// before the event with seq `beforeSeq` (the first of the range's first chunk), as allocations
// (allocStream, pool and device by handle, the alloc's seq, time, thread, API and call site;
// beforeLoaded set, freeTsNs kStillLive), in alloc seq order. Imported mappings are left out.
// What a range's Timeline cannot know: the blocks allocated before it that it never sees freed.
struct LiveBlocksBefore {
    uint64_t beforeSeq = 0;
    std::vector<Allocation> blocks; // filled by the pass
};
// Long on a large trace: `progress` gets (events done, total) per chunk, and `cancel`, once
// set, ends the pass with ErrorCode::Cancelled.
// `threads` decode the chunks and keep only the events the names depend on (NamesFilter, for
// a reader that skips damaged chunks and reuses its header scan), and one replay follows
// those; LiveBlocksBefore's blocks come from contiguous runs of chunks on as many threads.
// 0 for one per CPU (POOLSCOPE_DECODE_THREADS sets it); 1 for a replay of every event on the
// calling thread, the chunks decoded ahead as reportTrace reads them.
struct NamesPassControl {
    std::function<void(uint64_t, uint64_t)> progress;
    const std::atomic<bool>* cancel = nullptr;
    unsigned threads = 0;
    // Tests: the pass over the filtered events (NamesFilter) even on one thread, as it runs
    // on several.
    bool filterAlone = false;
    // Tests: TraceNames::madeFrom filled in.
    bool describe = false;
};
Result<TraceNames> traceNamesAndStart(const TraceReader& reader, LiveBlocksBefore* live = nullptr,
                                      const NamesPassControl& control = {});
Result<view::EntityNames> traceNames(const TraceReader& reader);

Result<TraceReport> reportTraceViaTimeline(const TraceReader& reader,
                                           const TraceReportOptions& options,
                                           std::string tracePath = {}, ProcessInfo process = {},
                                           std::map<std::string, std::string> meta = {});

} // namespace poolscope
