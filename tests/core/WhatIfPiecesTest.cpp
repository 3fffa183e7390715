// The pool model over a tape cut in pieces modelled at once (PoolModel::runInPieces): every
// answer must be run()'s over the whole tape, on any number of pieces and threads, whether a
// piece's guess met the true state (and was joined) or not (and was modelled again).
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "../../core/src/analysis/PieceRead.h"
#include "../bench/SyntheticTrace.h"
#include "GeneratedTraces.h"
#include "PredictionChecks.h"
#include "TestTraces.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {
namespace {

using test::expectSamePrediction;
using test::expectSameTape;
using whatif::Op;
using whatif::PoolModel;
using whatif::PoolPrediction;
using whatif::Question;

constexpr uint64_t MiB = uint64_t{1} << 20;

std::string samplePath(const char* name) {
    return std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
}

std::unique_ptr<PoolModel> modelFor(const Question& q) {
    whatif::Calibration c;
    if (q.opportunisticLagNs) c.opportunisticLagNs = *q.opportunisticLagNs;
    auto m = std::make_unique<PoolModel>(q.all, c);
    for (const auto& [h, s] : q.perPool) m->setPoolSettings(h, s);
    m->keepSeries(q.keepSeries);
    return m;
}

// Every question whole and in pieces; returns what the pieces did, summed.
PoolModel::PieceStats expectPiecesSame(const whatif::Tape& tape, const std::vector<Question>& qs,
                                       const std::vector<size_t>& pieces,
                                       const std::vector<unsigned>& threads, const std::string& what) {
    PoolModel::PieceStats all;
    for (size_t qi = 0; qi < qs.size(); ++qi) {
        const std::vector<PoolPrediction> whole = modelFor(qs[qi])->run(tape);
        EXPECT_FALSE(whole.empty()) << what;
        for (size_t n : pieces) {
            for (unsigned t : threads) {
                const std::string at = what + " question " + std::to_string(qi) + ", " +
                                       std::to_string(n) + " pieces on " + std::to_string(t);
                PoolModel::PieceStats st;
                const auto cut = modelFor(qs[qi])->runInPieces(tape, std::nullopt, n, t, &st);
                EXPECT_EQ(cut.size(), whole.size()) << at;
                if (cut.size() != whole.size()) return all;
                for (size_t k = 0; k < whole.size(); ++k)
                    expectSamePrediction(cut[k], whole[k], at + " pool " + std::to_string(k));
                all.pieces += st.pieces;
                all.joined += st.joined;
                all.opsTwice += st.opsTwice;
                if (::testing::Test::HasFailure()) return all;
            }
        }
        // One pool alone, in pieces: that pool among all of them.
        const auto one = modelFor(qs[qi])->runInPieces(tape, whole.back().handle, pieces.back(),
                                                      threads.back());
        EXPECT_EQ(one.size(), 1u) << what;
        if (one.size() == 1) expectSamePrediction(one[0], whole.back(), what + " one pool, question " + std::to_string(qi));
    }
    return all;
}

TEST(WhatIfPieces, SamplesInPiecesGiveTheWholeTapesAnswers) {
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "threads_race", "gpt2",
                             "cupy", "jax", "torch_async", "torch_native", "beyond_pool"}) {
        auto reader = TraceReader::open(samplePath(name));
        ASSERT_TRUE(reader) << name;
        auto tape = detail::recordTapeInOneRead(**reader);
        ASSERT_TRUE(tape) << name;
        expectPiecesSame(*tape, test::modelQuestions(), {2, 5, 33}, {2, 3}, name);
        if (HasFailure()) return;
    }
}

// The tape of the generator's workload (not a recording), `events` long.
whatif::Tape generatedTape(uint64_t seed, size_t events) {
    replay::Replay r;
    whatif::TapeRecorder rec;
    r.subscribe(&rec, whatif::TapeRecorder::kindMask());
    for (const Event& e : bench::SyntheticTrace(seed).generate(events)) r.apply(e);
    return rec.tape(r);
}

