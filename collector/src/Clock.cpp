#include "Clock.h"

#include <cstdio>
#include <cstring>

namespace poolscope::collector {

namespace {
bool cpuHasInvariantTsc() {
    FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[4096];
    bool constant = false, nonstop = false;
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, "flags", 5) != 0) continue;
        constant = std::strstr(line, " constant_tsc") != nullptr;
        nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
        break;
    }
    std::fclose(f);
    return constant && nonstop;
}

// One (ticks, ns) pair read as close together as possible: the ns read bracketed by two tick
// reads, keeping the tightest of a few tries.
void readPair(uint64_t& ticks, int64_t& ns) {
    uint64_t best = ~uint64_t{0};
    for (int i = 0; i < 5; ++i) {
        uint64_t a = Clock::ticks();
        int64_t n = monoNowNs();
        uint64_t b = Clock::ticks();
        if (b - a < best) {
            best = b - a;
            ticks = a + (b - a) / 2;
            ns = n;
        }
    }
}
} // namespace

void Clock::init(bool allowTsc) {
#if defined(__x86_64__)
    useTsc_ = allowTsc && cpuHasInvariantTsc();
#else
    (void)allowTsc;
    useTsc_ = false;
#endif
}

TickConverter::TickConverter() {
    readPair(t0_, ns0_);
    if (!Clock::usesTsc()) return;
    // A first rate from a short spin, refined by every recalibrate().
    uint64_t t1;
    int64_t ns1;
    do {
        readPair(t1, ns1);
    } while (ns1 - ns0_ < 2'000'000);
    nsPerTick_ = double(ns1 - ns0_) / double(t1 - t0_);
}

void TickConverter::recalibrate() {
    if (!Clock::usesTsc()) return;
    uint64_t t1;
    int64_t ns1;
    readPair(t1, ns1);
    if (t1 > t0_ && ns1 - ns0_ > 2'000'000) nsPerTick_ = double(ns1 - ns0_) / double(t1 - t0_);
}

int64_t TickConverter::toNs(uint64_t ticks) const {
    if (!Clock::usesTsc()) return static_cast<int64_t>(ticks);
    const double d = double(int64_t(ticks - t0_)) * nsPerTick_;
    return ns0_ + static_cast<int64_t>(d);
}

} // namespace poolscope::collector
