// Screenshots of the main window under Xvfb (the xcb platform, real fonts): checks they are not
// blank and saves them to $POOLSCOPE_SCREENSHOT_DIR for docs/screenshots. Uses the bundled
// recorded sample when it exists, else a generated trace (whose device lane says so).
#include "CallSiteTreeModel.h"
#include "CallSitesView.h"
#include "CompareView.h"
#include "DiffTableModel.h"
#include "EntityTreeModel.h"
#include "IcicleWidget.h"
#include "MultiProcessView.h"
#include "MultiGpuBuilt.h"
#include "DetailsPane.h"
#include "EventsPanel.h"
#include "MainWindow.h"
#include "ReplayBar.h"
#include "TestTrace.h"
#include "TimelineWidget.h"
#include "WatermarkPlot.h"
#include "WhatIfPanel.h"
#include <qcustomplot.h>
#include "WindowModes.h"
#include "poolscope/EventFields.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/replay/Replay.h"

#include <QTreeView>
#include <QDir>
#include <QPushButton>
#include <QLabel>
#include <QLineEdit>
#include <QComboBox>
#include <QCheckBox>
#include <QSlider>
#include <QTableWidget>
#include <functional>
#include <QDockWidget>
#include <QFile>
#include <QImage>
#include <QScreen>
#include <QSet>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>
#include <QToolTip>
#include <gtest/gtest.h>

using namespace poolscope;
using namespace poolscope::ui;

namespace {

int distinctColours(const QImage& img) {
    QSet<QRgb> colours;
    const QImage im = img.convertToFormat(QImage::Format_RGB32);
    for (int y = 0; y < im.height(); y += 2) {
        const QRgb* line = reinterpret_cast<const QRgb*>(im.constScanLine(y));
        for (int x = 0; x < im.width(); x += 2)
            colours.insert(line[x]);
    }
    return int(colours.size());
}

QString outDir() {
    QString d = qEnvironmentVariable("POOLSCOPE_SCREENSHOT_DIR");
    if (d.isEmpty()) d = QDir::tempPath() + "/poolscope-screenshots";
    QDir().mkpath(d);
    return d;
}

QString tracePath() {
    const QString chosen = qEnvironmentVariable("POOLSCOPE_SCREENSHOT_TRACE"); // look at others
    if (!chosen.isEmpty()) return chosen;
    const QString sample = QStringLiteral(POOLSCOPE_SAMPLE_TRACE);
    if (QFile::exists(sample)) return sample;
    return synth::syntheticTracePath(20000);
}

void settle(MainWindow& w) {
    for (int i = 0; i < 10; ++i) {
        QApplication::processEvents();
        QTest::qWait(30);
    }
    if (w.events()->queryRunning()) {
        QSignalSpy done(w.events(), &EventsPanel::queryFinished);
        done.wait(20000);
    }
    QTest::qWait(300);
    QApplication::processEvents();
}

void save(const QImage& img, const QString& name) {
    const QString path = outDir() + "/" + name;
    EXPECT_TRUE(img.save(path)) << path.toStdString();
    std::printf("screenshot: %s (%dx%d, %d colours)\n", qPrintable(path), img.width(), img.height(),
                distinctColours(img));
}

// A bundled sample (they sit beside churn.poolscope).
QString samplePath(const QString& file) {
    QString p = QStringLiteral(POOLSCOPE_SAMPLE_TRACE);
    return p.replace(QStringLiteral("churn.poolscope"), file);
}

// The window in the light theme at `size` (1600x1000: what the README screenshots show), shown, with `paths` opened (several: one lane group
// per process) and their first snapshot on screen.
testing::AssertionResult showAndOpen(MainWindow& w, const QStringList& paths,
                                     QSize size = {1600, 1000}) {
    w.setTheme(Theme::Light);
    w.resize(size);
    w.show();
    if (!QTest::qWaitForWindowExposed(&w)) return testing::AssertionFailure() << "not exposed";
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    if (paths.size() == 1)
        w.openFile(paths.front());
    else
        w.openFiles(paths);
    if (!shown.wait(60000)) return testing::AssertionFailure() << "no snapshot within 60 s";
    return testing::AssertionSuccess();
}

} // namespace

