#pragma once
// Seams for overhead diagnostics. They change what the collector does (an empty trace, extra
// CUPTI activity, a timing wrapper around the callback), so they live only in the diagnostic
// module `poolscope_collector_diag` (the same sources plus Diagnostics.cpp, built with
// POOLSCOPE_DIAGNOSTICS; never installed; tests/gpu/run.sh, docs/PERFORMANCE.md). In the shipped
// module these are empty inlines: it carries neither the code nor the variables' names.

#include <cupti.h>

namespace poolscope::collector {

struct Runtime;

namespace diag {

#ifdef POOLSCOPE_DIAGNOSTICS
// How much the callback does under POOLSCOPE_BENCH_LEVELS=1 (poolscope_diag_level).
enum Level { kLevelOff = 0, kLevelEmpty, kLevelMinimal, kLevelNoWatermarks, kLevelFull, kLevelFullStacks,
             kLevelFullPython };
int setLevel(int level); // -1 for a level not in Level
// At InitializeInjection: reads the POOLSCOPE_BENCH_* variables and returns the callback to
// subscribe (shipped, or a wrapper around it).
CUpti_CallbackFunc start(CUpti_CallbackFunc shipped);
// After MEMORY_POOL activity is enabled: enables whatever else a diagnostic asks for.
CUptiResult enableActivity();
// One pass of the writer thread; true when the diagnostic did it instead of the trace sink.
bool writerPass(Runtime& rt);
// False when the rings must not be read until exit (POOLSCOPE_BENCH_DISCARD=2).
bool drainerEnabled();
#else
inline CUpti_CallbackFunc start(CUpti_CallbackFunc shipped) { return shipped; }
inline CUptiResult enableActivity() { return CUPTI_SUCCESS; }
inline bool writerPass(Runtime&) { return false; }
inline bool drainerEnabled() { return true; }
#endif

} // namespace diag
} // namespace poolscope::collector
