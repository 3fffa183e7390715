// The report's analyses and the advisor's inputs read in the same pieces (issue #15;
// detail::reportPieces, TraceReportOptions::readPieces): each joined piece hands on one read's
// ops and racing threads' inputs in order, the analyses are one read's, and `report` gives one
// read's report, text and JSON, with the pieces used where exact and read whole where not.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../../core/src/analysis/AdviceFeed.h"
#include "../../core/src/analysis/PieceRead.h"
#include "../../core/src/replay/TraceEntities.h"
#include "../../core/src/whatif/TapeSpill.h"
#include "../bench/SyntheticTrace.h"
#include "FuzzCommon.h"
#include "GeneratedTraces.h"
#include "PredictionChecks.h"
#include "TestTraces.h"
#include "poolscope/Report.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope {
namespace {

// The generator's workload (not a recording) in chunks of 10,000 events: 20 chunks to cut.
std::string generatedTrace(test::ScratchDir& dir, uint64_t seed) {
    return test::writeGenerated(dir.file("generated.poolscope"), bench::SyntheticTrace(seed).generate(200'000), 10'000);
}

// The racing threads' ranges of one read: RaceBounds on a replay of every event.
std::vector<whatif::RaceRange> racesInOneRead(const TraceReader& reader) {
    replay::Replay r;
    EXPECT_TRUE(detail::declareTraceEntities(reader, r, true));
    whatif::RaceBounds races;
    r.subscribe(&races, whatif::RaceBounds::kindMask());
    EXPECT_TRUE(reader.forEachEvent([&](const Event& e) {
        r.apply(e);
        return true;
    }));
    return races.result(r);
}

void expectSameRaces(const std::vector<whatif::RaceRange>& a, const std::vector<whatif::RaceRange>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE("pool " + std::to_string(i));
        EXPECT_EQ(a[i].handle, b[i].handle);
        EXPECT_EQ(a[i].racingAllocs, b[i].racingAllocs);
        EXPECT_EQ(a[i].crossThreadFrees, b[i].crossThreadFrees);
        EXPECT_EQ(a[i].largestBlock, b[i].largestBlock);
        EXPECT_EQ(a[i].demandSum, b[i].demandSum);
        EXPECT_EQ(a[i].threads, b[i].threads);
        EXPECT_EQ(a[i].low, b[i].low);
        EXPECT_EQ(a[i].high, b[i].high);
        EXPECT_EQ(a[i].highHandoversAsRecorded, b[i].highHandoversAsRecorded);
    }
}

// reportPieces of `path` in each count of pieces on each count of threads: where exact, what it
// handed on (gathered in order) and its analyses are one read's. Returns the reads that were.
size_t expectPiecesHandOnOneRead(const std::string& path, const std::vector<size_t>& pieces,
                                 const std::vector<unsigned>& threads) {
    auto reader = TraceReader::open(path);
    EXPECT_TRUE(reader) << path;
    if (!reader) return 0;
    auto tape = detail::recordTapeInOneRead(**reader);
    auto analyses = detail::analysesInOneRead(**reader, 10);
    EXPECT_TRUE(tape && analyses) << path;
    if (!tape || !analyses) return 0;
    const std::vector<whatif::RaceRange> races = racesInOneRead(**reader);
    size_t exact = 0;
    for (size_t n : pieces)
        for (unsigned t : threads) {
            const std::string what = path + ", " + std::to_string(n) + " pieces on " + std::to_string(t);
            SCOPED_TRACE(what);
            whatif::Tape gathered;
            whatif::RaceBounds followed;
            uint64_t events = 0;
            bool inOrder = true;
            detail::ReportPiecesSink sink;
            sink.piece = [&](whatif::Tape& ops, whatif::RaceInputs& in, const replay::Replay& end) {
                inOrder = inOrder && end.eventCount() >= events;
                events = end.eventCount();
                gathered.ops.insert(gathered.ops.end(), ops.ops.begin(), ops.ops.end());
                gathered.allocSeq.insert(gathered.allocSeq.end(), ops.allocSeq.begin(), ops.allocSeq.end());
                followed.follow(in);
            };
            auto cut = detail::reportPieces(**reader, n, t, 10, /*models=*/true, sink);
            EXPECT_TRUE(cut) << cut.error().message;
            if (!cut) continue;
            if (!cut->exact) {
                EXPECT_FALSE(cut->inexact.empty());
                continue;
            }
            ++exact;
            EXPECT_TRUE(inOrder);
            if (!cut->last || !cut->recording || !cut->analyses) {
                ADD_FAILURE() << "an exact read without its end, recording or analyses";
                return exact;
            }
            EXPECT_EQ(cut->last->eventCount(), events);
            cut->recording->finishTape(gathered, *cut->last);
            gathered.recorded = whatif::PoolModel().run(gathered);
            gathered.events = tape->events;
            test::expectSameTape(gathered, *tape, what);
            expectSameRaces(followed.result(*cut->last), races);
            EXPECT_EQ(detail::analysesDiffer(*cut->analyses, **analyses), "");
            if (::testing::Test::HasFailure()) return exact;
        }
    return exact;
}

TEST(ReportPieces, SamplesHandOnOneReadsOpsRacesAndAnalyses) {
    size_t exact = 0, reads = 0;
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "threads_race", "gpt2", "cupy", "jax",
                             "torch_async", "torch_native", "beyond_pool", "callsites", "thread_first",
                             "torchrun-rank0"}) {
        exact += expectPiecesHandOnOneRead(fuzz::samplePath(name), {2, 5}, {1, 3});
        reads += 4;
        if (HasFailure()) return;
    }
    std::printf("samples: %zu of %zu reads exact\n", exact, reads);
    EXPECT_GT(exact, reads / 2);
}

