// The what-if tape (whatif::Tape): the model's inputs recorded once, asked again without the
// trace. Every answer from a tape must be the answer of following the trace's replay, on the
// real samples and under settings that change what the model does (thresholds, each reuse
// policy, per-pool settings, the opportunistic lower bound), whole and one pool at a time.
#include <gtest/gtest.h>

#include <cstdlib>

#include <limits>

#include "PredictionChecks.h"
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {
namespace {

using test::expectSamePrediction;
using test::modelQuestions;
using whatif::PoolPrediction;
using whatif::Question;

constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

std::string samplePath(const char* name) {
    return std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
}

TEST(WhatIfTape, SamplesGiveTheSameAnswersFromTheTapeAsFromTheTrace) {
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "threads_race", "gpt2",
                             "cupy", "jax", "torch_async", "torch_native", "beyond_pool",
                             "callsites", "thread_first"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(samplePath(name));
        ASSERT_TRUE(reader);
        const std::vector<Question> qs = modelQuestions();
        auto direct = whatif::predict(**reader, qs);
        ASSERT_TRUE(direct);
        // Spread over four replays, the live set kept once and followed by all: the same answers.
        ::setenv("POOLSCOPE_PREDICT_REPLAYS", "4", 1);
        auto spread = whatif::predict(**reader, qs);
        ::unsetenv("POOLSCOPE_PREDICT_REPLAYS");
        ASSERT_TRUE(spread) << spread.error().message;
        ASSERT_EQ(spread->perQuestion.size(), direct->perQuestion.size());
        for (size_t qi = 0; qi < qs.size(); ++qi) {
            ASSERT_EQ(spread->perQuestion[qi].size(), direct->perQuestion[qi].size());
            for (size_t k = 0; k < direct->perQuestion[qi].size(); ++k)
                expectSamePrediction(spread->perQuestion[qi][k], direct->perQuestion[qi][k],
                           std::string(name) + " four replays, question " + std::to_string(qi));
        }
        auto tape = whatif::recordTape(**reader);
        ASSERT_TRUE(tape);
        EXPECT_EQ(tape->events, direct->events);
        EXPECT_GT(tape->ops.size(), 0u);
        for (size_t qi = 0; qi < qs.size(); ++qi) {
            const std::vector<PoolPrediction> fromTape = whatif::predict(*tape, qs[qi]);
            const std::vector<PoolPrediction>& fromTrace = direct->perQuestion[qi];
            ASSERT_EQ(fromTape.size(), fromTrace.size()) << "question " << qi;
            for (size_t k = 0; k < fromTape.size(); ++k) {
                expectSamePrediction(fromTape[k], fromTrace[k],
                           std::string(name) + " question " + std::to_string(qi) + " pool " +
                               std::to_string(k));
                // One pool alone: the same as that pool among all of them.
                const auto one = whatif::predict(*tape, qs[qi], {}, fromTrace[k].handle);
                ASSERT_EQ(one.size(), 1u);
                expectSamePrediction(one[0], fromTrace[k], std::string(name) + " one pool, question " +
                                                     std::to_string(qi));
            }
        }
    }
}

TEST(WhatIfTape, PerPoolSettingsChangeOnlyTheirPool) {
    // pools.poolscope has three pools. A threshold for one of them, from the tape, against the
    // same per-pool question asked of the trace.
    auto reader = TraceReader::open(samplePath("pools"));
    ASSERT_TRUE(reader);
    auto tape = whatif::recordTape(**reader);
    ASSERT_TRUE(tape);
    ASSERT_GE(tape->recorded.size(), 3u);
    const uint64_t second = tape->recorded[1].handle;
    Question q;
    q.perPool[second].releaseThreshold = kMax;
    q.keepSeries = true;
    auto direct = whatif::predict(**reader, {q});
    ASSERT_TRUE(direct);
    const auto fromTape = whatif::predict(*tape, q);
    ASSERT_EQ(fromTape.size(), direct->perQuestion[0].size());
    for (size_t k = 0; k < fromTape.size(); ++k)
        expectSamePrediction(fromTape[k], direct->perQuestion[0][k], "pool " + std::to_string(k));
    EXPECT_EQ(fromTape[1].releaseThreshold, kMax);
    EXPECT_EQ(fromTape[1].releases, 0u);
    EXPECT_EQ(fromTape[0].releaseThreshold, tape->recorded[0].releaseThreshold);
}

TEST(WhatIfTape, AdviceFromTheTapeIsTheAdviceFromTheTrace) {
    for (const char* name : {"jax", "churn", "gpt2", "pools"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(samplePath(name));
        ASSERT_TRUE(reader);
        auto fromTrace = whatif::advise(**reader);
        ASSERT_TRUE(fromTrace);
        auto tape = whatif::recordTape(**reader);
        ASSERT_TRUE(tape);
        const auto fromTape = whatif::advise(*tape);
        ASSERT_EQ(fromTape.size(), fromTrace->size());
        for (size_t i = 0; i < fromTape.size(); ++i) {
            const whatif::PoolAdvice &a = fromTape[i], &b = (*fromTrace)[i];
            EXPECT_EQ(a.handle, b.handle);
            EXPECT_EQ(a.thresholdAdvice, b.thresholdAdvice);
            EXPECT_EQ(a.suggestedThreshold, b.suggestedThreshold);
            EXPECT_EQ(a.suggestedReleases, b.suggestedReleases);
            EXPECT_EQ(a.suggestedPeakReserved, b.suggestedPeakReserved);
            EXPECT_EQ(a.currentReleases, b.currentReleases);
            EXPECT_EQ(a.policies.size(), b.policies.size());
            EXPECT_EQ(whatif::adviceText(a, "p"), whatif::adviceText(b, "p"));
        }
    }
    // jax is the sample the advisor has something to say about (docs/WHATIF.md).
    auto reader = TraceReader::open(samplePath("jax"));
    ASSERT_TRUE(reader);
    auto tape = whatif::recordTape(**reader);
    ASSERT_TRUE(tape);
    const auto advice = whatif::advise(*tape);
    ASSERT_FALSE(advice.empty());
    EXPECT_TRUE(advice[0].thresholdAdvice);
    EXPECT_EQ(advice[0].suggestedThreshold, 128 * MiB);
}

TEST(WhatIfTape, ARecorderOnATimelineBuilderRecordsWhatRecordTapeRecords) {
    // A live session follows its timeline builder's replay: the tape taken from it must be the
    // tape of the same events read from the file.
    auto reader = TraceReader::open(samplePath("churn"));
    ASSERT_TRUE(reader);
    auto tape = whatif::recordTape(**reader);
    ASSERT_TRUE(tape);
    TimelineBuilder b;
    auto devices = (*reader)->devices();
    auto pools = (*reader)->pools();
    auto streams = (*reader)->streams();
    ASSERT_TRUE(devices && pools && streams);
    b.setEntities(*devices, *pools, *streams);
    whatif::TapeRecorder rec;
    b.subscribe(&rec, whatif::TapeRecorder::kindMask());
    auto samples = (*reader)->samples(0, std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int64_t>::max());
    ASSERT_TRUE(samples);
    size_t si = 0;
    ASSERT_TRUE((*reader)->forEachChunk([&](std::vector<Event>& chunk) {
        for (const Event& e : chunk) {
            while (si < samples->size() && (*samples)[si].tsNs <= e.tsNs) b.add((*samples)[si++]);
            b.add(e);
        }
        return true;
    }));
    while (si < samples->size()) b.add((*samples)[si++]);
    const whatif::Tape live = rec.tape(b.replay());
    EXPECT_EQ(live.ops.size(), tape->ops.size());
    EXPECT_EQ(live.allocSeq, tape->allocSeq);
    Question q;
    q.all.releaseThreshold = kMax;
    q.keepSeries = true;
    const auto x = whatif::predict(live, q), y = whatif::predict(*tape, q);
    ASSERT_EQ(x.size(), y.size());
    for (size_t k = 0; k < x.size(); ++k) expectSamePrediction(x[k], y[k], "pool " + std::to_string(k));
}

TEST(WhatIfTape, OnePoolTheTapeDoesNotHaveGivesNothing) {
    auto reader = TraceReader::open(samplePath("churn"));
    ASSERT_TRUE(reader);
    auto tape = whatif::recordTape(**reader);
    ASSERT_TRUE(tape);
    EXPECT_TRUE(whatif::predict(*tape, Question{}, {}, uint64_t{0xdead0000}).empty());
    EXPECT_TRUE(whatif::predict(whatif::Tape{}, Question{}).empty());
}

TEST(WhatIfTape, RecordingStopsWhenCancelled) {
    auto reader = TraceReader::open(samplePath("gpt2"));
    ASSERT_TRUE(reader);
    std::atomic<bool> cancel{true};
    auto tape = whatif::recordTape(**reader, &cancel);
    ASSERT_FALSE(tape);
    EXPECT_EQ(tape.error().code, ErrorCode::Cancelled);
    // The advisor over a tape stops between its questions, with nothing to say.
    auto whole = whatif::recordTape(**reader);
    ASSERT_TRUE(whole);
    EXPECT_FALSE(whatif::advise(*whole).empty());
    EXPECT_TRUE(whatif::advise(*whole, {}, &cancel).empty());
}


// The split in time's hooks (PoolModel::clone, sameState, guessReserved, forgetPending; the
// study is tests/bench/SplitModelsBench.cpp): a clone taken halfway answers the rest of the ops
// as the model itself; a guess that moves reserved bytes differs from the truth until the ops
// bring both to the same state, and from there on the two give the same answers.
TEST(WhatIfTape, AModelClonedHalfwayOrGuessedMeetsTheTruthAndThenAnswersAlike) {
    bool forgetDiffered = false;
    for (const char* name : {"churn", "gpt2", "pools", "trims_oom"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(samplePath(name));
        ASSERT_TRUE(reader);
        auto tape = whatif::recordTape(**reader);
        ASSERT_TRUE(tape);
        const std::vector<whatif::Op>& ops = tape->ops;
        const size_t half = ops.size() / 2;
        size_t allocsBefore = 0;
        for (size_t i = 0; i < half; ++i) allocsBefore += ops[i].kind == whatif::Op::Kind::Alloc;
        const std::vector<uint8_t> noMute;
        auto feed = [&](whatif::PoolModel& m, size_t a, size_t b, size_t seqAt) {
            m.feed(ops.data() + a, ops.data() + b, tape->allocSeq.data() + seqAt,
                   tape->allocSeq.size() - seqAt, tape->streamHandles, noMute);
        };
        whatif::Settings s;
        s.releaseThreshold = 64 * MiB;
        whatif::PoolModel whole(s);
        feed(whole, 0, half, 0);
        std::unique_ptr<whatif::PoolModel> copy = whole.clone(), guessed = whole.clone();
        std::unique_ptr<whatif::PoolModel> copyAtHalf = whole.clone(), forgot = whole.clone();
        forgot->forgetPending();
        EXPECT_TRUE(copy->sameState(whole));
        // The guess: every pool's reserved one granule above the truth.
        guessed->guessReserved([&](uint32_t pool, uint64_t, uint64_t) {
            return whole.reservedOf(pool) + (32 * MiB);
        });
        bool anyPool = false;
        for (uint32_t p = 0; p < 8; ++p) anyPool |= whole.reservedOf(p) != guessed->reservedOf(p);
        ASSERT_TRUE(anyPool);
        EXPECT_FALSE(guessed->sameState(whole));
        // One op at a time: the guess meets the truth at a release or a growth.
        size_t met = ops.size();
        size_t seqAt = allocsBefore;
        for (size_t i = half; i < ops.size(); ++i) {
            const size_t next = seqAt + (ops[i].kind == whatif::Op::Kind::Alloc);
            feed(whole, i, i + 1, seqAt);
            feed(*copy, i, i + 1, seqAt);
            if (met == ops.size()) {
                feed(*guessed, i, i + 1, seqAt);
                if (guessed->sameState(whole)) met = i;
            } else {
                feed(*guessed, i, i + 1, seqAt);
                EXPECT_TRUE(guessed->sameState(whole)) << "op " << i;
            }
            seqAt = next;
            EXPECT_TRUE(copy->sameState(whole)) << "op " << i;
        }
        EXPECT_LT(met, ops.size()) << "the guess never met the truth";
        const auto a = whole.collect(*tape), b = copy->collect(*tape);
        ASSERT_EQ(a.size(), b.size());
        for (size_t p = 0; p < a.size(); ++p) test::expectSamePrediction(a[p], b[p], "clone");
        // Forgetting the pending frees halfway moves them to the free bytes: the reserved bytes
        // stay, the state differs wherever some were pending (in at least one sample).
        for (uint32_t p = 0; p < 8; ++p) EXPECT_EQ(forgot->reservedOf(p), copyAtHalf->reservedOf(p));
        forgetDiffered |= !forgot->sameState(*copyAtHalf);
    }
    EXPECT_TRUE(forgetDiffered);
}

} // namespace
} // namespace poolscope
