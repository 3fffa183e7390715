#pragma once
// The collector's only output: one "[poolscope] ..." line per kind of problem, written with
// write(2) (no stdio locks, usable from any thread and from a signal handler's caller).

namespace poolscope::collector {

enum class LogKey { Cupti, Subscribe, Activity, Sqlite, Output, Driver, Ring, Fork, Info, Control, Count };

// Logs once per key; later calls with the same key are dropped. printf-style.
void logOnce(LogKey key, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Always logs (debug output, gated by the caller).
void logLine(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace poolscope::collector