TEST(ReportPieces, AGeneratedTraceHandsOnOneReadsOpsRacesAndAnalyses) {
    test::ScratchDir dir;
    const std::string path = generatedTrace(dir, 7);
    EXPECT_EQ(expectPiecesHandOnOneRead(path, {3, 8, 20}, {2, 4}), 6u);
}

// The advisor's inputs fed from the pieces (AdviceFeed::FromPieces): the spill holds one read's
// ops, streams and pools step by step, and the recorded settings' and never-releasing
// predictions and the racing threads' ranges are one read's.
TEST(ReportPieces, AFeedFromPiecesGivesTheAdvisorOneReadsInputs) {
    test::ScratchDir dir;
    const std::string path = generatedTrace(dir, 42);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    auto tape = detail::recordTapeInOneRead(**reader);
    ASSERT_TRUE(tape);
    // In 2 pieces, each more than a step's ops (handed in several steps), and in 8.
    for (size_t n : {size_t{2}, size_t{8}}) {
        SCOPED_TRACE(std::to_string(n) + " pieces");
        detail::AdviceFeed fed(detail::AdviceFeed::FromPieces{}, /*spill=*/true);
        detail::ReportPiecesSink sink;
        sink.piece = [&](whatif::Tape& ops, whatif::RaceInputs& races, const replay::Replay& end) {
            fed.piece(ops, races, end);
        };
        auto cut = detail::reportPieces(**reader, n, 3, 10, true, sink);
        ASSERT_TRUE(cut) << cut.error().message;
        ASSERT_TRUE(cut->exact) << cut->inexact;
        std::vector<uint64_t> pools;
        for (const replay::PoolState& p : cut->last->pools()) pools.push_back(p.info.handle);
        fed.endPieces(std::move(cut->recording), std::move(*cut->last));
        fed.end();
        fed.finish();
        ASSERT_TRUE(fed.spill() && fed.spill()->ok());
        whatif::TapeSpill::Reader spilled(*fed.spill());
        whatif::Tape step, all;
        std::vector<uint64_t> handles;
        while (spilled.next(step, handles)) {
            all.ops.insert(all.ops.end(), step.ops.begin(), step.ops.end());
            all.allocSeq.insert(all.allocSeq.end(), step.allocSeq.begin(), step.allocSeq.end());
        }
        EXPECT_TRUE(spilled.atEnd());
        if (n == 2) EXPECT_GT(spilled.steps(), 2u);
        EXPECT_EQ(handles, pools);
        EXPECT_EQ(step.streamHandles, tape->streamHandles);
        all.streamHandles = tape->streamHandles;
        all.poolIndex = tape->poolIndex;
        all.recordedEnd = tape->recordedEnd;
        all.lastTs = tape->lastTs;
        all.events = tape->events;
        all.recorded = fed.recorded();
        test::expectSameTape(all, *tape, "the spill");
        const std::vector<whatif::PoolPrediction> never = whatif::PoolModel(whatif::neverReleasing()).run(*tape);
        const std::vector<whatif::PoolPrediction> fedNever = fed.neverReleasing();
        ASSERT_EQ(fedNever.size(), never.size());
        for (size_t k = 0; k < never.size(); ++k)
            test::expectSamePrediction(fedNever[k], never[k], "never releasing, pool " + std::to_string(k));
        expectSameRaces(fed.races(), racesInOneRead(**reader));
    }
}

