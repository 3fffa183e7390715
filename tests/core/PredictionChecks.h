#pragma once
// Two what-if predictions compared field by field (the tape's tests, the lanes' tests).

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "poolscope/whatif/PoolModel.h"

namespace poolscope::test {

inline void expectSamePrediction(const whatif::PoolPrediction& a, const whatif::PoolPrediction& b,
                                 const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(a.handle, b.handle);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.touched, b.touched);
    EXPECT_EQ(a.recordedKnown, b.recordedKnown);
    EXPECT_EQ(a.recordedPeakReserved, b.recordedPeakReserved);
    EXPECT_EQ(a.recordedReleases, b.recordedReleases);
    EXPECT_EQ(a.recordedGrowths, b.recordedGrowths);
    EXPECT_EQ(a.recordedMaxIdle, b.recordedMaxIdle);
    EXPECT_EQ(a.recordedMeanIdle, b.recordedMeanIdle);
    EXPECT_EQ(a.recordedFinalReserved, b.recordedFinalReserved);
    EXPECT_EQ(a.peakReserved, b.peakReserved);
    EXPECT_EQ(a.peakReservedTsNs, b.peakReservedTsNs);
    EXPECT_EQ(a.releases, b.releases);
    EXPECT_EQ(a.releasedBytes, b.releasedBytes);
    EXPECT_EQ(a.trims, b.trims);
    EXPECT_EQ(a.growths, b.growths);
    EXPECT_EQ(a.grownBytes, b.grownBytes);
    EXPECT_EQ(a.failedAllocs, b.failedAllocs);
    EXPECT_EQ(a.maxIdle, b.maxIdle);
    EXPECT_EQ(a.meanIdle, b.meanIdle);
    EXPECT_EQ(a.finalReserved, b.finalReserved);
    EXPECT_EQ(a.peakLive, b.peakLive);
    EXPECT_EQ(a.releaseThreshold, b.releaseThreshold);
    EXPECT_EQ(a.followEventDependencies, b.followEventDependencies);
    EXPECT_EQ(a.allowOpportunistic, b.allowOpportunistic);
    EXPECT_EQ(a.allowInternalDependencies, b.allowInternalDependencies);
    ASSERT_EQ(a.growthAllocs.size(), b.growthAllocs.size());
    for (size_t i = 0; i < a.growthAllocs.size(); ++i) {
        EXPECT_EQ(a.growthAllocs[i].seq, b.growthAllocs[i].seq) << i;
        EXPECT_EQ(a.growthAllocs[i].tsNs, b.growthAllocs[i].tsNs) << i;
        EXPECT_EQ(a.growthAllocs[i].stream, b.growthAllocs[i].stream) << i;
        EXPECT_EQ(a.growthAllocs[i].bytes, b.growthAllocs[i].bytes) << i;
        EXPECT_EQ(a.growthAllocs[i].grownBy, b.growthAllocs[i].grownBy) << i;
    }
    EXPECT_EQ(a.reserved.t, b.reserved.t);
    EXPECT_EQ(a.reserved.v, b.reserved.v);
}

// Questions that make the model take each of its paths on the samples, series kept.
inline std::vector<whatif::Question> modelQuestions() {
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    std::vector<whatif::Question> qs(9);
    qs[1].all.releaseThreshold = 0;
    qs[2].all.releaseThreshold = 64 * kMiB;
    qs[3].all.releaseThreshold = std::numeric_limits<uint64_t>::max();
    qs[4].all.allowOpportunistic = false;
    qs[5].all.followEventDependencies = false;
    qs[6].all.allowInternalDependencies = false;
    qs[6].all.releaseThreshold = 48 * kMiB;
    qs[7].all.allowOpportunistic = true;
    qs[7].opportunisticLagNs = 0;
    qs[8].all.followEventDependencies = true;
    qs[8].all.allowOpportunistic = true;
    for (whatif::Question& q : qs) q.keepSeries = true;
    return qs;
}

// A tape recorded in pieces: op for op the one recordTape records in one read.
inline void expectSameTape(const whatif::Tape& a, const whatif::Tape& b, const std::string& what) {
    SCOPED_TRACE(what);
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (size_t i = 0; i < a.ops.size(); ++i) {
        const whatif::Op &x = a.ops[i], &y = b.ops[i];
        if (x.ts != y.ts || x.value != y.value || x.pool != y.pool || x.stream != y.stream ||
            x.aux != y.aux || x.kind != y.kind || x.attr != y.attr || x.flag != y.flag) {
            ADD_FAILURE() << "op " << i << " of " << a.ops.size() << " differs: kind "
                          << int(x.kind) << " against " << int(y.kind) << ", pool " << x.pool
                          << " against " << y.pool << ", value " << x.value << " against " << y.value;
            return;
        }
    }
    EXPECT_EQ(a.allocSeq, b.allocSeq);
    EXPECT_EQ(a.streamHandles, b.streamHandles);
    EXPECT_EQ(a.poolIndex, b.poolIndex);
    EXPECT_EQ(a.recordedEnd, b.recordedEnd);
    EXPECT_EQ(a.lastTs, b.lastTs);
    EXPECT_EQ(a.events, b.events);
    ASSERT_EQ(a.recorded.size(), b.recorded.size());
    for (size_t k = 0; k < a.recorded.size(); ++k)
        expectSamePrediction(a.recorded[k], b.recorded[k], "pool " + std::to_string(k));
}

} // namespace poolscope::test
