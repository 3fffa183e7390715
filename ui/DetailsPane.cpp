#include "DetailsPane.h"

#include "EventTableModel.h"
#include "TimeTicker.h"
#include "poolscope/EventText.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/analysis/SiteTree.h"

#include <algorithm>

namespace poolscope::ui {

namespace {
QString qb(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}
QString qd(int64_t ns) {
    return QString::fromStdString(formatDuration(ns));
}
QString qn(std::string_view s) {
    return QString::fromUtf8(s.data(), qsizetype(s.size()));
}
QString row(const QString& k, const QString& v) {
    return QStringLiteral("<tr><td style='padding-right:12px'><b>%1</b></td><td>%2</td></tr>")
        .arg(k, v);
}
QString bytesExact(uint64_t v) {
    return QStringLiteral("%1 <span style='color:gray'>(%L2 B)</span>").arg(qb(v)).arg(v);
}
} // namespace

DetailsPane::DetailsPane(QWidget* parent) : QTextBrowser(parent) {
    setOpenLinks(false);
    setMinimumWidth(220);
    // Links name an allocation ("alloc:INDEX"): the events of a hazard or a pool growth.
    connect(this, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        const QString s = url.toString();
        if (!s.startsWith(QLatin1String("alloc:")) || !snap_.valid()) return;
        bool ok = false;
        const uint32_t i = s.mid(6).toUInt(&ok);
        if (ok && i < snap_.timeline->allocations.size())
            emit selectionRequested({Selection::Allocation, i, 0, {}});
    });
    render();
}

void DetailsPane::setSnapshot(const TraceSnapshot& s, bool keepSelection) {
    snap_ = s;
    if (!keepSelection) {
        sel_ = {};
        cursor_ = INT64_MIN;
    }
    render();
}

void DetailsPane::showSelection(const Selection& s) {
    sel_ = s;
    render();
}

void DetailsPane::setCursorTime(int64_t t) {
    if (cursor_ == t) return;
    cursor_ = t;
    render();
}

namespace {
struct PolicyRow {
    const char* label;
    PoolAttr attr;
};
// The three reuse policies, in the order cudaMemPoolAttr lists them.
constexpr PolicyRow kPolicies[] = {
    {QT_TRANSLATE_NOOP("DetailsPane", "reuse: follow event dependencies"),
     PoolAttr::ReuseFollowEventDependencies},
    {QT_TRANSLATE_NOOP("DetailsPane", "reuse: allow opportunistic"),
     PoolAttr::ReuseAllowOpportunistic},
    {QT_TRANSLATE_NOOP("DetailsPane", "reuse: allow internal dependencies"),
     PoolAttr::ReuseAllowInternalDependencies},
};
bool known(const Series& s, int64_t t) {
    return !s.empty() && t >= s.t.front();
}
} // namespace

QString DetailsPane::thresholdText(const PoolTimeline& p, int64_t t) {
    if (!known(p.releaseThreshold, t)) return tr("unknown");
    const uint64_t v = p.releaseThreshold.valueAt(t);
    return v == UINT64_MAX ? tr("max (never release)") : qb(v);
}

QString DetailsPane::policyText(const Series& s, int64_t t) {
    if (!known(s, t)) return tr("unknown");
    return s.valueAt(t) ? tr("on") : tr("off");
}

QString DetailsPane::attributeChange(const Timeline&, const Marker& m) {
    if (m.kind != EventKind::PoolSetAttribute && m.kind != EventKind::KnobChange) return {};
    const QString name = qn(poolAttrName(m.attr));
    switch (m.attr) {
    case uint16_t(PoolAttr::ReleaseThreshold):
        return tr("%1 → %2").arg(name, m.value == UINT64_MAX ? tr("max") : qb(m.value));
    case uint16_t(PoolAttr::ReuseFollowEventDependencies):
    case uint16_t(PoolAttr::ReuseAllowOpportunistic):
    case uint16_t(PoolAttr::ReuseAllowInternalDependencies):
        return tr("%1 → %2").arg(name, m.value ? tr("on") : tr("off"));
    case uint16_t(KnobAction::TrimTo): return tr("trimmed: reserved %1 after").arg(qb(m.value));
    case uint16_t(KnobAction::ResetHighWatermarks):
        return tr("high watermarks reset (reserved high %1)").arg(qb(m.value));
    default: return {};
    }
}

