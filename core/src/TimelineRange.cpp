// The Timeline of one time range (TimelineRange.h): the chunks overlapping it, with each pool's
// state at its start taken from the summaries and a bounded pre-roll instead of the events
// before it.
#include "poolscope/TimelineRange.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "TimelineSetup.h"
#include "poolscope/EventFields.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"

namespace poolscope {

namespace {

constexpr int64_t kMinTs = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxTs = std::numeric_limits<int64_t>::max();

RangePlan plan(const std::vector<ChunkHeaderInfo>& h, bool summaries, int64_t t0, int64_t t1) {
    RangePlan p;
    p.chunkCount = h.size();
    p.summaries = summaries;
    if (h.empty()) return p;
    p.traceT0 = kMaxTs;
    p.traceT1 = kMinTs;
    for (const ChunkHeaderInfo& c : h) {
        p.traceT0 = std::min(p.traceT0, c.tMin);
        p.traceT1 = std::max(p.traceT1, c.tMax);
        p.traceEvents += c.count;
    }
    if (t1 < t0) std::swap(t0, t1);
    // Chunks follow seq order, and time up to the threads' interleaving: the first that reaches
    // t0 and the last that starts by t1.
    size_t first = h.size() - 1, last = 0;
    for (size_t i = 0; i < h.size(); ++i)
        if (h[i].tMax >= t0) {
            first = i;
            break;
        }
    for (size_t i = h.size(); i-- > 0;)
        if (h[i].tMin <= t1) {
            last = i;
            break;
        }
    if (last < first) last = first; // the range falls between two chunks: the later one
    if (!summaries) first = 0;
    p.firstChunk = first;
    p.lastChunk = last;
    for (size_t i = first; i <= last; ++i) p.events += h[i].count;
    int64_t prevMax = kMinTs, nextMin = kMaxTs;
    for (size_t i = 0; i < first; ++i) prevMax = std::max(prevMax, h[i].tMax);
    for (size_t i = last + 1; i < h.size(); ++i) nextMin = std::min(nextMin, h[i].tMin);
    p.loadedFromNs = first == 0 ? p.traceT0 : std::max(h[first].tMin, prevMax + 1);
    p.loadedUntilNs = last + 1 == h.size() ? p.traceT1 : std::min(h[last].tMax, nextMin - 1);
    if (p.loadedUntilNs < p.loadedFromNs) p.loadedUntilNs = p.loadedFromNs; // damaged times
    return p;
}

// A pool's state as the events before the range left it, as far as the warm-up knows.
struct WarmPool {
    uint64_t reserved = 0, used = 0;
    bool known = false;
    bool capLater = true; // a later sample's UsedMemHigh may still lower `used` (Timeline.cpp)
    int64_t readTs = kMinTs;
};

// Follows the pool-state rules of the replay (replay/Replay.cpp apply()) for the kinds that set
// reserved/used or an attribute, nothing else: no blocks, no streams.
struct WarmUp {
    std::map<uint64_t, WarmPool> pools;
    std::map<std::pair<uint64_t, PoolAttr>, uint64_t> knobs;

    // A value read from the driver at ts: a sample, a chunk's last summary row, an event's
    // watermarks.
    void read(uint64_t pool, uint64_t reserved, uint64_t used, int64_t ts, bool capLater) {
        WarmPool& w = pools[pool];
        w.reserved = reserved;
        w.used = used;
        w.known = true;
        w.readTs = std::max(w.readTs, ts);
        w.capLater = capLater;
    }

    void sample(const Event& s) {
        const SampleFields h = SampleFields::of(s);
        read(s.pool, s.reserved, s.used, s.tsNs, h.reservedHigh == 0 && h.usedHigh == 0);
    }

    void summaryRow(const PoolChunkSummary& r) {
        read(r.pool, r.reservedLast, r.usedLast, r.tMax, true);
    }

    void event(const Event& e) {
        if (e.kind == EventKind::PoolSetAttribute || e.kind == EventKind::KnobChange) {
            if (e.failed()) return;
            if (e.kind == EventKind::PoolSetAttribute) {
                const AttributeFields a = AttributeFields::of(e);
                knob(e.pool, a.attr, a.value);
            } else if (const KnobFields k = KnobFields::of(e); k.isAttribute()) {
                knob(e.pool, k.attr(), k.value);
            }
            return;
        }
        if (e.pool == 0) return;
        const bool release = e.kind == EventKind::ImplicitRelease;
        auto it = pools.find(e.pool);
        const bool stale = release && it != pools.end() && e.tsNs < it->second.readTs;
        if (e.has(kHasWatermarks) && !stale) {
            read(e.pool, e.reserved, e.used, e.tsNs, true);
            return;
        }
        if (e.has(kHasWatermarks)) return;
        if (e.kind == EventKind::PoolCreate || e.kind == EventKind::PoolDestroy) {
            WarmPool& w = pools[e.pool];
            w.reserved = w.used = 0;
            w.known = true;
            w.capLater = true;
            if (e.kind == EventKind::PoolCreate)
                for (PoolAttr a : {PoolAttr::ReleaseThreshold, PoolAttr::ReuseFollowEventDependencies,
                                   PoolAttr::ReuseAllowOpportunistic,
                                   PoolAttr::ReuseAllowInternalDependencies})
                    knobs.try_emplace({e.pool, a}, a == PoolAttr::ReleaseThreshold ? 0 : 1);
        } else if (release && !stale) {
            pools[e.pool].reserved = ReleaseFields::of(e).reservedAfter;
        }
    }

