#pragma once
// What the fuzz targets (FuzzTest.cpp, FuzzReadsTest.cpp, ChunkCodecFuzzTest.cpp) share: their input budget, their
// seeds, the bundled samples they start from, and byte-level damage.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace poolscope::fuzz {

using Clock = std::chrono::steady_clock;

inline int64_t msSince(Clock::time_point t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// Inputs to run: POOLSCOPE_FUZZ_INPUTS (no time limit then), else `ciInputs` within `ciMs`
// (but at least `minInputs`, however slow the build); POOLSCOPE_FUZZ_SECONDS=S: S seconds.
struct Budget {
    uint64_t inputs;
    int64_t ms;
    uint64_t minInputs;
    Budget(uint64_t ciInputs, int64_t ciMs, uint64_t min) : inputs(ciInputs), ms(ciMs), minInputs(min) {
        if (const char* e = std::getenv("POOLSCOPE_FUZZ_INPUTS"); e && *e) {
            inputs = std::strtoull(e, nullptr, 10);
            ms = std::numeric_limits<int64_t>::max();
            minInputs = inputs;
        }
        // A long run bounded by wall time instead (the figures are printed at the end).
        if (const char* e = std::getenv("POOLSCOPE_FUZZ_SECONDS"); e && *e) {
            inputs = std::numeric_limits<uint64_t>::max();
            ms = std::strtoll(e, nullptr, 10) * 1000;
            minInputs = 0;
        }
    }
    bool more(uint64_t done, Clock::time_point t0) const {
        return done < inputs && (done < minInputs || msSince(t0) < ms);
    }
};

// POOLSCOPE_FUZZ_SEED=N starts every target's generator elsewhere (N = 0: the fixed CI runs), so
// that a long run can be split into shards that try different inputs.
inline uint64_t runSeed(uint64_t fixed) {
    const char* e = std::getenv("POOLSCOPE_FUZZ_SEED");
    return fixed ^ (e && *e ? std::strtoull(e, nullptr, 10) * 0x9E3779B97F4A7C15ull : 0);
}

inline const char* const kSamples[] = {"churn",    "cupy",         "ipc-child",   "ipc-parent",
                                "pools",    "thread_first", "torch_async", "trims_oom",
                                "jax",      "threads"};

inline std::string samplePath(const std::string& name) {
    return std::string(POOLSCOPE_SAMPLES_DIR) + "/" + name + ".poolscope";
}

inline std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Byte-level damage shared by both targets: flips, truncation, splices, insertion, runs of
// 0x00/0xFF (a varint or a v3 length code at its extreme), noise.
inline void mutateBytes(std::string& b, const std::vector<std::string>& others, std::mt19937_64& rng) {
    switch (rng() % 7) {
    case 0:
        for (int i = 0, n = 1 + int(rng() % 4); i < n && !b.empty(); ++i)
            b[rng() % b.size()] ^= char(1 + rng() % 255);
        break;
    case 1:
        b.resize(rng() % (b.size() + 1));
        break;
    case 2: { // splice: a prefix of this, the suffix of another
        const std::string& o = others[rng() % others.size()];
        b.resize(rng() % (b.size() + 1));
        b.append(o, rng() % (o.size() + 1));
        break;
    }
    case 3: { // insert random bytes
        std::string ins(1 + rng() % 16, '\0');
        for (char& c : ins)
            c = char(rng());
        b.insert(rng() % (b.size() + 1), ins);
        break;
    }
    case 4:
    case 5: { // a run of extremes (v3 header codes all 7, varints that never end, zeros)
        if (b.empty()) break;
        const size_t at = rng() % b.size();
        const size_t n = std::min<size_t>(1 + rng() % 12, b.size() - at);
        const char v = rng() % 3 == 0 ? '\0' : rng() % 2 ? char(0xFF) : char(0x7F);
        for (size_t i = 0; i < n; ++i)
            b[at + i] = v;
        break;
    }
    default: // noise over a stretch
        if (b.empty()) break;
        for (size_t i = rng() % b.size(), n = 1 + rng() % 64; i < b.size() && n; ++i, --n)
            b[i] = char(rng());
    }
}

} // namespace poolscope::fuzz
