#pragma once
// Generated traces and names-pass helpers shared by the streaming report's tests
// (ReportStreamTest) and the names pass's (NamesPassTest). Built by hand, not recordings.

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "../bench/SyntheticTrace.h"
#include "TestTraces.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope::test {

inline constexpr uint64_t MiB = 1ull << 20;

// Events and samples written as a trace of two generated devices (declaring `pools`).
// `perChunk`: events per chunk (a commit after each such run), else full chunks.
inline std::string writeEvents(const std::string& path, const std::vector<Event>& events,
                  const std::vector<Event>& samples, const std::vector<PoolInfo>& pools = {},
                  size_t perChunk = 0) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{1, "generated device (not a recording)", 80ull << 30, ""}));
    for (const PoolInfo& p : pools) EXPECT_TRUE((*w)->addPool(p));
    if (perChunk == 0) {
        EXPECT_TRUE((*w)->append(events));
    } else {
        for (size_t i = 0; i < events.size(); i += perChunk) {
            const size_t n = std::min(perChunk, events.size() - i);
            EXPECT_TRUE((*w)->append(std::span<const Event>(events.data() + i, n)));
            EXPECT_TRUE((*w)->commit());
        }
    }
    EXPECT_TRUE((*w)->append(samples));
    EXPECT_TRUE((*w)->close());
    return path;
}

// The generator's events (bench::SyntheticTrace) written as its trace files have them: one
// generated device, its pools and streams declared, and `attributes` as the pools' first knobs.
// `perChunk` as writeEvents'.
inline std::string writeGenerated(const std::string& path, const std::vector<Event>& events, size_t perChunk = 0,
                                  const std::vector<PoolAttributeValue>& attributes = {}) {
    auto w = TraceWriter::create(path);
    EXPECT_TRUE(w);
    EXPECT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
    for (uint64_t pool : bench::SyntheticTrace::kPools) {
        PoolInfo p;
        p.handle = pool;
        p.device = 0;
        p.kind = pool == bench::SyntheticTrace::kPools[0] ? PoolKind::Default : PoolKind::Explicit;
        EXPECT_TRUE((*w)->addPool(p));
    }
    for (const PoolAttributeValue& a : attributes) EXPECT_TRUE((*w)->addPoolAttribute(a));
    for (uint64_t stream : bench::SyntheticTrace::kStreams) {
        StreamInfo si;
        si.handle = stream;
        si.device = 0;
        EXPECT_TRUE((*w)->addStream(si));
    }
    for (size_t i = 0; i < events.size(); i += perChunk ? perChunk : events.size()) {
        const size_t n = std::min(perChunk ? perChunk : events.size(), events.size() - i);
        EXPECT_TRUE((*w)->append(std::span<const Event>(events.data() + i, n))); // (samples to their table)
        if (perChunk) EXPECT_TRUE((*w)->commit());
    }
    EXPECT_TRUE((*w)->close());
    return path;
}

// Every pool's and stream's name: those of the entity tables and those the events name.
inline std::string namesText(const TraceReader& r, const view::EntityNames& names) {
    std::set<uint64_t> pools, streams;
    if (auto p = r.pools()) for (const PoolInfo& i : *p) pools.insert(i.handle);
    if (auto st = r.streams()) for (const StreamInfo& i : *st) streams.insert(i.handle);
    EXPECT_TRUE(r.forEachEvent([&](const Event& e) {
        pools.insert(e.pool);
        streams.insert(e.stream);
        return true;
    }));
    std::string out;
    for (uint64_t h : pools) out += "pool " + std::to_string(h) + ": " + names.pool(h) + "\n";
    for (uint64_t h : streams) out += "stream " + std::to_string(h) + ": " + names.stream(h) + "\n";
    return out;
}

// The names pass on `threads`: replaying every event with 1 (filterAlone false), else only
// what NamesFilter keeps (with 1 too, where filterAlone).
inline Result<TraceNames> namesPass(const TraceReader& r, unsigned threads, bool filterAlone,
                             LiveBlocksBefore* live = nullptr) {
    NamesPassControl c;
    c.threads = threads;
    c.filterAlone = filterAlone;
    c.describe = true;
    return traceNamesAndStart(r, live, c);
}

// A generated trace that does what recorded ones do rarely and all at once.
class Disorderly {
public:
    Disorderly(uint64_t seed, int64_t maxLateNs) : rng_(seed), maxLate_(maxLateNs) {}

