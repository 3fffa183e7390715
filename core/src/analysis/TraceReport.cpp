// `poolscope report` of a trace file: streamed (ReportReducer.h), or from a whole Timeline, the
// way it was computed before and the reference the streamed one is tested against.
#include "poolscope/analysis/TraceReport.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <sys/times.h>

#include "../ChunkPipe.h"
#include "../replay/TraceEntities.h"
#include "AdviceFeed.h"
#include "LaneNames.h"
#include "PieceRead.h"
#include "ReportReducer.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {

using detail::ChunkShelf;
using detail::ReplayThread;
using detail::SharedChunk;

namespace {

// Where the live set is kept once by default: the 16-core hosts it was measured on (0.88 of the
// read's time there). Below that the read's threads already share fewer cores than they number,
// and one more thread only adds turns (docs/PERFORMANCE.md).
constexpr unsigned kLeadFromCpus = 12;

void addAdvice(Report& rep, Result<std::vector<whatif::PoolAdvice>> advice) {
    if (!advice) return; // the advisor's failure costs its suggestions, not the report
    for (const whatif::PoolAdvice& a : *advice)
        if (a.any()) rep.findings.push_back(whatif::adviceText(a, rep.names.poolWithHandle(a.handle)));
}

// The advisor reads the trace again with up to 29 pool models, so only where it can suggest
// something: a trace with implicit releases, or a pool that ran with a reuse policy off.
bool adviceWorthIt(const Report& rep, bool policyOff) {
    return rep.implicitReleases >= 3 || policyOff;
}

// The machine's CPU time so far, from /proc/stat's first line, and this process's own (times()),
// in clock ticks: all of it, the idle part (idle + iowait) and this process's; zeros where they
// cannot be read.
struct CpuTicks {
    uint64_t total = 0, idle = 0, own = 0;
};

CpuTicks cpuTicks() {
    CpuTicks t;
    std::FILE* f = std::fopen("/proc/stat", "re");
    if (!f) return t;
    unsigned long long v[8] = {};
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                    &v[4], &v[5], &v[6], &v[7]) == 8) {
        for (unsigned long long x : v) t.total += x;
        t.idle = v[3] + v[4];
    }
    std::fclose(f);
    struct tms own {};
    if (times(&own) != static_cast<clock_t>(-1))
        t.own = static_cast<uint64_t>(own.tms_utime) + static_cast<uint64_t>(own.tms_stime);
    return t;
}

// The CPUs that stood idle, on average, since `before` (the hardware's where it cannot be told).
unsigned idleCpus(const CpuTicks& before) {
    const CpuTicks now = cpuTicks();
    const unsigned hw = std::thread::hardware_concurrency();
    if (before.total == 0 || now.total <= before.total || now.idle < before.idle) return hw;
    return static_cast<unsigned>(double(now.idle - before.idle) / double(now.total - before.total) * hw);
}

// Threads for the advisor's questions: the CPUs that this process used or that stood idle, on
// average, while the first read ran (at least one). On a machine busy with other work, a thread
// beyond those only adds its own read of the spill (measured slower there,
// docs/PERFORMANCE.md). A read too short to measure (within a clock tick) gets one: its advisor
// is as short. 0 (the hardware's) where /proc/stat cannot be read.
unsigned adviceThreads(const CpuTicks& before) {
    const CpuTicks now = cpuTicks();
    const unsigned hw = std::thread::hardware_concurrency();
    if (before.total == 0 || now.total == 0 || hw == 0) return 0;
    if (now.total <= before.total || now.idle < before.idle || now.own < before.own) return 1;
    const double ticks = double(now.total - before.total);
    // /proc/stat counts every CPU's ticks; times() this process's threads' together. A single
    // busy thread is counted as at least one CPU (the read's own), as before the feed's thread.
    const double own = std::max(double(now.own - before.own), ticks / hw);
    const double freeCpus = (double(now.idle - before.idle) + own) / ticks * hw;
    const unsigned n = static_cast<unsigned>(std::max(1.0, freeCpus + 0.3));
    return std::min(n, whatif::kMaxAdviceThreads);
}

} // namespace

bool TraceReportOptions::defaultParallel() { return BuildOptions::defaultReadAhead(); }

