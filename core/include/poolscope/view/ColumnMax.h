#pragma once
// The arithmetic behind an area chart drawn at pixel resolution: the highest value of a step
// series in force anywhere in each pixel column. Exact, and the same for a column whatever the
// rest of the view is, so a panned image and a fresh one agree.

#include "poolscope/Series.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace poolscope::view {

// max(m, v[i..j)), whole blocks of Series::kBlock points read from the series' block summary.
uint64_t summarisedMax(const Series& s, size_t i, size_t j, uint64_t m);

// colMax[c] (c < e.size() - 1) = the highest value in force anywhere in [e[c], e[c + 1]) (e
// increasing), or -1 where nothing is drawn: columns before the series' first point or at or
// after tEnd. colMax is resized to e.size() - 1.
// blockT: the time of every Series::kBlock-th point (LaneLayout's block times; may be empty).
// Columns averaging at least blockScanMinPoints points each are found through blockT in passes
// (fewer: the plain column-by-column scan is cheaper). Both give the same values.
void columnMaxima(const Series& s, const std::vector<int64_t>& blockT,
                  const std::vector<int64_t>& e, int64_t tEnd, size_t blockScanMinPoints,
                  std::vector<double>& colMax);

} // namespace poolscope::view