// Fed from pieces, a wave of questions that found no idle CPUs at its sixth of the trace is
// asked at a later step where they are (the pieces take every CPU while they last), and the
// advice is the same as with every question asked after the read.
TEST(ReportPieces, AWaveTheCpusCouldNotTakeIsAskedLater) {
    test::ScratchDir dir;
    const std::string path = generatedTrace(dir, 42);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    // The idle CPUs none at the first `busy` times asked, 8 afterwards.
    auto advice = [&](unsigned busy, size_t& waves) {
        detail::AdviceFeed fed(detail::AdviceFeed::FromPieces{}, /*spill=*/true);
        unsigned calls = 0;
        fed.askAhead(8, (*reader)->summary()->eventCount, [&calls, busy] { return calls++ < busy ? 0u : 8u; });
        detail::ReportPiecesSink sink;
        sink.piece = [&](whatif::Tape& ops, whatif::RaceInputs& races, const replay::Replay& end) {
            fed.piece(ops, races, end);
        };
        auto cut = detail::reportPieces(**reader, 8, 3, 10, true, sink);
        EXPECT_TRUE(cut && cut->exact);
        if (!cut || !cut->exact) return std::string();
        fed.endPieces(std::move(cut->recording), std::move(*cut->last));
        fed.end();
        fed.finish();
        waves = fed.ahead().size();
        auto got = whatif::adviseAfter(**reader, fed.recorded(), fed.neverReleasing(), fed.races(), true, {},
                                       fed.spill(), 2, {}, fed.ahead());
        EXPECT_TRUE(got);
        std::string text;
        if (got)
            for (const whatif::PoolAdvice& a : *got) text += whatif::adviceText(a, std::to_string(a.handle)) + "\n";
        return text;
    };
    // Busy twice: at the first wave's sixth and at the step after it, which without asking again
    // would have been the second wave's sixth (and no wave at all).
    size_t waves = 0, wavesAtOnce = 0;
    const std::string later = advice(2, waves), atOnce = advice(0, wavesAtOnce);
    EXPECT_GE(wavesAtOnce, 1u);
    EXPECT_GE(waves, 1u);
    EXPECT_FALSE(later.empty());
    EXPECT_EQ(later, atOnce);
}

// The joins wait for a slow sink, and the pieces for the joins: no more than twice the threads
// end and wait to be joined at once, however far ahead the pieces' threads could have gone.
TEST(ReportPieces, PiecesWaitForASlowSink) {
    test::ScratchDir dir;
    const std::string path = generatedTrace(dir, 8);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    detail::ReportPiecesSink sink;
    size_t handed = 0;
    sink.piece = [&](whatif::Tape&, whatif::RaceInputs&, const replay::Replay&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(40));
        ++handed;
    };
    auto cut = detail::reportPieces(**reader, 20, 2, 10, true, sink);
    ASSERT_TRUE(cut) << cut.error().message;
    ASSERT_TRUE(cut->exact) << cut->inexact;
    EXPECT_EQ(handed, cut->pieces);
    EXPECT_GE(cut->pieces, 15u);
    EXPECT_LE(cut->mostWaiting, 4u);
}

