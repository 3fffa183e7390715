// Whole replays of a trace's events held in memory (decoding left out), timed: the replay's own
// cost an event on a real or generated file, to compare two builds of the core library
// alternately (poolscope_bench_replay measures the same on the generator's events, in process).
//
//   poolscope_bench_replay_time TRACE [ROUNDS]
#include "../../core/src/replay/TraceEntities.h"
#include "poolscope/TraceReader.h"
#include "poolscope/replay/Replay.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

using namespace poolscope;

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE [ROUNDS]\n", argv[0]);
        return 2;
    }
    auto reader = TraceReader::open(argv[1]);
    if (!reader) {
        std::fprintf(stderr, "%s\n", reader.error().message.c_str());
        return 1;
    }
    std::vector<Event> events;
    Status st = (*reader)->forEachChunk([&](std::vector<Event>& c) {
        events.insert(events.end(), c.begin(), c.end());
        return true;
    });
    if (!st) {
        std::fprintf(stderr, "%s\n", st.error().message.c_str());
        return 1;
    }
    const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
    for (int k = 0; k < rounds; ++k) {
        // (Built against older cores too: nothing newer than declareTraceEntities here.)
        replay::Replay r;
        if (!detail::declareTraceEntities(**reader, r, /*knobs=*/true)) {
            std::fprintf(stderr, "cannot read the trace's tables\n");
            return 1;
        }
        const auto t0 = std::chrono::steady_clock::now();
        uint64_t freed = 0;
        for (const Event& e : events) freed += r.apply(e).freed;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::printf("%.3f s, %.1f ns an event (%llu frees)\n", s, s * 1e9 / double(events.size()),
                    static_cast<unsigned long long>(freed));
    }
    return 0;
}