    void knob(uint64_t pool, PoolAttr a, uint64_t value) {
        knobs[{pool, a}] = a == PoolAttr::ReleaseThreshold ? value : uint64_t(value != 0);
    }
};

// Kinds that change a pool's state without leaving a summary row of their own.
constexpr uint64_t kinds(std::initializer_list<EventKind> ks) {
    uint64_t m = 0;
    for (EventKind k : ks) m |= uint64_t{1} << static_cast<unsigned>(k);
    return m;
}
constexpr uint64_t kUnsummarizedKinds =
    kinds({EventKind::ImplicitRelease, EventKind::PoolCreate, EventKind::PoolDestroy,
           EventKind::PoolSetAttribute, EventKind::KnobChange});

std::string human(uint64_t n) {
    std::string s = std::to_string(n);
    for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
    return s;
}

} // namespace

Result<RangePlan> planTimelineRange(const TraceReader& reader, int64_t t0, int64_t t1) {
    auto headers = reader.chunkHeaders();
    if (!headers) return headers.error();
    auto sums = reader.poolSummariesShared();
    if (!sums) return sums.error();
    return plan(*headers, (*sums)->present, t0, t1);
}

Result<std::shared_ptr<const Timeline>> buildTimelineRange(const TraceReader& reader, int64_t t0,
                                                           int64_t t1,
                                                           const RangeBuildOptions& options) {
    auto headersR = reader.chunkHeaders();
    if (!headersR) return headersR.error();
    const std::vector<ChunkHeaderInfo>& h = *headersR;
    auto sumsR = reader.poolSummariesShared();
    if (!sumsR) return sumsR.error();
    const PoolSummaries& sums = **sumsR;
    const RangePlan p = plan(h, sums.present, t0, t1);
    if (options.maxEvents && p.events > options.maxEvents)
        return Error{ErrorCode::InvalidArgument,
                     (!p.summaries
                          ? "this trace has no pool summaries (written before they existed), so its "
                            "detail can only be read from its beginning: up to this range that is "
                          : "this range holds ") +
                         human(p.events) + " events, more than the " + human(options.maxEvents) +
                         " that can be held"};

    // From the first chunk: the ordinary build, stopped after the range's last chunk.
    if (h.empty() || p.fromStart()) {
        BuildOptions b;
        b.progress = options.progress;
        b.cancel = options.cancel;
        b.readAhead = false;
        if (!h.empty() && p.lastChunk + 1 < h.size()) b.maxEvents = p.events;
        return buildTimeline(reader, b);
    }
    auto cancelled = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };
    const Error cancelError{ErrorCode::Cancelled, "reading the trace was cancelled"};

    // Chunk positions by seq (to place a decoded chunk) and by id (to place a summary row).
    auto positionOfSeq = [&](uint64_t seq) -> size_t {
        auto it = std::upper_bound(h.begin(), h.end(), seq, [](uint64_t s, const ChunkHeaderInfo& c) {
            return s < c.firstSeq;
        });
        return it == h.begin() ? h.size() : size_t(it - h.begin()) - 1;
    };
    std::unordered_map<int64_t, size_t> posOfId;
    posOfId.reserve(h.size());
    for (size_t i = 0; i < h.size(); ++i) posOfId.emplace(h[i].id, i);

    // ---- the pools' state before the range: summaries, then a bounded pre-roll --------------
    const size_t first = p.firstChunk, last = p.lastChunk;
    std::vector<std::vector<size_t>> rowsAt; // summary rows per position in [p0, first)
    std::map<uint64_t, size_t> lastRowPos;   // per pool, the last position < first with a row
    for (size_t i = 0; i < sums.rows.size(); ++i) {
        auto it = posOfId.find(sums.rows[i].chunk);
        if (it != posOfId.end() && it->second < first) lastRowPos[sums.rows[i].pool] = it->second;
    }
    size_t p0 = first > options.maxPrerollChunks ? first - options.maxPrerollChunks : 0;
    size_t earliestRow = first;
    for (const auto& [pool, pos] : lastRowPos) earliestRow = std::min(earliestRow, pos);
    p0 = std::max(p0, std::min(earliestRow, first));
    std::unordered_set<int64_t> without(sums.withoutIds.begin(), sums.withoutIds.end());
    std::vector<int64_t> decodeIds;
    std::vector<char> decoded(first - p0, 0);
    for (size_t i = p0; i < first; ++i)
        if ((h[i].kinds & kUnsummarizedKinds) || without.count(h[i].id)) {
            decodeIds.push_back(h[i].id);
            decoded[i - p0] = 1;
        }