QString DetailsPane::poolState(uint64_t pool, int64_t t, const QString& when) const {
    const PoolTimeline* p = snap_.timeline->pool(pool);
    if (!p) return {};
    QString s = QStringLiteral("<h4>%1 %2</h4><table>").arg(snap_.layout->poolName(pool), when);
    s += row(tr("reserved"), qb(p->reserved.valueAt(t)));
    // Racing threads: the driver's order of their calls is not known, nor is used between
    // two of its reads; no value is made up for it.
    if (auto [a, b] = snap_.timeline->racingThreads(pool, t); a)
        s += row(tr("used"), tr("not known: threads %1 and %2 allocate from this pool at once "
                                "(their order is not recorded)").arg(a).arg(b));
    else
        s += row(tr("used"), qb(p->used.valueAt(t)));
    s += row(tr("release threshold"), thresholdText(*p, t));
    for (const PolicyRow& r : kPolicies)
        s += row(tr(r.label), policyText(*p->attributeSeries(r.attr), t));
    s += row(tr("high watermark so far"), qb(seriesMax(p->reserved, snap_.timeline->t0, t + 1)));
    return s + QStringLiteral("</table>");
}

namespace {
QString allocLink(uint32_t allocation, uint64_t seq) {
    const QString text = QStringLiteral("seq %1").arg(seq);
    if (allocation == replay::kNone) return text;
    return QStringLiteral("<a href='alloc:%1'>%2</a>").arg(allocation).arg(text);
}
} // namespace

// One line per hazard, both events as links to their allocations.
QString DetailsPane::hazardText(const StreamHazard& h) const {
    const Timeline& tl = *snap_.timeline;
    const LaneLayout& L = *snap_.layout;
    auto ev = [&](const char* what, const StreamHazard::At& a) {
        return tr("%1 on %2 (%3, at %4)")
            .arg(tr(what), L.streamName(a.stream), allocLink(a.allocation, a.seq),
                 qd(a.tsNs - tl.t0));
    };
    if (h.kind == StreamHazard::Kind::UnorderedFree)
        return tr("<b style='color:#c05000'>unordered free</b> of %1: %2, then %3 with nothing "
                  "ordering the first stream's work before it")
            .arg(qb(h.bytes), ev(QT_TR_NOOP("allocated"), h.first),
                 ev(QT_TR_NOOP("freed"), h.second));
    const QString policy = h.opportunistic < 0 ? tr("not known")
                           : h.opportunistic   ? tr("on")
                                               : tr("off");
    return tr("<b style='color:#c05000'>unordered reuse</b> of %1: %2, then %3 with nothing "
              "ordering the free before it (opportunistic reuse %4)")
        .arg(qb(h.bytes), ev(QT_TR_NOOP("freed"), h.first), ev(QT_TR_NOOP("allocated"), h.second),
             policy);
}

QString DetailsPane::growthText(const PoolGrowth& g) const {
    QString s = g.failed ? tr("failed") : tr("grew the pool by %1").arg(qb(g.grewBy));
    s += tr(" with %1 idle in it").arg(qb(g.idleBefore));
    if (g.pendingElsewhere) s += tr(" (%1 pending on other streams)").arg(qb(g.pendingElsewhere));
    if (g.fragmented())
        s += tr(": <b style='color:#c05000'>fragmentation</b>, no free block it could use was large "
                 "enough");
    else if (g.whileIdle())
        s += tr(": the idle bytes may have been other streams' frees, not yet reusable here");
    return s;
}

namespace {
// One stack as a table in call order: the outermost caller first, the call itself last (bold).
QString stackTable(const analysis::CallStack& cs) {
    auto esc = [](const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); };
    QString h = QStringLiteral("<table cellspacing='0'>");
    for (size_t i = 0; i < cs.frames.size(); ++i) {
        const analysis::StackFrame& f = cs.frames[i];
        const bool py = f.kind == analysis::StackFrame::Kind::Python;
        const QString tag = QStringLiteral("<span style='color:%1'>%2</span>")
                                .arg(py ? QStringLiteral("#3572a5") : QStringLiteral("#a0522d"),
                                     py ? QStringLiteral("py") : QStringLiteral("C"));
        QString text;
        if (f.function.empty())
            text = esc(f.location);
        else {
            text = esc(f.function);
            if (i + 1 == cs.frames.size()) text = QStringLiteral("<b>%1</b>").arg(text);
            if (!f.location.empty())
                text += QStringLiteral(" <span style='color:gray'>%1</span>").arg(esc(f.location));
        }
        h += QStringLiteral("<tr><td style='padding-right:6px'>%1</td><td>%2</td></tr>")
                 .arg(tag, text);
    }
    h += QStringLiteral("</table>");
    QStringList notes;
    if (cs.runtimeFrames)
        notes << DetailsPane::tr("%n CUDA runtime frame(s) above it not shown", "",
                                 int(cs.runtimeFrames));
    if (cs.interpreterFrames)
        notes << DetailsPane::tr("%n Python interpreter frame(s) shown as the Python frames", "",
                                 int(cs.interpreterFrames));
    if (!notes.isEmpty())
        h += QStringLiteral("<p style='color:gray'>%1.</p>").arg(notes.join(QStringLiteral("; ")));
    return h;
}
} // namespace

