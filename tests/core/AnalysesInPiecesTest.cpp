// The report's replay analyses read in pieces (issue #15, analysis/PieceRead.h): every piece's
// analyses taken in by the first piece's must give what one read gives. Hand-built traces cut at
// every chunk (orderings, records, waits and frees on both sides of each cut), then real GPU
// traces from resources/samples; a trace whose clocks ran past their bound is not carried.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

#include "../../core/src/analysis/PieceRead.h"
#include "../../core/src/analysis/ReplayThread.h"
#include "../../core/src/replay/TraceEntities.h"
#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope {
namespace {

using test::Events;
constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kPool = 0x100, kS1 = 0x11, kS2 = 0x22, kS3 = 0x33;
constexpr size_t kTopN = 10;

void record(Events& ev, int64_t ts, uint64_t stream, uint64_t cuEvent) {
    Event& e = ev.add(EventKind::EventRecord, ts);
    e.stream = stream;
    CuEventFields{cuEvent, 0}.into(e);
}
void wait(Events& ev, int64_t ts, uint64_t stream, uint64_t cuEvent) {
    Event& e = ev.add(EventKind::StreamWaitEvent, ts);
    e.stream = stream;
    CuEventFields{cuEvent, 0}.into(e);
}

// Blocks handed between three streams, each hand-off ordered by something else or by nothing:
// frees of blocks allocated long before, addresses freed on one stream and allocated on
// another, records made long before the waits on them, synchronizes of streams and events, a
// context synchronize. Watermarks on the allocs: the pool grows while bytes sit idle.
Events handOffs() {
    Events ev;
    int64_t t = 0;
    uint64_t reserved = 0, used = 0;
    auto alloc = [&](uint64_t stream, uint64_t ptr, uint64_t bytes) {
        used += bytes;
        if (used > reserved) reserved = used + 2 * MiB;
        Events::wm(ev.alloc(t += 10, stream, kPool, ptr, bytes), reserved, used);
    };
    auto free = [&](uint64_t stream, uint64_t ptr, uint64_t bytes) {
        used -= bytes;
        Event& e = Events::wm(ev.free(t += 10, stream, kPool, ptr), reserved, used);
        FreeFields{ptr, bytes}.into(e); // as the collector records a free: a piece counts it by its size
    };
    for (uint64_t round = 0; round < 4; ++round) {
        const uint64_t e = 0xE0 + round * 8;
        alloc(kS1, 0x1000, MiB);             // freed on S2 with nothing between: a hazard
        alloc(kS1, 0x2000, MiB);             // ordered by a record and a wait
        record(ev, t += 10, kS1, e);
        alloc(kS1, 0x3000, MiB);             // ordered through S3 (two waits)
        record(ev, t += 10, kS1, e + 1);
        wait(ev, t += 10, kS3, e + 1);
        record(ev, t += 10, kS3, e + 2);
        alloc(kS1, 0x4000, 2 * MiB);         // ordered by a synchronize of S1
        alloc(kS2, 0x5000, MiB);             // freed on S1 after an event synchronize
        record(ev, t += 10, kS2, e + 3);
        free(kS2, 0x1000, MiB);
        wait(ev, t += 10, kS2, e);
        free(kS2, 0x2000, MiB);
        wait(ev, t += 10, kS2, e + 2);
        free(kS2, 0x3000, MiB);
        ev.add(EventKind::StreamSynchronize, t += 10).stream = kS1;
        free(kS2, 0x4000, 2 * MiB);
        CuEventFields{e + 3, 0}.into(ev.add(EventKind::EventSynchronize, t += 10));
        free(kS1, 0x5000, MiB);
        // Addresses freed above, allocated again on other streams: 0x1000 and 0x2000 by S3
        // with nothing ordering S2's frees, 0x5000 by S2 (freed on S1, synchronized below in
        // every other round).
        alloc(kS3, 0x1000, MiB);
        if (round % 2) ev.add(EventKind::StreamSynchronize, t += 10).stream = kS1;
        alloc(kS2, 0x5000, MiB);
        alloc(kS3, 0x2000, MiB);
        free(kS3, 0x1000, MiB);
        free(kS3, 0x2000, MiB);
        free(kS2, 0x5000, MiB);
        if (round == 2) ev.add(EventKind::ContextSynchronize, t += 10);
    }
    return ev;
}

std::string writeTrace(const Events& ev, size_t perChunk, const std::string& name) {
    const std::string path = ::testing::TempDir() + "/" + name + std::to_string(::getpid()) + ".poolscope";
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w) << (w ? "" : w.error().message);
    if (!w) return path;
    // The tables a recording has: a replay of any piece numbers the entities as one read does.
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "hand-built", 80ull << 30, {}}));
    EXPECT_TRUE((*w)->addPool(PoolInfo{kPool, 0, PoolKind::Default}));
    for (uint64_t s : {kS1, kS2, kS3}) EXPECT_TRUE((*w)->addStream(StreamInfo{s, 0}));
    const std::vector<Event>& all = ev.all();
    for (size_t i = 0; i < all.size(); i += perChunk) {
        const size_t n = std::min(perChunk, all.size() - i);
        EXPECT_TRUE((*w)->append(std::span<const Event>(all.data() + i, n)));
        EXPECT_TRUE((*w)->commit()); // a chunk of its own
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

// The analyses read in `pieces` pieces against one read: exact and the same.
void expectPiecesGiveOneRead(const std::string& path, size_t pieces, bool exactExpected = true) {
    SCOPED_TRACE(path + " in " + std::to_string(pieces) + " pieces");
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader) << reader.error().message;
    auto one = detail::analysesInOneRead(**reader, kTopN);
    ASSERT_TRUE(one) << one.error().message;
    auto split = detail::analysesInPieces(**reader, pieces, 2, kTopN);
    ASSERT_TRUE(split) << split.error().message;
    EXPECT_EQ(split->exact, exactExpected) << split->inexact;
    if (split->exact) {
        EXPECT_EQ(detail::analysesDiffer(*split->analyses, **one), "");
    }
}

