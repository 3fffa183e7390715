// The allocator replay's cost an event, and what a replay that follows a live set kept elsewhere
// saves (issue #15: `report` reads every event through several replays, one per thread): a
// replay of its own; the live set alone as a replay::LiveLead keeps it (pointer -> slot, the
// record of each chunk's operations); and a replay following that record (Replay::followLive).
// The synthetic workload held in memory in chunks of 4096 events (decoding is the timeline
// benchmark's business), 2 M and 10 M events: the generator leaks, so the larger has the larger
// live set. The ratios to the plain replay are the figures that carry between machines.
// docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <map>

#include "../../core/src/replay/LiveLead.h"
#include "SyntheticTrace.h"
#include "poolscope/replay/Replay.h"

namespace {

using namespace poolscope;

constexpr size_t kChunk = 4096;
constexpr size_t kAhead = 8; // as the report's replays prefetch

const std::vector<std::vector<Event>>& chunks(int64_t n) {
    static std::map<int64_t, std::vector<std::vector<Event>>> made;
    auto it = made.find(n);
    if (it != made.end()) return it->second;
    std::vector<Event> v;
    v.reserve(static_cast<size_t>(n) + 16);
    bench::SyntheticTrace gen(42);
    while (gen.events() < static_cast<uint64_t>(n)) gen.step(v);
    std::vector<std::vector<Event>> out;
    for (size_t at = 0; at < v.size(); at += kChunk)
        out.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(at),
                         v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), at + kChunk)));
    return made.emplace(n, std::move(out)).first->second;
}

size_t eventsIn(const std::vector<std::vector<Event>>& cs) {
    size_t n = 0;
    for (const auto& c : cs) n += c.size();
    return n;
}

std::vector<std::vector<uint32_t>> tapesOf(const std::vector<std::vector<Event>>& cs) {
    replay::LiveLead lead;
    std::vector<std::vector<uint32_t>> tapes(cs.size());
    for (size_t k = 0; k < cs.size(); ++k)
        for (const Event& e : cs[k]) lead.apply(e, tapes[k]);
    return tapes;
}

void BM_ReplayOwnLiveSet(benchmark::State& state) {
    const auto& cs = chunks(state.range(0));
    uint64_t x = 0;
    for (auto _ : state) {
        replay::Replay r;
        for (const auto& c : cs)
            for (size_t i = 0; i < c.size(); ++i) {
                if (i + kAhead < c.size()) r.prefetch(c[i + kAhead]);
                x += r.apply(c[i]).freed;
            }
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * eventsIn(cs)));
}

void BM_LiveSetKeptOnce(benchmark::State& state) {
    const auto& cs = chunks(state.range(0));
    std::vector<uint32_t> tape;
    size_t ops = 0;
    for (auto _ : state) {
        replay::LiveLead lead;
        ops = 0;
        for (const auto& c : cs) {
            tape.clear();
            for (size_t i = 0; i < c.size(); ++i) {
                if (i + kAhead < c.size()) lead.prefetch(c[i + kAhead]);
                lead.apply(c[i], tape);
            }
            ops += tape.size();
        }
        benchmark::DoNotOptimize(ops);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * eventsIn(cs)));
    state.counters["ops_per_event"] = double(ops) / double(eventsIn(cs));
}

void BM_ReplayFollowing(benchmark::State& state) {
    const auto& cs = chunks(state.range(0));
    const auto tapes = tapesOf(cs);
    uint64_t x = 0;
    for (auto _ : state) {
        replay::Replay r;
        for (size_t k = 0; k < cs.size(); ++k) {
            r.followLive(tapes[k].data(), tapes[k].size());
            for (const Event& e : cs[k]) x += r.apply(e).freed;
        }
        if (r.liveOpsMissing() != 0) state.SkipWithError("the record was not of these events");
        benchmark::DoNotOptimize(x);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * eventsIn(cs)));
}

BENCHMARK(BM_ReplayOwnLiveSet)->Arg(2'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_LiveSetKeptOnce)->Arg(2'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ReplayFollowing)->Arg(2'000'000)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->MinTime(2.0);

} // namespace

BENCHMARK_MAIN();
