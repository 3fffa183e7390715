// The events table's filters over a big trace (issue #15: "under 1 s at 100 M events"), each
// answered three ways in one run, as the window's provider asks (a fresh reader per query, the
// first 200,000 matching rows: the table's kRowCap):
//   before     the provider as it was: events(t0, t1) over windows of ~200k events, every event
//              tested (every chunk of the range decoded)
//   no index   TraceReader::forEachMatchingChunk with chunk_index unread (setUseChunkIndex):
//              chunks passed over on their kinds only (after their checksum)
//   index      forEachMatchingChunk as the window runs it: kinds and chunk_index rows
//   no headers forEachMatchingChunk with chunk_headers unread (setUseChunkHeaders(false)): the
//              header scan reads prev_last_seq and crc from event_chunks, as before the table
//   page       what a table that shows one page at a time asks: countMatching (the row count)
//              and the first 500 rows (events with a cap of 500)
// Prints a table: seconds (median of REPS; no headers, index and page alternated run by run,
// their spreads below each row), chunks decoded, and the ratios. Not a test.
// First, the header scan alone (open + summary(): what every read starts with), with and
// without chunk_headers, alternated REPS times: median and range.
//
//   poolscope_bench_gentrace big.poolscope 4500000 --variety     (~10 M events)
//   poolscope_bench_filters big.poolscope [REPS] [--no-before] [--no-noindex]
// --no-before leaves the first column out (at 100 M events it re-reads every chunk header for
// each of its ~500 windows: minutes a filter); --no-noindex the second (every chunk decoded:
// ~15 s a selective filter at 100 M events).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "SyntheticTrace.h"
#include "poolscope/TraceReader.h"
#include "poolscope/view/EventFilter.h"

using namespace poolscope;
using view::EventFilter;