TEST(Screenshots, MainWindowIsNotBlank) {
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {tracePath()}));
    const Timeline& tl = *w.snapshot().timeline;
    // Pick the largest cross-stream-freed allocation and put the cursor in the middle.
    uint32_t pick = 0;
    uint64_t best = 0;
    for (uint32_t i = 0; i < tl.allocations.size(); ++i) {
        const Allocation& a = tl.allocations[i];
        if (!a.live() && a.freeStream != a.allocStream && a.size > best) {
            best = a.size;
            pick = i;
        }
    }
    w.select({Selection::Allocation, pick, 0, {}});
    w.replay()->setCursor(tl.t0 + (tl.t1 - tl.t0) * 6 / 10);
    settle(w);
    const QImage full = w.grab().toImage();
    EXPECT_GT(distinctColours(full), 100);
    const QImage timeline = w.timeline()->grab().toImage();
    EXPECT_GT(distinctColours(timeline), 20);
    save(full, "main-window.png");

    // Zoomed in: individual bars, record -> wait arrows, sync markers.
    const Allocation& a = tl.allocations[pick];
    const int64_t mid = a.allocTsNs;
    w.timeline()->setViewRange(mid - 600'000, mid + 900'000);
    w.replay()->setCursor(mid + 100'000);
    settle(w);
    const QImage zoomed = w.grab().toImage();
    EXPECT_GT(distinctColours(zoomed), 100);
    save(zoomed, "main-window-zoomed.png");

    // Dark palette.
    w.setTheme(Theme::Dark);
    w.timeline()->fitAll();
    w.replay()->clearCursor();
    settle(w);
    const QImage dark = w.grab().toImage();
    EXPECT_GT(distinctColours(dark), 100);
    save(dark, "main-window-dark.png");
}

TEST(Screenshots, PoolsTraceWithReusePoliciesCollapsedLanesAndSortedTable) {
    // pools.poolscope (H200) turns the reuse policies of one explicit pool off mid-run: the
    // cursor sits just after that, the attribute marker is selected, one pool group and one
    // stream lane are collapsed, and the events table is sorted by size, largest first.
    const QString path = samplePath(QStringLiteral("pools.poolscope"));
    if (!QFile::exists(path)) GTEST_SKIP() << "no pools sample";
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {path}));
    const Timeline& tl = *w.snapshot().timeline;
    const LaneLayout& L = *w.snapshot().layout;
    // The last attribute change of the run (the reuse policies go off one after another).
    int64_t changeTs = 0;
    uint32_t marker = 0;
    for (uint32_t i = 0; i < tl.markers.size(); ++i)
        if (tl.markers[i].kind == EventKind::PoolSetAttribute && tl.markers[i].tsNs >= changeTs) {
            changeTs = tl.markers[i].tsNs;
            marker = i;
        }
    ASSERT_GT(changeTs, 0);
    // Collapse the first explicit pool that has stream lanes, and one stream lane elsewhere.
    int collapsedPool = -1, collapsedStream = -1;
    for (size_t i = 0; i + 1 < L.lanes.size(); ++i)
        if (L.lanes[i].kind == LaneKind::Pool && L.lanes[i + 1].kind == LaneKind::Stream &&
            L.lanes[i].pool != tl.markers[marker].pool && collapsedPool < 0)
            collapsedPool = int(i);
    for (size_t i = 0; i < L.lanes.size(); ++i)
        if (L.lanes[i].kind == LaneKind::Stream && L.lanes[i].rowCount > 1 &&
            (collapsedPool < 0 || L.lanes[i].pool != L.lanes[size_t(collapsedPool)].pool) &&
            collapsedStream < 0)
            collapsedStream = int(i);
    if (collapsedPool >= 0) w.timeline()->setLaneCollapsed(collapsedPool, true);
    if (collapsedStream >= 0) w.timeline()->setLaneCollapsed(collapsedStream, true);
    w.select({Selection::Marker, marker, 0, {}});
    // The run's activity: from the first allocation to the end.
    int64_t first = tl.t1;
    for (const Allocation& a : tl.allocations)
        first = std::min(first, a.allocTsNs);
    w.timeline()->setViewRange(first - (tl.t1 - first) / 20, tl.t1 + (tl.t1 - first) / 20);
    w.replay()->setCursor(changeTs + 1000);
    w.events()->view()->sortByColumn(EventTableModel::Size, Qt::DescendingOrder);
    settle(w);
    const QImage img = w.grab().toImage();
    EXPECT_GT(distinctColours(img), 100);
    save(img, "main-window-pools.png");
    w.timeline()->expandAll(); // leave the test settings as found
}

