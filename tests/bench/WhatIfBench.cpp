// The what-if pool model's speed: the replay alone against the replay driving one model, and
// eight models at once (the advisor's second pass answers up to 25 questions per read), over
// the same 2 M synthetic events held in memory (decoding the trace is the timeline benchmark's
// business). The target is 10 M events/s for the replay with one model (issue #14); the ratio
// to the plain replay is the figure that carries between machines. docs/PERFORMANCE.md.
//
// The window's What-if panel (issue #14: under 100 ms from a control change to the redrawn curve
// on a 1 M-event trace) asks its questions of a tape (whatif::Tape) recorded once: the
// Panel* benchmarks time one prediction over 1 M events, as the panel asks it (one pool, the
// reserved series kept; and all pools), against the replay with one model over the same events
// (what asking the trace again would cost, decoding aside).
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

// The first 1 M events of the same workload (a prefix of a trace is a trace).
constexpr uint64_t kPanelEvents = 1'000'000;
const std::vector<Event>& panelEvents() {
    static const std::vector<Event> ev(events().begin(),
                                       events().begin() + static_cast<std::ptrdiff_t>(kPanelEvents));
    return ev;
}

const whatif::Tape& panelTape() {
    static const whatif::Tape tape = [] {
        replay::Replay r;
        whatif::TapeRecorder rec;
        r.subscribe(&rec, whatif::TapeRecorder::kindMask());
        for (const Event& e : panelEvents()) r.apply(e);
        return rec.tape(r);
    }();
    return tape;
}

// Once per trace, when the panel first needs it: the replay with the recording model.
void BM_PanelRecordTape(benchmark::State& state) {
    const std::vector<Event>& ev = panelEvents();
    size_t ops = 0;
    for (auto _ : state) {
        replay::Replay r;
        whatif::TapeRecorder rec;
        r.subscribe(&rec, whatif::TapeRecorder::kindMask());
        for (const Event& e : ev) r.apply(e);
        ops = rec.ops();
        benchmark::DoNotOptimize(ops);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ev.size()));
    state.counters["ops"] = double(ops);
    state.counters["tape_MiB"] = double(panelTape().bytes()) / (1 << 20);
}

// What asking the trace again would cost per question (its decoding not counted).
void BM_PanelReplayOneModel(benchmark::State& state) {
    const std::vector<Event>& ev = panelEvents();
    uint64_t peak = 0;
    for (auto _ : state) {
        replay::Replay r;
        whatif::Settings s;
        s.releaseThreshold = uint64_t{64} << 20;
        whatif::PoolModel m(s);
        m.keepSeries(true);
        r.subscribe(&m, whatif::PoolModel::kindMask());
        for (const Event& e : ev) r.apply(e);
        for (const auto& p : m.result(r)) peak += p.peakReserved;
        benchmark::DoNotOptimize(peak);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ev.size()));
}

// One prediction from the tape, as the panel asks it: a threshold for one pool (the slider
// moves through 32 MiB steps), its reserved series kept; or every pool.
void panelPredict(benchmark::State& state, bool onePool) {
    const whatif::Tape& tape = panelTape();
    const uint64_t pool = bench::SyntheticTrace::kPools[0];
    uint64_t peak = 0, step = 0;
    for (auto _ : state) {
        whatif::Question q;
        q.perPool[pool].releaseThreshold = (step++ % 8) * (uint64_t{32} << 20);
        q.keepSeries = true;
        const auto out = onePool ? whatif::predict(tape, q, {}, pool) : whatif::predict(tape, q);
        for (const auto& p : out) peak += p.peakReserved + p.reserved.size();
        benchmark::DoNotOptimize(peak);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * panelEvents().size()));
}
void BM_PanelPredictOnePoolFromTape(benchmark::State& state) { panelPredict(state, true); }
void BM_PanelPredictAllPoolsFromTape(benchmark::State& state) { panelPredict(state, false); }

BENCHMARK(BM_PanelRecordTape)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PanelReplayOneModel)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PanelPredictOnePoolFromTape)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PanelPredictAllPoolsFromTape)->Unit(benchmark::kMillisecond)->MinTime(1.0);

BENCHMARK(BM_ReplayOnly)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayWithOneModel)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayWithEightModels)->Unit(benchmark::kMillisecond)->MinTime(2.0);

} // namespace

BENCHMARK_MAIN();
