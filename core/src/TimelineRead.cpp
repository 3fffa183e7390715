// buildTimeline: a trace file's events, in chunks decoded ahead, and its samples merged in by
// time, through a TimelineBuilder, with progress, partial timelines, caps and cancellation.
#include "poolscope/TimelineBuilder.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <thread>

#include "ChunkPipe.h"
#include "TimelineSetup.h"
#include "replay/TraceEntities.h"
#include "poolscope/TraceReader.h"

namespace poolscope {

namespace {

void addSample(TimelineBuilder& b, Event s) {
    s.kind = EventKind::Sample; // whatever the reader filled in, these rows are samples
    b.add(s);
}

} // namespace

bool BuildOptions::defaultReadAhead() {
    return std::thread::hardware_concurrency() >= 4;
}

Status detail::setEntitiesFromTrace(TimelineBuilder& b, const TraceReader& reader) {
    auto tables = readTraceTables(reader);
    if (!tables) return tables.error();
    b.setEntities(std::move(tables->devices), std::move(tables->pools), std::move(tables->streams));
    if (auto gaps = reader.dropGaps(); gaps) b.setDropGaps(std::move(*gaps));
    return {};
}

Result<std::shared_ptr<const Timeline>> buildTimeline(const TraceReader& reader,
                                                      const BuildOptions& options) {
    TimelineBuilder b;
    if (Status st = detail::setEntitiesFromTrace(b, reader); !st) return st.error();
    // The same for the attributes read when each pool was first seen: without them the
    // policies a program never set are unknown, as in traces from before the table.
    if (auto attrs = reader.poolAttributes(); attrs) b.declarePoolAttributes(*attrs);
    // The whole trace's time range (for partial timelines), per-kind counts (capacity) and
    // event count (progress); the chunks' own count when the summary cannot be read.
    TraceSummary summary;
    uint64_t total = 0;
    if (auto s = reader.summary(); s) {
        summary = std::move(*s);
        total = summary.eventCount;
    }
    if (total == 0) total = reader.chunkedEventCount();

    const bool bound = options.boundTimes != nullptr;
    auto plausible = [](int64_t t) { return t >= 0 && t < BuildOptions::kLatestPlausibleNs; };
    // The chunk headers' range only widens a partial timeline: a damaged one is not used.
    if (bound && !(plausible(summary.firstTsNs) && plausible(summary.lastTsNs)))
        summary.firstTsNs = summary.lastTsNs = 0;

    // Samples live in their own table; they are few (periodic), so read them whole and merge
    // them into the event stream by time: each goes in before the first event not earlier.
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    if (bound) {
        std::vector<Event>& all = samples.value();
        const auto bad = std::find_if(all.begin(), all.end(),
                                      [&](const Event& e) { return !plausible(e.tsNs); });
        if (bad != all.end()) {
            const int64_t example = bad->tsNs;
            const auto kept = std::remove_if(bad, all.end(),
                                             [&](const Event& e) { return !plausible(e.tsNs); });
            const size_t n = size_t(all.end() - kept);
            all.erase(kept, all.end());
            options.boundTimes->push_back(
                {std::to_string(n) + " watermark sample(s) dated at a time no recording has (e.g. " +
                     std::to_string(example) + " ns; the clock is never negative nor 2^62 ns or "
                     "later): left out", 0});
        }
    }
    const std::vector<Event>& ss = samples.value();
    // Capacity hints from event_counts, each bounded by the events the chunk rows can hold
    // (a damaged or hostile table may claim 2^63 of a kind: issue #12).
    auto counts = summary.countsByKind;
    // A build stopped at maxEvents reads at most one chunk more.
    const uint64_t chunkBound =
        options.maxEvents ? std::min(reader.chunkedEventCount(), options.maxEvents + 65536)
                          : reader.chunkedEventCount();
    for (auto& [kind, n] : counts) n = std::min(n, chunkBound);
    counts[EventKind::Sample] = ss.size();
    b.reserve(counts);
    size_t si = 0;
    int64_t nextSample = ss.empty() ? std::numeric_limits<int64_t>::max() : ss[0].tsNs;

    uint64_t done = 0;
    bool partialDue = static_cast<bool>(options.onPartial);
    // The partial timeline's clock starts with the first events: the time spent opening and
    // reading samples before them would otherwise leave it next to empty.
    std::chrono::steady_clock::time_point started{};
    auto cancelled = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };
    // One chunk into the builder, then progress, the partial timeline when due, and cancel.
    uint64_t movedEvents = 0;
    int64_t movedExample = 0;
    Event moved;
    bool limited = false; // stopped at options.maxEvents
    int64_t lastTs = std::numeric_limits<int64_t>::min();
    auto consume = [&](const std::vector<Event>& chunk) {
        if (done == 0) started = std::chrono::steady_clock::now();
        for (const Event& read : chunk) {
            const Event* ep = &read;
            if (bound && !plausible(read.tsNs)) [[unlikely]] {
                if (movedEvents++ == 0) movedExample = read.tsNs;
                moved = read;
                moved.tsNs = read.tsNs < 0 ? 0 : BuildOptions::kLatestPlausibleNs - 1;
                ep = &moved;
            }
            const Event& e = *ep;
            if (e.tsNs >= nextSample) [[unlikely]] {
                while (si < ss.size() && ss[si].tsNs <= e.tsNs) addSample(b, ss[si++]);
                nextSample = si < ss.size() ? ss[si].tsNs : std::numeric_limits<int64_t>::max();
            }
            b.add(e);
        }
        done += chunk.size();
        if (options.progress) options.progress(done, total);
        if (partialDue && done < total &&
            ((options.partialAfterEvents && done >= options.partialAfterEvents) ||
             std::chrono::steady_clock::now() - started >= options.partialAfter)) {
            partialDue = false;
            options.onPartial(b.partialSnapshot(summary.firstTsNs, summary.lastTsNs, total));
        }
        if (options.maxEvents && done >= options.maxEvents && done < total) {
            limited = true;
            lastTs = chunk.empty() ? lastTs : chunk.back().tsNs;
            return false;
        }
        return !cancelled();
    };

    const Status st = detail::forEachChunk(reader, options.readAhead, consume);
    if (cancelled()) return Error{ErrorCode::Cancelled, "reading the trace was cancelled"};
    if (!st && !limited) return st.error(); // the plain reader reports a stop as cancelled
    if (movedEvents)
        options.boundTimes->push_back(
            {"events dated at a time no recording has (e.g. " + std::to_string(movedExample) +
                 " ns; the clock is never negative nor 2^62 ns or later): shown at the nearer "
                 "end of the possible range",
             movedEvents});
    if (limited) {
        while (si < ss.size() && ss[si].tsNs <= lastTs) addSample(b, ss[si++]);
        auto out = std::const_pointer_cast<Timeline>(
            b.finishPartial(summary.firstTsNs, summary.lastTsNs, total));
        out->limited = true;
        return std::shared_ptr<const Timeline>(std::move(out));
    }
    while (si < ss.size()) addSample(b, ss[si++]);
    return b.finish();
}

Result<std::shared_ptr<const Timeline>>
buildTimeline(const TraceReader& reader, const std::function<void(uint64_t, uint64_t)>& progress,
              const std::atomic<bool>* cancel) {
    BuildOptions options;
    options.progress = progress;
    options.cancel = cancel;
    return buildTimeline(reader, options);
}

} // namespace poolscope