TEST(Screenshots, StreamHazardsAndFragmentationInTheDetailsPane) {
    // threads.poolscope (H100): every 4th block is freed by another thread on its own stream
    // with nothing ordering the two: unordered frees, and unordered reuses of those addresses.
    // The details name both events and streams; a link to the other event selects it.
    const QString path = samplePath(QStringLiteral("threads.poolscope"));
    if (!QFile::exists(path)) GTEST_SKIP() << "no threads sample";
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {path}));
    const Timeline& tl = *w.snapshot().timeline;
    ASSERT_FALSE(tl.hazards.hazards.empty());
    // Nothing selected: the trace summary counts the hazards and lists the first ones.
    settle(w);
    EXPECT_TRUE(w.details()->toPlainText().contains("stream-order hazards"))
        << w.details()->toPlainText().toStdString();
    // An unordered reuse: two allocations; select the first, follow the link to the second.
    const StreamHazard* reuse = nullptr;
    for (const StreamHazard& h : tl.hazards.hazards)
        if (h.kind == StreamHazard::Kind::UnorderedReuse) {
            reuse = &h;
            break;
        }
    ASSERT_NE(reuse, nullptr);
    w.select({Selection::Allocation, reuse->first.allocation, 0, {}});
    settle(w);
    const QString text = w.details()->toPlainText();
    EXPECT_TRUE(text.contains("unordered reuse")) << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("seq %1").arg(reuse->second.seq))) << text.toStdString();
    emit w.details()->anchorClicked(QUrl(QStringLiteral("alloc:%1").arg(reuse->second.allocation)));
    settle(w);
    EXPECT_EQ(w.timeline()->selection().kind, Selection::Allocation);
    EXPECT_EQ(w.timeline()->selection().index, reuse->second.allocation);
    // The unordered free, zoomed to its allocation.
    const StreamHazard& h = tl.hazards.hazards.front();
    w.select({Selection::Allocation, h.first.allocation, 0, {}});
    w.timeline()->zoomToSelection();
    w.replay()->setCursor(h.second.tsNs);
    settle(w);
    const QString freeText = w.details()->toPlainText();
    EXPECT_TRUE(freeText.contains("unordered free")) << freeText.toStdString();
    save(w.grab().toImage(), "stream-hazard.png");
    save(w.details()->grab().toImage(), "stream-hazard-details.png");

    // churn.poolscope: the default pool's growths against its idle bytes.
    QString churn = QStringLiteral(POOLSCOPE_SAMPLE_TRACE);
    QSignalSpy shown2(&w, &MainWindow::snapshotShown);
    w.openFile(churn);
    ASSERT_TRUE(shown2.wait(60000));
    const Timeline& ct = *w.snapshot().timeline;
    ASSERT_FALSE(ct.fragmentation.pools.empty());
    w.select({Selection::Pool, 0, ct.fragmentation.pools[0].handle, {}});
    w.timeline()->fitAll();
    w.replay()->setCursor(ct.t0 + (ct.t1 - ct.t0) * 6 / 10);
    settle(w);
    const QString poolText = w.details()->toPlainText();
    EXPECT_TRUE(poolText.contains("fragmented")) << poolText.toStdString();
    EXPECT_TRUE(poolText.contains("idle")) << poolText.toStdString();
    save(w.details()->grab().toImage(), "fragmentation-details.png");
}