TEST(AnalysesInPieces, HandBuiltHandOffsCutAtEveryChunkGiveOneRead) {
    const Events ev = handOffs();
    // What one read finds, worked out from the rounds above: each round's free of 0x1000 on S2
    // is unordered, and S3's allocs of 0x1000 and 0x2000 reuse S2's frees unordered; 0x5000
    // on S2 reuses S1's free unordered where no synchronize of S1 came between (rounds 0, 2).
    // The next round's allocs on S1 reuse 0x1000 and 0x2000 (freed on S3) and 0x3000 and
    // 0x4000 (freed on S2) unordered, but after the context synchronize (round 2's end).
    {
        const std::string path = writeTrace(ev, 4096, "handoffs-whole");
        auto reader = TraceReader::open(path);
        ASSERT_TRUE(reader);
        auto one = detail::analysesInOneRead(**reader, kTopN);
        ASSERT_TRUE(one);
        const StreamHazards& h = (*one)->hazards.result();
        EXPECT_EQ(h.unorderedFrees, 4u);
        EXPECT_EQ(h.unorderedReuses, (4u * 2 + 2) + 2 * 4);
        EXPECT_FALSE((*one)->fragmentation.result().pools.empty());
        EXPECT_FALSE((*one)->pending.result().streams.empty());
        std::remove(path.c_str());
    }
    for (size_t perChunk : {1, 2, 3, 7}) {
        const std::string path = writeTrace(ev, perChunk, "handoffs" + std::to_string(perChunk));
        const size_t chunks = (ev.all().size() + perChunk - 1) / perChunk;
        for (size_t pieces : {size_t{2}, size_t{5}, chunks}) expectPiecesGiveOneRead(path, pieces);
        std::remove(path.c_str());
    }
}

