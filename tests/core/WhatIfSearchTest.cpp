// The advisor's second read after the streaming report (whatif::adviseAfter): its models follow
// one recording model's ops a chunk at a time with the pools they do not answer for muted
// (PoolModel::feed), stop a candidate threshold for a pool once its releases pass what the advice
// allows, stand the never-releasing answer in for the candidates at or above a pool's
// never-releasing peak, and stop reading once nothing is open. Each of those must give what
// separate models over the whole trace give: checked on generated random traces (not
// recordings) and on the samples, against PoolModel::run one pool at a time and against
// whatif::advise (two full reads, every question a model on every event).
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope {
namespace {

using whatif::PoolPrediction;
using whatif::Question;

constexpr uint64_t MiB = uint64_t{1} << 20;

// A random multi-pool, multi-stream workload with synchronizes, event waits, trims and the
// pools' knobs set along the way; `policyOff` turns a reuse policy off on pool 1.
class RandomTrace {
public:
    explicit RandomTrace(uint64_t seed, bool policyOff) : rng_(seed), policyOff_(policyOff) {}

    test::Events generate(size_t n) {
        test::Events ev;
        int64_t ts = 1'000;
        if (policyOff_) {
            Event& e = ev.add(EventKind::PoolSetAttribute, ts);
            e.pool = kPools[1];
            AttributeFields{PoolAttr::ReuseAllowOpportunistic, 0, std::nullopt}.into(e);
        }
        // Pool 2's threshold is set high: few or no releases there.
        Event& t = ev.add(EventKind::PoolSetAttribute, ts);
        t.pool = kPools[2];
        AttributeFields{PoolAttr::ReleaseThreshold, 96 * MiB, std::nullopt}.into(t);
        while (ev.all().size() < n) {
            ts += 1 + static_cast<int64_t>(rng_() % 200'000);
            const uint64_t r = rng_() % 1000;
            const int p = static_cast<int>(rng_() % 3), s = static_cast<int>(rng_() % 3);
            if (r < 450 || live_.empty()) {
                const uint64_t size = (1 + rng_() % 64) * (rng_() % 4 == 0 ? MiB : 64 * 1024);
                ev.alloc(ts, kStreams[s], kPools[p], next_, size);
                live_.push_back({next_, kPools[p]});
                next_ += 128 * MiB;
            } else if (r < 900) {
                const size_t k = rng_() % live_.size();
                ev.free(ts, kStreams[s], live_[k].pool, live_[k].ptr);
                live_[k] = live_.back();
                live_.pop_back();
            } else if (r < 940) {
                Event& e = ev.add(EventKind::StreamSynchronize, ts);
                e.stream = kStreams[s];
            } else if (r < 960) {
                Event& e = ev.add(EventKind::EventRecord, ts);
                e.stream = kStreams[s];
                CuEventFields{0xE0, 0}.into(e);
                Event& w = ev.add(EventKind::StreamWaitEvent, ts + 1);
                w.stream = kStreams[(s + 1) % 3];
                CuEventFields{0xE0, 0}.into(w);
            } else if (r < 970) {
                ev.add(EventKind::ContextSynchronize, ts);
            } else if (r < 975) {
                Event& e = ev.add(EventKind::PoolTrimTo, ts);
                e.pool = kPools[p];
                e.size = (rng_() % 4) * 32 * MiB;
            } else if (r < 980) {
                Event& e = ev.add(EventKind::PoolSetAttribute, ts);
                e.pool = kPools[0];
                AttributeFields{PoolAttr::ReleaseThreshold, (rng_() % 3) * 32 * MiB, std::nullopt}.into(e);
            }
        }
        return ev;
    }

private:
    static constexpr uint64_t kPools[3] = {0xA00, 0xB00, 0xC00};
    static constexpr uint64_t kStreams[3] = {0x10, 0x20, 0x30};
    struct Live {
        uint64_t ptr, pool;
    };
    std::mt19937_64 rng_;
    bool policyOff_;
    std::vector<Live> live_;
    uint64_t next_ = 0x7000'0000'0000;
};

std::string write(const std::string& path, const std::vector<Event>& events) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
    EXPECT_TRUE((*w)->append(events));
    EXPECT_TRUE((*w)->close());
    return path;
}

void expectSamePrediction(const PoolPrediction& a, const PoolPrediction& b) {
    EXPECT_EQ(a.handle, b.handle);
    EXPECT_EQ(a.touched, b.touched);
    EXPECT_EQ(a.peakReserved, b.peakReserved);
    EXPECT_EQ(a.peakReservedTsNs, b.peakReservedTsNs);
    EXPECT_EQ(a.releases, b.releases);
    EXPECT_EQ(a.releasedBytes, b.releasedBytes);
    EXPECT_EQ(a.trims, b.trims);
    EXPECT_EQ(a.growths, b.growths);
    EXPECT_EQ(a.failedAllocs, b.failedAllocs);
    EXPECT_EQ(a.maxIdle, b.maxIdle);
    EXPECT_EQ(a.meanIdle, b.meanIdle);
    EXPECT_EQ(a.finalReserved, b.finalReserved);
    EXPECT_EQ(a.peakLive, b.peakLive);
    ASSERT_EQ(a.growthAllocs.size(), b.growthAllocs.size());
    for (size_t i = 0; i < a.growthAllocs.size(); ++i) EXPECT_EQ(a.growthAllocs[i].seq, b.growthAllocs[i].seq);
}

void expectSameAdvice(const std::vector<whatif::PoolAdvice>& a,
                      const std::vector<whatif::PoolAdvice>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(a[i].handle, b[i].handle);
        EXPECT_EQ(a[i].currentReleases, b[i].currentReleases);
        EXPECT_EQ(a[i].thresholdAdvice, b[i].thresholdAdvice);
        EXPECT_EQ(a[i].suggestedThreshold, b[i].suggestedThreshold);
        EXPECT_EQ(a[i].suggestedReleases, b[i].suggestedReleases);
        EXPECT_EQ(a[i].suggestedPeakReserved, b[i].suggestedPeakReserved);
        EXPECT_EQ(a[i].suggestedMeanIdle, b[i].suggestedMeanIdle);
        ASSERT_EQ(a[i].policies.size(), b[i].policies.size());
        for (size_t k = 0; k < a[i].policies.size(); ++k) {
            EXPECT_EQ(a[i].policies[k].name, b[i].policies[k].name);
            EXPECT_EQ(a[i].policies[k].peakReservedOn, b[i].policies[k].peakReservedOn);
        }
        // (advise() gives every racing pool its range; the report's advice only where it says
        // something, and only that is printed.)
        if (b[i].any()) EXPECT_EQ(a[i].race.has_value(), b[i].race.has_value());
        EXPECT_EQ(whatif::adviceText(a[i], "p"), whatif::adviceText(b[i], "p"));
    }
}

// The first read's models (as the streaming report has them) and the advice after them.
std::vector<whatif::PoolAdvice> adviceAfter(const TraceReader& reader, bool sameReplay) {
    std::vector<Question> q(2);
    q[1].all = whatif::neverReleasing();
    auto first = whatif::predict(reader, q, {}, /*races=*/true);
    EXPECT_TRUE(first);
    if (!first) return {};
    auto a = whatif::adviseAfter(reader, first->perQuestion[0], first->perQuestion[1], first->races,
                                 sameReplay);
    EXPECT_TRUE(a);
    return a ? *a : std::vector<whatif::PoolAdvice>{};
}

TEST(WhatIfSearch, FedModelsWithOtherPoolsMutedAnswerAsSeparateModels) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
        SCOPED_TRACE(seed);
        test::ScratchDir dir;
        const test::Events ev = RandomTrace(seed, seed % 2 == 0).generate(20'000);
        auto reader = TraceReader::open(write(dir.file("random.poolscope"), ev.all()));
        ASSERT_TRUE(reader);
        auto tape = whatif::recordTape(**reader);
        ASSERT_TRUE(tape);
        ASSERT_GE(tape->recorded.size(), 3u);
        std::vector<Question> qs(4);
        qs[1].all.releaseThreshold = 32 * MiB;
        qs[2].all.releaseThreshold = 64 * MiB;
        qs[3].all.allowOpportunistic = true;
        std::mt19937_64 rng(seed);
        for (const Question& q : qs) {
            for (size_t k = 0; k < tape->recorded.size(); ++k) {
                const uint64_t handle = tape->recorded[k].handle;
                const auto separate = whatif::predict(*tape, q, {}, handle);
                ASSERT_EQ(separate.size(), 1u);
                // The same ops in random batches, every other pool muted from its first op.
                whatif::PoolModel m(q.all);
                std::vector<uint8_t> mute(tape->poolIndex.size() + 4, 1);
                mute[tape->poolIndex[k]] = 0;
                size_t at = 0, seqAt = 0;
                while (at < tape->ops.size()) {
                    const size_t n = std::min<size_t>(1 + rng() % 3000, tape->ops.size() - at);
                    size_t allocs = 0;
                    for (size_t j = at; j < at + n; ++j)
                        allocs += tape->ops[j].kind == whatif::Op::Kind::Alloc;
                    m.feed(tape->ops.data() + at, tape->ops.data() + at + n,
                           tape->allocSeq.data() + seqAt, allocs, tape->streamHandles, mute);
                    at += n;
                    seqAt += allocs;
                }
                const auto fed = m.collect(*tape, tape->poolIndex[k]);
                ASSERT_EQ(fed.size(), 1u);
                expectSamePrediction(fed[0], separate[0]);
                EXPECT_EQ(m.releasesOf(tape->poolIndex[k]), separate[0].releases);
            }
        }
        // The traces reach what they are for: releases to decide on, a pool that releases
        // less, the policy off.
        EXPECT_GT(tape->recorded[0].releases, 20u);
    }
}

