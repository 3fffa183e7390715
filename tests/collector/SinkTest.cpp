// Rings and the writer sink without a GPU: several producer threads, no loss, seq order, frees
// completed from their allocs, implicit releases placed before their synchronize.
#include <atomic>
#include <filesystem>
#include <gtest/gtest.h>
#include <memory>
#include <thread>
#include <unistd.h>
#include <vector>

#include "EventRing.h"
#include "RingRegistry.h"
#include "Spool.h"
#include "TraceSink.h"
#include "poolscope/EventFields.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"

using namespace poolscope;
using namespace poolscope::collector;

namespace {

std::string tempTrace(const char* name) {
    auto p = std::filesystem::temp_directory_path() /
             (std::string("poolscope_sink_") + name + "_" + std::to_string(getpid()) + ".poolscope");
    std::filesystem::remove(p);
    return p.string();
}

std::vector<Event> readAll(const std::string& path) {
    auto r = TraceReader::open(path);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    std::vector<Event> out;
    if (!r) return out;
    Status s = (*r)->forEachEvent([&](const Event& e) {
        out.push_back(e);
        return true;
    });
    EXPECT_TRUE(s.ok());
    return out;
}

std::unique_ptr<TraceSink> makeSink(const std::string& path, RingRegistry& rings,
                                    std::atomic<uint64_t>& seq) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w.ok());
    return std::make_unique<TraceSink>(std::move(w.value()), rings, seq);
}

} // namespace

TEST(EventRing, FullRingRefusesAndDrainFrees) {
    EventRing r(64);
    Event e;
    for (int i = 0; i < 64; ++i) {
        e.seq = uint64_t(i);
        ASSERT_TRUE(r.push(e));
    }
    EXPECT_FALSE(r.push(e));
    Event out[80];
    EXPECT_EQ(r.drain(out, 80), 64u);
    EXPECT_EQ(out[63].seq, 63u);
    EXPECT_TRUE(r.push(e));
}

TEST(TraceSink, ManyProducersNoLossInSeqOrderFreesResolved) {
    constexpr int kThreads = 6;
    constexpr int kPairs = 20000;
    // The registry does not own its rings (in the collector they live as long as the process).
    // Owned here, declared first so they outlive the registry and the sink: LSan reported the
    // six as leaks under the debug preset (issue #12).
    std::vector<std::unique_ptr<EventRing>> owned(kThreads);
    const std::string path = tempTrace("mp");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);

    std::atomic<bool> stop{false};
    std::thread writer([&] {
        while (!stop.load()) {
            ASSERT_TRUE(sink->pump().ok());
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    });
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t) {
        producers.emplace_back([&, t] {
            // Small rings force the writer to keep up; a full ring is retried (never dropped).
            owned[size_t(t)] = std::make_unique<EventRing>(256);
            EventRing* ring = owned[size_t(t)].get();
            ASSERT_TRUE(rings.add(ring));
            auto put = [&](Event e) {
                Event* slot;
                while (!(slot = ring->claim())) std::this_thread::yield();
                e.seq = seq.fetch_add(1);
                e.tsNs = int64_t(e.seq);
                *slot = e;
                ring->publish();
            };
            for (int i = 0; i < kPairs; ++i) {
                Event a;
                a.kind = EventKind::Alloc;
                a.ptr = (uint64_t(t + 1) << 40) | (uint64_t(i % 64) << 12);
                a.size = 256 + uint64_t(i);
                a.pool = 0x1000 + uint64_t(t % 2);
                a.tid = uint32_t(1000 + t);
                put(a);
                Event f;
                f.kind = EventKind::Free;
                f.ptr = a.ptr;
                f.tid = a.tid;
                put(f);
            }
        });
    }
    for (auto& p : producers) p.join();
    stop = true;
    writer.join();
    ASSERT_TRUE(sink->close().ok());
    EXPECT_EQ(sink->dropped(), 0u);

    auto events = readAll(path);
    ASSERT_EQ(events.size(), size_t(kThreads) * kPairs * 2);
    for (size_t i = 1; i < events.size(); ++i) ASSERT_LT(events[i - 1].seq, events[i].seq);
    size_t frees = 0;
    for (const Event& e : events) {
        if (e.kind != EventKind::Free) continue;
        ++frees;
        ASSERT_TRUE(e.has(kSizeKnown)) << "free of 0x" << std::hex << e.ptr << " unresolved";
        EXPECT_GE(e.size, 256u);
        EXPECT_EQ(e.pool, 0x1000u + uint64_t((e.tid - 1000) % 2));
    }
    EXPECT_EQ(frees, size_t(kThreads) * kPairs);
    std::filesystem::remove(path);
}