QString DetailsPane::callSiteText(const Allocation& a) const {
    if (!snap_.hasStacks()) return {};
    const StackTables& st = *snap_.stacks;
    const Timeline& tl = *snap_.timeline;
    auto esc = [](const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); };
    QString h = QStringLiteral("<h4>%1</h4>").arg(tr("Call stack"));
    const analysis::CallStack cs = analysis::callStack(st, a.site);
    if (cs.empty())
        h += tr("<p style='color:gray'>Not recorded for this allocation (the thread's stack "
                "was not captured).</p>");
    else
        h += stackTable(cs);
    // Recorded with --stacks-at-free: where the block was given back.
    if (a.freeSite) {
        if (const analysis::CallStack fs = analysis::callStack(st, a.freeSite); !fs.empty())
            h += QStringLiteral("<h4>%1</h4>").arg(tr("Freed at")) + stackTable(fs);
    }
    // The ranges the collector saw open on the thread; the site's own path when the ranges
    // themselves were not kept.
    const auto open = analysis::openRanges(st, a.tid, a.allocTsNs);
    if (!open.empty()) {
        h += QStringLiteral("<h4>%1</h4><table>")
                 .arg(tr("NVTX ranges open on thread %1").arg(a.tid));
        for (const NvtxRange* r : open) {
            const QString span =
                r->endNs ? tr("%1 – %2 (%3)")
                               .arg(qd(r->startNs - tl.t0), qd(r->endNs - tl.t0),
                                    qd(r->endNs - r->startNs))
                         : tr("from %1, never ended").arg(qd(r->startNs - tl.t0));
            h += QStringLiteral("<tr><td style='padding-right:12px;padding-left:%1px'>%2</td>"
                                "<td style='color:gray'>%3</td></tr>")
                     .arg(8 * r->depth)
                     .arg(esc(r->name), span);
        }
        h += QStringLiteral("</table>");
    } else if (std::string path = analysis::sitePath(st, a.site); !path.empty()) {
        h += QStringLiteral("<table>") + row(tr("NVTX ranges"), esc(path)) +
             QStringLiteral("</table>");
    }
    return h;
}