    void generate(size_t n) {
        Event& create = add(EventKind::PoolCreate);
        create.pool = kPools[0];
        while (ev_.all().size() < n) step();
    }
    const std::vector<Event>& events() const { return ev_.all(); }
    const std::vector<Event>& samples() const { return samples_; }
    std::vector<PoolInfo> declared() const {
        PoolInfo b;
        b.handle = kPools[1];
        b.device = 0;
        b.kind = PoolKind::Explicit;
        return {b};
    }

private:
    static constexpr uint64_t kPools[3] = {0xA00, 0xB00, 0xC00};
    static constexpr uint64_t kStreams[4] = {0x10, 0x20, 0x30, 0};
    struct Block {
        uint64_t ptr, size;
        int pool, stream;
    };

    uint64_t pick(uint64_t n) { return rng_() % n; }
    bool chance(int percent) { return pick(100) < static_cast<uint64_t>(percent); }

    // Threads' clocks: mostly on time, some late by a few microseconds, now and then one far
    // behind (a preempted thread), and events on the same nanosecond.
    int64_t nextTs() {
        if (!chance(6)) now_ += 1 + static_cast<int64_t>(pick(3000));
        if (chance(20)) return now_ - static_cast<int64_t>(pick(5000));
        if (chance(1)) return now_ - static_cast<int64_t>(pick(static_cast<uint64_t>(maxLate_) + 1));
        return now_;
    }
    Event& add(EventKind k) {
        Event& e = ev_.add(k, nextTs());
        e.tid = 1 + static_cast<uint32_t>(pick(4));
        return e;
    }
    static int deviceOf(int pool) { return pool == 2 ? 1 : 0; }
    void watermarks(Event& e, int p, int percent) {
        if (chance(percent)) Events::wm(e, reserved_[p], used_[p]);
    }