TEST(AnalysesInPieces, AFreeOlderThanTheReuseWindowIsForgottenAlike) {
    // 0x1000 freed on S1 a window's worth of events in, then more than the window of S1's own
    // churn, then allocated on S2: not checked, and said; 0x2000 freed on S1 shortly before S2
    // allocates it: an unordered reuse. Cut in pieces, the free and the allocs fall in different
    // pieces; in 2, each longer than the window, 0x1000's free ages only in the second (absorb()
    // then takes that piece's frees whole, and must say the older one aged).
    Events ev;
    int64_t t = 0;
    auto freeSized = [&](uint64_t stream, uint64_t ptr) { FreeFields{ptr, MiB}.into(ev.free(t += 10, stream, kPool, ptr)); };
    auto churn = [&](uint64_t n) {
        for (uint64_t i = 0; i < n; ++i) {
            ev.alloc(t += 10, kS1, kPool, 0x100000 + (i % 64) * 0x1000, MiB);
            freeSized(kS1, 0x100000 + (i % 64) * 0x1000);
        }
    };
    ev.alloc(t += 10, kS1, kPool, 0x2000, MiB);
    churn(StreamHazards::kReuseWindow / 2);
    ev.alloc(t += 10, kS1, kPool, 0x1000, MiB);
    freeSized(kS1, 0x1000);
    churn(StreamHazards::kReuseWindow * 3 / 4);
    freeSized(kS1, 0x2000);
    ev.alloc(t += 10, kS2, kPool, 0x1000, MiB);
    ev.alloc(t += 10, kS2, kPool, 0x2000, MiB);
    const std::string path = writeTrace(ev, 4096, "window");
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    auto one = detail::analysesInOneRead(**reader, kTopN);
    ASSERT_TRUE(one);
    const StreamHazards& h = (*one)->hazards.result();
    EXPECT_TRUE(h.freedForgotten);
    EXPECT_EQ(h.unorderedReuses, 1u);
    ASSERT_EQ(h.hazards.size(), 1u);
    EXPECT_EQ(h.hazards[0].ptr, 0x2000u);
    for (size_t pieces : {2, 7, 40}) expectPiecesGiveOneRead(path, pieces);
    std::remove(path.c_str());
}

TEST(AnalysesInPieces, RealTracesGiveOneRead) {
    const std::string dir = POOLSCOPE_SAMPLES_DIR;
    for (const char* name : {"threads", "threads_race", "cupy", "churn_format7"})
        for (size_t pieces : {3, 16}) expectPiecesGiveOneRead(dir + "/" + name + ".poolscope", pieces);
    for (size_t pieces : {3, 8}) expectPiecesGiveOneRead(dir + "/gpt2.poolscope", pieces);
}

// A sample's pieces as PieceRead plans them: the reader, its samples, the declared replay, the
// plan and an opener of the same file.
struct Cut {
    std::string path;
    std::unique_ptr<TraceReader> reader;
    std::vector<Event> samples;
    replay::Replay declared;
    detail::PiecePlan plan;
    detail::ReaderOpener open;
};
std::unique_ptr<Cut> cutSample(const std::string& name, size_t pieces) {
    auto c = std::make_unique<Cut>();
    c->path = std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
    auto reader = TraceReader::open(c->path);
    EXPECT_TRUE(reader) << (reader ? "" : reader.error().message);
    if (!reader) return nullptr;
    c->reader = std::move(*reader);
    auto samples = c->reader->samples(0, INT64_MIN, INT64_MAX);
    auto headers = c->reader->chunkHeaders();
    EXPECT_TRUE(samples && headers);
    if (!samples || !headers) return nullptr;
    c->samples = std::move(*samples);
    EXPECT_TRUE(detail::declareTraceEntities(*c->reader, c->declared, true));
    c->plan = detail::planPieces(std::move(*headers), c->samples, pieces);
    c->open = [path = c->path] { return TraceReader::open(path); };
    return c;
}