    WarmUp warm;
    // Rows of pools last seen before the pre-roll: their last values, in position order.
    {
        std::vector<std::pair<size_t, size_t>> early; // (position, row)
        std::map<uint64_t, size_t> lastRow;
        for (size_t i = 0; i < sums.rows.size(); ++i) {
            auto it = posOfId.find(sums.rows[i].chunk);
            if (it != posOfId.end() && it->second < p0) lastRow[sums.rows[i].pool] = i;
        }
        for (const auto& [pool, i] : lastRow) early.emplace_back(posOfId[sums.rows[i].chunk], i);
        std::sort(early.begin(), early.end());
        for (const auto& [pos, i] : early) warm.summaryRow(sums.rows[i]);
    }
    rowsAt.assign(first - p0, {});
    for (size_t i = 0; i < sums.rows.size(); ++i) {
        auto it = posOfId.find(sums.rows[i].chunk);
        if (it != posOfId.end() && it->second >= p0 && it->second < first)
            rowsAt[it->second - p0].push_back(i);
    }
    // Samples up to the end of the chunks before the range, merged by time as buildTimeline
    // merges them (each before the first item not earlier).
    int64_t prevMax = kMinTs;
    for (size_t i = 0; i < first; ++i) prevMax = std::max(prevMax, h[i].tMax);
    int64_t warmFrom = h[p0].tMin;
    for (const auto& [pool, st] : warm.pools) warmFrom = std::min(warmFrom, st.readTs);
    auto warmSamples = reader.samples(0, warmFrom, prevMax + 1);
    if (!warmSamples) return warmSamples.error();
    size_t ws = 0;
    auto samplesUpTo = [&](int64_t t) {
        while (ws < warmSamples->size() && (*warmSamples)[ws].tsNs <= t) warm.sample((*warmSamples)[ws++]);
    };
    size_t nextPos = p0; // the next position whose summary rows are due
    auto rowsBefore = [&](size_t pos) {
        for (; nextPos < pos && nextPos < first; ++nextPos) {
            if (decoded[nextPos - p0]) continue;
            for (size_t r : rowsAt[nextPos - p0]) {
                samplesUpTo(sums.rows[r].tMax);
                warm.summaryRow(sums.rows[r]);
            }
        }
    };
    Status st = reader.forEachChunkById(decodeIds, [&](std::vector<Event>& chunk) {
        if (chunk.empty()) return !cancelled();
        const size_t pos = positionOfSeq(chunk.front().seq);
        rowsBefore(pos);
        nextPos = std::max(nextPos, pos + 1);
        for (const Event& e : chunk) {
            samplesUpTo(e.tsNs);
            warm.event(e);
        }
        return !cancelled();
    });
    if (cancelled()) return cancelError;
    if (!st) return st.error();
    rowsBefore(first);
    samplesUpTo(kMaxTs);

    // ---- blocks allocated before the range and freed inside it ------------------------------
    std::vector<int64_t> rangeIds;
    rangeIds.reserve(last - first + 1);
    for (size_t i = first; i <= last; ++i) rangeIds.push_back(h[i].id);
    const int64_t leftEdge = h[first].tMin;
    std::vector<Event> before;
    std::map<uint64_t, uint64_t> beforeBytes; // per pool
    uint64_t done = 0;
    const uint64_t total = 2 * p.events;
    // The range's events per kind, for the builder's capacity (as buildTimeline reserves from
    // event_counts): vectors reserved once instead of doubling while they grow.
    std::map<EventKind, uint64_t> kindCounts;
    {
        std::vector<uint64_t> perKind(kEventKindCount, 0);
        std::unordered_set<uint64_t> live;
        st = reader.forEachChunkById(rangeIds, [&](std::vector<Event>& chunk) {
            for (const Event& e : chunk) {
                if (static_cast<unsigned>(e.kind) < perKind.size()) perKind[static_cast<unsigned>(e.kind)]++;
                if (e.failed() || e.ptr == 0) continue;
                if (e.kind == EventKind::Alloc) {
                    live.insert(e.ptr);
                } else if (e.kind == EventKind::Free && !live.erase(e.ptr) &&
                           e.has(kSizeKnown) && e.pool != 0) {
                    // Freed here, allocated before: what the free says of it (its size and
                    // pool, which the writer took from the allocation), on the free's stream.
                    Event a;
                    AllocFields{e.ptr, e.size, AllocApi::Async}.into(a);
                    a.seq = 0;
                    a.tsNs = leftEdge;
                    a.pool = e.pool;
                    a.stream = e.stream;
                    a.device = e.device;
                    a.tid = e.tid;
                    before.push_back(a);
                    beforeBytes[e.pool] += e.size;
                }
            }
            done += chunk.size();
            if (options.progress) options.progress(done, total);
            return !cancelled();
        });
        for (size_t k = 0; k < perKind.size(); ++k)
            if (perKind[k]) kindCounts[static_cast<EventKind>(k)] = perKind[k];
    }
    if (cancelled()) return cancelError;
    if (!st) return st.error();