// The generator's workload (not a recording): long enough for pieces with checkpoints, so
// that most pieces are joined where their guess met the true state, a few ops into them.
TEST(WhatIfPieces, AGeneratedWorkloadsPiecesAreJoinedEarlyAndAnswerAlike) {
    const whatif::Tape tape = generatedTape(3, 300'000);
    ASSERT_GT(tape.ops.size(), 250'000u);
    std::vector<Question> qs = test::modelQuestions();
    const PoolModel::PieceStats st = expectPiecesSame(tape, qs, {4, 16}, {2, 4}, "generated");
    ASSERT_GT(st.pieces, 0u);
    EXPECT_GT(st.joined, st.pieces / 2);
    EXPECT_LT(st.opsTwice, tape.ops.size() * 4); // of 9 questions x 4 runs over every op
}

// predict() over a tape as long as kPiecesFromOps goes in pieces on every hardware thread.
TEST(WhatIfPieces, ALongTapesQuestionIsAnsweredAsTheWholeTapes) {
    const whatif::Tape tape = generatedTape(4, 1'200'000);
    ASSERT_GE(tape.ops.size(), whatif::kPiecesFromOps);
    const std::vector<Question> qs = test::modelQuestions();
    for (size_t qi : {size_t{1}, size_t{3}}) {
        const auto whole = modelFor(qs[qi])->run(tape);
        const auto asked = whatif::predict(tape, qs[qi]);
        ASSERT_EQ(asked.size(), whole.size());
        for (size_t k = 0; k < whole.size(); ++k)
            expectSamePrediction(asked[k], whole[k], "question " + std::to_string(qi));
    }
}

// Ops drawn at random (not a recording, and not always consistent: frees of bytes never
// allocated, times out of order, pools first named part-way, knobs and size limits changing,
// drops and resets): whatever the guesses are, the pieces answer as the whole tape.
whatif::Tape randomTape(uint64_t seed, size_t n) {
    std::mt19937_64 rng(seed);
    whatif::Tape t;
    t.streamHandles = {0x10, 0x20, 0x30};
    const uint64_t handles[2] = {0xa0, 0xb0};
    std::vector<uint64_t> live[2];
    int64_t ts = 1'000'000;
    uint64_t seq = 0;
    auto push = [&](Op op) {
        op.ts = ts;
        t.ops.push_back(op);
    };
    Op init;
    init.kind = Op::Kind::Init;
    init.pool = 0;
    init.value = handles[0];
    push(init);
    bool second = false;
    for (size_t i = 0; i < n; ++i) {
        ts += static_cast<int64_t>(rng() % 3000);
        if (rng() % 100 == 0) ts -= static_cast<int64_t>(rng() % 20000);
        if (!second && i > n / 3) {
            init.pool = 1;
            init.value = handles[1];
            push(init);
            second = true;
        }
        // The second pool in bursts: a piece may begin where it has been idle a while.
        const bool burst = second && (i / 2000) % 2 == 0;
        const uint32_t pool = burst ? static_cast<uint32_t>(rng() % 2) : 0;
        const uint32_t stream = static_cast<uint32_t>(rng() % 3);
        Op op;
        op.pool = pool;
        op.stream = stream;
        const unsigned r = static_cast<unsigned>(rng() % 1000);
        if (r < 420) {
            op.kind = Op::Kind::Alloc;
            op.value = (uint64_t{1} << (10 + rng() % 16)) + rng() % 4096;
            if (rng() % 200 == 0) op.stream = replay::kNone;
            live[pool].push_back(op.value);
            t.allocSeq.push_back(++seq);
        } else if (r < 800) {
            op.kind = Op::Kind::Free;
            if (!live[pool].empty() && rng() % 50 != 0) {
                const size_t k = rng() % live[pool].size();
                op.value = live[pool][k];
                live[pool][k] = live[pool].back();
                live[pool].pop_back();
            } else {
                op.value = rng() % (8 * MiB);
            }
            op.flag = rng() % 60 == 0;
        } else if (r < 840) {
            op.kind = Op::Kind::Wait;
            op.aux = static_cast<uint32_t>(rng() % 3);
            op.value = rng() % (16 * MiB);
        } else if (r < 865) {
            op.kind = Op::Kind::EventCleared;
            op.value = rng() % (16 * MiB);
        } else if (r < 905) {
            op.kind = Op::Kind::StreamSync;
            op.aux = 0;
        } else if (r < 925) {
            op.kind = Op::Kind::EventSync;
            op.aux = 0;
        } else if (r < 940) {
            op.kind = Op::Kind::ContextSync;
            op.aux = 0;
        } else if (r < 950) {
            op.kind = Op::Kind::Trim;
            op.value = rng() % (128 * MiB);
        } else if (r < 975) {
            op.kind = Op::Kind::Knob;
            op.attr = static_cast<uint8_t>(rng() % 5);
            op.flag = 1;
            const uint64_t thresholds[4] = {0, 64 * MiB, 256 * MiB, std::numeric_limits<uint64_t>::max()};
            op.value = op.attr == 0                  ? thresholds[rng() % 4]
                       : op.attr == whatif::kKnobMaxSize ? (rng() % 2 ? 0 : 512 * MiB)
                                                     : rng() % 2;
        } else if (r < 995) {
            op.kind = Op::Kind::Drop;
            op.value = rng() % (4 * MiB);
        } else {
            op.kind = Op::Kind::Reset;
            live[pool].clear();
        }
        push(op);
    }
    for (uint32_t p = 0; p < 2; ++p) {
        PoolPrediction rec;
        rec.handle = handles[p];
        t.recorded.push_back(rec);
        t.poolIndex.push_back(p);
        t.recordedEnd.push_back(std::numeric_limits<int64_t>::min());
    }
    t.lastTs = ts;
    t.events = t.ops.size();
    return t;
}

TEST(WhatIfPieces, RandomOpsInPiecesAnswerAsTheWholeTape) {
    PoolModel::PieceStats all;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        const whatif::Tape tape = randomTape(seed, 40'000);
        const PoolModel::PieceStats st = expectPiecesSame(
            tape, test::modelQuestions(), {3, 8, 41}, {2, 5}, "random " + std::to_string(seed));
        if (HasFailure()) return;
        all.pieces += st.pieces;
        all.joined += st.joined;
    }
    // Both ways through a piece are taken: joined from a checkpoint, and modelled again whole.
    EXPECT_GT(all.joined, 0u);
    EXPECT_LT(all.joined, all.pieces);
}

// A piece whose guess grew at every allocation where the model took free bytes, until both
// reserved the same: its list of growths is full of the guess's own, and the model, whose list
// is not full yet, must go through the piece itself to keep the growths past the checkpoint.
TEST(WhatIfPieces, GrowthsPastTheListsLengthAreTakenInOrder) {
    whatif::Tape t;
    t.streamHandles = {0x10};
    int64_t ts = 1000;
    auto push = [&](Op::Kind kind, uint64_t value) {
        Op op;
        op.ts = ts += 10;
        op.kind = kind;
        op.pool = 0;
        op.stream = kind == Op::Kind::ContextSync ? replay::kNone : 0;
        op.value = value;
        t.ops.push_back(op);
        if (kind == Op::Kind::Alloc) t.allocSeq.push_back(t.allocSeq.size() + 1);
    };
    push(Op::Kind::Init, 0xa0);
    push(Op::Kind::Alloc, 40ull << 30); // the model: 40 GiB reserved, kept (never released)
    push(Op::Kind::Free, 40ull << 30);
    while (t.ops.size() < 3000) push(Op::Kind::ContextSync, 0);
    for (int i = 0; i < 3000; ++i) push(Op::Kind::Alloc, 32 * MiB);
    PoolPrediction rec;
    rec.handle = 0xa0;
    t.recorded.push_back(rec);
    t.poolIndex.push_back(0);
    t.recordedEnd.push_back(std::numeric_limits<int64_t>::min());
    t.lastTs = ts;
    Question q;
    q.all.releaseThreshold = std::numeric_limits<uint64_t>::max();
    q.keepSeries = true;
    const auto whole = modelFor(q)->run(t);
    ASSERT_EQ(whole.size(), 1u);
    ASSERT_EQ(whole[0].growths, 1u + 3000 - 1280);
    ASSERT_EQ(whole[0].growthAllocs.size(), whatif::kKeptGrowths);
    PoolModel::PieceStats st;
    const auto cut = modelFor(q)->runInPieces(t, std::nullopt, 2, 2, &st);
    ASSERT_EQ(cut.size(), 1u);
    expectSamePrediction(cut[0], whole[0], "2 pieces");
    EXPECT_EQ(st.joined, 0u);
}

// Returns how many of the reads were joined whole (the rest said they could not be).
size_t expectTapeInPiecesSame(const std::string& path, const std::vector<size_t>& pieces,
                              const std::vector<unsigned>& threads) {
    auto reader = TraceReader::open(path);
    EXPECT_TRUE(reader) << path;
    if (!reader) return 0;
    auto whole = detail::recordTapeInOneRead(**reader);
    EXPECT_TRUE(whole) << path;
    if (!whole) return 0;
    size_t joined = 0;
    for (size_t n : pieces)
        for (unsigned t : threads) {
            auto cut = detail::recordTapeInPieces(**reader, n, t);
            EXPECT_TRUE(cut) << path;
            if (!cut || !*cut) continue;
            ++joined;
            expectSameTape(**cut, *whole, path + ", " + std::to_string(n) + " pieces on " + std::to_string(t));
        }
    return joined;
}

TEST(WhatIfPieces, SamplesRecordedInPiecesGiveTheWholeReadsTape) {
    size_t joined = 0, reads = 0;
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "threads_race", "gpt2",
                             "cupy", "jax", "torch_async", "torch_native", "beyond_pool",
                             "callsites", "thread_first"}) {
        joined += expectTapeInPiecesSame(samplePath(name), {2, 5, 16}, {1, 3});
        reads += 6;
        if (HasFailure()) return;
    }
    std::printf("samples: %zu of %zu reads joined\n", joined, reads);
    EXPECT_GT(joined, reads / 2);
}

