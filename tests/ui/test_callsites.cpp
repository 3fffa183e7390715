// Call sites in the window (issue #13): the tree model under QAbstractItemModelTester on the
// real callsites.poolscope sample (recorded on an H100), the Call sites view and its links to
// the timeline and the plot, and the details pane's stack. The aggregation itself is tested in
// core (tests/core/SiteTreeTest.cpp).
#include "CallSiteTreeModel.h"
#include "CallSitesView.h"
#include "ColorScheme.h"
#include "DetailsPane.h"
#include "IcicleWidget.h"
#include "MainWindow.h"
#include "ReplayBar.h"
#include "TimelineWidget.h"
#include "WatermarkPlot.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"

#include <QAbstractItemModelTester>
#include <QHeaderView>
#include <QMenu>
#include <QMenuBar>
#include <QDockWidget>
#include <QSettings>
#include <QSignalSpy>
#include <QTest>
#include <QTreeView>
#include <gtest/gtest.h>
#include <qcustomplot.h>

using namespace poolscope;
using namespace poolscope::ui;

namespace {

QString samplePath(const char* name) {
    return QStringLiteral(POOLSCOPE_SAMPLES_DIR "/") + QString::fromUtf8(name);
}

struct Loaded {
    std::shared_ptr<const Timeline> tl;
    StackTables stacks;
};

Loaded loadCallsites() {
    Loaded l;
    auto r = TraceReader::open(samplePath("callsites.poolscope").toStdString());
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return l;
    auto tl = buildTimeline(**r);
    EXPECT_TRUE(tl);
    if (tl) l.tl = *tl;
    auto st = (*r)->stacks();
    EXPECT_TRUE(st);
    if (st) l.stacks = std::move(*st);
    return l;
}

// Depth-first over every index of the model.
template <class F> void forEachIndex(const QAbstractItemModel& m, const QModelIndex& parent, F f) {
    for (int r = 0; r < m.rowCount(parent); ++r) {
        const QModelIndex i = m.index(r, 0, parent);
        f(i);
        forEachIndex(m, i, f);
    }
}

std::unique_ptr<MainWindow> openWindow(const QString& path) {
    auto w = std::make_unique<MainWindow>();
    w->resize(1600, 1000);
    w->show();
    EXPECT_TRUE(QTest::qWaitForWindowExposed(w.get()));
    QSignalSpy shown(w.get(), &MainWindow::snapshotShown);
    w->openFile(path);
    EXPECT_TRUE(shown.wait(60000));
    return w;
}

} // namespace

