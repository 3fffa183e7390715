// A stretch of a trace for Perfetto (Export.h, docs/INTEROP.md): one names pass over the whole
// trace, which also keeps the blocks live before the stretch, then the stretch's range build,
// written by the Timeline-based writer cut to it.
#include <algorithm>
#include <set>

#include "poolscope/TimelineRange.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Export.h"

namespace poolscope::interop {

Result<StretchExport> writePerfettoStretch(TraceReader& reader, ExportInput in, int64_t fromNs,
                                           int64_t untilNs, std::FILE* out, uint64_t maxEvents,
                                           const NamesPassControl& control) {
    reader.setSkipDamaged(true);
    reader.setReuseHeaderScan(true);
    const int64_t last = untilNs == INT64_MAX ? INT64_MAX : untilNs - 1; // [from, until)
    // The names pass keeps the blocks live where the range's chunks start.
    auto plan = planTimelineRange(reader, fromNs, last);
    if (!plan) return plan.error();
    auto headers = reader.chunkHeaders();
    if (!headers) return headers.error();
    LiveBlocksBefore live;
    live.beforeSeq = plan->firstChunk < headers->size() ? (*headers)[plan->firstChunk].firstSeq : 0;
    auto pass = traceNamesAndStart(reader, &live, control);
    if (!pass) return pass.error();
    RangeBuildOptions build;
    build.maxEvents = maxEvents;
    build.cancel = control.cancel;
    auto built = buildTimelineRange(reader, fromNs, last, build);
    if (!built) return built.error();
    const Timeline& tl = **built;
    StretchExport result;
    // The blocks the range never sees freed are drawn over all of it (the rest of liveAtStart
    // names the range's own allocations from before it).
    std::set<uint64_t> freedInside;
    for (const Allocation& a : tl.allocations)
        if (a.beforeLoaded) freedInside.insert(a.ptr);
    for (const Allocation& a : live.blocks)
        if (!freedInside.count(a.ptr)) ++result.blocksBefore, result.bytesBefore += a.size;
    uint64_t unaccounted = 0;
    for (const PoolTimeline& p : tl.pools) unaccounted += p.unaccountedAtLoadStart;
    result.unaccountedBytes = unaccounted > result.bytesBefore ? unaccounted - result.bytesBefore : 0;
    in.timeline = *built;
    in.names = std::move(pass->names);
    in.liveAtStart = std::move(live.blocks);
    // The timeline is exact from loadedFromNs to loadedUntilNs (chunks' clocks interleave at
    // its edges): the clip stays inside both that and the range asked for.
    in.clipFromNs = result.clipFromNs = std::max(fromNs, tl.loadedFromNs);
    in.clipUntilNs = result.clipUntilNs = std::min(last, tl.loadedUntilNs);
    const std::vector<ExportInput> inputs{std::move(in)};
    if (Status st = writePerfettoJson(inputs, out, &result.stats); !st) return st.error();
    return result;
}

} // namespace poolscope::interop
