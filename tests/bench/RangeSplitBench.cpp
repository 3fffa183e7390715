// The plot's split of used bytes by NVTX range (analysis/RangeSplit.h, issue #13) on a synthetic
// pool of 1 M allocations (generated here, not recorded: 24 range names, ~1,000 blocks live at a
// time), against what the window already computes on the UI thread for one click: the live-bytes
// series of a chosen call site's allocations (analysis::liveBytesSeries, here all of them), and
// the per-frame feed (the used series downsampled for a 2,000-pixel plot, then the stacked tops
// at its points). Results: docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <numeric>

#include "poolscope/TimelineBuilder.h"
#include "poolscope/analysis/RangeSplit.h"
#include "poolscope/analysis/SiteTree.h"

namespace {

using namespace poolscope;

constexpr uint64_t kPool = 0x5000, kStream = 0x77;
constexpr uint32_t kAllocs = 1'000'000, kLive = 1000, kNames = 24;

struct Fixture {
    std::shared_ptr<const Timeline> tl;
    StackTables stacks;
    std::vector<uint32_t> all;
};

const Fixture& fixture() {
    static const Fixture f = [] {
        Fixture f;
        for (uint32_t i = 1; i <= kNames; ++i) {
            f.stacks.nvtxPaths[i] = {"step", "layer" + std::to_string(i)};
            f.stacks.sites[i] = SiteInfo{i, i, 0, i};
        }
        f.stacks.sites[kNames + 1] = SiteInfo{kNames + 1, kNames + 1, 0, 0}; // outside ranges
        TimelineBuilder b;
        uint64_t used = 0, seq = 1;
        auto event = [&](EventKind k, int64_t ts, uint64_t ptr, uint64_t size, uint32_t site) {
            Event e;
            e.seq = seq++;
            e.tsNs = ts;
            e.kind = k;
            e.device = 0;
            e.tid = 1;
            e.stream = kStream;
            e.pool = kPool;
            e.ptr = ptr;
            e.size = size;
            e.site = site;
            e.flags = kHasWatermarks;
            e.reserved = uint64_t(1) << 40;
            e.used = used;
            b.add(e);
        };
        std::vector<uint64_t> sizes(kAllocs);
        for (uint32_t i = 0; i < kAllocs; ++i) {
            sizes[i] = (uint64_t(i % 97) + 1) << 12;
            used += sizes[i];
            event(EventKind::Alloc, int64_t(i) * 100, 0x10000000 + uint64_t(i) * 0x100000, sizes[i],
                  i % (kNames + 1) + 1);
            if (i >= kLive) {
                const uint32_t j = i - kLive;
                used -= sizes[j];
                event(EventKind::Free, int64_t(i) * 100 + 50, 0x10000000 + uint64_t(j) * 0x100000,
                      0, 0);
            }
        }
        f.tl = b.finish();
        f.all.resize(f.tl->allocations.size());
        std::iota(f.all.begin(), f.all.end(), 0u);
        return f;
    }();
    return f;
}

void BM_SplitUsedByRange(benchmark::State& state) {
    const Fixture& f = fixture();
    for (auto _ : state) {
        auto s = analysis::splitUsedByRange(*f.tl, f.stacks, kPool);
        benchmark::DoNotOptimize(s.bands.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * kAllocs);
}
BENCHMARK(BM_SplitUsedByRange)->Unit(benchmark::kMillisecond);

void BM_BaselineLiveBytesSeriesOfAll(benchmark::State& state) {
    const Fixture& f = fixture();
    for (auto _ : state) {
        Series s = analysis::liveBytesSeries(*f.tl, f.all);
        benchmark::DoNotOptimize(s.t.data());
    }
    state.SetItemsProcessed(int64_t(state.iterations()) * kAllocs);
}
BENCHMARK(BM_BaselineLiveBytesSeriesOfAll)->Unit(benchmark::kMillisecond);

// Per frame, with the split on: the used line's points for the plot, and the tops at them.
void BM_FrameUsedDownsample(benchmark::State& state) {
    const Fixture& f = fixture();
    const Series& used = f.tl->pool(kPool)->used;
    for (auto _ : state) {
        auto pts = downsample(used, f.tl->t0, f.tl->t1, 4000);
        benchmark::DoNotOptimize(pts.data());
    }
}
BENCHMARK(BM_FrameUsedDownsample)->Unit(benchmark::kMicrosecond);

void BM_FrameStackedTops(benchmark::State& state) {
    const Fixture& f = fixture();
    const auto split = analysis::splitUsedByRange(*f.tl, f.stacks, kPool);
    const Series& used = f.tl->pool(kPool)->used;
    const auto pts = downsample(used, f.tl->t0, f.tl->t1, 4000);
    for (auto _ : state) {
        auto tops = analysis::stackedTops(split, pts);
        benchmark::DoNotOptimize(tops.data());
    }
}
BENCHMARK(BM_FrameStackedTops)->Unit(benchmark::kMicrosecond);

} // namespace

BENCHMARK_MAIN();