TEST(CallSiteTreeModel, PassesModelTesterOnTheCallsitesSampleInBothOrders) {
    Loaded l = loadCallsites();
    ASSERT_TRUE(l.tl);
    ASSERT_FALSE(l.stacks.sites.empty());
    CallSiteTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    EXPECT_EQ(model.rowCount(), 0);
    for (auto order : {analysis::SiteOrder::TopDown, analysis::SiteOrder::BottomUp}) {
        auto tree = std::make_shared<const analysis::SiteTree>(
            analysis::buildSiteTree(*l.tl, l.stacks, order));
        model.setTree(tree);
        ASSERT_EQ(model.rowCount(), int(tree->nodes[0].children.size()));
        EXPECT_EQ(model.columnCount(), CallSiteTreeModel::ColumnCount);
        size_t seen = 0;
        forEachIndex(model, {}, [&](const QModelIndex& i) {
            ++seen;
            const uint32_t node = model.nodeOf(i);
            ASSERT_LT(node, tree->nodes.size());
            EXPECT_EQ(model.indexOfNode(node), i);
            EXPECT_EQ(model.nodeOf(i.parent()), tree->nodes[node].parent);
            EXPECT_EQ(i.siblingAtColumn(CallSiteTreeModel::Frame).data().toString().toStdString(),
                      tree->nodes[node].frame);
            EXPECT_EQ(i.siblingAtColumn(CallSiteTreeModel::Allocated).data(CallSiteTreeModel::SortRole)
                          .toULongLong(),
                      tree->nodes[node].bytesAllocated);
        });
        EXPECT_EQ(seen, tree->nodes.size() - 1); // every node but the root, once
        // Human units in the byte columns.
        const QString peak = model.index(0, CallSiteTreeModel::PeakLive).data().toString();
        EXPECT_TRUE(peak.endsWith("iB") || peak.endsWith(" B")) << peak.toStdString();
        EXPECT_FALSE(model.headerData(CallSiteTreeModel::LiveAtEnd, Qt::Horizontal).toString().isEmpty());
    }
    model.setTree(nullptr);
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(CallSitesView, SelectingASiteMarksItsAllocationsOnTheTimelineAndThePlot) {
    auto w = openWindow(samplePath("callsites.poolscope"));
    CallSitesView* v = w->callSites();
    ASSERT_TRUE(v->hasStacks());
    ASSERT_NE(v->model()->tree(), nullptr);
    v->setOrder(analysis::SiteOrder::BottomUp);
    const analysis::SiteTree* tree = v->model()->tree();
    ASSERT_EQ(tree->order, analysis::SiteOrder::BottomUp);
    // The workload's allocating functions head the bottom-up tree.
    uint32_t weights = 0;
    for (uint32_t c : tree->nodes[0].children)
        if (tree->nodes[c].frame.find("alloc_weights") != std::string::npos) weights = c;
    ASSERT_NE(weights, 0u);
    QSignalSpy chosen(v, &CallSitesView::sitesSelected);
    v->selectNode(weights);
    ASSERT_EQ(chosen.count(), 1);
    const auto* marked = w->timeline()->highlightedAllocations();
    ASSERT_NE(marked, nullptr);
    EXPECT_EQ(marked->size(), tree->nodes[weights].count);
    for (uint32_t i : *marked)
        EXPECT_TRUE(std::binary_search(tree->nodes[weights].sites.begin(),
                                       tree->nodes[weights].sites.end(),
                                       w->snapshot().timeline->allocations[i].site));
    QCPGraph* g = w->watermarks()->highlightGraph();
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(g->visible());
    EXPECT_GT(g->data()->size(), 1);
    double top = 0;
    for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        top = std::max(top, it->value);
    // The plot shows the view's points (downsampled, each bucket's maximum kept): never more
    // than the site's peak, and the peak itself when it lies in view.
    EXPECT_GT(top, 0.0);
    EXPECT_LE(uint64_t(top), tree->nodes[weights].peakLive);
    const int64_t peakAt = tree->nodes[weights].peakLiveTsNs;
    if (peakAt >= w->timeline()->viewStart() && peakAt < w->timeline()->viewEnd()) {
        EXPECT_EQ(uint64_t(top), tree->nodes[weights].peakLive);
    }
    // Choosing nothing removes the marks.
    v->selectNode(0);
    EXPECT_EQ(w->timeline()->highlightedAllocations(), nullptr);
    EXPECT_FALSE(w->watermarks()->highlightGraph()->visible());

    // The icicle: at a pool's peak reserved its root holds what report --top-sites counts.
    v->setOrder(analysis::SiteOrder::TopDown);
    v->setIcicleInstant(1);
    EXPECT_GT(v->icicle()->value(0), 0u);
    EXPECT_TRUE(v->icicleCaption().contains("peak")) << v->icicleCaption().toStdString();
    // Clicking a frame in the icicle selects it in the (top-down) tree.
    const QRect r = v->icicle()->nodeRect(v->model()->tree()->nodes[0].children.front());
    if (!r.isEmpty()) {
        w->showCallSites();
        QTest::qWait(50);
        QTest::mouseClick(v->icicle(), Qt::LeftButton, {}, r.center());
        EXPECT_EQ(v->model()->nodeOf(v->treeView()->currentIndex()),
                  v->model()->tree()->nodes[0].children.front());
    }
    // The cursor moves the icicle's instant.
    v->setIcicleInstant(0);
    const Timeline& tl = *w->snapshot().timeline;
    const auto topDown = analysis::buildSiteTree(tl, *w->snapshot().stacks, analysis::SiteOrder::TopDown);
    for (int64_t at : {tl.t0, tl.t0 + (tl.t1 - tl.t0) / 3, tl.t1}) {
        w->replay()->setCursor(at);
        const int64_t cursor = w->timeline()->cursorTime();
        EXPECT_EQ(v->icicle()->value(0), analysis::liveBytesAt(topDown, tl, cursor)[0]) << at;
    }
}

TEST(CallSitesView, TraceWithoutStacksSaysHowToRecordThem) {
    auto w = openWindow(samplePath("churn.poolscope"));
    EXPECT_FALSE(w->callSites()->hasStacks());
    EXPECT_EQ(w->callSites()->model()->tree(), nullptr);
    EXPECT_EQ(w->callSites()->findChild<QLabel*>() != nullptr, true);
    bool said = false;
    for (QLabel* l : w->callSites()->findChildren<QLabel*>())
        said |= l->text().contains("--stacks");
    EXPECT_TRUE(said);
}

TEST(DetailsPane, ShowsTheAllocationsCallStackAndItsNvtxRanges) {
    auto w = openWindow(samplePath("callsites.poolscope"));
    const Timeline& tl = *w->snapshot().timeline;
    const StackTables& st = *w->snapshot().stacks;
    // An allocation made inside an NVTX range.
    int pick = -1;
    for (size_t i = 0; i < tl.allocations.size() && pick < 0; ++i)
        if (tl.allocations[i].site && !analysis::openRanges(st, tl.allocations[i].tid,
                                                            tl.allocations[i].allocTsNs).empty())
            pick = int(i);
    ASSERT_GE(pick, 0);
    w->select({Selection::Allocation, uint32_t(pick), 0, {}});
    const QString text = w->details()->toPlainText();
    EXPECT_TRUE(text.contains("Call stack")) << text.toStdString();
    EXPECT_TRUE(text.contains("NVTX ranges open on thread")) << text.toStdString();
    const analysis::CallStack cs = analysis::callStack(st, tl.allocations[size_t(pick)].site);
    ASSERT_FALSE(cs.empty());
    // The allocating call, as the stack shortens it.
    EXPECT_TRUE(text.contains(QString::fromStdString(cs.frames.back().function.empty()
                                                         ? cs.frames.back().location
                                                         : cs.frames.back().function)))
        << text.toStdString();
    for (const NvtxRange* r : analysis::openRanges(st, tl.allocations[size_t(pick)].tid,
                                                   tl.allocations[size_t(pick)].allocTsNs))
        EXPECT_TRUE(text.contains(QString::fromStdString(r->name))) << r->name;
}

// Recorded with --stacks-at-free (the callsites sample is, on an H100), an allocation's free has a
// site of its own: the details show it under "Freed at" after the allocating stack, innermost frame
// the workload's own function that freed it (callsites.cu frees in main and scratch).
TEST(DetailsPane, ShowsWhereTheBlockWasFreedWhenRecorded) {
    auto w = openWindow(samplePath("callsites.poolscope"));
    TraceSnapshot snap = w->snapshot();
    const Timeline& tl = *snap.timeline;
    int pick = -1;
    for (size_t i = 0; i < tl.allocations.size() && pick < 0; ++i)
        if (tl.allocations[i].site && tl.allocations[i].freeSite &&
            tl.allocations[i].freeSite != tl.allocations[i].site)
            pick = int(i);
    ASSERT_GE(pick, 0) << "the sample's frees carry sites of their own";
    DetailsPane pane;
    pane.setSnapshot(snap);
    pane.showSelection({Selection::Allocation, uint32_t(pick), 0, {}});
    const QString text = pane.toPlainText();
    ASSERT_TRUE(text.contains("Freed at")) << text.toStdString();
    const analysis::CallStack fs = analysis::callStack(*snap.stacks, tl.allocations[size_t(pick)].freeSite);
    ASSERT_FALSE(fs.empty());
    const std::string last = fs.frames.back().function.empty() ? fs.frames.back().location
                                                                : fs.frames.back().function;
    EXPECT_GT(text.indexOf(QString::fromStdString(last), text.indexOf("Freed at")), 0)
        << "the free's own innermost frame follows the heading: " << text.toStdString();

    // Without a free site (a trace recorded without --stacks-at-free): no section.
    auto stripped = std::make_shared<Timeline>(tl);
    for (Allocation& a : stripped->allocations) a.freeSite = 0;
    snap.timeline = stripped;
    pane.setSnapshot(snap);
    pane.showSelection({Selection::Allocation, uint32_t(pick), 0, {}});
    EXPECT_FALSE(pane.toPlainText().contains("Freed at")) << "no free site recorded: no section";
}

// Beside the Pools & streams dock at 1600x1000 the Call sites dock is ~500 px wide: the tree and
// the icicle side by side left the frames cut. Narrow, the icicle goes under the tree, and the
// tree shows its frames and numbers at the dock's width.
TEST(CallSitesView, PutsTheIcicleUnderTheTreeWhenNarrow) {
    QSettings().remove("window/state");
    auto w = openWindow(samplePath("callsites.poolscope"));
    w->showCallSites();
    CallSitesView* v = w->callSites();
    ASSERT_TRUE(v->hasStacks());
    QTest::qWait(100);
    ASSERT_LT(v->width(), CallSitesView::kSideBySideWidth) << "the dock is wide: nothing to test";
    EXPECT_EQ(v->splitOrientation(), Qt::Vertical);
    QTreeView* t = v->treeView();
    EXPECT_LE(t->header()->length(), t->viewport()->width()) << "frames or numbers cut";
    // Wide (the user made room): side by side again.
    CallSitesView wide;
    wide.resize(CallSitesView::kSideBySideWidth + 100, 400);
    wide.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&wide));
    EXPECT_EQ(wide.splitOrientation(), Qt::Horizontal);
    wide.resize(CallSitesView::kSideBySideWidth - 100, 400);
    QTest::qWait(20);
    EXPECT_EQ(wide.splitOrientation(), Qt::Vertical);
}