namespace {

constexpr size_t kRowCap = 200'000; // the events table's cap (ui/EventsPanel)

struct Outcome {
    double seconds = 0;
    size_t rows = 0;
    bool truncated = false;
    uint64_t decoded = 0; // chunks
};

// The provider before issue #15's index, kept here as the baseline.
Outcome before(const std::string& path, const EventFilter& f) {
    Outcome o;
    auto r = TraceReader::open(path);
    if (!r) std::exit((std::fprintf(stderr, "%s\n", r.error().message.c_str()), 1));
    auto sum = (*r)->summary();
    if (!sum) std::exit(1);
    const int64_t traceT0 = sum->firstTsNs, traceT1 = sum->lastTsNs;
    const int64_t end = traceT1 == INT64_MAX ? INT64_MAX : traceT1 + 1;
    const int64_t a = std::max(f.t0, traceT0);
    const int64_t b = f.t1 == INT64_MAX ? end : std::min(f.t1, end);
    const double density = double(std::max<uint64_t>(sum->eventCount, 1)) /
                           std::max(double(traceT1) - double(traceT0), 1.0);
    const int64_t chunk = int64_t(std::clamp(200000.0 / density, 1.0, 4.0e18));
    for (int64_t t = a; t < b;) {
        int64_t next = 0;
        if (__builtin_add_overflow(t, chunk, &next) || next > b) next = b;
        auto ev = (*r)->events(t, next);
        if (!ev) std::exit((std::fprintf(stderr, "%s\n", ev.error().message.c_str()), 1));
        for (const Event& e : *ev) {
            if (!f.matches(e)) continue;
            if (o.rows >= kRowCap) {
                o.truncated = true;
                return o;
            }
            ++o.rows;
        }
        t = next;
    }
    return o;
}

Outcome filtered(const std::string& path, const EventFilter& f, bool index,
                 bool headers = true) {
    Outcome o;
    auto r = TraceReader::open(path);
    if (!r) std::exit(1);
    (*r)->setUseChunkIndex(index);
    (*r)->setUseChunkHeaders(headers);
    FilteredReadStats stats;
    bool truncated = false;
    auto ev = (*r)->events(f, kRowCap, &truncated, &stats);
    if (!ev) std::exit((std::fprintf(stderr, "%s\n", ev.error().message.c_str()), 1));
    o.rows = ev->size();
    o.truncated = truncated;
    o.decoded = stats.decoded;
    return o;
}

constexpr size_t kPage = 500;

// The row count and the first page, on one reader, as a paged table would ask.
Outcome paged(const std::string& path, const EventFilter& f) {
    Outcome o;
    auto r = TraceReader::open(path);
    if (!r) std::exit(1);
    FilteredReadStats stats;
    // The count only where the kind counts answer it (kinds and time): other filters would
    // decode what may match, and a paged table shows "500+" for them instead.
    const bool countable = !f.failedOnly && !f.stream && !f.pool && !f.sizeActive();
    uint64_t count = 0;
    if (countable) {
        auto n = (*r)->countMatching(f, &stats);
        if (!n) std::exit((std::fprintf(stderr, "%s\n", n.error().message.c_str()), 1));
        count = *n;
    }
    bool truncated = false;
    auto ev = (*r)->events(f, kPage, &truncated, &stats);
    if (!ev) std::exit(1);
    o.rows = countable ? size_t(count) : ev->size();
    o.truncated = truncated;
    o.decoded = stats.decoded;
    return o;
}

double scanSeconds(const std::string& path, bool headers) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = TraceReader::open(path);
    if (!r) std::exit(1);
    (*r)->setUseChunkHeaders(headers);
    auto sum = (*r)->summary();
    if (!sum) std::exit(1);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The median of REPS runs (seconds), with the fastest and slowest kept for the spread.
struct Timed : Outcome {
    double lo = 0, hi = 0;
};
Outcome timedRun(const std::function<Outcome()>& run) {
    const auto t0 = std::chrono::steady_clock::now();
    Outcome o = run();
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return o;
}
Timed summarize(std::vector<Outcome> all) {
    std::sort(all.begin(), all.end(),
              [](const Outcome& a, const Outcome& b) { return a.seconds < b.seconds; });
    Timed t;
    static_cast<Outcome&>(t) = all[all.size() / 2];
    t.lo = all.front().seconds;
    t.hi = all.back().seconds;
    return t;
}
Timed best(int reps, const std::function<Outcome()>& run) {
    std::vector<Outcome> all;
    for (int i = 0; i < reps; ++i) all.push_back(timedRun(run));
    return summarize(std::move(all));
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s TRACE [REPS] [--no-before]\n", argv[0]);
        return 2;
    }
    const std::string path = argv[1];
    const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
    bool withBefore = true, withNoIndex = true;
    for (int i = 3; i < argc; ++i) {
        if (std::string(argv[i]) == "--no-before") withBefore = false;
        if (std::string(argv[i]) == "--no-noindex") withNoIndex = false;
    }
    auto r = TraceReader::open(path);
    if (!r) return (std::fprintf(stderr, "%s\n", r.error().message.c_str()), 1);
    auto sum = (*r)->summary();
    if (!sum) return 1;
    const uint64_t chunks = ((*r)->chunkedEventCount() + 4095) / 4096;
    std::printf("trace %s: %llu events, ~%llu chunks; median of %d; rows capped at %zu\n\n",
                path.c_str(), static_cast<unsigned long long>(sum->eventCount),
                static_cast<unsigned long long>(chunks), reps, kRowCap);

    {
        std::vector<double> with, without;
        for (int i = 0; i < std::max(reps, 5); ++i) {
            without.push_back(scanSeconds(path, false));
            with.push_back(scanSeconds(path, true));
        }
        auto show = [](const char* name, std::vector<double> v) {
            std::sort(v.begin(), v.end());
            std::printf("  %-32s median %.3f s (%.3f-%.3f, %zu runs)\n", name, v[v.size() / 2],
                        v.front(), v.back(), v.size());
            return v[v.size() / 2];
        };
        std::printf("header scan (open + summary), alternated:\n");
        const double a = show("event_chunks (no chunk_headers)", without);
        const double b = show("chunk_headers", with);
        std::printf("  ratio without/with: %.1fx\n\n", a / b);
    }

