// What if, for pools several host threads allocate from at once (whatif/RaceRange.h): the range
// the peak reserved lies in across the interleavings of the threads' calls. The HandBuilt tests
// feed hand-built event sequences (every one is written here) with the bounds worked out in the
// test from the rules in RaceRange.h (32 MiB granules); the Samples tests run the recorded
// threads traces in resources/samples.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sys/wait.h>

#include "TestTraces.h"
#include "poolscope/EventFields.h"
#include "poolscope/TraceReader.h"
#include "poolscope/whatif/PoolModel.h"
#include "poolscope/whatif/RaceRange.h"

namespace poolscope {
namespace {

using test::Events;

constexpr uint64_t MiB = uint64_t{1} << 20;
constexpr uint64_t kPool = 0x100, kS1 = 0x11, kS2 = 0x22;
constexpr uint32_t kA = 101, kB = 202;
constexpr int64_t us = 1'000;

struct Outcome {
    whatif::PoolPrediction predicted; // the model under the recorded settings
    std::optional<whatif::RaceRange> race;
};

Outcome follow(const Events& ev) {
    replay::Replay r;
    whatif::PoolModel m;
    whatif::RaceBounds b;
    r.subscribe(&m, whatif::PoolModel::kindMask());
    r.subscribe(&b, whatif::RaceBounds::kindMask());
    for (const Event& e : ev.all()) r.apply(e);
    Outcome o;
    const auto preds = m.result(r);
    EXPECT_EQ(preds.size(), 1u);
    if (!preds.empty()) o.predicted = preds[0];
    const auto races = b.result(r);
    EXPECT_EQ(races.size(), 1u);
    if (!races.empty()) o.race = races[0];
    return o;
}

Event& by(Event& e, uint32_t tid) {
    e.tid = tid;
    return e;
}
void neverRelease(Events& ev, int64_t ts) {
    Event& e = ev.add(EventKind::PoolSetAttribute, ts);
    e.pool = kPool;
    AttributeFields{PoolAttr::ReleaseThreshold, std::numeric_limits<uint64_t>::max(), std::nullopt}
        .into(e);
}
void syncOf(Events& ev, int64_t ts, uint64_t stream, uint32_t tid) {
    Event& e = ev.add(EventKind::StreamSynchronize, ts);
    e.stream = stream;
    e.tid = tid;
}

// Threads A (stream S1) and B (stream S2) each allocate 20 MiB, free it and synchronize their
// stream, in a pool that never releases. In `overlapped` order both blocks are live at once;
// in the other, A finishes before B starts.
Events twoThreads(bool overlapped) {
    Events ev;
    neverRelease(ev, 1 * us);
    if (overlapped) {
        by(ev.alloc(10 * us, kS1, kPool, 0xA000, 20 * MiB), kA);
        by(ev.alloc(12 * us, kS2, kPool, 0xB000, 20 * MiB), kB);
        by(ev.free(14 * us, kS1, kPool, 0xA000), kA);
        syncOf(ev, 16 * us, kS1, kA);
        by(ev.free(18 * us, kS2, kPool, 0xB000), kB);
        syncOf(ev, 20 * us, kS2, kB);
    } else {
        by(ev.alloc(10 * us, kS1, kPool, 0xA000, 20 * MiB), kA);
        by(ev.free(12 * us, kS1, kPool, 0xA000), kA);
        syncOf(ev, 14 * us, kS1, kA);
        by(ev.alloc(16 * us, kS2, kPool, 0xB000, 20 * MiB), kB);
        by(ev.free(18 * us, kS2, kPool, 0xB000), kB);
        syncOf(ev, 20 * us, kS2, kB);
    }
    return ev;
}

TEST(WhatIfRace, HandBuiltTwoRacingThreadsGetARangeHoldingEveryOrder) {
    // Overlapped: A's 20 MiB grows the pool to 32 (12 free), B's 20 takes the 12 and grows
    // by a granule for the other 8: 64. One after the other: A's block is free again after its
    // synchronize (threshold max: nothing released) and B reuses it: 32.
    const Outcome over = follow(twoThreads(true));
    const Outcome serial = follow(twoThreads(false));
    EXPECT_EQ(over.predicted.peakReserved, 64 * MiB);
    EXPECT_EQ(serial.predicted.peakReserved, 32 * MiB);
    // The bounds: low = the largest block (20 MiB) in granules = 32; high = each thread's own
    // highest demand (20 MiB live, then 20 MiB pending until its own synchronize) summed,
    // 40 MiB, in granules = 64. Both orders lie inside, at either end.
    ASSERT_TRUE(over.race);
    const whatif::RaceRange& r = *over.race;
    EXPECT_TRUE(r.racing());
    EXPECT_EQ(r.threads, 2u);
    EXPECT_EQ(r.racingAllocs, 1u); // B's alloc, 2 us after A's
    EXPECT_EQ(r.crossThreadFrees, 0u);
    EXPECT_EQ(r.demandSum, 40 * MiB);
    EXPECT_EQ(r.low, 32 * MiB);
    EXPECT_EQ(r.high, 64 * MiB);
    EXPECT_EQ(r.highHandoversAsRecorded, 64 * MiB);
    // The bounds come from each thread's own calls: the same for the other order's trace.
    ASSERT_TRUE(serial.race);
    EXPECT_EQ(serial.race->low, r.low);
    EXPECT_EQ(serial.race->high, r.high);
}

TEST(WhatIfRace, HandBuiltBlockFreedByAnotherThreadStaysInItsAllocatorsDemand) {
    // A allocates x1 (20 MiB, S1); B allocates y (4 MiB, S2) and frees x1 on S2; A allocates x2
    // (20 MiB); B frees x2 on S2. The model in this order: x1 grows to 32 (12 free), y takes 4
    // (8 free), x1's free is pending on S2 (A may not reuse it), x2 takes the 8 and grows by a
    // granule: 64.
    Events ev;
    by(ev.alloc(10 * us, kS1, kPool, 0xA000, 20 * MiB), kA);
    by(ev.alloc(11 * us, kS2, kPool, 0xC000, 4 * MiB), kB);
    by(ev.free(12 * us, kS2, kPool, 0xA000), kB);
    by(ev.alloc(13 * us, kS1, kPool, 0xA100, 20 * MiB), kA);
    by(ev.free(14 * us, kS2, kPool, 0xA100), kB);
    const Outcome o = follow(ev);
    EXPECT_EQ(o.predicted.peakReserved, 64 * MiB);
    ASSERT_TRUE(o.race);
    const whatif::RaceRange& r = *o.race;
    EXPECT_TRUE(r.racing());
    EXPECT_EQ(r.crossThreadFrees, 2u);
    // A's demand: x1 and x2 both (B may free them at any point of A's calls): 40 MiB. B's:
    // y live and both frees pending on S2, which only B reuses: 4 + 20 + 20 = 44. Sum 84 MiB:
    // 96 in granules.
    EXPECT_EQ(r.demandSum, 84 * MiB);
    EXPECT_EQ(r.high, 96 * MiB);
    // With each hand-over where it fell among A's calls, A holds one 20 MiB block at a time:
    // 20 + 44 = 64.
    EXPECT_EQ(r.highHandoversAsRecorded, 64 * MiB);
    EXPECT_EQ(r.low, 32 * MiB);
}

// The ranges followed on another thread than the replay's, from what a RaceRecord takes down of
// its facts a step at a time, against the ranges followed on the replay itself.
void expectRecordedAsFollowed(const std::vector<Event>& events, size_t step) {
    replay::Replay r;
    whatif::RaceBounds direct, later;
    whatif::RaceRecord record;
    r.subscribe(&direct, whatif::RaceBounds::kindMask());
    r.subscribe(&record, whatif::RaceBounds::kindMask());
    size_t taken = 0;
    for (size_t i = 0; i < events.size(); ++i) {
        r.apply(events[i]);
        if ((i + 1) % step == 0) {
            taken += record.taken.inputs.size();
            later.follow(record.taken);
            record.taken = {};
        }
    }
    taken += record.taken.inputs.size();
    later.follow(record.taken);
    EXPECT_GT(taken, 0u);
    const auto want = direct.result(r), got = later.result(r);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        SCOPED_TRACE(testing::Message() << "pool " << i);
        EXPECT_EQ(got[i].handle, want[i].handle);
        EXPECT_EQ(got[i].threads, want[i].threads);
        EXPECT_EQ(got[i].racingAllocs, want[i].racingAllocs);
        EXPECT_EQ(got[i].crossThreadFrees, want[i].crossThreadFrees);
        EXPECT_EQ(got[i].largestBlock, want[i].largestBlock);
        EXPECT_EQ(got[i].demandSum, want[i].demandSum);
        EXPECT_EQ(got[i].low, want[i].low);
        EXPECT_EQ(got[i].high, want[i].high);
        EXPECT_EQ(got[i].highHandoversAsRecorded, want[i].highHandoversAsRecorded);
    }
}

TEST(WhatIfRace, RecordedFactsGiveTheRangesOfTheReplaysOwn) {
    for (const char* name : {"threads", "threads_race", "threads_race_indexed", "churn", "pools",
                             "gpt2", "torch_async", "cupy", "beyond_pool", "torchrun-rank0", "jax"}) {
        SCOPED_TRACE(name);
        auto reader = TraceReader::open(std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope");
        ASSERT_TRUE(reader);
        auto events = (*reader)->events(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
        ASSERT_TRUE(events);
        for (size_t step : {size_t{1}, size_t{97}, size_t{4096}}) expectRecordedAsFollowed(*events, step);
    }
}

TEST(WhatIfRace, HandBuiltContextSynchronizeOfOneDeviceRecordedAsFollowed) {
    // Thread A frees a block of a pool on device 0 and one of a pool on device 1, each on its
    // own stream, then synchronizes device 0's context: only device 0's pool's pending frees are
    // settled, so device 1's stays in A's demand beside its next allocation there, on another
    // stream. Pools' devices as the replay knew them at the synchronize, followed on another
    // thread.
    constexpr uint64_t kPool1 = 0x200, kS3 = 0x33, kS4 = 0x44;
    Events ev;
    by(ev.alloc(10 * us, kS1, kPool, 0xA000, 20 * MiB), kA);
    by(ev.alloc(11 * us, kS2, kPool, 0xB000, 20 * MiB), kB);
    Event& other = by(ev.alloc(12 * us, kS3, kPool1, 0xD000, 40 * MiB), kA);
    other.device = 1;
    by(ev.free(13 * us, kS1, kPool, 0xA000), kA);
    Event& otherFree = by(ev.free(14 * us, kS3, kPool1, 0xD000), kA);
    otherFree.device = 1;
    Event& sync = by(ev.add(EventKind::ContextSynchronize, 15 * us), kA);
    sync.device = 0;
    Event& again = by(ev.alloc(16 * us, kS4, kPool1, 0xD100, 40 * MiB), kA);
    again.device = 1;
    by(ev.alloc(17 * us, kS1, kPool, 0xA100, 20 * MiB), kA);
    for (size_t step : {size_t{1}, size_t{3}, size_t{100}}) expectRecordedAsFollowed(ev.all(), step);
    // The device mattered: device 1's pool kept A's free pending through device 0's synchronize.
    replay::Replay r;
    whatif::RaceBounds b;
    r.subscribe(&b, whatif::RaceBounds::kindMask());
    for (const Event& e : ev.all()) r.apply(e);
    const auto races = b.result(r);
    ASSERT_EQ(races.size(), 2u);
    EXPECT_EQ(races[1].demandSum, 80 * MiB); // 40 live beside the 40 still pending
}

TEST(WhatIfRace, HandBuiltThreadsThatDoNotOverlapGetNoRange) {
    // The same two threads, B starting 5 ms after A is done: each call is far outside the
    // race window of the other thread's, so the order is the recorded one and no range is given.
    Events ev;
    by(ev.alloc(10 * us, kS1, kPool, 0xA000, 20 * MiB), kA);
    by(ev.free(12 * us, kS1, kPool, 0xA000), kA);
    by(ev.alloc(5'000 * us, kS2, kPool, 0xB000, 20 * MiB), kB);
    by(ev.free(5'002 * us, kS2, kPool, 0xB000), kB);
    const Outcome o = follow(ev);
    ASSERT_TRUE(o.race);
    EXPECT_EQ(o.race->threads, 2u);
    EXPECT_EQ(o.race->racingAllocs, 0u);
    EXPECT_FALSE(o.race->racing());
}

TEST(WhatIfRace, HandBuiltOneThreadOnTwoStreamsGetsNoRange) {
    // One thread's calls have one order, however close together and on however many streams.
    Events ev;
    for (int i = 0; i < 10; ++i) {
        ev.alloc((10 + 4 * i) * us, i % 2 ? kS1 : kS2, kPool, 0xA000 + i, 20 * MiB);
        ev.free((12 + 4 * i) * us, i % 2 ? kS1 : kS2, kPool, 0xA000 + i);
    }
    const Outcome o = follow(ev);
    ASSERT_TRUE(o.race);
    EXPECT_EQ(o.race->threads, 1u);
    EXPECT_FALSE(o.race->racing());
}

TEST(WhatIfRace, HandBuiltAdviceForARacingPoolNamesTheRange) {
    whatif::PoolAdvice a;
    a.thresholdAdvice = true;
    a.currentReleases = 20;
    a.suggestedThreshold = 64 * MiB;
    a.currentPeakReserved = a.suggestedPeakReserved = 64 * MiB;
    const std::string plain = whatif::adviceText(a, "pool #1 (default)");
    EXPECT_EQ(plain.find("threads race"), std::string::npos) << plain;
    whatif::RaceRange r;
    r.threads = 4;
    r.racingAllocs = 10;
    r.low = 32 * MiB;
    r.high = 160 * MiB;
    a.race = r;
    const std::string text = whatif::adviceText(a, "pool #1 (default)");
    EXPECT_NE(text.find("4 threads race on this pool"), std::string::npos) << text;
    EXPECT_NE(text.find("32.0 MiB – 160 MiB"), std::string::npos) << text;
}

// The CLI on the recorded samples.
std::string sample(const char* name) {
    return std::string("'") + POOLSCOPE_SAMPLES_DIR + "/" + name + ".poolscope'";
}
nlohmann::json whatifJson(const std::string& args) {
    const test::CliRun r = test::runCli("whatif --json " + args);
    EXPECT_EQ(r.exitCode, 0) << r.output;
    return nlohmann::json::parse(r.output, nullptr, false);
}

TEST(WhatIfRaceCli, SamplesOfRacingThreadsPrintTheirRange) {
    // threads: four threads, every fourth block freed by the next thread. Six H100 runs of it
    // peaked at 32 to 96 MiB (docs/WHATIF.md); this one recorded 96.
    nlohmann::json j = whatifJson(sample("threads"));
    ASSERT_EQ(j["pools"].size(), 1u);
    const auto& t = j["pools"][0]["predicted_interleavings"];
    ASSERT_TRUE(t.is_object()) << j.dump(2);
    EXPECT_EQ(t["threads"], 4);
    EXPECT_EQ(t["peak_reserved_low"], 32 * MiB);
    EXPECT_EQ(t["peak_reserved_high"], 960 * MiB);
    EXPECT_EQ(t["peak_reserved_high_handovers_as_recorded"], 160 * MiB);
    EXPECT_GT(t["cross_thread_frees"].get<uint64_t>(), 0u);
    for (uint64_t run : {32, 64, 96}) {
        EXPECT_LE(t["peak_reserved_low"].get<uint64_t>(), run * MiB);
        EXPECT_GE(t["peak_reserved_high_handovers_as_recorded"].get<uint64_t>(), run * MiB);
    }
    const test::CliRun text = test::runCli("whatif " + sample("threads"));
    EXPECT_NE(text.output.find("peak depends on how 4 threads interleave: 32.0 MiB – 960 MiB"),
              std::string::npos)
        << text.output;
    // threads_race: no hand-overs; the default pool can double, the explicit pool cannot move.
    j = whatifJson(sample("threads_race"));
    ASSERT_EQ(j["pools"].size(), 2u);
    EXPECT_EQ(j["pools"][0]["predicted_interleavings"]["peak_reserved_low"], 32 * MiB);
    EXPECT_EQ(j["pools"][0]["predicted_interleavings"]["peak_reserved_high"], 64 * MiB);
    EXPECT_EQ(j["pools"][1]["predicted_interleavings"]["peak_reserved_high"], 32 * MiB);
    // A trace whose pools no two threads allocate from at once has no such field.
    for (const char* s : {"churn", "gpt2", "pools"}) {
        j = whatifJson(sample(s));
        for (const auto& p : j["pools"]) EXPECT_FALSE(p.contains("predicted_interleavings")) << s;
    }
}

} // namespace
} // namespace poolscope