TEST(WhatIfSearch, AdviceAfterTheFirstReadIsTheAdviceOfTwoFullReads) {
    size_t advised = 0, policies = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(seed);
        test::ScratchDir dir;
        const test::Events ev = RandomTrace(seed, seed % 2 == 0).generate(seed == 1 ? 60'000 : 15'000);
        auto reader = TraceReader::open(write(dir.file("random.poolscope"), ev.all()));
        ASSERT_TRUE(reader);
        auto full = whatif::advise(**reader);
        ASSERT_TRUE(full);
        for (bool same : {true, false}) {
            SCOPED_TRACE(same);
            expectSameAdvice(adviceAfter(**reader, same), *full);
        }
        for (const whatif::PoolAdvice& a : *full) {
            advised += a.thresholdAdvice;
            policies += a.policies.size();
        }
    }
    // Some advice is given (and some is not), or the comparison would prove little.
    EXPECT_GT(advised, 0u);
    EXPECT_GT(policies, 0u);
}

TEST(WhatIfSearch, AdviceAfterTheFirstReadOnTheSamples) {
    size_t advised = 0;
    for (const char* name : {"jax", "churn", "gpt2", "pools", "threads", "threads_race",
                             "trims_oom", "cupy", "torch_async"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(reader);
        auto full = whatif::advise(**reader);
        ASSERT_TRUE(full);
        expectSameAdvice(adviceAfter(**reader, true), *full);
        for (const whatif::PoolAdvice& a : *full) advised += a.any();
    }
    EXPECT_GE(advised, 2u); // jax and churn
}

} // namespace
} // namespace poolscope