    void alloc() {
        const int p = static_cast<int>(pick(3)), s = static_cast<int>(pick(4));
        const uint64_t size = uint64_t{256} << pick(14);
        if (chance(4)) { // a failure: 201 is often retried by the runtime on the same thread
            Event& f = add(EventKind::Alloc);
            f.pool = kPools[p];
            f.stream = kStreams[s];
            f.device = static_cast<int16_t>(deviceOf(p));
            f.size = size;
            f.result = chance(60) ? 201 : 2;
            if (f.result == 201 && chance(60)) {
                const uint32_t tid = f.tid;
                Event& r = alloc(p, s, size);
                r.tid = tid;
            }
            return;
        }
        if (chance(3)) { // a zero-byte request
            Event& z = add(EventKind::Alloc);
            z.pool = kPools[p];
            z.stream = kStreams[s];
            z.device = static_cast<int16_t>(deviceOf(p));
            return;
        }
        alloc(p, s, size);
    }
    Event& alloc(int p, int s, uint64_t size) {
        uint64_t ptr;
        if (!freed_.empty() && chance(50)) {
            ptr = freed_.back();
            freed_.pop_back();
        } else {
            ptr = next_;
            next_ += 8 * MiB;
        }
        used_[p] += size;
        if (used_[p] > reserved_[p]) reserved_[p] = (used_[p] + 32 * MiB - 1) / (32 * MiB) * (32 * MiB);
        Event& e = add(EventKind::Alloc);
        e.pool = kPools[p];
        e.stream = kStreams[s];
        e.device = static_cast<int16_t>(deviceOf(p));
        e.ptr = ptr;
        e.size = size;
        e.site = static_cast<uint32_t>(pick(6));
        watermarks(e, p, 90);
        live_.push_back({ptr, size, p, s});
        return e;
    }
    void free() {
        if (live_.empty() || chance(2)) {
            Event& u = add(EventKind::Free);
            u.stream = kStreams[pick(4)];
            u.ptr = 0xdead0000 + pick(16) * 0x100;
            return;
        }
        const size_t i = pick(live_.size());
        const Block b = live_[i];
        live_[i] = live_.back();
        live_.pop_back();
        used_[b.pool] -= b.size;
        freed_.push_back(b.ptr);
        Event& e = add(chance(3) ? EventKind::DeviceFree : EventKind::Free); // cudaFree of a block
        e.pool = kPools[b.pool];
        e.stream = chance(70) ? kStreams[b.stream] : kStreams[pick(4)];
        e.device = static_cast<int16_t>(deviceOf(b.pool));
        e.ptr = b.ptr;
        if (e.kind == EventKind::Free) watermarks(e, b.pool, 80);
    }
    void outside() {
        const int dev = static_cast<int>(pick(2));
        if (outsideLive_.empty() || chance(55)) {
            Event& e = add(EventKind::DeviceAlloc);
            e.device = static_cast<int16_t>(dev);
            e.ptr = 0x7000000000 + outsideNext_++ * 0x100000;
            e.size = (1 + pick(64)) * MiB;
            e.variant = static_cast<uint8_t>(chance(20) ? DeviceAllocApi::Managed : DeviceAllocApi::Malloc);
            if (chance(5)) e.result = 2;
            else outsideLive_.push_back({e.ptr, e.size, dev, 0});
            return;
        }
        const size_t i = pick(outsideLive_.size());
        Event& e = add(EventKind::DeviceFree);
        e.device = static_cast<int16_t>(outsideLive_[i].pool);
        e.ptr = outsideLive_[i].ptr;
        e.aux = pick(200'000); // the call's duration
        outsideLive_[i] = outsideLive_.back();
        outsideLive_.pop_back();
    }
    void host() {
        if (hostLive_.empty() || chance(50)) {
            Event& e = add(chance(50) ? EventKind::HostAlloc : EventKind::HostRegister);
            e.ptr = 0x9000000000 + hostNext_++ * 0x10000;
            e.size = (1 + pick(16)) * MiB;
            e.aux = pick(8);
            hostLive_.push_back({e.ptr, e.size, e.kind == EventKind::HostAlloc, 0});
            return;
        }
        const Block b = hostLive_.back();
        hostLive_.pop_back();
        Event& e = add(b.pool ? EventKind::HostFree : EventKind::HostUnregister);
        e.ptr = b.ptr;
    }
    void knob() {
        const int p = static_cast<int>(pick(3));
        Event& e = add(EventKind::PoolSetAttribute);
        e.pool = kPools[p];
        e.device = static_cast<int16_t>(deviceOf(p));
        const uint16_t attr = static_cast<uint16_t>(1 + pick(4)); // the reuse policies, threshold
        e.attr = attr;
        e.size = attr == 4 ? (chance(50) ? 0 : 64 * MiB) : pick(2);
        if (chance(50)) {
            e.aux = attr == 4 ? 64 * MiB : 1;
            e.flags |= kHasOldValue;
        }
    }
    void release() {
        const int p = static_cast<int>(pick(3));
        reserved_[p] = std::max(used_[p], (used_[p] + 32 * MiB - 1) / (32 * MiB) * (32 * MiB));
        Event& e = add(EventKind::ImplicitRelease);
        e.pool = kPools[p];
        e.device = static_cast<int16_t>(deviceOf(p));
        e.size = reserved_[p];
        watermarks(e, p, 50);
    }
    void sample() {
        const int p = static_cast<int>(pick(3));
        // The driver's high watermarks, sometimes below a used value derived in seq order.
        const uint64_t usedHigh = chance(50) ? used_[p] / 2 + pick(used_[p] + 1) : used_[p];
        const bool highs = chance(60);
        samples_.push_back(ev_.sample(now_ + 1, kPools[p], reserved_[p], used_[p],
                                      highs ? reserved_[p] + pick(2) * 32 * MiB : 0,
                                      highs ? usedHigh : 0));
    }

    void step() {
        const uint64_t r = pick(1000);
        if (r < 340) alloc();
        else if (r < 640) free();
        else if (r < 700) { // event record on one stream, waited on by another
            Event& rec = add(EventKind::EventRecord);
            rec.stream = kStreams[pick(4)];
            rec.ptr = 0xe0 + pick(4);
            // Kept by value: the next add() may move the vector `rec` points into (ASan reported
            // a heap-use-after-free here under the debug preset).
            const uint64_t handle = rec.ptr;
            Event& w = add(EventKind::StreamWaitEvent);
            w.stream = kStreams[pick(4)];
            w.ptr = handle;
        } else if (r < 740) add(EventKind::StreamSynchronize).stream = kStreams[pick(4)];
        else if (r < 750) add(EventKind::ContextSynchronize);
        else if (r < 760) add(EventKind::EventSynchronize).ptr = 0xe0 + pick(4);
        else if (r < 790) release();
        else if (r < 810) knob();
        else if (r < 815) {
            Event& t = add(EventKind::PoolTrimTo);
            t.pool = kPools[pick(3)];
        } else if (r < 880) outside();
        else if (r < 900) host();
        else if (r < 905 && !live_.empty()) { // an import over a live block: never freed after
            Event& e = add(EventKind::PointerImport);
            e.pool = kPools[pick(3)];
            e.ptr = live_[pick(live_.size())].ptr;
        } else if (r < 960) sample();
    }

    std::mt19937_64 rng_;
    int64_t maxLate_;
    int64_t now_ = 5'000'000'000;
    Events ev_;
    std::vector<Event> samples_;
    uint64_t reserved_[3] = {}, used_[3] = {};
    std::vector<Block> live_, outsideLive_, hostLive_;
    std::vector<uint64_t> freed_;
    uint64_t next_ = 0x300000000, outsideNext_ = 0, hostNext_ = 0;
};

} // namespace poolscope::test