TEST(TraceSink, ImplicitReleaseLandsBeforeItsSynchronize) {
    const std::string path = tempTrace("release");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);
    EventRing ring(64);
    rings.add(&ring);

    Event a;
    a.kind = EventKind::Alloc;
    a.ptr = 0x10000;
    a.size = 1 << 20;
    a.pool = 0xabc;
    a.seq = seq.fetch_add(1);
    a.tsNs = 100;
    ring.push(a);
    Event s;
    s.kind = EventKind::StreamSynchronize;
    s.pool = 0xabc;
    s.correlation = 42;
    s.seq = seq.fetch_add(1 + kReleaseSlots) + kReleaseSlots; // as the hot path does
    s.tsNs = 500;
    ring.push(s);
    ASSERT_TRUE(sink->pump().ok());

    PoolActivity rel;
    rel.op = PoolActivity::Op::Trimmed;
    rel.correlation = 42;
    rel.size = 0;
    rel.tsNs = 450;
    sink->addActivity(rel);
    PoolActivity orphan = rel; // no synchronize with this id or after its time
    orphan.correlation = 99;
    orphan.tsNs = 900;
    sink->addActivity(orphan);
    ASSERT_TRUE(sink->close().ok());

    auto events = readAll(path);
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[0].kind, EventKind::Alloc);
    EXPECT_EQ(events[1].kind, EventKind::ImplicitRelease);
    EXPECT_EQ(events[1].pool, 0xabcu);
    EXPECT_EQ(events[1].correlation, 42u);
    EXPECT_TRUE(events[1].has(kHasWatermarks));
    EXPECT_EQ(events[1].reserved, 0u);
    EXPECT_EQ(events[2].kind, EventKind::StreamSynchronize);
    EXPECT_EQ(events[3].kind, EventKind::ImplicitRelease); // the orphan, appended after
    EXPECT_EQ(events[3].correlation, 99u);
    for (size_t i = 1; i < events.size(); ++i) EXPECT_LT(events[i - 1].seq, events[i].seq);
    std::filesystem::remove(path);
}

// CUPTI reports a release up to the activity wait late. One that finds no slot before its
// synchronize (or a slot already written) lands after events whose readings are newer: its
// used/reserved, read at the release, must not set the pool back (GPT-2: used 1.69 GB low).
TEST(TraceSink, LateImplicitReleaseCarriesNoStaleWatermarks) {
    const std::string path = tempTrace("late_release");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);
    sink->setHoldBackMs(0); // every pass writes what it has: the releases come after
    EventRing ring(64);
    rings.add(&ring);
    constexpr uint64_t MiB = 1 << 20;
    auto alloc = [&](uint64_t ptr, int64_t ts, bool derived) {
        Event a;
        a.correlation = uint32_t(ptr >> 16); // the first names the pool's CREATED record
        a.kind = EventKind::Alloc;
        a.ptr = ptr;
        a.size = MiB;
        a.pool = 0xabc;
        a.device = 0;
        a.seq = seq.fetch_add(1);
        a.tsNs = ts;
        a.reserved = 32 * MiB;
        a.used = derived ? 0 : MiB;
        a.flags = kHasWatermarks | (derived ? kUsedDerived : 0);
        ring.push(a);
    };
    alloc(0x10000, 100, false); // read: used 1 MiB
    Event s;
    s.kind = EventKind::StreamSynchronize;
    s.pool = 0xabc;
    s.device = 0;
    s.correlation = 42;
    s.seq = seq.fetch_add(1 + kReleaseSlots) + kReleaseSlots;
    s.tsNs = 500;
    s.reserved = 32 * MiB;
    s.used = MiB;
    s.flags = kHasWatermarks;
    ring.push(s);
    alloc(0x20000, 1000, true); // used 2 MiB, derived
    PoolActivity created;
    created.op = PoolActivity::Op::Created;
    created.correlation = 1;
    created.address = 0x5000;
    sink->addActivity(created);
    ASSERT_TRUE(sink->pump().ok());

    // Both read at the release, when 1 MiB was in use and 2 MiB reserved. The first has no
    // synchronize at all (nothing returned after its time); the second names one already written.
    PoolActivity orphan;
    orphan.op = PoolActivity::Op::Trimmed;
    orphan.correlation = 99;
    orphan.address = 0x5000;
    orphan.size = 2 * MiB;
    orphan.utilized = MiB;
    orphan.tsNs = 900;
    sink->addActivity(orphan);
    PoolActivity slotted = orphan;
    slotted.correlation = 42;
    slotted.tsNs = 450;
    sink->addActivity(slotted);
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(sink->pump().ok()); // past the activity wait
    alloc(0x30000, 1100, true); // used 3 MiB, derived after the releases
    ASSERT_TRUE(sink->close().ok());

    auto events = readAll(path);
    ASSERT_EQ(events.size(), 6u);
    int releases = 0;
    for (size_t i = 0; i < events.size(); ++i) {
        if (i) EXPECT_LT(events[i - 1].seq, events[i].seq);
        if (events[i].kind != EventKind::ImplicitRelease) continue;
        ++releases;
        EXPECT_GT(i, 2u) << "placed after the alloc at 1000 ns";
        EXPECT_FALSE(events[i].has(kHasWatermarks)) << "correlation " << events[i].correlation;
        EXPECT_EQ(ReleaseFields::of(events[i]).reservedAfter, 2 * MiB);
    }
    EXPECT_EQ(releases, 2);
    ASSERT_EQ(events.back().kind, EventKind::Alloc);
    EXPECT_EQ(events.back().used, 3 * MiB);

    replay::Replay r;
    for (const Event& e : events) r.apply(e);
    ASSERT_EQ(r.pools().size(), 1u);
    EXPECT_EQ(r.pools()[0].used, 3 * MiB);
    EXPECT_EQ(r.pools()[0].reserved, 32 * MiB);
    std::filesystem::remove(path);
}