TEST(Screenshots, CallSitesViewAndTheDetailsPanesStack) {
    // callsites.poolscope (H100): three functions allocate under NVTX ranges. The Call sites
    // tab is in front, alloc_weights chosen (its blocks marked on the timeline and its live
    // bytes drawn in the plot), one of its allocations selected (its stack and ranges in the
    // details pane), the icicle at the default pool's peak reserved.
    const QString path = samplePath(QStringLiteral("callsites.poolscope"));
    if (!QFile::exists(path)) GTEST_SKIP() << "no callsites sample";
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {path}));
    const Timeline& tl = *w.snapshot().timeline;
    CallSitesView* v = w.callSites();
    ASSERT_TRUE(v->hasStacks());
    w.showCallSites();
    auto* dock = w.findChild<QDockWidget*>("callSitesDock");
    auto* treeDock = w.findChild<QDockWidget*>("treeDock");
    ASSERT_NE(dock, nullptr);
    ASSERT_NE(treeDock, nullptr);
    w.resizeDocks({dock}, {430}, Qt::Vertical);
    v->setIcicleInstant(1);
    const analysis::SiteTree* tree = v->model()->tree();
    uint32_t weights = 0;
    for (uint32_t n = 1; n < tree->nodes.size() && !weights; ++n)
        if (tree->nodes[n].frame.find("alloc_weights") != std::string::npos) weights = n;
    ASSERT_NE(weights, 0u);
    v->selectNode(weights);
    uint32_t pick = UINT32_MAX;
    for (uint32_t i = 0; i < tl.allocations.size() && pick == UINT32_MAX; ++i)
        if (std::binary_search(tree->nodes[weights].sites.begin(), tree->nodes[weights].sites.end(),
                               tl.allocations[i].site))
            pick = i;
    ASSERT_NE(pick, UINT32_MAX);
    w.timeline()->setSelection({Selection::Allocation, pick, 0, {}});
    w.details()->showSelection({Selection::Allocation, pick, 0, {}});
    settle(w);
    const QString text = w.details()->toPlainText();
    EXPECT_TRUE(text.contains("Call stack")) << text.toStdString();
    EXPECT_TRUE(text.contains("alloc_weights")) << text.toStdString();
    ASSERT_NE(w.timeline()->highlightedAllocations(), nullptr);
    EXPECT_GT(w.timeline()->nvtxBandHeight(), 0);
    const QImage img = w.grab().toImage();
    EXPECT_GT(distinctColours(img), 100);
    save(img, "call-sites.png");
    save(w.details()->grab().toImage(), "details-call-stack.png");
    // Bottom-up, the icicle at the replay cursor.
    v->setOrder(analysis::SiteOrder::BottomUp);
    v->setIcicleInstant(0);
    w.replay()->setCursor(v->model()->tree()->nodes[0].peakLiveTsNs); // most memory held
    settle(w);
    EXPECT_GT(v->icicle()->value(0), 0u);
    save(v->grab().toImage(), "call-sites-bottom-up.png");
}

