// Several release thresholds through one LaneModel (the advisor's candidates): each lane must
// answer exactly as a PoolModel with that threshold fed the same ops, after every step and at the
// end. Checked on op streams built here at random (not recordings: every kind of op, pools with
// size limits and reuse policies off, times out of order, frees of nothing) and on the tapes of
// the recorded samples; with lanes muted for pools along the way, as the advisor mutes them.
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <random>
#include <string>

#include "../../core/src/whatif/LaneModel.h"
#include "../../core/src/whatif/QuestionSearch.h"
#include "PredictionChecks.h"
#include "poolscope/TraceReader.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {
namespace {

using whatif::Op;
using whatif::PoolPrediction;

constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// A random op stream built here (not a recording), as a recording model would make it: pools
// declared with Init, their knobs (reuse policies on and off, thresholds, size limits) changed
// along the way, allocations and frees on four streams (some by cudaFree, some of nothing),
// waits, cleared events, every kind of synchronize, trims, drops and resets, with times that
// now and then go backwards.
whatif::Tape randomTape(uint64_t seed, size_t n) {
    std::mt19937_64 rng(seed);
    whatif::Tape tape;
    constexpr uint32_t kPools = 3, kStreams = 4;
    std::vector<uint64_t> live[kPools];
    int64_t ts = 1'000;
    uint64_t seq = 0;
    for (uint32_t s = 0; s < kStreams; ++s) tape.streamHandles.push_back(0x10 * (s + 1));
    auto add = [&](Op op) {
        op.ts = ts;
        tape.ops.push_back(op);
    };
    for (uint32_t p = 0; p < kPools; ++p) {
        Op op;
        op.kind = Op::Kind::Init;
        op.pool = p;
        op.value = 0xA00 + 0x100 * p;
        op.aux = p == 2 ? 1 : 0;
        add(op);
    }
    // Pool 1 has a size limit from the start (reached now and then).
    {
        Op op;
        op.kind = Op::Kind::Knob;
        op.pool = 1;
        op.attr = whatif::kKnobMaxSize;
        op.value = 256 * MiB;
        op.flag = 1;
        add(op);
    }
    while (tape.ops.size() < n) {
        // Mostly forward, now and then back (threads' records out of order).
        ts += rng() % 8 == 0 ? -static_cast<int64_t>(rng() % 3'000'000)
                             : static_cast<int64_t>(rng() % 1'500'000);
        const uint32_t p = static_cast<uint32_t>(rng() % kPools);
        const uint32_t s = static_cast<uint32_t>(rng() % kStreams);
        const uint64_t r = rng() % 1000;
        Op op;
        op.pool = p;
        op.stream = s;
        if (r < 420 || live[p].empty()) {
            op.kind = Op::Kind::Alloc;
            op.value = (1 + rng() % 48) * (rng() % 3 == 0 ? MiB : 96 * 1024) + rng() % 700;
            live[p].push_back(op.value);
            add(op);
            tape.allocSeq.push_back(++seq);
        } else if (r < 800) {
            const size_t k = rng() % live[p].size();
            op.kind = Op::Kind::Free;
            op.value = rng() % 50 == 0 ? 0 : live[p][k]; // a free of nothing, now and then
            op.flag = rng() % 20 == 0;                    // by cudaFree
            if (rng() % 40 == 0) op.stream = replay::kNone;
            live[p][k] = live[p].back();
            live[p].pop_back();
            add(op);
        } else if (r < 850) {
            op.kind = Op::Kind::StreamSync;
            op.stream = rng() % 10 == 0 ? replay::kNone : s;
            op.aux = static_cast<uint32_t>(rng() % 3) - 1; // device -1, 0 or 1
            add(op);
        } else if (r < 880) {
            op.kind = Op::Kind::Wait;
            op.aux = static_cast<uint32_t>((s + 1 + rng() % 3) % kStreams);
            op.value = (rng() % 64) * MiB;
            add(op);
        } else if (r < 900) {
            op.kind = Op::Kind::EventCleared;
            op.value = (rng() % 64) * MiB;
            add(op);
            op.kind = Op::Kind::EventSync;
            op.stream = replay::kNone;
            op.aux = static_cast<uint32_t>(rng() % 2);
            add(op);
        } else if (r < 915) {
            op.kind = Op::Kind::ContextSync;
            op.stream = replay::kNone;
            op.aux = rng() % 2 == 0 ? static_cast<uint32_t>(-1) : 0;
            add(op);
        } else if (r < 930) {
            op.kind = Op::Kind::Trim;
            op.value = (rng() % 5) * 32 * MiB + rng() % 3 * MiB;
            add(op);
        } else if (r < 940) {
            op.kind = Op::Kind::Drop;
            op.value = (1 + rng() % 8) * MiB;
            add(op);
        } else if (r < 945) {
            op.kind = Op::Kind::Reset;
            live[p].clear();
            add(op);
        } else if (r < 990) {
            // A knob: a reuse policy on or off, the recorded threshold, or pool 1's size limit.
            op.kind = Op::Kind::Knob;
            op.attr = static_cast<uint8_t>(rng() % 5);
            op.flag = rng() % 4 != 0;
            op.value = op.attr == 0 ? (rng() % 4) * 32 * MiB
                       : op.attr == whatif::kKnobMaxSize
                           ? (p == 1 ? (4 + rng() % 8) * 32 * MiB : 0)
                           : rng() % 2;
            add(op);
        } else {
            op.kind = Op::Kind::StreamSync;
            op.aux = static_cast<uint32_t>(-1);
            add(op);
        }
    }
    tape.lastTs = ts;
    // What collect() reads of the recording: one entry per pool.
    for (uint32_t p = 0; p < kPools; ++p) {
        PoolPrediction rec;
        rec.handle = 0xA00 + 0x100 * p;
        rec.device = p == 2 ? 1 : 0;
        rec.releaseThreshold = 7 * MiB;
        rec.allowOpportunistic = p != 0;
        rec.recordedReleases = p + 5;
        tape.poolIndex.push_back(p);
        tape.recorded.push_back(rec);
        tape.recordedEnd.push_back(p == 1 ? ts + 5'000'000 : std::numeric_limits<int64_t>::min());
    }
    return tape;
}

const std::vector<std::optional<uint64_t>> kThresholds = {
    std::nullopt, 0, 32 * MiB, 48 * MiB, 64 * MiB, 96 * MiB, 128 * MiB, 224 * MiB, 512 * MiB, kMax};

// The tape through a LaneModel of `thresholds` and through one PoolModel per threshold, in
// random steps; with `muting`, each lane muted for a random pool (or wholly) at random steps.
// Every lane's releases after each step and its whole answer at the end must be its model's,
// for every pool it still follows. `splits` gets the lanes split off their trunk.
void expectLanesAsModels(const whatif::Tape& tape,
                         const std::vector<std::optional<uint64_t>>& thresholds, uint64_t seed,
                         bool muting, uint64_t* splits = nullptr) {
    std::mt19937_64 rng(seed);
    const size_t lanes = thresholds.size();
    whatif::LaneModel lm(thresholds);
    std::vector<std::unique_ptr<whatif::PoolModel>> models;
    for (const auto& t : thresholds) {
        whatif::Settings s;
        s.releaseThreshold = t;
        models.push_back(std::make_unique<whatif::PoolModel>(s));
    }
    const size_t pools = tape.poolIndex.empty() ? 0 : *std::max_element(tape.poolIndex.begin(), tape.poolIndex.end()) + 1;
    std::vector<std::vector<uint8_t>> mute(lanes, std::vector<uint8_t>(pools, 0));
    std::vector<bool> done(lanes, false);
    size_t at = 0, seqAt = 0;
    while (at < tape.ops.size()) {
        const size_t n = std::min<size_t>(1 + rng() % 2000, tape.ops.size() - at);
        size_t allocs = 0;
        for (size_t j = at; j < at + n; ++j) allocs += tape.ops[j].kind == Op::Kind::Alloc;
        std::vector<const std::vector<uint8_t>*> mutes(lanes);
        for (size_t k = 0; k < lanes; ++k) mutes[k] = done[k] ? nullptr : &mute[k];
        const Op* first = tape.ops.data() + at;
        lm.feed(first, first + n, tape.allocSeq.data() + seqAt, allocs, tape.streamHandles, mutes);
        for (size_t k = 0; k < lanes; ++k)
            if (!done[k])
                models[k]->feed(first, first + n, tape.allocSeq.data() + seqAt, allocs,
                                tape.streamHandles, mute[k]);
        at += n;
        seqAt += allocs;
        for (size_t k = 0; k < lanes; ++k)
            for (uint32_t i = 0; i < pools && !done[k]; ++i) {
                if (mute[k][i]) continue;
                ASSERT_EQ(lm.releasesOf(k, i), models[k]->releasesOf(i))
                    << "lane " << k << " pool " << i << " after op " << at;
            }
        if (muting && rng() % 6 == 0) {
            const size_t k = rng() % lanes;
            if (rng() % 5 == 0) done[k] = true;
            else mute[k][rng() % pools] = 1;
        }
    }
    for (size_t k = 0; k < lanes; ++k) {
        if (done[k]) continue;
        SCOPED_TRACE(testing::Message() << "lane " << k);
        const std::vector<PoolPrediction> got = lm.collect(k, tape);
        const std::vector<PoolPrediction> want = models[k]->collect(tape);
        ASSERT_EQ(got.size(), want.size());
        for (size_t j = 0; j < got.size(); ++j) {
            if (mute[k][tape.poolIndex[j]]) continue;
            test::expectSamePrediction(got[j], want[j], "pool " + std::to_string(j));
        }
    }
    if (splits) *splits += lm.splits();
}

TEST(WhatIfLanes, EveryLaneAnswersAsItsOwnModelOnRandomOps) {
    uint64_t splits = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
        SCOPED_TRACE(testing::Message() << "seed " << seed);
        const whatif::Tape tape = randomTape(seed, 30'000);
        expectLanesAsModels(tape, kThresholds, seed, false, &splits);
        // A lane alone is a PoolModel too.
        expectLanesAsModels(tape, {48 * MiB}, seed + 100, false);
    }
    // The lanes did go their own ways (opportunistic reuse, the size limit) and were checked
    // there.
    EXPECT_GT(splits, 12u);
}

TEST(WhatIfLanes, MutedLanesLeaveTheOthersAnsweringAsTheirModels) {
    for (uint64_t seed = 21; seed <= 28; ++seed) {
        SCOPED_TRACE(testing::Message() << "seed " << seed);
        expectLanesAsModels(randomTape(seed, 20'000), kThresholds, seed, true);
    }
}

TEST(WhatIfLanes, SamplesTapesGiveEveryLaneItsModelsAnswers) {
    for (const char* name : {"churn", "pools", "trims_oom", "threads", "threads_race", "gpt2",
                             "cupy", "jax", "torch_async", "torch_native", "beyond_pool",
                             "callsites", "thread_first"}) {
        SCOPED_TRACE(name);
        auto reader =
            TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(reader);
        auto tape = whatif::recordTape(**reader);
        ASSERT_TRUE(tape);
        // The advisor's candidates for the sample's largest never-releasing peak.
        whatif::Question never;
        never.all = whatif::neverReleasing();
        uint64_t top = 0;
        for (const PoolPrediction& p : whatif::predict(*tape, never))
            top = std::max(top, p.peakReserved);
        std::vector<std::optional<uint64_t>> cands{std::nullopt};
        for (uint64_t t : whatif::candidatesUpTo(top, {})) cands.push_back(t);
        expectLanesAsModels(*tape, cands, 7, false);
        expectLanesAsModels(*tape, cands, 8, true);
    }
}

} // namespace
} // namespace poolscope