TEST(TraceSink, ExplicitTrimActivityIsNotDuplicated) {
    const std::string path = tempTrace("trim");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);
    EventRing ring(64);
    rings.add(&ring);
    Event t;
    t.kind = EventKind::PoolTrimTo;
    t.pool = 0xabc;
    t.correlation = 5;
    t.seq = seq.fetch_add(1);
    ring.push(t);
    ASSERT_TRUE(sink->pump().ok());
    PoolActivity a;
    a.op = PoolActivity::Op::Trimmed;
    a.correlation = 5;
    sink->addActivity(a);
    ASSERT_TRUE(sink->close().ok());
    auto events = readAll(path);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, EventKind::PoolTrimTo);
    std::filesystem::remove(path);
}

TEST(TraceSink, DroppedEventsAreCountedInTheTrace) {
    const std::string path = tempTrace("drop");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);
    EventRing ring(64);
    ring.tid = 4242;
    rings.add(&ring);
    // Two gaps, one per writer pass: 12 lost from tick 1000 to 1600, then 5 at tick 9000.
    for (int i = 0; i < 12; ++i) ring.noteDrop(1000 + 50 * uint64_t(i) + (i == 11 ? 50 : 0));
    ASSERT_TRUE(sink->pump().ok());
    for (int i = 0; i < 5; ++i) ring.noteDrop(9000);
    ASSERT_TRUE(sink->close().ok());
    auto r = TraceReader::open(path);
    ASSERT_TRUE(r.ok());
    auto meta = (*r)->meta();
    ASSERT_TRUE(meta.ok());
    EXPECT_EQ(meta->at("dropped_events"), "17");
    // Each gap is marked where it happened, on its thread, with its own count.
    auto gaps = (*r)->dropGaps();
    ASSERT_TRUE(gaps.ok());
    ASSERT_EQ(gaps->size(), 2u);
    EXPECT_EQ((*gaps)[0].count, 12u);
    EXPECT_EQ((*gaps)[1].count, 5u);
    EXPECT_EQ((*gaps)[0].tid, 4242u);
    EXPECT_EQ((*gaps)[1].tid, 4242u);
    EXPECT_GT((*gaps)[0].durationNs, 0);
    EXPECT_EQ((*gaps)[1].durationNs, 0);
    EXPECT_LT((*gaps)[0].tsNs, (*gaps)[1].tsNs);
    std::filesystem::remove(path);
}