TEST(AnalysesInPieces, AReplayStartOnlyGuessedIsSaid) {
    // JAX's run frees blocks from before a piece in ways the replay's carry does not follow
    // (Replay::afterPiece): carried, its pieces' starts are guesses. Read in pieces, each piece
    // starts either from the end of the one before (replayed first) or from such a carry; the
    // pieces say which, and are exact only where every start was replayed.
    auto cut = cutSample("jax", 3);
    ASSERT_TRUE(cut);
    auto starts = detail::findPieceStarts(cut->open, cut->declared, cut->plan, cut->samples, 2);
    ASSERT_TRUE(starts) << starts.error().message;
    EXPECT_FALSE(starts->allExact());

    auto one = detail::analysesInOneRead(*cut->reader, kTopN);
    ASSERT_TRUE(one);
    for (unsigned threads : {1u, 3u}) {
        auto split = detail::analysesInPieces(*cut->reader, 3, threads, kTopN);
        ASSERT_TRUE(split) << split.error().message;
        if (split->exact) {
            EXPECT_EQ(detail::analysesDiffer(*split->analyses, **one), "");
        } else {
            EXPECT_NE(split->inexact.find("carried as a guess"), std::string::npos) << split->inexact;
        }
        // On one thread every piece waits for the one before: no start is guessed.
        if (threads == 1) EXPECT_TRUE(split->exact) << split->inexact;
    }
}

TEST(AnalysesInPieces, ClocksPastTheirBoundAreNotCarried) {
    // A DDP rank's 129 streams wait on more than a clock holds: one read forgets orderings the
    // pieces would keep, so the pieces say they are not exact.
    expectPiecesGiveOneRead(std::string(POOLSCOPE_SAMPLES_DIR) + "/torchrun-rank0.poolscope", 4, false);
}

TEST(AnalysesInPieces, EveryPieceEndsWhereTheNextBeginsAndAHaltStopsThoseNotBegun) {
    // runPieces finds the pieces' starts on the way: each piece's replay ends in the next one's
    // start, carried or replayed, and the last in the whole replay's end state. A halt set at a
    // piece's end stops the pieces not yet begun with a Cancelled error.
    auto cut = cutSample("gpt2", 6);
    ASSERT_TRUE(cut);
    const detail::PiecePlan& plan = cut->plan;
    ASSERT_GE(plan.pieces(), 4u);
    const replay::Replay& declared = cut->declared;
    const std::vector<Event>& samples = cut->samples;
    const detail::ReaderOpener& open = cut->open;
    TraceReader* reader = cut->reader.get();

    // The whole replay's end, to hold the last piece's against.
    replay::Replay whole = declared.clone();
    {
        detail::SampleMerge merge;
        merge.expect(&samples);
        auto apply = [&](const Event& e) { whole.apply(e); };
        ASSERT_TRUE(reader->forEachChunk([&](std::vector<Event>& chunk) {
            merge.chunk(chunk, whole, apply);
            return true;
        }));
        merge.rest(apply);
    }

    for (unsigned threads : {1u, 2u, 5u}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        std::vector<size_t> ended;
        bool lastIsWhole = false;
        ASSERT_TRUE(detail::runPieces(open, declared, plan, samples, threads, {},
                                      [&](size_t k, const detail::PieceEnd& end) {
                                          EXPECT_TRUE(end.startExact) << "piece " << k;
                                          EXPECT_TRUE(end.endsAtNext) << "piece " << k;
                                          ended.push_back(k); // with the scheduler's lock held
                                          if (k + 1 == plan.pieces()) lastIsWhole = end.end.sameState(whole);
                                      }));
        std::sort(ended.begin(), ended.end());
        std::vector<size_t> all(plan.pieces());
        std::iota(all.begin(), all.end(), size_t{0});
        EXPECT_EQ(ended, all);
        EXPECT_TRUE(lastIsWhole);
    }

    std::vector<size_t> ended;
    std::atomic<bool> halt{false};
    Status st = detail::runPieces(
        open, declared, plan, samples, 1, {},
        [&](size_t k, const detail::PieceEnd&) {
            ended.push_back(k);
            if (k == 1) halt = true;
        },
        nullptr, &halt);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error().code, ErrorCode::Cancelled);
    EXPECT_EQ(ended, (std::vector<size_t>{0, 1}));
}

