#pragma once
// The launch contract: every environment variable between PoolScope's launchers and the
// collector, named once. The collector reads them (collector/src/Config.cpp); the launchers,
// `poolscope record` and the GUI's Live > Launch, set them only through buildLaunchPlan
// (LaunchSpec.h), so both start a program the same way. What each value means:
// collector/README.md.

namespace poolscope::control {

// Set by every launch (buildLaunchPlan).
inline constexpr const char* kEnvInjection = "CUDA_INJECTION64_PATH"; // the driver loads it
inline constexpr const char* kEnvOutput = "POOLSCOPE_OUTPUT";         // the trace path
inline constexpr const char* kEnvSamplePeriodMs = "POOLSCOPE_SAMPLE_PERIOD_MS"; // 0 = off
// The launched process's own pid: any other process that loads the collector (a fork+exec'd
// child) writes its own trace beside it instead of sharing the file.
inline constexpr const char* kEnvRootPid = "POOLSCOPE_ROOT_PID";
// Set when the launch asks for live control.
inline constexpr const char* kEnvListen = "POOLSCOPE_LISTEN";          // 1 | unix:/path | 0
inline constexpr const char* kEnvControlDir = "POOLSCOPE_CONTROL_DIR"; // where sockets go

// Call sites (issue #13): set by a launch that asks for them (record --stacks, --stack-depth).
inline constexpr const char* kEnvStacks = "POOLSCOPE_STACKS";          // off|native|python|all|auto
inline constexpr const char* kEnvStackDepth = "POOLSCOPE_STACK_DEPTH"; // frames, 1..256
inline constexpr const char* kEnvStacksAtFree = "POOLSCOPE_STACKS_AT_FREE"; // 1: frees get a site too
// NVTX's own variable: the library NVTX hands its calls to. Every launch sets it to the CUPTI
// library the collector uses (unless the user set it), so that NVTX ranges reach the collector.
inline constexpr const char* kEnvNvtxInjection = "NVTX_INJECTION64_PATH";

// Tuning and diagnostics: never set by a launcher, passed through from its environment.
inline constexpr const char* kEnvRingEvents = "POOLSCOPE_RING_EVENTS"; // per thread, >= 64
inline constexpr const char* kEnvSpoolEvents = "POOLSCOPE_SPOOL_EVENTS"; // shared, >= 1024
inline constexpr const char* kEnvWatermarks = "POOLSCOPE_WATERMARKS";  // exit | full | off
inline constexpr const char* kEnvActivity = "POOLSCOPE_ACTIVITY";      // 0 = no pool activity
inline constexpr const char* kEnvClock = "POOLSCOPE_CLOCK";            // monotonic = no TSC
inline constexpr const char* kEnvDebug = "POOLSCOPE_DEBUG";            // 1 = decisions on stderr
inline constexpr const char* kEnvDisable = "POOLSCOPE_DISABLE";        // 1 = load, record nothing

// Read by the launchers, not the collector: the collector module to inject.
inline constexpr const char* kEnvCollector = "POOLSCOPE_COLLECTOR";

} // namespace poolscope::control
