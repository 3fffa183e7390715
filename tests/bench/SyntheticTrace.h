#pragma once
// A deterministic synthetic workload shaped like a recorded training loop: allocs and frees with
// watermarks on four streams over two pools, pointer reuse, event record + cross-stream waits,
// synchronizes with implicit releases, the odd threshold change, a few leaks, and periodic
// samples. Used by the benchmarks so writer and reader numbers come from realistic rows.

#include <cstdint>
#include <random>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope::bench {

class SyntheticTrace {
public:
    static constexpr uint64_t kStreams[4] = {0x7f0000001000, 0x7f0000002000, 0x7f0000003000, 0};
    static constexpr uint64_t kPools[2] = {0x55000000aa00, 0x55000000bb00};
    // With `variety` (the events-table filter benchmark): twelve side streams, each created, used
    // for a burst of ~2,000 steps with allocations from a third pool, and destroyed, one burst
    // every 50,000 steps; and every 200,000 steps a run of ten failed 1 GiB allocations (an
    // out-of-memory spike) on the main pool. Without it the events are as they always were.
    static constexpr uint64_t kSideStreams[12] = {
        0x7f0000011000, 0x7f0000012000, 0x7f0000013000, 0x7f0000014000,
        0x7f0000015000, 0x7f0000016000, 0x7f0000017000, 0x7f0000018000,
        0x7f0000019000, 0x7f000001a000, 0x7f000001b000, 0x7f000001c000};
    static constexpr uint64_t kSidePool = 0x55000000cc00;

    explicit SyntheticTrace(uint64_t seed = 1, bool variety = false)
        : rng_(seed), variety_(variety) {}

    // Appends the next events (one step of the workload, 1 to 3 events, plus due samples).
    void step(std::vector<Event>& out) {
        if (variety_ && varietyStep(out)) {
            samples(out);
            return;
        }
        const uint64_t r = rng_() % 1000;
        const int s = static_cast<int>(rng_() % 4);
        const int p = s % 2;
        if (r < 470 || live_[s].empty()) {
            alloc(out, s, p);
        } else if (r < 940) {
            free(out, s, s);
        } else if (r < 985) {
            // Record on s, wait on another stream, free one of s's blocks there.
            const int o = (s + 1 + static_cast<int>(rng_() % 3)) % 4;
            Event& rec = make(out, EventKind::EventRecord);
            rec.stream = kStreams[s];
            rec.ptr = 0xe0000 + static_cast<uint64_t>(s);
            Event& wait = make(out, EventKind::StreamWaitEvent);
            wait.stream = kStreams[o];
            wait.ptr = 0xe0000 + static_cast<uint64_t>(s);
            free(out, s, o);
        } else if (r < 998) {
            Event& sync = make(out, EventKind::StreamSynchronize);
            sync.stream = kStreams[s];
            const uint32_t correlation = sync.correlation; // `sync` dangles after make() below
            // Memory above the threshold goes back to the driver at a synchronize.
            for (int q = 0; q < 2; ++q) {
                const uint64_t keep = std::max(used_[q], threshold_[q]);
                if (reserved_[q] > keep) {
                    reserved_[q] = roundUp(keep);
                    Event& rel = make(out, EventKind::ImplicitRelease);
                    rel.pool = kPools[q];
                    rel.size = reserved_[q];
                    rel.correlation = correlation;
                }
            }
        } else {
            Event& attr = make(out, EventKind::PoolSetAttribute);
            attr.pool = kPools[p];
            attr.attr = static_cast<uint16_t>(PoolAttr::ReleaseThreshold);
            attr.aux = threshold_[p];
            threshold_[p] = (rng_() % 2) ? (uint64_t{256} << 20) : 0;
            attr.size = threshold_[p];
            attr.flags = kHasOldValue;
        }
        samples(out);
    }

    // At least n events (samples excluded), ready to append in order.
    std::vector<Event> generate(size_t n) {
        std::vector<Event> out;
        out.reserve(n + n / 50);
        while (events_ < n) step(out);
        return out;
    }

    uint64_t events() const { return events_; }

private:
    void samples(std::vector<Event>& out) {
        while (ts_ >= nextSample_) {
            for (int q = 0; q < 2; ++q) {
                Event e;
                e.kind = EventKind::Sample;
                e.tsNs = nextSample_;
                e.pool = kPools[q];
                e.reserved = reserved_[q];
                e.used = used_[q];
                e.size = reserved_[q];
                e.aux = used_[q];
                e.flags = kHasWatermarks;
                out.push_back(e);
            }
            nextSample_ += 10'000'000; // 10 ms
        }
    }