// A replay thread retired (its observers' results known otherwise) takes the chunks still to
// come and drops them: its replay sees none of them, nor the last samples.
TEST(AnalysesInPieces, ARetiredReplayThreadAppliesNothingMore) {
    Events ev;
    for (int i = 0; i < 100; ++i) ev.alloc(10 * i + 10, kS1, kPool, 0x1000 + 0x1000 * uint64_t(i), MiB);
    const std::vector<Event> samples = {ev.sample(5000, kPool, 200 * MiB, 100 * MiB)};
    detail::ChunkShelf shelf;
    auto chunk = [&](size_t from, size_t to) {
        std::vector<Event> c(ev.all().begin() + std::ptrdiff_t(from), ev.all().begin() + std::ptrdiff_t(to));
        return shelf.hold(c);
    };
    for (bool retire : {false, true}) {
        detail::ReplayThread t;
        t.expectSamples(&samples);
        t.start();
        t.push(chunk(0, 50));
        if (retire) t.retire();
        t.push(chunk(50, 100));
        t.end();
        // Retired after the first chunk was pushed: that one may or may not have been applied
        // by then, the second never is.
        if (retire)
            EXPECT_LE(t.replay().eventCount(), 50u);
        else
            EXPECT_EQ(t.replay().eventCount(), 100u);
        EXPECT_EQ(t.retired(), retire);
    }
}

// `report` with its analyses read in pieces (TraceReportOptions::analysesPieces): the same
// report, text and JSON, with the pieces used where exact and read as before where not.
TEST(AnalysesInPieces, TheReportIsTheSameWithItsAnalysesReadInPieces) {
    const std::string dir = POOLSCOPE_SAMPLES_DIR;
    for (const char* name : {"threads", "cupy", "gpt2", "jax", "torchrun-rank0"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(dir + "/" + name + ".poolscope");
        ASSERT_TRUE(reader);
        TraceReportOptions plain;
        auto before = reportTrace(**reader, plain, name);
        ASSERT_TRUE(before) << before.error().message;
        TraceReportOptions pieces;
        pieces.analysesPieces = 3; // JAX's run cut in 3: a start guessed where one is carried
        // The analyses on a replay of their own beside the models' and their follower's, as on
        // a host with many CPUs: that replay is what the pieces stand in for.
        using F = TraceReportOptions::FeedThread;
        pieces.adviceFeedThread = pieces.analysesThread = pieces.spillThread = F::On;
        auto after = reportTrace(**reader, pieces, name);
        ASSERT_TRUE(after) << after.error().message;
        if (std::string(name) == "jax") {
            // Exact where every start came from the piece before replayed (runPieces).
            EXPECT_EQ(after->piecesUsed, after->piecesInexact.empty()) << after->piecesInexact;
            if (!after->piecesUsed) EXPECT_NE(after->piecesInexact.find("guess"), std::string::npos);
        } else {
            const bool exactExpected = std::string(name) != "torchrun-rank0";
            EXPECT_EQ(after->piecesUsed, exactExpected) << after->piecesInexact;
            EXPECT_EQ(after->piecesInexact.empty(), exactExpected);
        }
        EXPECT_EQ(reportToJson(after->report), reportToJson(before->report));
        EXPECT_EQ(reportToText(after->report), reportToText(before->report));
    }
}

} // namespace
} // namespace poolscope