QString DetailsPane::traceSummary() const {
    const Timeline& tl = *snap_.timeline;
    QString s = QStringLiteral("<h3>%1</h3><table>").arg(snap_.title.toHtmlEscaped());
    if (!snap_.process.commandLine.empty())
        s += row(tr("command"), QString::fromStdString(snap_.process.commandLine).toHtmlEscaped());
    if (!snap_.process.host.empty())
        s += row(tr("host"), QString::fromStdString(snap_.process.host).toHtmlEscaped());
    for (const DeviceInfo& d : tl.devices)
        s += row(tr("GPU %1").arg(d.ordinal),
                 QString::fromStdString(d.name).toHtmlEscaped() +
                     (d.totalMemory ? " · " + qb(d.totalMemory) : QString()));
    s += row(tr("duration"), qd(nsBetween(tl.t0, tl.t1)));
    // A timeline holding part of the trace (a prefix still loading or capped, or a range)
    // counts only that part: say so rather than pass it off as the trace's totals.
    const bool part = tl.partial && tl.totalEvents > tl.eventCount;
    const QString inPart = part ? tr(" in the loaded part") : QString();
    s += row(tr("events"), part ? tr("%L1 of %L2 loaded").arg(tl.eventCount).arg(tl.totalEvents)
                                : QStringLiteral("%L1").arg(tl.eventCount));
    s += row(tr("allocations"), QStringLiteral("%L1").arg(tl.allocations.size()) + inPart);
    s += row(tr("failed allocations"), QString::number(tl.failed.size()) + inPart);
    if (part)
        s += row(tr("live at the loaded end"), QString::number(tl.leaks.size()));
    else
        s += row(tr("never freed"), QString::number(tl.leaks.size()));
    s += row(tr("pools / streams"),
             QStringLiteral("%1 / %2").arg(tl.pools.size()).arg(tl.streams.size()));
    const StreamHazards& hz = tl.hazards;
    if (hz.count())
        s += row(tr("stream-order hazards"),
                 tr("%L1 unordered frees, %L2 unordered reuses").arg(hz.unorderedFrees)
                     .arg(hz.unorderedReuses));
    if (tl.deviceTotals.size() > 1)
        for (const DeviceTotals& d : tl.deviceTotals)
            s += row(tr("%1 pools together").arg(qn(deviceLabel(d.device))),
                     tr("peak reserved %1 · peak used %2 · %L3 pools")
                         .arg(qb(d.peakReserved), qb(d.peakUsed))
                         .arg(d.poolCount));
    for (const PeerCopyTotal& c : tl.peerCopies)
        s += row(tr("peer copies"), tr("%1 → %2: %L3 (%4)")
                                        .arg(qn(deviceLabel(c.srcDevice)), qn(deviceLabel(c.dstDevice)))
                                        .arg(c.count)
                                        .arg(qb(c.bytes)));
    for (const OutsideTimeline& o : tl.outside)
        s += row(o.device >= 0 ? tr("GPU %1 outside the pools").arg(o.device)
                               : tr("outside the pools"),
                 tr("cudaMalloc peak %1 · with the pools' reserved %2 · %L3 cudaFree device syncs")
                     .arg(qb(o.peakBytes), qb(o.withPoolsPeak))
                     .arg(o.syncFrees));
    if (tl.pinned.any())
        s += row(tr("pinned host memory"),
                 tr("peak %1 · allocated peak %2 · registered peak %3")
                     .arg(qb(tl.pinned.totalPeak), qb(tl.pinned.allocatedPeak),
                          qb(tl.pinned.registeredPeak)));
    for (const Fragmentation::Pool& p : tl.fragmentation.pools)
        if (p.fragmentedGrowths || p.fragmentedFailures)
            s += row(tr("fragmentation"),
                     tr("%1: %L2 of %L3 growths and %L4 failures while enough was idle")
                         .arg(snap_.layout->poolName(p.handle))
                         .arg(p.fragmentedGrowths)
                         .arg(p.growths)
                         .arg(p.fragmentedFailures));
    s += QStringLiteral("</table>");
    // The first few hazards, selectable.
    constexpr size_t kListed = 5;
    if (!hz.hazards.empty()) {
        s += QStringLiteral("<ul style='margin-left:-20px'>");
        for (size_t i = 0; i < hz.hazards.size() && i < kListed; ++i)
            s += QStringLiteral("<li>%1</li>").arg(hazardText(hz.hazards[i]));
        if (hz.count() > kListed)
            s += QStringLiteral("<li>%1</li>").arg(tr("… %L1 more (poolscope report lists them)")
                                                       .arg(hz.count() - kListed));
        s += QStringLiteral("</ul>");
    }
    s += QStringLiteral("<p style='color:gray'>Click a bar, a marker or a table row for "
                        "details. Click the ruler to place the replay cursor.</p>");
    return s;
}