Result<TraceReport> reportTrace(const TraceReader& reader, const TraceReportOptions& options,
                                std::string tracePath, ProcessInfo process,
                                std::map<std::string, std::string> meta) {
    const CpuTicks started = options.adviceThreads == 0 ? cpuTicks() : CpuTicks{};
    using Clock = std::chrono::steady_clock;
    const Clock::time_point readStart = Clock::now();
    const double callerCpuStart = detail::cpuSeconds(CLOCK_THREAD_CPUTIME_ID),
                 processCpuStart = detail::cpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
    auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    detail::ReportReducer reducer(options.report.topN, options.topSites > 0);
    auto tables = detail::readTraceTables(reader);
    if (!tables) return tables.error();
    const unsigned cpus = std::thread::hardware_concurrency();
    // A thread asked for, or by default (Auto) with at least `fromCpus` hardware threads.
    auto wanted = [cpus](TraceReportOptions::FeedThread f, unsigned fromCpus) {
        return f == TraceReportOptions::FeedThread::Auto ? cpus >= fromCpus
                                                         : f == TraceReportOptions::FeedThread::On;
    };
    reducer.setMergeThread(wanted(options.mergeThread, 6));
    reducer.setEntities(tables->devices, tables->pools, tables->streams);
    reducer.setDiffFacts(options.diffFacts);
    // The attributes read when each pool was first seen, as buildTimeline (and the advisor's
    // own read) declares them.
    std::vector<PoolAttributeValue> declared;
    if (auto attrs = reader.poolAttributes(); attrs) {
        declared = std::move(*attrs);
        for (const PoolAttributeValue& a : declared) reducer.replay().declareKnob(a.pool, a.attr, a.value);
    }
    TraceReport out;
    Report& rep = out.report;
    rep.tracePath = std::move(tracePath);
    rep.process = std::move(process);
    rep.meta = std::move(meta);
    // A drop_gaps table that cannot be read (damaged) loses the marks, not the report.
    if (auto gaps = reader.dropGaps(); gaps) rep.dropGaps = std::move(*gaps);
    const uint64_t total = detail::progressTotal(reader);

    // Samples are few (periodic) and read whole, as buildTimeline does: merged in by time, and
    // their high watermarks known ahead.
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    const std::vector<Event>& ss = *samples;
    reducer.expectSamples(ss);

    // The advisor's first two models and the racing threads' ranges follow the same events, on
    // a thread of their own where the machine has a second CPU (AdviceFeed.h). Their ops go to
    // disk too, for the advisor's questions after this read (instead of reading the trace
    // again): the advisor's own replay declares the pools' first attributes as this one does.
    // The report's replay analyses (pending frees, hazards, fragmentation) follow a replay on
    // another thread too: where there are 4 CPUs or more their own, else the models' (which had
    // time to spare while the report's thread had none). The racing threads' ranges go with
    // them there, unless the models have a follower (6 CPUs or more), which takes a model off
    // their thread: then the models' thread has the lighter load.
    ChunkShelf shelf; // before the threads: their queued chunks give their buffers back to it
    std::unique_ptr<detail::AdviceFeed> feed;
    std::unique_ptr<ReplayThread> analyses, analyses2;
    std::vector<ReplayThread*> threads;
    bool racesOnAnalyses = false; // the racing threads' ranges follow the analyses' replay
    // The live set kept once (below) takes about a quarter of the work off each replay that
    // follows it, the models' among them, which bounds the read on the 16-core hosts; the
    // analyses stay on one thread unless asked (analysesSplit): a fifth replay's CPU competes
    // with the questions asked during the read.
    const bool leadWanted = wanted(options.leadThread, kLeadFromCpus);
    const bool reportLeadWanted = !leadWanted && options.reportLeads == TraceReportOptions::FeedThread::On;
    const bool splitWanted = options.analysesSplit == TraceReportOptions::FeedThread::On;
    const bool analysesOnReport = options.analysesOnReport == TraceReportOptions::FeedThread::On;
    const bool modelsOnReport = options.modelsOnReport == TraceReportOptions::FeedThread::On;
    // The analyses and the advisor's inputs read in pieces beside the read instead of on
    // replays of their own (readPieces): the models fed from the pieces as they are joined.
    const bool readInPieces = options.readPieces > 0 && !reader.path().empty();
    if (options.advice) {
        const bool feedThread = !modelsOnReport && wanted(options.adviceFeedThread, 2);
        if (readInPieces)
            feed = std::make_unique<detail::AdviceFeed>(detail::AdviceFeed::FromPieces{}, /*spill=*/true);
        else
            feed = std::make_unique<detail::AdviceFeed>(reducer.replay(), feedThread,
                                                        /*spill=*/true, whatif::Calibration{},
                                                        (feedThread || modelsOnReport) && wanted(options.spillThread, 6),
                                                        options.racesThread == TraceReportOptions::FeedThread::On);
        if (feed->spill() && wanted(options.askAhead, whatif::Speculation::kFromCpus)) {
            out.aheadThreads = whatif::Speculation::threadsFor(cpus);
            // By default each wave takes only the CPUs that stood idle since the read began: on
            // a machine busy with other work the questions wait for the read's end instead.
            std::function<unsigned()> idle;
            if (options.askAhead == TraceReportOptions::FeedThread::Auto && !readInPieces) {
                idle = [readCpu = cpuTicks()] { return idleCpus(readCpu); };
            } else if (options.askAhead == TraceReportOptions::FeedThread::Auto) {
                // The pieces take every CPU while they last, then none: the CPUs idle of late
                // (over the last half second at least), for the waves asked again (AdviceFeed).
                idle = [last = cpuTicks(), at = Clock::now(), held = 0u]() mutable {
                    if (Clock::now() - at < std::chrono::milliseconds(500)) return held;
                    held = idleCpus(last);
                    last = cpuTicks();
                    at = Clock::now();
                    return held;
                };
            }
            using Y = whatif::Speculation::Yield;
            const Y yield = options.aheadYield == TraceReportOptions::AheadYield::Nice   ? Y::Nice
                            : options.aheadYield == TraceReportOptions::AheadYield::Idle ? Y::Idle
                                                                                         : Y::None;
            feed->askAhead(out.aheadThreads, total, idle, yield, {options.aheadLanes[0], options.aheadLanes[1]});
        }
    }
    if (options.advice && !readInPieces) {
        // The analyses on a replay of their own where the models have one, or where the models
        // are on the report's; else they stay where the models are.
        ReplayThread* models = feed->thread();
        if (models) threads.push_back(models);
        ReplayThread *heavy = models, *light = models;
        if (!analysesOnReport && (models || modelsOnReport) && wanted(options.analysesThread, 4)) {
            analyses = std::make_unique<ReplayThread>();
            threads.push_back(analyses.get());
            heavy = light = analyses.get();
            if (splitWanted) {
                analyses2 = std::make_unique<ReplayThread>();
                threads.push_back(analyses2.get());
                light = analyses2.get();
                feed->racesOn(light->replay());
            } else if (!feed->hasFollower()) {
                feed->racesOn(analyses->replay());
                racesOnAnalyses = true;
            }
        }
        if (!analysesOnReport && heavy)
            for (const detail::ReportReducer::Lent& l : reducer.lendAnalyses())
                (l.heaviest ? heavy : light)->replay().subscribe(l.observer, l.kindMask);
        for (ReplayThread* t : threads) {
            t->setEntities(tables->devices, tables->pools, tables->streams);
            for (const PoolAttributeValue& a : declared) t->replay().declareKnob(a.pool, a.attr, a.value);
            t->expectSamples(&ss);
            t->start();
        }
    }
    // The analyses read in pieces beside the read (on as many threads as the machine has unless
    // told fewer; the read's share them), where they have a replay of their own that does
    // nothing else: once the pieces are done and exact, that replay stops
    // (ReplayThread::retire) and the reducer takes the pieces' results.
    std::atomic<bool> piecesStop{false};
    std::optional<Result<detail::AnalysesInPieces>> pieces;
    std::thread piecesThread;
    ReplayThread* retirable = analyses && !analyses2 && !racesOnAnalyses ? analyses.get() : nullptr;
    std::optional<Result<detail::ReportPieces>> pieceRead;
    // Pieces read on a thread of their own, through a reader of their own: `work` given the
    // reader, `failed` the reason where the reader or the thread could not be had.
    auto beside = [&](std::function<void(const TraceReader&)> work, std::function<void(Error)> failed) {
        const Clock::time_point piecesStart = Clock::now();
        try {
            piecesThread = std::thread([&, work, failed, piecesStart, path = reader.path()] {
                auto own = TraceReader::open(path);
                if (!own) return failed(own.error());
                work(**own);
                out.piecesSeconds = seconds(Clock::now() - piecesStart);
            });
        } catch (const std::system_error&) {
            failed(Error{ErrorCode::Io, "no thread to be had for them"});
        }
    };
    if (readInPieces) {
        reducer.lendAnalyses(); // subscribed to nothing: the pieces' (or a read of their own) stand in
        detail::ReportPiecesSink sink;
        if (feed)
            sink.piece = [&](whatif::Tape& ops, whatif::RaceInputs& races, const replay::Replay& end) {
                feed->piece(ops, races, end);
            };
        beside([&, sink](const TraceReader& own) {
                   pieceRead.emplace(detail::reportPieces(own, options.readPieces,
                                                          options.readPiecesThreads ? options.readPiecesThreads : std::max(1u, cpus),
                                                          options.report.topN, feed != nullptr, sink, &piecesStop));
               },
               [&](Error e) { pieceRead.emplace(std::move(e)); });
    } else if (options.analysesPieces > 0 && retirable && !reader.path().empty()) {
        beside([&](const TraceReader& own) {
                   pieces.emplace(detail::analysesInPieces(own, options.analysesPieces,
                                                           options.analysesPiecesThreads ? options.analysesPiecesThreads : std::max(1u, cpus),
                                                           options.report.topN, &piecesStop));
                   if (*pieces && (*pieces)->exact) retirable->retire();
               },
               [&](Error e) { pieces.emplace(std::move(e)); });
    } else if (options.analysesPieces > 0) {
        out.piecesInexact = "the analyses have no replay of their own here to stand in for";
    }
    struct JoinPieces {
        std::thread& t;
        std::atomic<bool>& stop;
        ~JoinPieces() {
            stop = true;
            if (t.joinable()) t.join();
        }
    } joinPieces{piecesThread, piecesStop};
    detail::SampleMerge merge;
    merge.expect(&ss);
    auto add = [&](const Event& e) { reducer.add(e); };
    uint64_t done = 0;
    auto cancelled = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };
    auto reduce = [&](const std::vector<Event>& events) {
        merge.chunk(events, reducer.replay(), add);
        reducer.advance();
        if (feed && !feed->thread()) feed->step();
        done += events.size();
        if (options.progress) options.progress(done, total);
        return true;
    };
    // The live set kept once for all (replay::LiveLead) on a thread of its own, the report's
    // replay (on this thread) and the others following its record of each chunk. With the
    // models and analyses in pieces, the report's replay alone follows it: the read's thread,
    // which it lightens, is what the read waits for there.
    std::unique_ptr<detail::LiveFollow> live;
    if ((!threads.empty() || readInPieces) && leadWanted) live = std::make_unique<detail::LiveFollow>(threads, reducer.replay(), reduce);
    // Or the report's replay keeps it for them, each chunk's record handed over with the chunk.
    const bool reportLeads = !live && !threads.empty() && reportLeadWanted;
    std::vector<uint32_t> ops;
    if (reportLeads) reducer.replay().leadLive(&ops);
    auto consume = [&](std::vector<Event>& chunk) {
        if (live) {
            live->push(shelf.hold(chunk));
            return !cancelled();
        }
        SharedChunk shared;
        if (!threads.empty()) {
            shared = shelf.hold(chunk);
            if (!reportLeads)
                for (ReplayThread* t : threads) t->push(shared);
        }
        reduce(shared ? *shared : chunk);
        if (reportLeads) {
            const size_t n = ops.size();
            auto tape = std::make_shared<const std::vector<uint32_t>>(std::move(ops));
            ops = std::vector<uint32_t>();
            ops.reserve(n + 64);
            for (ReplayThread* t : threads) t->push(shared, tape);
        }
        return !cancelled();
    };
    const Status st = detail::forEachChunk(reader, options.parallel, consume);
    if (cancelled()) return Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
    if (!st) return st.error();
    if (live) live->finish();
    merge.rest(add);
    if (piecesThread.joinable()) piecesThread.join();
    bool adviseAlone = false; // the pieces could not stand in for the models: the advisor reads the trace itself
    if (pieceRead) {
        if (*pieceRead) out.piecesMostWaiting = (*pieceRead)->mostWaiting;
        if (*pieceRead && (*pieceRead)->exact) {
            reducer.useAnalyses(std::shared_ptr<const detail::PieceAnalyses>(std::move((*pieceRead)->analyses)));
            if (feed) feed->endPieces(std::move((*pieceRead)->recording), std::move(*(*pieceRead)->last));
            out.piecesUsed = true;
        } else {
            out.piecesInexact = *pieceRead ? (*pieceRead)->inexact : pieceRead->error().message;
            // What a piece's start or join could not carry is read whole: the analyses here,
            // the advisor's models by the advisor's own read.
            auto whole = detail::analysesInOneRead(reader, options.report.topN);
            if (!whole) return whole.error();
            reducer.useAnalyses(std::shared_ptr<const detail::PieceAnalyses>(std::move(*whole)));
            adviseAlone = feed != nullptr;
            feed.reset();
        }
    }
    if (pieces) {
        if (*pieces && (*pieces)->exact) {
            reducer.useAnalyses(std::shared_ptr<const detail::PieceAnalyses>(std::move((*pieces)->analyses)));
            out.piecesUsed = true;
            out.piecesStoppedReplay = retirable->retired();
        } else {
            out.piecesInexact = *pieces ? (*pieces)->inexact : pieces->error().message;
        }
    }
    if (analyses) analyses->end();
    if (analyses2) analyses2->end();
    if (feed) feed->end();
    if (live || reportLeads)
        if (Status inStep = detail::followersInStep(live.get(), threads); !inStep) return inStep.error();
    reducer.finish(rep, options.topSites > 0 ? &out.sites : nullptr, options.topSites);
    detail::dropEmptyUnknownPool(rep);
    detail::addFindings(rep);
    const Clock::time_point readEnd = Clock::now();
    out.readSeconds = seconds(readEnd - readStart);
    out.readCallerCpu = detail::cpuSeconds(CLOCK_THREAD_CPUTIME_ID) - callerCpuStart;
    out.readProcessCpu = detail::cpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - processCpuStart;
    if (live) out.readThreadCpu.push_back({"the live set", live->cpuSeconds()});
    for (ReplayThread* t : threads) {
        out.readWaitedForThreads += t->pushWaited();
        out.threadsWaitedForRead += t->chunkWaited();
        out.readThreadCpu.push_back({t == analyses.get()    ? "the analyses' replay"
                                     : t == analyses2.get() ? "the other analyses' replay"
                                                            : "the models' replay",
                                     t->cpuSeconds()});
    }
    if (feed && feed->followerCpu() > 0) out.readThreadCpu.push_back({"the models' follower", feed->followerCpu()});
    if (feed && feed->spillCpu() > 0) out.readThreadCpu.push_back({"the spill's writer", feed->spillCpu()});
    if (feed && feed->racesCpu() > 0) out.readThreadCpu.push_back({"the racing threads' ranges", feed->racesCpu()});
    if (reducer.seriesCpu() > 0) out.readThreadCpu.push_back({"the series' points", reducer.seriesCpu()});
    if (reducer.mergeCpu() > 0) out.readThreadCpu.push_back({"the time merge", reducer.mergeCpu()});
    if (feed && adviceWorthIt(rep, reducer.anyPolicyOff())) {
        feed->finish();
        out.adviceThreads = options.adviceThreads ? options.adviceThreads : adviceThreads(started);
        const whatif::detail::AheadCounts before = whatif::detail::aheadCounts();
        addAdvice(rep, whatif::adviseAfter(reader, feed->recorded(), feed->neverReleasing(),
                                           feed->races(), /*sameReplay=*/true, {}, feed->spill(),
                                           out.adviceThreads, options.adviceProgress,
                                           feed->ahead()));
        out.aheadGiven = whatif::detail::aheadCounts().given - before.given;
        out.aheadAsked = whatif::detail::aheadCounts().asked - before.asked;
        out.adviceSeconds = seconds(Clock::now() - readEnd);
    } else if (adviseAlone && adviceWorthIt(rep, reducer.anyPolicyOff())) {
        addAdvice(rep, whatif::advise(reader, {}, options.adviceProgress));
        out.adviceSeconds = seconds(Clock::now() - readEnd);
    }
    return out;
}

Result<TraceReport> reportTraceViaTimeline(const TraceReader& reader,
                                           const TraceReportOptions& options,
                                           std::string tracePath, ProcessInfo process,
                                           std::map<std::string, std::string> meta) {
    auto built = buildTimeline(reader, options.progress, options.cancel);
    if (!built) return built.error();
    const Timeline& tl = **built;
    TraceReport out;
    out.report = buildReport(tl, options.report, std::move(tracePath), std::move(process),
                             std::move(meta));
    if (options.advice) {
        bool policyOff = false;
        for (const PoolTimeline& p : tl.pools)
            for (const Series* s : {&p.reuseFollowEventDependencies, &p.reuseAllowOpportunistic,
                                    &p.reuseAllowInternalDependencies})
                for (uint64_t v : s->v) policyOff = policyOff || v == 0;
        if (adviceWorthIt(out.report, policyOff)) addAdvice(out.report, whatif::advise(reader));
    }
    if (options.topSites > 0) out.sites = analysis::topSitesAtPeaks(tl, out.report, options.topSites);
    return out;
}

} // namespace poolscope
