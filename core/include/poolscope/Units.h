#pragma once
// Human units for every front end (CLI, GUI, reports): KiB/MiB/GiB and ns/µs/ms/s.

#include <cstddef>
#include <cstdint>
#include <string>

namespace poolscope {

std::string formatBytes(uint64_t bytes);      // "512 B", "1.50 KiB", "20.3 GiB"
std::string formatBytesSigned(int64_t bytes); // "+1.00 MiB", "-32.0 MiB"
std::string formatDuration(int64_t ns);       // "850 ns", "12.4 µs", "3.20 ms", "1.25 s"
// The same texts appended to `out`, for writers of one row an event (the CSV export).
void appendBytes(std::string& out, uint64_t bytes);
void appendDuration(std::string& out, int64_t ns);
// The same texts written at `p`, which has room for kUnitTextMax chars; returns their end.
inline constexpr size_t kUnitTextMax = 32;
char* writeBytes(char* p, uint64_t bytes);
char* writeDuration(char* p, int64_t ns);
// A driver result code by its name, the number after it: "CUDA_ERROR_OUT_OF_MEMORY (2)";
// "CUresult 12345" for a code this build does not name.
std::string formatCuResult(int result);
std::string formatCount(uint64_t n);          // "9,950,369": counts of millions read bare badly
// to - from for two timestamps, without the undefined behaviour of signed overflow: saturates at
// INT64_MIN / INT64_MAX, which only a damaged or hostile trace reaches (a span over 292 years).
int64_t nsBetween(int64_t from, int64_t to);
// Parses "64MiB", "1.5 GB", "4096", "max" (UINT64_MAX). Returns false on garbage.
bool parseBytes(const std::string& text, uint64_t& out);
// Parses a duration: a decimal number and a unit, "1.5s", "250 ms", "40us" (or "µs"), "900ns",
// "2min", "1h"; a bare number is seconds. Exact to the nanosecond (no binary fraction on the
// way); more decimals than a nanosecond holds are refused, as are negative and larger than
// INT64_MAX ns. Returns false on garbage.
bool parseDuration(const std::string& text, int64_t& ns);

} // namespace poolscope