namespace {

// A hand-built trace (not recorded: named so in its file and device name) of a program mixing
// cudaMalloc into a stream-ordered workload: two streams allocating from the default pool,
// cudaMalloc blocks growing then freed with cudaFree (device-wide syncs, each with its call's
// duration), and pinned host memory allocated and registered.
std::string handBuiltBeyondPoolTrace() {
    const std::string path = (QDir::tempPath() + "/poolscope-handbuilt-beyond-pool.poolscope").toStdString();
    QFile::remove(QString::fromStdString(path));
    auto w = TraceWriter::create(path);
    if (!w) return {};
    DeviceInfo d;
    d.ordinal = 0;
    d.name = "hand-built, not recorded";
    d.totalMemory = uint64_t{80} << 30;
    (void)(*w)->addDevice(d);
    PoolInfo pool;
    pool.handle = 0x9000;
    pool.device = 0;
    pool.kind = PoolKind::Default;
    (void)(*w)->addPool(pool);
    constexpr uint64_t MiB = uint64_t{1} << 20;
    std::vector<Event> ev;
    uint64_t seq = 1;
    auto add = [&](EventKind k, int64_t ts) -> Event& {
        Event e;
        e.seq = seq++;
        e.tsNs = ts;
        e.kind = k;
        e.device = 0;
        e.tid = 7;
        ev.push_back(e);
        return ev.back();
    };
    uint64_t reserved = 0, used = 0;
    const int64_t ms = 1'000'000;
    std::vector<uint64_t> legacy;
    for (int i = 0; i < 60; ++i) {
        const int64_t t = i * 10 * ms;
        const uint64_t stream = i % 2 ? 0x51 : 0x52;
        const uint64_t n = (4 + i % 5) * MiB;
        used += n;
        reserved = std::max(reserved, used + 32 * MiB);
        Event& a = add(EventKind::Alloc, t);
        AllocFields{0xA000'0000 + uint64_t(i) * 0x100'0000, n, AllocApi::Async}.into(a);
        a.stream = stream;
        a.pool = 0x9000;
        a.flags = kHasWatermarks;
        a.reserved = reserved;
        a.used = used;
        if (i % 6 == 1) {
            Event& m = add(EventKind::DeviceAlloc, t + 2 * ms);
            const uint64_t ptr = 0x7000'0000 + uint64_t(i) * 0x1000'0000;
            DeviceAllocFields{ptr, (64 + 16 * uint64_t(i % 4)) * MiB, DeviceAllocApi::Malloc, 0}.into(m);
            legacy.push_back(ptr);
        }
        if (i % 10 == 9 && legacy.size() > 1) {
            Event& f = add(EventKind::DeviceFree, t + 5 * ms);
            ReleaseMemFields{legacy.front(), std::nullopt, 3 * uint64_t(ms)}.into(f, EventKind::DeviceFree);
            legacy.erase(legacy.begin());
        }
        if (i % 8 == 3) {
            Event& h = add(EventKind::HostAlloc, t + 6 * ms);
            PinnedFields{0x5000'0000 + uint64_t(i) * 0x100'0000, (8 + uint64_t(i % 3) * 8) * MiB,
                         i % 16 == 3 ? kHostAllocMapped : kHostAllocWriteCombined}
                .into(h, EventKind::HostAlloc);
        }
        if (i == 20) {
            Event& r = add(EventKind::HostRegister, t + 7 * ms);
            PinnedFields{0x6000'0000, 48 * MiB, kHostRegisterPortable}.into(r, EventKind::HostRegister);
        }
        if (i == 45) {
            Event& u = add(EventKind::HostUnregister, t + 7 * ms);
            ReleaseMemFields{0x6000'0000, std::nullopt, 0}.into(u, EventKind::HostUnregister);
        }
        if (i >= 2) {
            Event& f = add(EventKind::Free, t + 8 * ms);
            const int j = i - 2;
            FreeFields{0xA000'0000 + uint64_t(j) * 0x100'0000, std::nullopt}.into(f);
            f.stream = j % 2 ? 0x51 : 0x52;
            f.pool = 0x9000;
            used -= (4 + j % 5) * MiB;
            f.flags |= kHasWatermarks;
            f.reserved = reserved;
            f.used = used;
        }
    }
    replay::Replay r; // sizes of the frees, as the collector's writer fills them
    for (Event& e : ev) r.complete(e);
    if (!(*w)->append(ev) || !(*w)->close()) return {};
    return path;
}

} // namespace

TEST(Screenshots, HandBuiltBeyondThePoolsLanes) {
    const std::string path = handBuiltBeyondPoolTrace();
    ASSERT_FALSE(path.empty());
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {QString::fromStdString(path)}));
    const Timeline& tl = *w.snapshot().timeline;
    ASSERT_EQ(tl.outside.size(), 1u);
    ASSERT_FALSE(tl.deviceSyncs.empty());
    const LaneLayout& L = *w.snapshot().layout;
    int outsideLanes = 0, hostLanes = 0;
    for (const Lane& l : L.lanes) {
        outsideLanes += l.kind == LaneKind::Outside;
        hostLanes += l.kind == LaneKind::Host;
    }
    EXPECT_EQ(outsideLanes, 1);
    EXPECT_EQ(hostLanes, 1);
    w.replay()->setCursor(tl.t0 + (tl.t1 - tl.t0) / 2);
    settle(w);
    const QImage full = w.grab().toImage();
    EXPECT_GT(distinctColours(full), 100);
    save(full, "beyond-the-pools.png");
    w.setTheme(Theme::Dark);
    w.replay()->clearCursor();
    settle(w);
    save(w.grab().toImage(), "beyond-the-pools-dark.png");
}

namespace {

// The What-if panel on a real sample at 1600x1000: its tab in front, the model's answer for
// the chosen settings on screen, and nothing of the panel cut off.
void whatIfShot(const char* sample, const std::function<void(MainWindow&, WhatIfPanel&)>& set,
                const QString& name) {
    const QString path = samplePath(QString::fromUtf8(sample) + ".poolscope");
    if (!QFile::exists(path)) GTEST_SKIP() << "no " << sample << " sample";
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {path}));
    WhatIfPanel* p = w.whatIf();
    QSignalSpy answered(p, &WhatIfPanel::predictionShown);
    w.showWhatIf();
    ASSERT_TRUE(answered.wait(60000));
    set(w, *p);
    for (int i = 0; i < 100 && p->busy(); ++i) answered.wait(300);
    ASSERT_FALSE(p->busy());
    w.timeline()->fitAll();
    settle(w);
    for (QWidget* c : std::initializer_list<QWidget*>{
             p->applyButton(), p->useSuggestionButton(), p->asRecordedButton(), p->numbers(),
             p->thresholdEdit(), p->thresholdSlider(), p->adviceLabel(), p->poolBox(),
             p->policyBox(PoolAttr::ReuseAllowInternalDependencies)}) {
        EXPECT_EQ(c->visibleRegion().boundingRect(), c->rect())
            << name.toStdString() << ": " << c->metaObject()->className() << " cut off";
    }
    const QImage img = w.grab().toImage();
    EXPECT_GT(distinctColours(img), 100);
    save(img, name);
    save(p->grab().toImage(), QString(name).replace(".png", "-panel.png"));
    save(w.watermarks()->grab().toImage(), QString(name).replace(".png", "-plot.png"));
}

} // namespace