// The spool holds at most its bound; what does not fit stays in the ring, and a ring that fills
// then drops (and counts) as before: memory stays bounded whatever the writer does.
TEST(Spool, BoundedLeavesTheRestInTheRingWhichThenDrops) {
    RingRegistry rings;
    EventRing ring(2048);
    rings.add(&ring);
    Spool spool(1024);
    Event e;
    for (int i = 0; i < 2048; ++i) {
        e.seq = uint64_t(i + 1);
        ASSERT_TRUE(ring.push(e));
    }
    EXPECT_EQ(spool.fill(rings), 1024u);
    EXPECT_EQ(spool.fill(rings), 0u) << "the spool is full: nothing more may move";
    for (int i = 0; i < 1024; ++i) ASSERT_TRUE(ring.push(e));
    EXPECT_FALSE(ring.push(e));
    ring.noteDrop(7);
    std::vector<Event> got;
    std::vector<SpoolGap> gaps;
    spool.take(got, gaps);
    ASSERT_EQ(got.size(), 1024u);
    EXPECT_EQ(got.front().seq, 1u);
    EXPECT_EQ(got.back().seq, 1024u);
    EXPECT_TRUE(gaps.empty()) << "the drop came after the fill";
    EXPECT_EQ(spool.fill(rings), 1024u);
    spool.take(got, gaps);
    EXPECT_EQ(got.front().seq, 1025u);
    ASSERT_EQ(gaps.size(), 1u);
    EXPECT_EQ(gaps[0].gap.count, 1u);
    EXPECT_EQ(spool.peak(), 1024u);
}

// A drainer thread keeps the rings empty while the writer does not pump at all (a long stall):
// the producers, whose rings are tiny, never wait long, every event is spooled, and the writer
// then writes them all in seq order. Under the tsan preset this is also the drainer/writer race
// check.
TEST(TraceSink, DrainerAbsorbsAWriterStall) {
    constexpr int kThreads = 3;
    constexpr int kEvents = 20000;
    std::vector<std::unique_ptr<EventRing>> owned(kThreads);
    const std::string path = tempTrace("drainer");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto w = TraceWriter::create(path);
    ASSERT_TRUE(w.ok());
    TraceSink sink(std::move(w.value()), rings, seq, size_t(kThreads) * kEvents);
    sink.setDrainerRunning(true);
    std::atomic<bool> stop{false};
    std::thread drainer([&] {
        while (!stop.load()) {
            sink.drainOnce();
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    });
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t) {
        producers.emplace_back([&, t] {
            owned[size_t(t)] = std::make_unique<EventRing>(64);
            EventRing* ring = owned[size_t(t)].get();
            ASSERT_TRUE(rings.add(ring));
            for (int i = 0; i < kEvents; ++i) {
                Event* slot;
                while (!(slot = ring->claim())) std::this_thread::yield();
                Event e;
                e.kind = EventKind::EventRecord;
                e.seq = seq.fetch_add(1);
                e.tsNs = int64_t(e.seq);
                e.tid = uint32_t(100 + t);
                *slot = e;
                ring->publish();
            }
        });
    }
    for (auto& p : producers) p.join();
    // Every event left the rings for the spool without a single writer pass.
    for (int spins = 0; spins < 2000 && sink.spoolPeak() < size_t(kThreads) * kEvents; ++spins)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(sink.spoolPeak(), size_t(kThreads) * kEvents);
    ASSERT_TRUE(sink.pump().ok()); // races with the drainer: both are consumers of the spool
    stop = true;
    drainer.join();
    sink.setDrainerRunning(false);
    ASSERT_TRUE(sink.close().ok());
    EXPECT_EQ(sink.dropped(), 0u);
    auto events = readAll(path);
    ASSERT_EQ(events.size(), size_t(kThreads) * kEvents);
    for (size_t i = 1; i < events.size(); ++i) ASSERT_LT(events[i - 1].seq, events[i].seq);
    std::filesystem::remove(path);
}