    // The variety's events for this step, if any (true: the step is taken).
    bool varietyStep(std::vector<Event>& out) {
        ++steps_;
        if (steps_ % 200'000 == 100'000) oomLeft_ = 10;
        if (oomLeft_ > 0 && rng_() % 2 == 0) {
            --oomLeft_;
            Event& e = make(out, EventKind::Alloc);
            e.stream = kStreams[0];
            e.pool = kPools[0];
            e.size = uint64_t{1} << 30;
            e.result = 2; // CUDA_ERROR_OUT_OF_MEMORY: no pointer, nothing allocated
            return true;
        }
        if (side_ < 0) {
            if (steps_ % 50'000 != 0) return false;
            side_ = static_cast<int>(rng_() % 12);
            sideLeft_ = 2000;
            Event& c = make(out, EventKind::StreamCreate);
            c.stream = kSideStreams[side_];
            return true;
        }
        const uint64_t stream = kSideStreams[side_];
        if (--sideLeft_ == 0) {
            while (!sideLive_.empty()) sideFree(out, stream);
            Event& d = make(out, EventKind::StreamDestroy);
            d.stream = stream;
            side_ = -1;
            return true;
        }
        if (rng_() % 4 != 0) return false;
        if (sideLive_.empty() || rng_() % 2 == 0) {
            const uint64_t size = uint64_t{4096} << (rng_() % 10);
            sideUsed_ += size;
            Event& e = make(out, EventKind::Alloc);
            e.stream = stream;
            e.pool = kSidePool;
            e.ptr = 0x7e0000000000 + (nextSidePtr_ += uint64_t{8} << 20);
            e.size = size;
            e.flags = kHasWatermarks;
            e.reserved = roundUp(sideUsed_);
            e.used = sideUsed_;
            sideLive_.push_back({e.ptr, size, 0});
        } else {
            sideFree(out, stream);
        }
        return true;
    }

    void sideFree(std::vector<Event>& out, uint64_t stream) {
        const Block b = sideLive_.back();
        sideLive_.pop_back();
        sideUsed_ -= b.size;
        Event& e = make(out, EventKind::Free);
        e.stream = stream;
        e.pool = kSidePool;
        e.ptr = b.ptr;
        e.size = b.size;
        e.flags = kHasWatermarks | kSizeKnown;
        e.reserved = roundUp(sideUsed_);
        e.used = sideUsed_;
    }

    static uint64_t roundUp(uint64_t v) {
        const uint64_t g = uint64_t{2} << 20; // pools grow in 2 MiB granules
        return (v + g - 1) / g * g;
    }

    Event& make(std::vector<Event>& out, EventKind kind) {
        ts_ += 300 + static_cast<int64_t>(rng_() % 900);
        Event e;
        e.seq = ++seq_;
        e.tsNs = ts_;
        e.kind = kind;
        e.tid = 4000 + static_cast<uint32_t>(seq_ % 3);
        e.correlation = static_cast<uint32_t>(seq_);
        e.device = 0;
        out.push_back(e);
        ++events_;
        return out.back();
    }

    void alloc(std::vector<Event>& out, int s, int p) {
        const uint64_t size = uint64_t{256} << (rng_() % 14); // 256 B .. 2 MiB
        uint64_t ptr;
        if (!freePtrs_.empty() && rng_() % 4 != 0) {
            ptr = freePtrs_.back(); // pointer reuse, as the pool hands blocks out again
            freePtrs_.pop_back();
        } else {
            ptr = nextPtr_;
            nextPtr_ += uint64_t{4} << 20;
        }
        used_[p] += size;
        if (used_[p] > reserved_[p]) reserved_[p] = roundUp(used_[p] + used_[p] / 4);
        Event& e = make(out, EventKind::Alloc);
        e.stream = kStreams[s];
        e.pool = kPools[p];
        e.ptr = ptr;
        e.size = size;
        e.variant = static_cast<uint8_t>(AllocApi::Async);
        e.flags = kHasWatermarks;
        e.reserved = reserved_[p];
        e.used = used_[p];
        // One in a thousand blocks is never freed: the leaks a report should list.
        if (rng_() % 1000 != 0) live_[s].push_back({ptr, size, p});
        if (live_[s].size() > 96) free(out, s, s);
    }

    void free(std::vector<Event>& out, int owner, int on) {
        if (live_[owner].empty()) return;
        const size_t i = rng_() % live_[owner].size();
        const Block b = live_[owner][i];
        live_[owner][i] = live_[owner].back();
        live_[owner].pop_back();
        used_[b.pool] -= b.size;
        freePtrs_.push_back(b.ptr);
        Event& e = make(out, EventKind::Free);
        e.stream = kStreams[on];
        e.pool = kPools[b.pool];
        e.ptr = b.ptr;
        e.size = b.size;
        e.flags = kHasWatermarks | kSizeKnown;
        e.reserved = reserved_[b.pool];
        e.used = used_[b.pool];
    }

    struct Block {
        uint64_t ptr;
        uint64_t size;
        int pool;
    };
    std::mt19937_64 rng_;
    uint64_t seq_ = 0;
    uint64_t events_ = 0;
    int64_t ts_ = 1'000'000'000;
    int64_t nextSample_ = 1'000'000'000;
    uint64_t nextPtr_ = 0x7f4000000000;
    uint64_t reserved_[2] = {0, 0};
    uint64_t used_[2] = {0, 0};
    uint64_t threshold_[2] = {0, 0};
    std::vector<Block> live_[4];
    std::vector<uint64_t> freePtrs_;
    bool variety_ = false;
    uint64_t steps_ = 0;
    int oomLeft_ = 0;
    int side_ = -1; // the side stream in use, -1 = none
    int sideLeft_ = 0;
    uint64_t sideUsed_ = 0, nextSidePtr_ = 0;
    std::vector<Block> sideLive_;
};

} // namespace poolscope::bench
