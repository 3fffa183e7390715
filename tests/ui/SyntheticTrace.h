#pragma once
// A generated trace for GUI tests and the GUI benchmark: a two-stream alloc / record / wait /
// cross-stream-free loop on the default pool (reserved grows between synchronizes while used
// stays small), an explicit pool with long-lived blocks (two never freed), periodic samples, a
// release-threshold change by the app, a knob change and a trim, and one failed allocation.
// It is marked synthetic in its metadata, device name and command line: never a recording.

#include "poolscope/Result.h"

#include <cstdint>
#include <string>

namespace poolscope::synth {

struct SyntheticOptions {
    uint64_t events = 20000; // approximate number of events (samples not counted)
    uint32_t seed = 1;
    // Drop gaps (drop_gaps rows) spread evenly over the trace, each of dropCount events: made
    // up, like the rest of the trace, to show how lost events are marked.
    uint32_t dropGaps = 0;
    uint64_t dropCount = 1000;
};

Status writeSyntheticTrace(const std::string& path, const SyntheticOptions& options = {});

// A trace with `pools` explicit pools, one allocation each, and `samples` watermark samples
// spread over them: the many-pools case of the watermark plot (issue #12).
Status writeManyPoolsTrace(const std::string& path, uint32_t pools, uint64_t samples);

// Handles used by the generator, so tests can name what they expect.
inline constexpr uint64_t kSynthDefaultPool = 0x7f00d0000000ull;
inline constexpr uint64_t kSynthExplicitPool = 0x7f00e0000000ull;
inline constexpr uint64_t kSynthStreamA = 0x55550000a0ull; // allocates
inline constexpr uint64_t kSynthStreamB = 0x55550000b0ull; // waits and frees (cross-stream)
inline constexpr uint64_t kSynthStreamC = 0x55550000c0ull; // explicit pool
inline constexpr uint64_t kManyPoolsBase = 0x7f0100000000ull; // writeManyPoolsTrace's pool i: + i*0x1000

} // namespace poolscope::synth
