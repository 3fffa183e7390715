#pragma once
// Collector settings, read once from the environment: the names are the launch contract in
// core/include/poolscope/control/LaunchEnv.h (the launchers set them; see collector/README.md).

#include <cstdint>
#include <string>

#include "Stacks.h"

namespace poolscope::collector {

enum class WatermarkMode : uint8_t {
    Exit, // default: reserved read at alloc/sync/trim exit, used at sync/trim exit; at an alloc
          // or free `used` is derived from the sizes (kUsedDerived), reserved cached at a free
    Full, // reserved+used read at every alloc and free exit
    Off,  // no reads on the hot path (the sampler still runs)
};

struct Config {
    std::string output;         // POOLSCOPE_OUTPUT (already adjusted for a child process)
    double samplePeriodMs = 1;  // POOLSCOPE_SAMPLE_PERIOD_MS; 0 turns the sampler off
    size_t ringEvents = 16384;  // POOLSCOPE_RING_EVENTS, per thread
    size_t spoolEvents = 262144; // POOLSCOPE_SPOOL_EVENTS: drained, waiting for the writer
    WatermarkMode watermarks = WatermarkMode::Exit; // POOLSCOPE_WATERMARKS=exit|full|off
    bool activity = true;       // POOLSCOPE_ACTIVITY=0 turns MEMORY_POOL activity off
    bool allowTsc = true;       // POOLSCOPE_CLOCK=monotonic forces clock_gettime
    bool debug = false;         // POOLSCOPE_DEBUG=1: activity records and decisions on stderr
    bool disabled = false;      // POOLSCOPE_DISABLE=1: load, subscribe nothing
    std::string listen;         // POOLSCOPE_LISTEN: start the live control server
    StackMode stacks = StackMode::Auto; // POOLSCOPE_STACKS
    int stackDepth = kDefaultStackDepth; // POOLSCOPE_STACK_DEPTH (1..kMaxStackDepth)
    bool stacksAtFree = false;           // POOLSCOPE_STACKS_AT_FREE=1: frees get a call site too
    int64_t rootPid = 0;        // POOLSCOPE_ROOT_PID: the process the launcher started
    int64_t parentPid = 0;      // set when this process is not the root (its own trace)

    static Config fromEnvironment();
};

// "trace.poolscope" + pid 42 -> "trace.42.poolscope": a child process writes beside its parent.
std::string pathForPid(const std::string& path, int64_t pid);

} // namespace poolscope::collector