    // ---- the range itself ---------------------------------------------------------------------
    TimelineBuilder b;
    if (Status es = detail::setEntitiesFromTrace(b, reader); !es) return es.error();
    {
        // Values the pre-roll saw set come first: a declared value does not replace a known one.
        std::vector<PoolAttributeValue> knobs;
        for (const auto& [key, value] : warm.knobs) {
            PoolAttributeValue v;
            v.pool = key.first;
            v.attr = key.second;
            v.value = value;
            knobs.push_back(v);
        }
        b.declarePoolAttributes(knobs);
        if (auto attrs = reader.poolAttributes(); attrs) b.declarePoolAttributes(*attrs);
    }
    auto samples = reader.samples(0, prevMax == kMinTs ? kMinTs : prevMax + 1,
                                  h[last].tMax == kMaxTs ? kMaxTs : h[last].tMax + 1);
    if (!samples) return samples.error();
    const std::vector<Event>& ss = *samples;
    kindCounts[EventKind::Sample] = ss.size() + warm.pools.size();
    kindCounts[EventKind::Alloc] += before.size();
    b.reserve(kindCounts);
    for (const auto& [pool, w] : warm.pools)
        if (w.known) b.warmStart(pool, -1, leftEdge, w.reserved, w.used, w.capLater);
    for (const Event& a : before) b.addAllocatedBefore(a);

    size_t si = 0;
    auto addSample = [&](Event s) {
        s.kind = EventKind::Sample;
        b.add(s);
    };
    st = reader.forEachChunkById(rangeIds, [&](std::vector<Event>& chunk) {
        for (const Event& e : chunk) {
            while (si < ss.size() && ss[si].tsNs <= e.tsNs) addSample(ss[si++]);
            b.add(e);
        }
        done += chunk.size();
        if (options.progress) options.progress(done, total);
        return !cancelled();
    });
    if (cancelled()) return cancelError;
    if (!st) return st.error();
    while (si < ss.size()) addSample(ss[si++]);
    // A whole build lowers used points to the next sample's UsedMemHigh: each pool's first
    // sample with one after the range does it here too.
    {
        auto after = reader.samples(0, h[last].tMax == kMaxTs ? kMaxTs : h[last].tMax + 1, kMaxTs);
        if (!after) return after.error();
        std::unordered_set<uint64_t> capped;
        for (Event s : *after) {
            s.kind = EventKind::Sample;
            const SampleFields hs = SampleFields::of(s);
            if ((hs.reservedHigh == 0 && hs.usedHigh == 0) || !capped.insert(s.pool).second) continue;
            b.capBySampleAfter(s);
        }
    }

    // The trace's time range includes its samples: those before the first chunk and after the
    // last (a few) widen the chunks' span, as TraceSummary's range does.
    int64_t traceT0 = p.traceT0, traceT1 = p.traceT1;
    if (auto early = reader.samples(0, kMinTs, h.front().tMin); early && !early->empty())
        traceT0 = std::min(traceT0, early->front().tsNs);
    if (auto late = reader.samples(0, h.back().tMax, kMaxTs); late && !late->empty())
        traceT1 = std::max(traceT1, late->back().tsNs);

    auto out = std::const_pointer_cast<Timeline>(b.finish());
    out->partial = true;
    out->limited = true;
    out->t0 = std::min(out->t0, traceT0);
    out->t1 = std::max(out->t1, traceT1);
    out->loadedFromNs = std::max(p.loadedFromNs, out->t0);
    out->loadedUntilNs = p.loadedUntilNs;
    out->totalEvents = std::max(p.traceEvents, out->eventCount);
    for (PoolTimeline& pt : out->pools) {
        auto w = warm.pools.find(pt.info.handle);
        if (w == warm.pools.end() || !w->second.known) continue;
        const uint64_t seen = beforeBytes[pt.info.handle];
        pt.unaccountedAtLoadStart = w->second.used > seen ? w->second.used - seen : 0;
    }
    return std::shared_ptr<const Timeline>(std::move(out));
}

} // namespace poolscope
