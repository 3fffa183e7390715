// A range build (TimelineRange.h, issue #15) against building the trace's beginning of the same
// number of events (what the window holds of a trace larger than its limit), one build per
// process so that each peak RSS is its own:
//
//   poolscope_bench_range FILE prefix N      # buildTimeline with maxEvents = N
//   poolscope_bench_range FILE range N AT    # the N events' worth of chunks from AT (0..1) of
//                                            # the trace's time on, buildTimelineRange
//
// Prints one line: mode, events, chunks, wall s, CPU s, max RSS MiB. tests/bench/range_scale.sh
// runs both alternately and prints the ratios.
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TimelineRange.h"
#include "poolscope/TraceReader.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/resource.h>

using namespace poolscope;

namespace {
double cpuSeconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
} // namespace

int main(int argc, char** argv) {
    if (argc < 4 || (std::strcmp(argv[2], "prefix") != 0 && std::strcmp(argv[2], "range") != 0) ||
        (std::strcmp(argv[2], "range") == 0 && argc < 5)) {
        std::fprintf(stderr, "usage: %s FILE prefix N | FILE range N AT\n", argv[0]);
        return 2;
    }
    const bool range = std::strcmp(argv[2], "range") == 0;
    const uint64_t n = std::strtoull(argv[3], nullptr, 10);
    auto reader = TraceReader::open(argv[1]);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    const auto wall0 = std::chrono::steady_clock::now();
    const double cpu0 = cpuSeconds();
    std::shared_ptr<const Timeline> tl;
    uint64_t chunks = 0;
    if (!range) {
        BuildOptions o;
        o.maxEvents = n;
        auto r = buildTimeline(**reader, o);
        if (!r) {
            std::fprintf(stderr, "%s\n", r.error().message.c_str());
            return 1;
        }
        tl = *r;
        chunks = (tl->eventCount + 4095) / 4096;
    } else {
        // The chunks from AT of the trace's time on holding about n events.
        auto h = (*reader)->chunkHeaders();
        if (!h || h->empty()) {
            std::fprintf(stderr, "no chunks\n");
            return 1;
        }
        const double at = std::strtod(argv[4], nullptr);
        const int64_t t0 = h->front().tMin, t1 = h->back().tMax;
        const int64_t from = t0 + int64_t(double(t1 - t0) * at);
        size_t i = 0;
        while (i < h->size() && (*h)[i].tMax < from) ++i;
        uint64_t events = 0;
        size_t j = i;
        while (j < h->size() && events + (*h)[j].count <= n) events += (*h)[j++].count;
        if (j == i) j = i + 1;
        RangeBuildOptions o;
        o.maxEvents = n;
        auto r = buildTimelineRange(**reader, (*h)[i].tMin, (*h)[j - 1].tMax, o);
        if (!r) {
            std::fprintf(stderr, "%s\n", r.error().message.c_str());
            return 1;
        }
        tl = *r;
        chunks = j - i;
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    const double cpu = cpuSeconds() - cpu0;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("%s events %llu chunks %llu allocations %zu wall_s %.2f cpu_s %.2f maxrss_mib %.0f\n",
                range ? "range" : "prefix", static_cast<unsigned long long>(tl->eventCount),
                static_cast<unsigned long long>(chunks), tl->allocations.size(), wall, cpu,
                double(ru.ru_maxrss) / 1024.0);
    return 0;
}
