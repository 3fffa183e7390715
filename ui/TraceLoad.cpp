#include "TraceLoad.h"

#include "poolscope/Symbolizer.h"
#include "poolscope/TraceReader.h"
#include "poolscope/interop/Diff.h"
#include "poolscope/interop/ProcessTree.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <optional>
#include <unistd.h>

namespace poolscope::ui {

namespace {
QString tr(const char* s) {
    return QCoreApplication::translate("TraceLoader", s);
}

// BuildOptions::boundTimes's rule, for what the window reads beside the timeline.
int64_t boundTime(int64_t t) {
    return std::clamp<int64_t>(t, 0, BuildOptions::kLatestPlausibleNs - 1);
}

size_t boundRangeTimes(StackTables& st) {
    size_t n = 0;
    for (NvtxRange& r : st.ranges) {
        const int64_t start = boundTime(r.startNs);
        // endNs 0 is "still open": kept.
        const int64_t end = r.endNs == 0 ? 0 : std::max(start, boundTime(r.endNs));
        n += start != r.startNs || end != r.endNs;
        r.startNs = start;
        r.endNs = end;
    }
    return n;
}

void load(const QString& path, const std::atomic<bool>& cancel, const TraceLoadOptions& o,
          TraceLoadResult& out) {
    auto setPhase = [&](int p) {
        if (o.phase) *o.phase = p;
    };
    setPhase(0);
    auto reader = TraceReader::open(path.toStdString());
    if (!reader) {
        out.error = QString::fromStdString(reader.error().message);
        return;
    }
    // One header scan for the whole load: the summaries, the build's counts and its read.
    (*reader)->setReuseHeaderScan(true);
    TraceSnapshot& snap = out.snap;
    snap.path = QFileInfo(path).absoluteFilePath();
    snap.title = QFileInfo(path).fileName();
    if (auto p = (*reader)->process()) snap.process = p.value();
    // Before the events: the partial timeline draws the rest of the trace from it. Chunk
    // headers and a row per chunk and pool only; a trace without them simply has none.
    // A first draft from the blocks of 64 chunks where the trace has them (a few thousand rows
    // at 1 G events, no chunk read): the per-chunk rows (and the header scan they need) are
    // read after the first frame, below.
    bool drafted = false;
    if (auto blocks = (*reader)->poolBlockSummaries(); blocks && blocks->present) {
        snap.overview = std::make_shared<const view::Overview>(*blocks);
        drafted = true;
    } else if (auto summaries = (*reader)->poolSummaries(); summaries && summaries->present) {
        snap.overview = std::make_shared<const view::Overview>(*summaries);
    }
    setPhase(1);
    BuildOptions options;
    options.progress = o.progress;
    options.cancel = &cancel;
    options.maxEvents = o.maxEvents ? o.maxEvents : windowEventLimit();
    // A trace the window cannot hold whole opens with a shorter beginning: its first view is the
    // whole trace, drawn from the summaries, and a view zoomed anywhere is read by range
    // (RangeLoader), so the load ends, and the window answers with detail, seconds sooner.
    bool shortened = false;
    if (o.shortFirstLoad && !o.maxEvents && snap.overview) {
        if (auto s = (*reader)->summary(); s && s->eventCount > options.maxEvents) {
            options.maxEvents = std::min(options.maxEvents, windowFirstLoadEvents());
            shortened = true;
        }
    }
    if (o.partialAfter.count() >= 0 && o.onPartial) {
        // Such a trace is first seen whole, drawn from its summaries: its first frame waits
        // for no more than the first chunk.
        options.partialAfter = shortened ? std::chrono::milliseconds(0) : o.partialAfter;
        options.partialAfterEvents = o.partialAfterEvents;
        // Runs on this thread while the build waits: the partial timeline is small (it is
        // taken early), so its lane layout is quick.
        options.onPartial = [&](std::shared_ptr<const Timeline> tl) {
            TraceSnapshot part = snap;
            part.layout = LaneLayout::build(*tl, &cancel);
            if (!part.layout) return; // cancelled
            part.timeline = std::move(tl);
            o.onPartial(part);
        };
    }
    // A damaged trace shows what is intact, and says what was left out. Its impossible times
    // are bounded here, once, so that no t - t0 of the window's can overflow on them.
    (*reader)->setSkipDamaged(true);
    std::vector<TraceDamage> timeDamage;
    options.boundTimes = &timeDamage;
    auto tl = buildTimeline(**reader, options);
    // The overview at the grain of chunks; its blocks are checked against them (damage()).
    if (drafted && tl) {
        if (auto summaries = (*reader)->poolSummaries(); summaries && summaries->present)
            snap.overview = std::make_shared<const view::Overview>(*summaries);
    }
    // Only a trace the window does not hold whole is read by range.
    if (shortened || (tl && tl.value()->partial)) snap.scan = (*reader)->sharedScan();
    auto damage = (*reader)->damage();
    damage.insert(damage.end(), timeDamage.begin(), timeDamage.end());
    for (const TraceDamage& d : damage)
        snap.damage << (d.events
                            ? tr("%1 (%2 events)").arg(QString::fromStdString(d.what)).arg(d.events)
                            : QString::fromStdString(d.what));
    if (!tl) {
        if (tl.error().code == ErrorCode::Cancelled)
            out.cancelled = true;
        else
            out.error = QString::fromStdString(tl.error().message);
        return;
    }
    setPhase(2);
    snap.layout = LaneLayout::build(*tl.value(), &cancel);
    if (!snap.layout) out.cancelled = true;
    snap.timeline = tl.value();
    // The call sites, named where the binaries (or their debug files, by build-id) are found on
    // this machine; a trace recorded without stacks has none. Damaged stack tables leave the
    // stacks out and say so.
    setPhase(3);
    if (auto st = (*reader)->stacks()) {
        if (!st->sites.empty()) symbolize(*st);
        if (const size_t n = boundRangeTimes(*st))
            snap.damage << tr("%1 NVTX range(s) dated at a time no recording has: shown at the "
                              "nearer end of the possible range")
                               .arg(n);
        snap.stacks = std::make_shared<const StackTables>(std::move(*st));
    } else {
        snap.damage
            << tr("call stacks left out: %1").arg(QString::fromStdString(st.error().message));
    }
    if (o.ipc) {
        if (auto ipc = interop::readIpcEvents(**reader)) {
            out.ipc = std::move(*ipc);
            // The same events as the timeline's: already counted above if any was moved.
            for (Event& e : out.ipc) e.tsNs = boundTime(e.tsNs);
        } else {
            snap.damage << tr("IPC calls left out (links to other processes are not shown): %1")
                               .arg(QString::fromStdString(ipc.error().message));
        }
    }
    if (o.report) {
        if (!snap.timeline->partial) {
            out.report = std::make_shared<const Report>(
                interop::reportForDiff(**reader, *snap.timeline, snap.path.toStdString()));
            out.diffFacts = std::make_shared<const interop::DiffFacts>(
                interop::diffFacts(*snap.timeline, snap.stacks.get()));
        } else {
            // The timeline holds the trace's beginning only: the figures compared are the whole
            // trace's, from one streaming read (as `poolscope diff` takes them).
            auto meta = (*reader)->meta();
            auto r = interop::readForDiff(**reader, snap.stacks.get(), snap.path.toStdString(),
                                          snap.process,
                                          meta ? std::move(*meta) : std::map<std::string, std::string>{},
                                          &cancel);
            if (!r) {
                if (r.error().code == ErrorCode::Cancelled)
                    out.cancelled = true;
                else
                    out.error = tr("could not read the whole trace for the comparison: %1")
                                    .arg(QString::fromStdString(r.error().message));
                return;
            }
            out.report = std::make_shared<const Report>(std::move(r->report));
            out.diffFacts = std::make_shared<const interop::DiffFacts>(std::move(r->facts));
        }
    }
}

// An event count from the environment; nullopt when unset or not a plain number.
std::optional<uint64_t> envCount(const char* name) {
    const char* env = std::getenv(name);
    if (!env || !*env) return std::nullopt;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(env, &end, 10);
    if (!end || *end != 0) return std::nullopt;
    return n;
}
} // namespace

uint64_t windowEventLimit() {
    constexpr uint64_t kFloor = 100'000, kBytesPerEvent = 100, kBudget = 1792ull << 20;
    if (auto n = envCount("POOLSCOPE_WINDOW_MAX_EVENTS")) return std::max<uint64_t>(*n, kFloor);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return UINT64_MAX / 2; // unknown: no limit
    const uint64_t bytes = uint64_t(pages) * uint64_t(page);
    return std::max<uint64_t>(std::min(bytes / 2, kBudget) / kBytesPerEvent, kFloor);
}

uint64_t windowFirstLoadEvents() {
    constexpr uint64_t kDefault = 2'000'000, kFloor = 100'000;
    if (auto n = envCount("POOLSCOPE_WINDOW_FIRST_EVENTS"))
        return std::min(std::max<uint64_t>(*n, kFloor), windowEventLimit());
    return std::min(kDefault, windowEventLimit());
}

uint64_t windowRangeEventLimit() {
    // A range and the one held beside it measured 115-119 bytes an event together (two 8.3 or
    // 8.5 M-event ranges of the bench generator's trace: 1.84-1.90 GiB peak), so under half.
    return std::max<uint64_t>(windowEventLimit() / 20 * 9, 100'000);
}

TraceLoadResult loadTraceFile(const QString& path, const std::atomic<bool>& cancel,
                              const TraceLoadOptions& options) {
    TraceLoadResult out;
    // Nothing may escape: a worker's exception is rethrown by QFuture::waitForFinished(), i.e.
    // from a destructor, and the window aborted on exit after a damaged file that made the build
    // throw (issue #12). The load fails with the reason.
    try {
        load(path, cancel, options, out);
    } catch (const std::exception& e) {
        out.error = tr("Loading stopped on an internal error: %1. The file may be damaged.")
                        .arg(QString::fromLocal8Bit(e.what()));
    } catch (...) {
        out.error = tr("Loading stopped on an unknown internal error. The file may be damaged.");
    }
    if (cancel) out.cancelled = true;
    if (!out.error.isEmpty() || out.cancelled) {
        out.snap.timeline.reset();
        out.snap.layout.reset();
    }
    return out;
}

} // namespace poolscope::ui
