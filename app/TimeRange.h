#pragma once
// `--from` / `--to` of `dump` and `export`: a part of a long trace, in times since its start
// (the window's time axis, the CSV export's time column), so that a minute of an hour-long
// recording is read without the rest.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "poolscope/Result.h"
#include "poolscope/Units.h"

namespace poolscope::cli {

struct TimeRangeArgs {
    std::string from, to;
    bool given() const { return !from.empty() || !to.empty(); }
};

inline void addTimeRangeOptions(CLI::App* sub, TimeRangeArgs& a, const std::string& note = {}) {
    auto isTime = [](const std::string& s) -> std::string {
        int64_t ns = 0;
        return parseDuration(s, ns) ? std::string()
                                    : "'" + s + "' is not a time: write e.g. 1.5s, 250ms, 40us, 900ns, 2min or 1h";
    };
    sub->add_option("--from", a.from,
                    "only what happens from this time on, since the trace's start (1.5s, 250ms, 2min, ...)" + note)
        ->check(isTime);
    sub->add_option("--to", a.to, "only what happens before this time since the trace's start")->check(isTime);
}

// [fromNs, untilNs) in the trace's own clock, for a trace whose events and samples span
// [t0, t1]; an error in words for a range that ends before it starts or starts after the trace.
struct AbsoluteRange {
    int64_t fromNs = INT64_MIN, untilNs = INT64_MAX;
};

inline Result<AbsoluteRange> resolveTimeRange(const TimeRangeArgs& a, int64_t t0, int64_t t1) {
    int64_t from = 0, to = INT64_MAX;
    if (!a.from.empty() && !parseDuration(a.from, from))
        return Error{ErrorCode::InvalidArgument, "--from '" + a.from + "' is not a time"};
    if (!a.to.empty() && !parseDuration(a.to, to))
        return Error{ErrorCode::InvalidArgument, "--to '" + a.to + "' is not a time"};
    if (from >= to)
        return Error{ErrorCode::InvalidArgument, "--from " + formatDuration(from) + " is not before --to " +
                                                     formatDuration(to) + ": nothing lies between them"};
    const int64_t span = nsBetween(t0, t1);
    if (from > span)
        return Error{ErrorCode::InvalidArgument, "--from " + formatDuration(from) + " is after the trace's end (it lasts " +
                                                     formatDuration(span) + ")"};
    // Saturating: a damaged trace's t0 may lie near the end of the clock.
    auto at = [&](int64_t offset) { return t0 > 0 && offset > INT64_MAX - t0 ? INT64_MAX : t0 + offset; };
    AbsoluteRange r;
    r.fromNs = a.from.empty() ? INT64_MIN : at(from);
    r.untilNs = a.to.empty() ? INT64_MAX : at(to);
    return r;
}

} // namespace poolscope::cli