// The plot's used bytes split by NVTX range (issue #13) on the real callsites sample: the
// action a user checks (View menu or the plot's context menu) adds one filled graph per range
// that holds bytes, named by the range, stacked up to the pool's used line; hovering a band names
// it with its bytes. The split itself is tested in core (tests/core/RangeSplitTest.cpp).
TEST(WatermarkPlot, SplitsUsedBytesByNvtxRangeOnTheCallsitesSample) {
    auto w = openWindow(samplePath("callsites.poolscope"));
    WatermarkPlot* plot = w->watermarks();
    QAction* split = plot->splitByRangeAction();
    ASSERT_NE(split, nullptr);
    EXPECT_TRUE(split->isEnabled());
    EXPECT_FALSE(split->isChecked());
    EXPECT_EQ(plot->split(), nullptr);
    EXPECT_TRUE(plot->splitGraphs().empty());
    // The window offers it in its View menu.
    bool inMenu = false;
    for (QAction* m : w->menuBar()->actions())
        if (m->menu() && m->menu()->actions().contains(split)) inMenu = true;
    EXPECT_TRUE(inMenu);

    split->trigger();
    ASSERT_TRUE(plot->splitByRange());
    ASSERT_NE(plot->split(), nullptr);
    const Timeline& tl = *w->snapshot().timeline;
    const PoolTimeline& pool = tl.pools.at(0);
    EXPECT_EQ(plot->split()->pool, pool.info.handle);
    std::map<QString, QCPGraph*> byName;
    for (QCPGraph* g : plot->splitGraphs()) byName[g->name()] = g;
    QStringList names;
    for (const auto& [n, g] : byName) names << n;
    EXPECT_EQ(names, (QStringList{"(no range)", "backward", "forward", "setup"}));
    const QString legend = plot->legendText();
    for (const char* n : {"used by NVTX range", "setup", "forward", "backward", "(no range)"})
        EXPECT_TRUE(legend.contains(QString::fromUtf8(n))) << n << " in " << legend.toStdString();
    // Each graph is the top of its band in the stack (setup at the bottom): at fit-all the
    // peak lies in view, where setup holds 192 MiB and the whole stack the pool's used peak.
    auto maxOf = [](QCPGraph* g) {
        double m = 0;
        for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
            m = std::max(m, it->value);
        return uint64_t(m);
    };
    constexpr uint64_t MiB = 1 << 20;
    ASSERT_TRUE(byName.count("setup") && byName.count("(no range)"));
    EXPECT_EQ(maxOf(byName["setup"]), 192 * MiB);
    EXPECT_EQ(maxOf(byName["forward"]), pool.peakUsed);
    EXPECT_EQ(maxOf(byName["(no range)"]), pool.peakUsed);
    // Coloured as the NVTX band above the lanes colours the range, each range its own colour.
    const view::NvtxRows* rows = w->timeline()->nvtxRows();
    ASSERT_NE(rows, nullptr);
    const ColorScheme colors(plot->palette());
    for (const char* n : {"setup", "forward", "backward"})
        EXPECT_EQ(byName[n]->brush().color(), colors.nvtxColor(rows->colorSlot(n))) << n;
    EXPECT_NE(byName["forward"]->brush().color(), byName["backward"]->brush().color());

    // Hovering the middle of the setup band while the peak holds.
    QCustomPlot* cp = plot->plot();
    cp->replot();
    const auto next = std::upper_bound(pool.used.t.begin(), pool.used.t.end(), pool.peakUsedTsNs);
    ASSERT_NE(next, pool.used.t.end());
    const int64_t mid = pool.peakUsedTsNs + (*next - pool.peakUsedTsNs) / 2;
    const QPoint at(int(cp->xAxis->coordToPixel(double(mid - plot->origin()))),
                    int(cp->yAxis->coordToPixel(double(96 * MiB))));
    const QString tip = plot->splitToolTip(at);
    EXPECT_TRUE(tip.contains("<b>setup: 192 MiB</b>")) << tip.toStdString();
    EXPECT_TRUE(tip.contains("backward: 96.0 MiB")) << tip.toStdString();
    EXPECT_TRUE(tip.contains("used 352 MiB")) << tip.toStdString();
    EXPECT_TRUE(plot->splitToolTip(QPoint(-5, -5)).isEmpty());

    // Off again: the graphs and the legend's line go.
    split->trigger();
    EXPECT_EQ(plot->split(), nullptr);
    EXPECT_TRUE(plot->splitGraphs().empty());
    EXPECT_FALSE(plot->legendText().contains("NVTX"));
}

TEST(WatermarkPlot, SplitByRangeIsDisabledForTracesWithoutRanges) {
    auto w = openWindow(samplePath("churn.poolscope"));
    EXPECT_FALSE(w->watermarks()->splitByRangeAction()->isEnabled());
    w->watermarks()->setSplitByRange(true);
    EXPECT_EQ(w->watermarks()->split(), nullptr);
    EXPECT_TRUE(w->watermarks()->splitGraphs().empty());
}