TEST(ReportPieces, ACancelledReadStopsWithoutHanging) {
    test::ScratchDir dir;
    const std::string path = generatedTrace(dir, 9);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    std::atomic<bool> cancel{false};
    detail::ReportPiecesSink sink;
    size_t handed = 0;
    sink.piece = [&](whatif::Tape&, whatif::RaceInputs&, const replay::Replay&) {
        // Cancelled while the pieces after the second wait for their turn.
        if (++handed == 2) cancel = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    };
    auto cut = detail::reportPieces(**reader, 20, 2, 10, true, sink, &cancel);
    ASSERT_FALSE(cut);
    EXPECT_EQ(cut.error().code, ErrorCode::Cancelled);
    EXPECT_LT(handed, 20u);
}

// `report --read-pieces`: the same report, text and JSON, on every sample and a generated trace,
// with the pieces used where exact; where not (the torchrun ranks: a stream's hazards not carried
// exactly), the analyses read whole and the advisor reading the trace itself.
TEST(ReportPieces, TheReportIsTheSameReadInPieces) {
    test::ScratchDir dir;
    std::vector<std::string> paths = {generatedTrace(dir, 42)};
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "threads_race", "gpt2", "cupy", "jax",
                             "torch_async", "torch_native", "beyond_pool", "callsites", "thread_first",
                             "torchrun-rank0", "ipc-parent"})
        paths.push_back(fuzz::samplePath(name));
    size_t used = 0, fellBack = 0;
    for (const std::string& path : paths) {
        SCOPED_TRACE(path);
        auto reader = TraceReader::open(path);
        ASSERT_TRUE(reader);
        auto before = reportTrace(**reader, TraceReportOptions{}, path);
        ASSERT_TRUE(before) << before.error().message;
        if (path == paths[0]) { // the advice, with its racing threads' ranges, compared too
            const std::string text = reportToText(before->report);
            EXPECT_NE(text.find("what-if model"), std::string::npos) << text;
            EXPECT_NE(text.find("threads race"), std::string::npos) << text;
        }
        for (size_t n : {size_t{3}, size_t{7}}) {
            TraceReportOptions pieces;
            pieces.readPieces = n;
            pieces.readPiecesThreads = 3;
            // In 3, the questions after the read, from the spill the pieces' ops were written to
            // (not from a read of the trace again): counted below. In 7, as on the hosts with
            // many CPUs: asked during the read (from the spill's thread), and the report's
            // replay following a live set kept on a thread of its own.
            using F = TraceReportOptions::FeedThread;
            pieces.askAhead = n == 3 ? F::Off : F::On;
            if (n == 7) pieces.leadThread = F::On;
            const whatif::detail::SpillCounts spilled = whatif::detail::spillCounts();
            auto after = reportTrace(**reader, pieces, path);
            ASSERT_TRUE(after) << after.error().message;
            if (path == paths[0] && n == 3) {
                EXPECT_TRUE(after->piecesUsed) << after->piecesInexact;
                EXPECT_EQ(whatif::detail::spillCounts().replayed, spilled.replayed + 1);
                EXPECT_EQ(whatif::detail::spillCounts().fellBack, spilled.fellBack);
            }
            EXPECT_EQ(after->piecesUsed, after->piecesInexact.empty()) << after->piecesInexact;
            used += after->piecesUsed;
            fellBack += !after->piecesUsed;
            EXPECT_EQ(reportToJson(after->report), reportToJson(before->report));
            EXPECT_EQ(reportToText(after->report), reportToText(before->report));
            if (HasFailure()) return;
        }
    }
    EXPECT_GE(fellBack, 2u); // torchrun-rank0's
    EXPECT_GE(used, 2 * paths.size() - fellBack);
}

} // namespace
} // namespace poolscope
