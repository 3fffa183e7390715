#pragma once
// What the benches of a trace read in pieces share: their wall and CPU clocks, and their
// arguments (TRACE [PIECES [THREADS [ROUNDS]]]).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <sys/resource.h>
#include <thread>

namespace poolscope::bench {

inline double wallNow() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double processCpu() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// The process's largest resident set so far, in MiB (the GPU hosts have no /usr/bin/time).
inline double maxRssMiB() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_maxrss) / 1024.0;
}

struct PiecesArgs {
    const char* path = nullptr;
    size_t pieces = 16;
    unsigned threads = 1;
    int rounds = 1;
};

// Empty (after printing the usage) without a trace. Threads default to the hardware's.
inline std::optional<PiecesArgs> piecesArgs(int argc, char** argv, const char* usage) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return std::nullopt;
    }
    PiecesArgs a;
    a.path = argv[1];
    if (argc > 2) a.pieces = size_t(std::max(1, std::atoi(argv[2])));
    a.threads = argc > 3 ? unsigned(std::max(1, std::atoi(argv[3]))) : std::max(1u, std::thread::hardware_concurrency());
    if (argc > 4) a.rounds = std::max(1, std::atoi(argv[4]));
    return a;
}

} // namespace poolscope::bench
