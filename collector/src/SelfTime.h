#pragma once
// Diagnostic builds only (-DPOOLSCOPE_COLLECTOR_DEFINES=POOLSCOPE_EXP_SELFTIME, see
// docs/PERFORMANCE.md): the callback times its own sections with the TSC and prints the means
// at exit. Every macro is empty in a shipped build. Not thread-safe: for the single-threaded
// overhead benchmark.

#ifdef POOLSCOPE_EXP_SELFTIME
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <x86intrin.h>

namespace poolscope::collector::selftime {
// ticks[0] enter callbacks, ticks[1] exit callbacks, ticks[2..5] the exit's sections.
inline uint64_t ticks[6], calls[2], mark, start;
inline int site;
struct Report {
    uint64_t tsc0 = __rdtsc();
    timespec ts0 = [] { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t; }();
    ~Report() {
        timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double ns = double(t1.tv_sec - ts0.tv_sec) * 1e9 + double(t1.tv_nsec - ts0.tv_nsec);
        const double perTick = ns / double(__rdtsc() - tsc0);
        auto per = [&](int i, int c) { return calls[c] ? double(ticks[i]) * perTick / double(calls[c]) : 0.0; };
        std::fprintf(stderr,
                     "[selftime] enter %llu calls %.1f ns/call; exit %llu calls %.1f ns/call "
                     "(decode %.1f, lookups+reads %.1f, switch %.1f, seq+ring %.1f)\n",
                     (unsigned long long)calls[0], per(0, 0), (unsigned long long)calls[1],
                     per(1, 1), per(2, 1), per(3, 1), per(4, 1), per(5, 1));
    }
};
inline Report report;
inline void section(int i) {
    const uint64_t now = __rdtsc();
    ticks[i] += now - mark;
    mark = now;
}
} // namespace poolscope::collector::selftime

#define SELFTIME_BEGIN(s) (selftime::site = (s), selftime::start = selftime::mark = __rdtsc())
#define SELFTIME(i) selftime::section(i)
#define SELFTIME_END() \
    (selftime::ticks[selftime::site] += __rdtsc() - selftime::start, ++selftime::calls[selftime::site])
#else
#define SELFTIME_BEGIN(s) ((void)0)
#define SELFTIME(i) ((void)0)
#define SELFTIME_END() ((void)0)
#endif