    using bench::SyntheticTrace;
    struct Case {
        const char* name;
        EventFilter f;
    };
    std::vector<Case> cases;
    {
        EventFilter f;
        f.failedOnly = true;
        cases.push_back({"failed only", f});
        f = {};
        f.stream = SyntheticTrace::kSideStreams[3];
        cases.push_back({"one side stream", f});
        f = {};
        f.pool = SyntheticTrace::kSidePool;
        cases.push_back({"one pool (side)", f});
        f = {};
        f.minSize = uint64_t{256} << 20;
        cases.push_back({"size >= 256 MiB", f});
        f = {};
        f.kindMask = EventFilter::bit(EventKind::StreamCreate);
        cases.push_back({"kind stream_create", f});
        f = {};
        f.stream = SyntheticTrace::kStreams[1];
        cases.push_back({"one main stream", f});
        f = {};
        f.kindMask = EventFilter::bit(EventKind::Alloc);
        cases.push_back({"kind alloc (capped)", f});
    }
    std::printf("%-20s %9s | %9s | %9s %8s | %9s | %9s %8s | %9s %8s | %8s %8s %8s\n",
                "filter", "rows", "before s", "no idx s", "decoded", "no hdr s", "index s",
                "decoded", "page s", "decoded", "bef/idx", "noi/idx", "noh/idx");
    for (const Case& c : cases) {
        // Alternated run by run, so that the machine's load falls on every column alike.
        const std::function<Outcome()> cols[] = {
            [&] { return filtered(path, c.f, true, false); },
            [&] { return filtered(path, c.f, true); }, [&] { return paged(path, c.f); }};
        std::vector<Outcome> got[3];
        for (int i = 0; i < reps; ++i)
            for (size_t k = 0; k < 3; ++k) got[k].push_back(timedRun(cols[k]));
        const Timed h = summarize(got[0]), x = summarize(got[1]), pg = summarize(got[2]);
        Timed n = x;
        n.seconds = n.lo = n.hi = 0;
        if (withNoIndex) n = best(reps, [&] { return filtered(path, c.f, false); });
        const bool countable = !c.f.failedOnly && !c.f.stream && !c.f.pool && !c.f.sizeActive();
        if (h.rows != x.rows || h.truncated != x.truncated ||
            (countable && !x.truncated && pg.rows != x.rows) ||
            (countable && x.truncated && pg.rows < x.rows) ||
            (!countable && pg.rows != std::min(x.rows, kPage))) {
            std::fprintf(stderr, "%s: the answers differ (%zu, %zu, count %zu rows)\n", c.name,
                         h.rows, x.rows, pg.rows);
            return 1;
        }
        Timed b = x;
        b.seconds = 0;
        if (withBefore) b = best(reps, [&] { return before(path, c.f); });
        if (b.rows != x.rows || n.rows != x.rows || b.truncated != x.truncated ||
            n.truncated != x.truncated) {
            std::fprintf(stderr, "%s: the answers differ (%zu, %zu, %zu rows)\n", c.name, b.rows,
                         n.rows, x.rows);
            return 1;
        }
        std::printf("%-20s %8zu%s | %9.3f | %9.3f %8llu | %9.3f | %9.3f %8llu | %9.3f %8llu | "
                    "%7.1fx %7.1fx %7.1fx\n",
                    c.name, x.rows, x.truncated ? "+" : " ", b.seconds, n.seconds,
                    static_cast<unsigned long long>(n.decoded), h.seconds, x.seconds,
                    static_cast<unsigned long long>(x.decoded), pg.seconds,
                    static_cast<unsigned long long>(pg.decoded), b.seconds / x.seconds,
                    n.seconds / x.seconds, h.seconds / x.seconds);
        std::printf("%-20s spread: no hdr %.3f-%.3f, index %.3f-%.3f, page %.3f-%.3f\n", "",
                    h.lo, h.hi, x.lo, x.hi, pg.lo, pg.hi);
        if (x.truncated && countable) std::printf("%-20s count: %zu rows\n", "", pg.rows);
    }
    return 0;
}