TEST(WhatIfPieces, AGeneratedTraceRecordedInPiecesGivesTheWholeReadsTape) {
    test::ScratchDir dir;
    const std::vector<Event> events = bench::SyntheticTrace(6).generate(200'000);
    // Its pools and streams declared, as the generator's files have them.
    const std::string path = test::writeGenerated(dir.file("generated.poolscope"), events);
    const size_t joined = expectTapeInPiecesSame(path, {3, 16}, {2, 4});
    EXPECT_EQ(joined, 4u);
}

// Built by hand: a pool's reserved bytes read lower in the second piece than the first left
// them, with no release between (a driver reading that lags), then released in the third: the
// release counts against the most held since the last one, which the second piece must carry.
TEST(WhatIfPieces, TheMostHeldSinceAReleaseIsCarriedAcrossAPieceWithoutOne) {
    constexpr uint64_t kPool = 0x5500, kStream = 0x7f00;
    test::Events ev;
    test::Events::wm(ev.alloc(100, kStream, kPool, 0xA000, 96 * MiB), 128 * MiB, 96 * MiB);
    test::Events::wm(ev.free(200, kStream, kPool, 0xA000), 128 * MiB, 0);
    test::Events::wm(ev.alloc(300, kStream, kPool, 0xB000, MiB), 64 * MiB, MiB);
    test::Events::wm(ev.free(400, kStream, kPool, 0xB000), 64 * MiB, 0);
    ev.add(EventKind::ContextSynchronize, 500);
    Event& rel = ev.add(EventKind::ImplicitRelease, 510);
    rel.pool = kPool;
    rel.size = 96 * MiB;
    test::ScratchDir dir;
    PoolInfo info;
    info.handle = kPool;
    info.device = 0;
    const std::string path = test::writeEvents(dir.file("handbuilt_lagging_reading.poolscope"), ev.all(), {}, {info}, 2);
    auto reader = TraceReader::open(path);
    ASSERT_TRUE(reader);
    auto whole = whatif::recordTape(**reader);
    ASSERT_TRUE(whole);
    ASSERT_EQ(whole->recorded.size(), 1u);
    ASSERT_EQ(whole->recorded[0].recordedReleases, 1u);
    auto cut = detail::recordTapeInPieces(**reader, 3, 2);
    ASSERT_TRUE(cut);
    ASSERT_TRUE(cut->has_value());
    expectSameTape(**cut, *whole, "3 pieces");
}

} // namespace
} // namespace poolscope