void DetailsPane::render() {
    if (!snap_.valid()) {
        setHtml(tr("<p style='color:gray'>No trace open.</p>"));
        return;
    }
    const Timeline& tl = *snap_.timeline;
    const LaneLayout& L = *snap_.layout;
    auto at = [&](int64_t t) {
        return QStringLiteral("%1 <span style='color:gray'>(%2 of the trace)</span>")
            .arg(timeTickLabel(t - tl.t0, 1, t - tl.t0))
            .arg(QString::number(100.0 * double(t - tl.t0) /
                                     double(std::max<int64_t>(1, nsBetween(tl.t0, tl.t1))),
                                 'f', 1) +
                 "%");
    };
    QString h;
    uint64_t pool = 0;
    int64_t when = 0;
    switch (sel_.kind) {
    case Selection::Allocation: {
        if (sel_.index >= tl.allocations.size()) break;
        const Allocation& a = tl.allocations[sel_.index];
        h = QStringLiteral("<h3>Allocation of %1</h3><table>").arg(qb(a.size));
        h += row(tr("size"), bytesExact(a.size));
        h += row(tr("pointer"), hexHandle(a.ptr));
        h += row(tr("pool"), L.poolName(a.pool) + " · " + hexHandle(a.pool));
        h +=
            row(tr("allocated on"), L.streamName(a.allocStream) + " · " + hexHandle(a.allocStream));
        h += row(tr("allocated at"), at(a.allocTsNs));
        h += row(tr("API"), qn(allocApiName(AllocApi(a.api))));
        if (a.live()) {
            h += row(tr("freed"), tr("<span style='color:#e02020'><b>never</b> (still live at the "
                                     "end of the trace)</span>"));
            h += row(tr("lifetime"), tr("≥ %1").arg(qd(tl.t1 - a.allocTsNs)));
        } else {
            QString fs = L.streamName(a.freeStream);
            if (a.freeStream != a.allocStream) fs += tr(" <i>(a different stream)</i>");
            h += row(tr("freed on"), fs);
            h += row(tr("freed at"), at(a.freeTsNs));
            h += row(tr("lifetime"), qd(a.freeTsNs - a.allocTsNs));
        }
        h += row(tr("thread"), QString::number(a.tid));
        h += row(tr("device"), QString::number(a.device));
        h += row(tr("seq"), QStringLiteral("%1 → %2")
                                .arg(a.allocSeq)
                                .arg(a.live() ? QStringLiteral("–") : QString::number(a.freeSeq)));
        if (const PoolGrowth* g = tl.fragmentation.at(a.allocSeq)) h += row(tr("pool growth"), growthText(*g));
        // Hazards this allocation takes part in (a linear scan: at most StreamHazards::kMaxKept).
        int shown = 0;
        for (const StreamHazard& hz : tl.hazards.hazards) {
            if (hz.first.allocation != sel_.index && hz.second.allocation != sel_.index) continue;
            if (++shown > 3) break;
            h += row(tr("stream-order hazard"), hazardText(hz));
        }
        h += QStringLiteral("</table>");
        h += callSiteText(a);
        pool = a.pool;
        when = a.allocTsNs;
        break;
    }
    case Selection::Marker: {
        if (sel_.index >= tl.markers.size()) break;
        const Marker& m = tl.markers[sel_.index];
        h = QStringLiteral("<h3>%1</h3><table>").arg(qn(eventKindName(m.kind)));
        h += row(tr("at"), at(m.tsNs));
        if (m.pool) h += row(tr("pool"), L.poolName(m.pool) + " · " + hexHandle(m.pool));
        if (m.kind == EventKind::StreamSynchronize || m.kind == EventKind::PeerCopy)
            h += row(tr("stream"), L.streamName(m.stream));
        if (m.kind == EventKind::PeerCopy)
            h += row(tr("copied"), qn(describeMarkerValues(m.kind, m.attr, m.value)));
        else if (m.kind == EventKind::PoolSetAccess)
            h += row(tr("access"), qn(describeMarkerValues(m.kind, m.attr, m.value)));
        if (m.kind == EventKind::ImplicitRelease)
            h += row(tr("pool size after release"), bytesExact(m.value));
        else if (m.kind == EventKind::PoolTrimTo)
            h += row(tr("minimum bytes to keep"), bytesExact(m.value));
        else if (m.kind == EventKind::PoolSetAttribute || m.kind == EventKind::KnobChange) {
            const QString change = attributeChange(tl, m);
            h += change.isEmpty() ? row(tr("new value"), bytesExact(m.value))
                                  : row(tr("changed"), change);
        }
        h += row(tr("seq"), QString::number(m.seq));
        h += QStringLiteral("</table>");
        pool = m.pool;
        when = m.tsNs;
        break;
    }
    case Selection::Failed: {
        if (sel_.index >= tl.failed.size()) break;
        const FailedAllocation& f = tl.failed[sel_.index];
        h = QStringLiteral("<h3 style='color:#e02020'>Failed allocation of %1</h3><table>")
                .arg(qb(f.size));
        h += row(tr("size"), bytesExact(f.size));
        h += row(tr("CUresult"),
                 QString::fromStdString(formatCuResult(int(f.result))));
        h += row(tr("stream"), L.streamName(f.stream));
        if (f.pool) h += row(tr("pool"), L.poolName(f.pool));
        h += row(tr("at"), at(f.tsNs));
        h += row(tr("seq"), QString::number(f.seq));
        if (const PoolGrowth* g = tl.fragmentation.at(f.seq)) h += row(tr("pool growth"), growthText(*g));
        h += QStringLiteral("</table>");
        pool = f.pool;
        when = f.tsNs;
        break;
    }
    case Selection::Event: {
        const Event& e = sel_.event;
        h = QStringLiteral("<h3>%1 event</h3><table>").arg(qn(eventKindName(e.kind)));
        h += row(tr("at"), at(e.tsNs));
        h += row(tr("seq"), QString::number(e.seq));
        const QString info = EventTableModel::describe(e);
        if (!info.isEmpty()) h += row(tr("meaning"), info);
        h += row(tr("stream"), L.streamName(e.stream) + " · " + hexHandle(e.stream));
        if (e.pool) h += row(tr("pool"), L.poolName(e.pool) + " · " + hexHandle(e.pool));
        if (e.ptr) h += row(tr("pointer / handle"), hexHandle(e.ptr));
        h += row(tr("size field"), bytesExact(e.size));
        if (e.aux) h += row(tr("aux field"), QString::number(e.aux));
        if (e.has(kHasWatermarks)) {
            h += row(tr("reserved at event"), bytesExact(e.reserved));
            h += row(tr("used at event"), bytesExact(e.used));
        }
        h += row(tr("CUresult"), QString::fromStdString(formatCuResult(int(e.result))));
        h += row(tr("thread"), QString::number(e.tid));
        h += row(tr("device"), QString::number(e.device));
        if (e.correlation) h += row(tr("CUPTI correlation"), QString::number(e.correlation));
        h += QStringLiteral("</table>");
        pool = e.pool;
        when = e.tsNs;
        break;
    }
    case Selection::Pool: {
        const PoolTimeline* p = tl.pool(sel_.handle);
        if (!p) break;
        h = QStringLiteral("<h3>%1</h3><table>").arg(L.poolName(sel_.handle));
        h += row(tr("handle"), hexHandle(sel_.handle));
        h += row(tr("device"), QString::number(p->info.device));
        h += row(tr("kind"), qn(poolKindName(p->info.kind)));
        for (const PoolAccess& a : p->access)
            h += row(tr("shared with"),
                     qn((a.locationType <= 1 ? deviceLabel(a.device)
                                             : "location type " + std::to_string(a.locationType)) +
                        ": " + describeAccessFlags(a.flags)) +
                         " · " + tr("since %1").arg(qd(a.tsNs - tl.t0)));
        h += row(tr("max size"), p->info.maxSize ? qb(p->info.maxSize) : tr("unlimited"));
        h += row(tr("peak reserved"),
                 bytesExact(p->peakReserved) + " at " + qd(p->peakReservedTsNs - tl.t0));
        h += row(tr("peak used"), bytesExact(p->peakUsed) + " at " + qd(p->peakUsedTsNs - tl.t0));
        if (p->driverUsedHigh)
            h += row(tr("peaks from"), tr("the driver's ReservedMemHigh / UsedMemHigh"));
        h += row(tr("bytes allocated"), qb(p->bytesAllocated));
        h += row(tr("allocations / frees"),
                 QStringLiteral("%L1 / %L2").arg(p->allocCount).arg(p->freeCount));
        h += row(
            tr("live at end"),
            QStringLiteral("%1 in %2 blocks").arg(qb(p->liveAtEndBytes)).arg(p->liveAtEndCount));
        if (const Fragmentation::Pool* f = tl.fragmentation.pool(sel_.handle)) {
            h += row(tr("growths"), tr("%L1 (%2), %L3 while at least their size was idle, %L4 "
                                       "fragmented")
                                        .arg(f->growths)
                                        .arg(qb(f->grownBytes))
                                        .arg(f->growthsWhileIdle)
                                        .arg(f->fragmentedGrowths));
            // The first fragmented growth or failure, selectable.
            for (const PoolGrowth& g : tl.fragmentation.events)
                if (g.pool == sel_.handle && g.fragmented()) {
                    h += row(tr("first fragmented"),
                             tr("%1 of %2 at %3: %4")
                                 .arg(allocLink(g.allocation, g.seq), qb(g.bytes),
                                      qd(g.tsNs - tl.t0), growthText(g)));
                    break;
                }
        }
        h += QStringLiteral("</table>");
        break;
    }
    case Selection::Stream: {
        const StreamTimeline* s = tl.stream(sel_.handle);
        h = QStringLiteral("<h3>%1</h3><table>").arg(L.streamName(sel_.handle));
        h += row(tr("handle"), hexHandle(sel_.handle));
        if (s) {
            if (s->info.priorityKnown) h += row(tr("priority"), QString::number(s->info.priority));
            h += row(tr("peak live"),
                     bytesExact(s->peakLive) + " at " + qd(s->peakLiveTsNs - tl.t0));
            h += row(tr("bytes allocated"), qb(s->bytesAllocated));
            h += row(tr("allocations"), QStringLiteral("%L1").arg(s->allocCount));
            h += row(tr("live at end"), QStringLiteral("%1 in %2 blocks")
                                            .arg(qb(s->liveAtEndBytes))
                                            .arg(s->liveAtEndCount));
        }
        // Freed in this stream's order, not yet reusable by other streams.
        if (const PendingFrees::Stream* pf = tl.pendingFrees.stream(sel_.handle); pf && pf->peak)
            h += row(tr("peak pending free"),
                     bytesExact(pf->peak) + " at " + qd(pf->peakTsNs - tl.t0));
        h += QStringLiteral("</table>");
        break;
    }
    default:
        break;
    }
    if (h.isEmpty()) h = traceSummary();
    if (pool && when) h += poolState(pool, when, tr("at that moment"));
    if (cursor_ != INT64_MIN) {
        h += QStringLiteral("<h4>At the cursor (%1)</h4><table>").arg(qd(cursor_ - tl.t0));
        for (const PoolTimeline& p : tl.pools) {
            if (L.laneOfPool(p.info.handle) < 0)
                continue; // not shown anywhere (empty unknown pool)
            const uint64_t rv = p.reserved.valueAt(cursor_), uv = p.used.valueAt(cursor_);
            QString v = QStringLiteral("reserved %1 · used %2 · idle %3")
                            .arg(qb(rv), qb(uv), qb(rv > uv ? rv - uv : 0));
            v += tr("<br>threshold %1 · reuse: event deps %2, opportunistic %3, internal deps %4")
                     .arg(thresholdText(p, cursor_),
                          policyText(p.reuseFollowEventDependencies, cursor_),
                          policyText(p.reuseAllowOpportunistic, cursor_),
                          policyText(p.reuseAllowInternalDependencies, cursor_));
            h += row(L.poolName(p.info.handle), v);
        }
        // Only streams holding memory at that instant: a PyTorch trace has 100+ streams.
        int idle = 0;
        for (const StreamTimeline& s : tl.streams) {
            const uint64_t live = s.liveBytes.valueAt(cursor_);
            const PendingFrees::Stream* pf = tl.pendingFrees.stream(s.info.handle);
            const uint64_t pending = pf ? pf->bytes.valueAt(cursor_) : 0;
            if (live == 0 && pending == 0) {
                ++idle;
                continue;
            }
            QString v = QStringLiteral("live %1").arg(qb(live));
            if (pending) v += tr(" · pending free %1").arg(qb(pending));
            h += row(L.streamName(s.info.handle), v);
        }
        if (idle) h += row(tr("%n other stream(s)", "", idle), tr("nothing live"));
        // Memory outside the pools (cudaMalloc) and pinned host memory at that instant.
        for (const OutsideTimeline& o : tl.outside) {
            QString v = tr("%1 · with the pools' reserved %2")
                            .arg(qb(o.liveBytes.valueAt(cursor_)), qb(o.withPools.valueAt(cursor_)));
            const uint64_t managed = o.managedBytes.valueAt(cursor_);
            if (managed) v += tr(" · managed %1").arg(qb(managed));
            h += row(o.device >= 0 ? tr("GPU %1 outside the pools").arg(o.device)
                                   : tr("outside the pools"),
                     v);
        }
        if (tl.pinned.any())
            h += row(tr("pinned host memory"),
                     tr("%1 · registered %2")
                         .arg(qb(tl.pinned.total.valueAt(cursor_)),
                              qb(tl.pinned.registered.valueAt(cursor_))));
        h += QStringLiteral("</table>");
    }
    setHtml(h);
}

} // namespace poolscope::ui