TEST(Screenshots, WhatIfPanel) {
    // jax (H100): threshold 0, an implicit release at nearly every synchronize; the advisor's
    // suggestion taken (docs/screenshots/whatif-panel.png).
    whatIfShot("jax", [](MainWindow&, WhatIfPanel& p) { p.useSuggestionButton()->click(); },
               "whatif-jax-suggestion.png");
    // churn (H200): the program changes its threshold mid-run; asked at max, then at 0, from
    // the start.
    whatIfShot("churn", [](MainWindow&, WhatIfPanel& p) { p.setThreshold(~uint64_t{0}); },
               "whatif-churn-max.png");
    whatIfShot("churn", [](MainWindow&, WhatIfPanel& p) { p.setThreshold(0); },
               "whatif-churn-zero.png");
    // gpt2 (H100; PyTorch keeps everything: threshold max): what threshold 0 would do.
    whatIfShot("gpt2", [](MainWindow&, WhatIfPanel& p) { p.setThreshold(0); },
               "whatif-gpt2-zero.png");
}

// Issue #16: the IPC parent and child traces (H200) as a lane group per process, the parent's
// exported pool chosen (the child's imported pool lit with it), and two runs compared.
TEST(Screenshots, SeveralProcessesAndTheCompareMode) {
    const QString parent = samplePath("ipc-parent.poolscope"),
                  child = samplePath("ipc-child.poolscope");
    if (!QFile::exists(parent) || !QFile::exists(child)) GTEST_SKIP() << "no IPC samples";
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {parent, child}));
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    MultiProcessView* v = w.modes()->processes();
    ASSERT_EQ(v->processCount(), 2);
    ASSERT_FALSE(v->processes().links.empty());
    const auto& link = v->processes().links.front();
    v->selectPool(int(link.exporter), link.exportPool);
    v->tree()->setFocus();
    settle(w);
    const QImage multi = w.grab().toImage();
    EXPECT_GT(distinctColours(multi), 100);
    save(multi, "multi-process.png");

    w.compareFiles(samplePath("threads.poolscope"), samplePath("threads_race.poolscope"));
    ASSERT_TRUE(shown.wait(60000));
    CompareView* c = w.modes()->compare();
    // The default pool, in both runs: highlighted in both plots.
    DiffTableModel* m = c->model();
    const QModelIndex pools = m->index(1, 0);
    for (int r = 0; r < m->rowCount(pools); ++r) {
        const QModelIndex i = m->index(r, 0, pools);
        if (i.data(DiffTableModel::HandleARole).toULongLong() &&
            i.data(DiffTableModel::HandleBRole).toULongLong()) {
            c->table()->setCurrentIndex(i);
            break;
        }
    }
    settle(w);
    const QImage diff = w.grab().toImage();
    EXPECT_GT(distinctColours(diff), 50);
    save(diff, "diff.png");
}

