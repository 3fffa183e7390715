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

#include "../../core/src/whatif/LaneModel.h"
#include "../../core/src/whatif/QuestionSearch.h"
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

// The model's inputs from events held in memory (a trace's are whatif::recordTape's).
whatif::Tape tapeOf(const std::vector<Event>& events) {
    replay::Replay r;
    whatif::TapeRecorder rec;
    r.subscribe(&rec, whatif::TapeRecorder::kindMask());
    for (const Event& e : events) r.apply(e);
    return rec.tape(r);
}

const whatif::Tape& panelTape() {
    static const whatif::Tape tape = tapeOf(panelEvents());
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

// The advisor's candidate thresholds over the tape of all 2 M events, fed a step (4 k ops) at a
// time as the questions follow the report's spill: each its own PoolModel, against the same
// thresholds as lanes of LaneModels (all in one, or dealt to 2 or 4 of them, as threads would
// hold them). Items are events times candidates: the figure is the cost of one candidate an event.
const whatif::Tape& wholeTape() {
    static const whatif::Tape tape = tapeOf(events());
    return tape;
}

std::vector<uint64_t> candidateThresholds() {
    whatif::Question never;
    never.all = whatif::neverReleasing();
    uint64_t top = 0;
    for (const auto& p : whatif::predict(wholeTape(), never)) top = std::max(top, p.peakReserved);
    std::vector<uint64_t> c = whatif::candidatesUpTo(top, {});
    if (!c.empty()) c.pop_back(); // (the never-releasing answer stands for the last)
    return c;
}

template <typename Feed>
void inSteps(const whatif::Tape& tape, Feed&& feed) {
    constexpr size_t kStep = 4096;
    size_t seqAt = 0;
    for (size_t at = 0; at < tape.ops.size(); at += kStep) {
        const size_t n = std::min(kStep, tape.ops.size() - at);
        size_t allocs = 0;
        for (size_t j = at; j < at + n; ++j) allocs += tape.ops[j].kind == whatif::Op::Kind::Alloc;
        feed(tape.ops.data() + at, tape.ops.data() + at + n, tape.allocSeq.data() + seqAt, allocs);
        seqAt += allocs;
    }
}

void BM_CandidatesEachAModel(benchmark::State& state) {
    const whatif::Tape& tape = wholeTape();
    const std::vector<uint64_t> cands = candidateThresholds();
    const std::vector<uint8_t> noMute;
    uint64_t releases = 0;
    for (auto _ : state) {
        std::vector<std::unique_ptr<whatif::PoolModel>> ms;
        for (uint64_t t : cands) {
            whatif::Settings s;
            s.releaseThreshold = t;
            ms.push_back(std::make_unique<whatif::PoolModel>(s));
        }
        inSteps(tape, [&](const whatif::Op* a, const whatif::Op* b, const uint64_t* seq, size_t n) {
            for (auto& m : ms) m->feed(a, b, seq, n, tape.streamHandles, noMute);
        });
        for (auto& m : ms) releases += m->releasesOf(0);
        benchmark::DoNotOptimize(releases);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events().size() * cands.size()));
    state.counters["candidates"] = double(cands.size());
}

void BM_CandidatesAsLanes(benchmark::State& state) {
    const whatif::Tape& tape = wholeTape();
    const std::vector<uint64_t> cands = candidateThresholds();
    const size_t groups = static_cast<size_t>(state.range(0));
    const std::vector<uint8_t> noMute;
    uint64_t releases = 0, splits = 0;
    for (auto _ : state) {
        std::vector<std::unique_ptr<whatif::LaneModel>> ls;
        std::vector<std::vector<const std::vector<uint8_t>*>> mutes;
        for (size_t g = 0; g < groups; ++g) {
            std::vector<std::optional<uint64_t>> lanes;
            for (size_t i = g; i < cands.size(); i += groups) lanes.push_back(cands[i]);
            mutes.emplace_back(lanes.size(), &noMute);
            ls.push_back(std::make_unique<whatif::LaneModel>(lanes));
        }
        inSteps(tape, [&](const whatif::Op* a, const whatif::Op* b, const uint64_t* seq, size_t n) {
            for (size_t g = 0; g < groups; ++g) ls[g]->feed(a, b, seq, n, tape.streamHandles, mutes[g]);
        });
        splits = 0;
        for (auto& l : ls) {
            releases += l->releasesOf(0, 0);
            splits += l->splits();
        }
        benchmark::DoNotOptimize(releases);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * events().size() * cands.size()));
    state.counters["candidates"] = double(cands.size());
    state.counters["splits"] = double(splits);
}

BENCHMARK(BM_CandidatesEachAModel)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_CandidatesAsLanes)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->MinTime(2.0);

BENCHMARK(BM_PanelRecordTape)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PanelReplayOneModel)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PanelPredictOnePoolFromTape)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_PanelPredictAllPoolsFromTape)->Unit(benchmark::kMillisecond)->MinTime(1.0);

BENCHMARK(BM_ReplayOnly)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayWithOneModel)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayWithEightModels)->Unit(benchmark::kMillisecond)->MinTime(2.0);

} // namespace

BENCHMARK_MAIN();
