// The what-if pool model's speed: the replay alone against the replay driving one model, and
// eight models at once (the advisor's second pass answers up to 25 questions per read), over
// the same 2 M synthetic events held in memory (decoding the trace is the timeline benchmark's
// business). The target is 10 M events/s for the replay with one model (issue #14); the ratio
// to the plain replay is the figure that carries between machines. docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <memory>

#include "SyntheticTrace.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/PoolModel.h"

namespace {

using namespace poolscope;

constexpr uint64_t kEvents = 2'000'000;

const std::vector<Event>& events() {
    static const std::vector<Event> ev = [] {
        std::vector<Event> v;
        v.reserve(kEvents + 16);
        bench::SyntheticTrace gen(42);
        while (gen.events() < kEvents) gen.step(v);
        return v;
    }();
    return ev;
}

void replayWith(benchmark::State& state, int models) {
    const std::vector<Event>& ev = events();
    uint64_t peak = 0;
    for (auto _ : state) {
        replay::Replay r;
        std::vector<std::unique_ptr<whatif::PoolModel>> ms;
        for (int i = 0; i < models; ++i) {
            whatif::Settings s;
            s.releaseThreshold = uint64_t(i) * (uint64_t{32} << 20);
            ms.push_back(std::make_unique<whatif::PoolModel>(s));
            r.subscribe(ms.back().get(), whatif::PoolModel::kindMask());
        }
        for (const Event& e : ev) r.apply(e);
        for (auto& m : ms)
            for (const auto& p : m->result(r)) peak += p.peakReserved;
        benchmark::DoNotOptimize(peak);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ev.size()));
    state.counters["models"] = models;
}

void BM_ReplayOnly(benchmark::State& state) { replayWith(state, 0); }
void BM_ReplayWithOneModel(benchmark::State& state) { replayWith(state, 1); }
void BM_ReplayWithEightModels(benchmark::State& state) { replayWith(state, 8); }

BENCHMARK(BM_ReplayOnly)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayWithOneModel)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayWithEightModels)->Unit(benchmark::kMillisecond)->MinTime(2.0);

} // namespace

BENCHMARK_MAIN();