// Default watermark mode: the hot path reads no `used` at allocs and frees (kUsedDerived); the
// sink derives it in seq order from the sizes and rebases on every value read from the driver.
// Expected values worked out by hand below.
TEST(TraceSink, DerivesUsedFromSizesAndRebasesOnReads) {
    const std::string path = tempTrace("used");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);
    EventRing ring(64);
    rings.add(&ring);
    constexpr uint64_t kPool = 0xabc, kOther = 0xdef;
    auto push = [&](EventKind k, uint64_t pool, uint64_t ptr, uint64_t size, uint8_t flags,
                    uint64_t used = 0) {
        Event e;
        e.kind = k;
        e.pool = pool;
        e.ptr = ptr;
        e.size = k == EventKind::Free ? 0 : size; // a free's size comes from its alloc
        e.flags = flags;
        e.used = used;
        e.reserved = 32 << 20;
        e.seq = seq.fetch_add(1);
        ASSERT_TRUE(ring.push(e));
    };
    const uint8_t derived = kHasWatermarks | kUsedDerived;
    push(EventKind::Alloc, kPool, 0x1000, 100, derived);         // 100
    push(EventKind::Alloc, kPool, 0x2000, 50, derived);          // 150
    push(EventKind::Alloc, kOther, 0x9000, 7, derived);          // other pool: 7
    push(EventKind::Free, kPool, 0x1000, 0, derived);            // 50
    push(EventKind::StreamSynchronize, kPool, 0, 0, kHasWatermarks, 1000); // read: rebase to 1000
    push(EventKind::Alloc, kPool, 0x3000, 24, derived);          // 1024
    push(EventKind::Free, kPool, 0x7777, 0, derived);            // alloc never seen: no value
    push(EventKind::Free, kPool, 0x2000, 0, derived);            // 974
    ASSERT_TRUE(sink->close().ok());
    auto events = readAll(path);
    ASSERT_EQ(events.size(), 8u);
    const uint64_t want[] = {100, 150, 7, 50, 1000, 1024, 0, 974};
    for (size_t i = 0; i < 8; ++i) {
        SCOPED_TRACE(i);
        EXPECT_EQ(events[i].used, want[i]);
        EXPECT_EQ(events[i].has(kHasWatermarks), i != 6);
    }
    EXPECT_TRUE(events[3].has(kUsedDerived));
    EXPECT_TRUE(events[3].has(kSizeKnown));
    EXPECT_EQ(events[3].size, 100u);
    EXPECT_FALSE(events[4].has(kUsedDerived));
    EXPECT_FALSE(events[6].has(kUsedDerived));
    std::filesystem::remove(path);
}

// Issue #18: the writer sizes a cudaFree / cudaFreeHost from the call that handed the memory out,
// and turns a cudaFree's duration (stored by the hot path in clock ticks, like its time) into ns.
TEST(TraceSink, HandBuiltCudaFreeGetsItsSizeAndItsDurationInNs) {
    const std::string path = tempTrace("cudafree");
    RingRegistry rings;
    std::atomic<uint64_t> seq{1};
    auto sink = makeSink(path, rings, seq);
    EventRing ring(64);
    rings.add(&ring);
    auto push = [&](EventKind k, uint64_t ptr, uint64_t size, int64_t ticks, uint64_t aux) {
        Event e;
        e.kind = k;
        e.ptr = ptr;
        e.size = size;
        e.aux = aux;
        e.device = 0;
        e.seq = seq.fetch_add(1);
        e.tsNs = ticks;
        ring.push(e);
    };
    // Without Clock::init the hot path's ticks are CLOCK_MONOTONIC ns: the duration keeps its
    // value up to the converter's rate estimate.
    push(EventKind::DeviceAlloc, 0x7000, 64 << 20, 1'000'000, 0);
    push(EventKind::HostAlloc, 0x5000, 8192, 1'100'000, kHostAllocMapped);
    push(EventKind::DeviceFree, 0x7000, 0, 3'000'000, 500'000);
    push(EventKind::HostFree, 0x5000, 0, 3'100'000, 0);
    ASSERT_TRUE(sink->pump().ok());
    ASSERT_TRUE(sink->close().ok());
    auto events = readAll(path);
    ASSERT_EQ(events.size(), 4u);
    EXPECT_EQ(events[2].kind, EventKind::DeviceFree);
    EXPECT_TRUE(events[2].has(kSizeKnown));
    EXPECT_EQ(events[2].size, uint64_t{64} << 20);
    EXPECT_NEAR(double(events[2].aux), 500'000.0, 5'000.0);
    EXPECT_EQ(events[3].kind, EventKind::HostFree);
    EXPECT_EQ(events[3].size, 8192u);
    EXPECT_EQ(events[1].aux, uint64_t(kHostAllocMapped)); // a HostAlloc's aux is its flags: kept
    std::filesystem::remove(path);
}