// Several GPUs (issue #19) on the hand-built two-device trace (tests/core/MultiGpuBuilt.h): NOT a
// recording. Each device's lanes with its pools' peak, the tree's device rows with their pools'
// totals, GPU 0's explicit pool shared with GPU 1 selected, peer copies on the streams.
TEST(Screenshots, HandBuiltTwoDevices) {
    QTemporaryDir dir;
    const QString path = dir.filePath("multi_gpu_built.poolscope");
    ASSERT_TRUE(test::writeTwoDeviceBuiltTrace(path.toStdString()).ok());
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {path}));
    const Timeline& tl = *w.snapshot().timeline;
    ASSERT_EQ(tl.deviceTotals.size(), 2u);
    ASSERT_EQ(tl.peerCopies.size(), 2u);
    ASSERT_EQ(w.entityModel()->rowCount(), 2);
    w.select({Selection::Pool, 0, test::TwoDeviceBuilt::kExplicit0, {}});
    w.replay()->setCursor(tl.totalsOf(1)->peakReservedTsNs);
    settle(w);
    const QString details = w.details()->toPlainText();
    EXPECT_TRUE(details.contains("shared with")) << details.toStdString();
    EXPECT_TRUE(details.contains("GPU 1: read-write")) << details.toStdString();
    const QImage full = w.grab().toImage();
    EXPECT_GT(distinctColours(full), 100);
    save(full, "multi-gpu-built.png");
    // Without the cursor the lanes say what each pool did, and who else may use it.
    w.replay()->clearCursor();
    w.select({Selection::Marker, 0, 0, {}});
    for (uint32_t i = 0; i < tl.markers.size(); ++i)
        if (tl.markers[i].kind == EventKind::PeerCopy) {
            w.select({Selection::Marker, i, 0, {}});
            break;
        }
    settle(w);
    const QString copy = w.details()->toPlainText();
    EXPECT_TRUE(copy.contains("GPU 0 → GPU 1")) << copy.toStdString();
    save(w.grab().toImage(), "multi-gpu-built-peer-copy.png");
}

TEST(Screenshots, PlotSplitByNvtxRange) {
    // callsites.poolscope (H100): the plot's used bytes split by NVTX range (View > Split Used
    // Bytes by NVTX Range), zoomed onto the allocations: scratch's 128 MiB outside any range,
    // then setup, forward and backward stacked up to the pool's used line, in the colours of
    // the NVTX band above the lanes; the hover tooltip over the setup band at the peak.
    const QString path = samplePath(QStringLiteral("callsites.poolscope"));
    if (!QFile::exists(path)) GTEST_SKIP() << "no callsites sample";
    MainWindow w;
    ASSERT_TRUE(showAndOpen(w, {path}));
    WatermarkPlot* plot = w.watermarks();
    ASSERT_TRUE(plot->splitByRangeAction()->isEnabled());
    plot->splitByRangeAction()->trigger();
    ASSERT_NE(plot->split(), nullptr);
    const Timeline& tl = *w.snapshot().timeline;
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const Allocation& a : tl.allocations) {
        first = std::min(first, a.allocTsNs);
        last = std::max(last, a.live() ? a.allocTsNs : a.freeTsNs);
    }
    const int64_t pad = (last - first) / 20;
    w.timeline()->setViewRange(first - pad, last + pad);
    settle(w);
    EXPECT_EQ(plot->splitGraphs().size(), 4u);
    const QImage img = w.grab().toImage();
    EXPECT_GT(distinctColours(img), 100);
    save(img, "plot-split-by-range-window.png");
    save(plot->grab().toImage(), "plot-split-by-range.png");
    // The tooltip is a window of its own: grabbed from the screen, with the plot around it.
    const PoolTimeline& pool = tl.pools.at(0);
    const auto next = std::upper_bound(pool.used.t.begin(), pool.used.t.end(), pool.peakUsedTsNs);
    ASSERT_NE(next, pool.used.t.end());
    QCustomPlot* cp = plot->plot();
    const int64_t mid = pool.peakUsedTsNs + (*next - pool.peakUsedTsNs) / 2;
    const QPoint at(int(cp->xAxis->coordToPixel(double(mid - plot->origin()))),
                    int(cp->yAxis->coordToPixel(double(uint64_t(96) << 20))));
    QTest::mouseMove(cp, at);
    QApplication::processEvents();
    const QString tip = plot->splitToolTip(at);
    EXPECT_TRUE(tip.contains("<b>setup: 192 MiB</b>")) << tip.toStdString();
    QToolTip::showText(cp->mapToGlobal(at), tip, cp);
    settle(w);
    // The plot's right part and the tooltip (it may reach below the plot or past its edge).
    QRect area(plot->mapToGlobal(QPoint(plot->width() / 2, 0)), QSize(plot->width() / 2, plot->height()));
    QWidget* tipLabel = nullptr;
    for (QWidget* top : QApplication::topLevelWidgets())
        if (top->inherits("QTipLabel") && top->isVisible()) tipLabel = top;
    ASSERT_NE(tipLabel, nullptr);
    area = area.united(tipLabel->geometry().adjusted(-8, -8, 8, 8));
    const QImage screen = QGuiApplication::primaryScreen()
                              ->grabWindow(0, area.x(), area.y(), area.width(), area.height())
                              .toImage();
    save(screen, "plot-split-by-range-tooltip.png");
    QToolTip::hideText();
}
