// Reader side on a 10M-event trace: reconstructing the timeline once, then the query the GUI
// makes on every pan/zoom (every series downsampled to the visible range), and the SQL
// time-range query behind the event table.
//
// The trace is generated once (a few seconds) and cached next to this binary; delete
// synthetic-10M.poolscope to regenerate. Run a benchmark alone for its peak RSS to mean
// anything: ru_maxrss is per process.
#include <benchmark/benchmark.h>

#include <chrono>
#include <filesystem>
#include <sys/resource.h>

#include "SyntheticTrace.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"

namespace {

using namespace poolscope;

constexpr uint64_t kTraceEvents = 10'000'000;
constexpr size_t kScreenPoints = 2000; // about one point per pixel column of a wide plot

std::string tracePath() { return POOLSCOPE_BENCH_DIR "/synthetic-10M.poolscope"; }

double peakRssMiB() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0; // KiB on Linux
}

void ensureTrace() {
    static bool done = false;
    if (done) return;
    done = true;
    if (std::filesystem::exists(tracePath())) {
        if (auto r = TraceReader::open(tracePath()); r) {
            if (auto s = (*r)->summary(); s && s->eventCount >= kTraceEvents) return;
        }
    }
    std::fprintf(stderr, "generating %s (once)...\n", tracePath().c_str());
    WriterOptions options;
    options.synchronousOff = true;
    auto w = TraceWriter::create(tracePath(), options);
    if (!w) {
        std::fprintf(stderr, "%s\n", w.error().message.c_str());
        std::abort();
    }
    (*w)->setProcess(ProcessInfo{12345, "python train.py (synthetic)", 0, 0, "bench", 13000, 0,
                                 "bench", 0});
    (*w)->addDevice(DeviceInfo{0, "synthetic GPU", 141ull << 30, ""});
    bench::SyntheticTrace gen(42);
    std::vector<Event> batch;
    while (gen.events() < kTraceEvents) {
        batch.clear();
        while (batch.size() < 65536 && gen.events() < kTraceEvents) gen.step(batch);
        if (!(*w)->append(batch) || !(*w)->commit()) std::abort();
    }
    if (!(*w)->close()) std::abort();
}

std::unique_ptr<TraceReader> openTrace() {
    ensureTrace();
    auto r = TraceReader::open(tracePath());
    if (!r) {
        std::fprintf(stderr, "%s\n", r.error().message.c_str());
        std::abort();
    }
    return std::move(*r);
}

std::shared_ptr<const Timeline> builtTimeline() {
    static std::shared_ptr<const Timeline> tl = [] {
        auto r = openTrace();
        auto built = buildTimeline(*r);
        if (!built) std::abort();
        return *built;
    }();
    return tl;
}

// The whole load: read + decode + reconstruct. Args: read-ahead (decoding on a second thread)
// on/off, and a partial timeline handed out at the default 300 ms (as the GUI asks) or not;
// the last row is what the GUI does on this 2-vCPU machine (no read-ahead, a partial).
// Process CPU time (both threads) and wall time.
void BM_BuildTimeline10M(benchmark::State& state) {
    auto reader = openTrace();
    std::shared_ptr<const Timeline> tl;
    BuildOptions options;
    options.readAhead = state.range(0) != 0;
    double partialMs = 0;
    uint64_t partialEvents = 0;
    std::chrono::steady_clock::time_point start;
    if (state.range(1) != 0) {
        options.onPartial = [&](std::shared_ptr<const Timeline> p) {
            const auto now = std::chrono::steady_clock::now();
            partialMs = std::chrono::duration<double, std::milli>(now - start).count();
            partialEvents = p->eventCount;
        };
    }
    for (auto _ : state) {
        start = std::chrono::steady_clock::now();
        auto built = buildTimeline(*reader, options);
        if (!built) {
            state.SkipWithError(built.error().message.c_str());
            return;
        }
        tl = *built;
    }
    if (state.range(1) != 0) {
        state.counters["partial_ms"] = partialMs; // build start -> partial timeline handed out
        state.counters["partial_events"] = static_cast<double>(partialEvents);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * tl->eventCount));
    state.counters["events"] = static_cast<double>(tl->eventCount);
    state.counters["allocations"] = static_cast<double>(tl->allocations.size());
    size_t points = 0;
    for (const PoolTimeline& p : tl->pools) points += p.reserved.size() + p.used.size();
    for (const StreamTimeline& s : tl->streams) points += s.liveBytes.size();
    state.counters["series_points"] = static_cast<double>(points);
    state.counters["peak_rss_MiB"] = peakRssMiB();
}

// Every series of the timeline downsampled to one visible range: what a pan or zoom costs.
// Arg: the visible range as a fraction of the trace, in thousandths.
void BM_RangeQueryDownsampled(benchmark::State& state) {
    auto tl = builtTimeline();
    const int64_t span = tl->t1 - tl->t0;
    const int64_t width = std::max<int64_t>(1, span / 1000 * state.range(0));
    size_t points = 0;
    int64_t offset = 0;
    for (auto _ : state) {
        // Slide the window so each iteration reads different memory.
        const int64_t t0 = tl->t0 + offset % std::max<int64_t>(1, span - width + 1);
        const int64_t t1 = t0 + width;
        offset += span / 7 + 1;
        points = 0;
        for (const PoolTimeline& p : tl->pools) {
            for (const Series* s : {&p.reserved, &p.used, &p.releaseThreshold}) {
                auto pts = downsample(*s, t0, t1, kScreenPoints);
                points += pts.size();
                benchmark::DoNotOptimize(pts.data());
            }
        }
        for (const StreamTimeline& s : tl->streams) {
            auto pts = downsample(s.liveBytes, t0, t1, kScreenPoints);
            points += pts.size();
            benchmark::DoNotOptimize(pts.data());
        }
    }
    state.counters["points_out"] = static_cast<double>(points);
    state.counters["series"] = static_cast<double>(tl->pools.size() * 3 + tl->streams.size());
}

// The SQL side: events of a time window (the event table's page), decoded from chunks.
void BM_ReaderEventsRange(benchmark::State& state) {
    auto reader = openTrace();
    auto summary = (*reader).summary();
    const int64_t span = summary->lastTsNs - summary->firstTsNs;
    const int64_t width = std::max<int64_t>(1, span / 100000 * state.range(0));
    size_t n = 0;
    int64_t offset = 0;
    for (auto _ : state) {
        const int64_t t0 = summary->firstTsNs + offset % std::max<int64_t>(1, span - width);
        offset += span / 7 + 1;
        auto ev = reader->events(t0, t0 + width);
        if (!ev) {
            state.SkipWithError(ev.error().message.c_str());
            return;
        }
        n = ev->size();
    }
    state.counters["events_out"] = static_cast<double>(n);
}

BENCHMARK(BM_BuildTimeline10M)
    ->ArgNames({"readahead", "partial"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({0, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK(BM_RangeQueryDownsampled)->Arg(1)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);
// 0.01% and 0.1% of the trace: about 1,000 and 10,000 events.
BENCHMARK(BM_ReaderEventsRange)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
