// Several traces in the window (issue #16), offscreen, on the real samples: the IPC parent and
// child (resources/samples/ipc-*.poolscope, one trace per process as `record` writes them) as a
// lane group per process, and two runs in the compare mode. Every expected value comes from the
// core functions `poolscope merge` and `poolscope diff` use, run here on the files themselves.
#include "CompareView.h"
#include "DiffTableModel.h"
#include "EventsPanel.h"
#include "MainWindow.h"
#include "MultiProcessView.h"
#include "ProcessSet.h"
#include "ProcessTreeModel.h"
#include "TimelineWidget.h"
#include "TestTrace.h"
#include "TraceLoad.h"
#include "WatermarkPlot.h"
#include "WindowModes.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/interop/Diff.h"
#include "poolscope/interop/ProcessTree.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>
#include <gtest/gtest.h>
#include <qcustomplot.h>
#include <sqlite3.h>

using namespace poolscope;
using namespace poolscope::ui;

namespace {

QString sample(const char* name) {
    return QStringLiteral(POOLSCOPE_SAMPLES_DIR "/") + name;
}

// What `poolscope merge` computes for these files, read without the window.
struct MergeTruth {
    std::vector<interop::ProcessEvents> inputs;
    std::vector<interop::ProcessNode> tree;
    std::vector<interop::IpcLink> links;
    std::vector<std::shared_ptr<const Timeline>> timelines;
};

MergeTruth mergeTruth(const QStringList& paths) {
    MergeTruth t;
    for (const QString& p : paths) {
        auto r = TraceReader::open(p.toStdString());
        EXPECT_TRUE(r.ok()) << p.toStdString();
        auto ipc = interop::readIpcEvents(**r);
        EXPECT_TRUE(ipc.ok());
        t.inputs.push_back({*(*r)->process(), *ipc});
        t.timelines.push_back(*buildTimeline(**r));
    }
    t.tree = interop::processTree(t.inputs);
    t.links = interop::findIpcLinks(t.inputs);
    return t;
}

std::vector<TraceLoadResult> loadAll(const QStringList& paths, bool report = false) {
    std::vector<TraceLoadResult> out;
    std::atomic<bool> cancel{false};
    TraceLoadOptions o;
    o.ipc = true;
    o.report = report;
    for (const QString& p : paths)
        out.push_back(loadTraceFile(p, cancel, o));
    return out;
}

bool openAndWait(MainWindow& w, const QStringList& paths) {
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFiles(paths);
    return shown.wait(60000);
}

QModelIndex findRow(const QAbstractItemModel& m,
                    const std::function<bool(const QModelIndex&)>& pred,
                    const QModelIndex& parent = {}) {
    for (int r = 0; r < m.rowCount(parent); ++r) {
        const QModelIndex i = m.index(r, 0, parent);
        if (pred(i)) return i;
        if (QModelIndex hit = findRow(m, pred, i); hit.isValid()) return hit;
    }
    return {};
}

const QStringList kIpcChildFirst = {sample("ipc-child.poolscope"), sample("ipc-parent.poolscope")};

} // namespace

TEST(ProcessTreeModel, RealIpcPairUnderTheModelTester) {
    const auto results = loadAll(kIpcChildFirst);
    const ProcessSet set = ProcessSet::build(results);
    ProcessTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.resetData(&set);
    ASSERT_EQ(set.entries.size(), 2u);
    // One root (the parent), the child process under it.
    ASSERT_EQ(model.rowCount(), 1);
    const QModelIndex parentRow = model.index(0, 0);
    EXPECT_EQ(model.targetFor(parentRow).process, 0);
    const QModelIndex childRow = model.indexFor(1, ProcessTreeModel::NodeKind::Process);
    ASSERT_TRUE(childRow.isValid());
    EXPECT_EQ(childRow.parent(), parentRow);
    model.setHighlightedPools(set.linkedPools(0, set.links.front().exportPool));
    model.setHighlightedPools({});
    model.resetData(nullptr);
    EXPECT_EQ(model.rowCount(), 0);
}

TEST(MultiProcessView, IpcPairShowsAGroupPerProcessLinkedPoolsAndOneAxis) {
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    ASSERT_TRUE(openAndWait(w, kIpcChildFirst));
    ASSERT_EQ(w.modes()->mode(), WindowModes::Mode::Processes);
    MultiProcessView* v = w.modes()->processes();
    const MergeTruth truth = mergeTruth(kIpcChildFirst);

    // Groups in process-tree order (parents first, whatever the order of the files), each named
    // by its program and pid, with the trace's own lanes. (Once seen with one group under a
    // loaded CI run: the view's problems say which file failed, and why.)
    ASSERT_EQ(v->processCount(), int(truth.tree.size())) << v->problemsText().toStdString();
    for (size_t g = 0; g < truth.tree.size(); ++g) {
        const size_t in = truth.tree[g].input;
        const ProcessInfo& p = truth.inputs[in].process;
        const QString title = v->groupTitle(int(g));
        EXPECT_TRUE(title.startsWith(QString::fromStdString(interop::processTitle(p))))
            << title.toStdString();
        EXPECT_TRUE(title.contains(QStringLiteral("pid %1").arg(p.pid)));
        EXPECT_TRUE(truth.tree[g].depth == 0 ||
                    title.contains(QStringLiteral("child of pid %1").arg(p.parentPid)));
        const auto layout = view::LaneLayout::build(*truth.timelines[in]);
        const TraceSnapshot& shown = v->timeline(int(g))->snapshot();
        ASSERT_EQ(shown.layout->lanes.size(), layout->lanes.size());
        EXPECT_EQ(shown.timeline->eventCount, truth.timelines[in].get()->eventCount);
    }

    // The links are merge's, in the groups' numbering; the linked pools' lanes say so.
    const ProcessSet& set = v->processes();
    ASSERT_EQ(set.links.size(), truth.links.size());
    ASSERT_FALSE(set.links.empty());
    auto groupOf = [&](size_t input) {
        for (size_t g = 0; g < truth.tree.size(); ++g)
            if (truth.tree[g].input == input) return g;
        return SIZE_MAX;
    };
    for (size_t k = 0; k < set.links.size(); ++k) {
        const auto& got = set.links[k];
        const auto& want = truth.links[k];
        EXPECT_EQ(got.exporter, groupOf(want.exporter));
        EXPECT_EQ(got.importer, groupOf(want.importer));
        EXPECT_EQ(got.exportPool, want.exportPool);
        EXPECT_EQ(got.importPool, want.importPool);
        EXPECT_EQ(got.kind, want.kind);
        const auto& impLayout = *v->timeline(int(got.importer))->snapshot().layout;
        const auto& impLane = impLayout.lanes[size_t(impLayout.laneOfPool(got.importPool))];
        const auto exporterPid = truth.inputs[want.exporter].process.pid;
        EXPECT_NE(impLane.title.find("pid " + std::to_string(exporterPid)), std::string::npos)
            << impLane.title;

        // The drawn line goes from the exporter's pool lane at the export to the importer's at
        // the import.
        const auto line = v->linkLine(k);
        ASSERT_TRUE(line.has_value());
        auto check = [&](size_t group, uint64_t pool, int64_t t, QPointF at) {
            TimelineWidget* tw = v->timeline(int(group));
            const int lane = tw->snapshot().layout->laneOfPool(pool);
            const QPointF local = tw->mapFrom(v, at);
            EXPECT_GE(local.y(), tw->laneTop(lane));
            EXPECT_LE(local.y(), tw->laneTop(lane) + tw->laneHeight(lane));
            const double plotW = tw->width() - tw->labelWidth() - tw->rightPad();
            const double x = tw->labelWidth() + double(t - tw->viewStart()) * plotW /
                                                    double(tw->viewEnd() - tw->viewStart());
            EXPECT_NEAR(local.x(),
                        std::clamp(x, double(tw->labelWidth()), tw->labelWidth() + plotW), 1.0);
        };
        check(got.exporter, got.exportPool, got.exportTsNs, line->first);
        check(got.importer, got.importPool, got.importTsNs, line->second);
    }

    // One axis: as core aligns them (one host: the same clock), the same span in every group.
    std::vector<interop::AlignInput> align;
    for (const auto& n : truth.tree)
        align.push_back({truth.inputs[n.input].process, truth.timelines[n.input]->t0,
                         truth.timelines[n.input]->t1});
    const auto want = interop::alignProcesses(align);
    EXPECT_EQ(set.alignment.offsetNs, want.offsetNs);
    EXPECT_TRUE(v->alignmentText().contains(QString::fromStdString(want.description)));
    v->timeline(1)->setViewRange(want.begin + 1'000'000, want.begin + 9'000'000);
    for (int g = 0; g < v->processCount(); ++g) {
        EXPECT_EQ(v->timeline(g)->viewStart() + set.entries[size_t(g)].offsetNs,
                  want.begin + 1'000'000);
        EXPECT_EQ(v->timeline(g)->viewEnd() + set.entries[size_t(g)].offsetNs,
                  want.begin + 9'000'000);
    }

    // View > Zoom In zooms every group about the middle.
    const auto before = v->viewRange();
    w.modes()->zoomBy(2.0);
    const auto after = v->viewRange();
    EXPECT_NEAR(double(after.second - after.first), double(before.second - before.first) / 2, 2.0);
    EXPECT_NEAR(double(after.first + after.second) / 2, double(before.first + before.second) / 2,
                2.0);
    EXPECT_EQ(v->timeline(0)->viewEnd() - v->timeline(0)->viewStart(), after.second - after.first);

    // The Processes tree: the importer's pool under the exporter's, as a link row; choosing it
    // selects the importer's pool and highlights the exporter's, in the tree and the lanes.
    QDockWidget* dock = w.findChild<QDockWidget*>("processesDock");
    ASSERT_TRUE(dock && dock->isVisible());
    ProcessTreeModel* m = v->treeModel();
    const auto& l = set.links.front();
    const QModelIndex exporterPool =
        m->indexFor(int(l.exporter), ProcessTreeModel::NodeKind::Pool, l.exportPool);
    ASSERT_TRUE(exporterPool.isValid());
    const QModelIndexList linkRows = m->linkRowsFor(int(l.importer), l.importPool);
    ASSERT_EQ(linkRows.size(), 1);
    EXPECT_EQ(linkRows.first().parent(), exporterPool);
    EXPECT_TRUE(linkRows.first().data().toString().startsWith(QStringLiteral("\u21c4")));
    v->tree()->setCurrentIndex(linkRows.first());
    EXPECT_EQ(v->activeProcess(), int(l.importer));
    auto laneOf = [&](size_t g, uint64_t pool) {
        return v->timeline(int(g))->snapshot().layout->laneOfPool(pool);
    };
    EXPECT_EQ(v->timeline(int(l.importer))->highlightedLane(), laneOf(l.importer, l.importPool));
    EXPECT_EQ(v->timeline(int(l.exporter))->highlightedLane(), laneOf(l.exporter, l.exportPool));
    EXPECT_TRUE(exporterPool.data(ProcessTreeModel::HighlightedRole).toBool());
    // The docks follow the process chosen.
    EXPECT_EQ(w.snapshot().path, v->timeline(int(l.importer))->snapshot().path);

    // Selecting the exporter's pool in its lanes highlights the importer's.
    v->selectPool(int(l.exporter), l.exportPool);
    EXPECT_EQ(w.snapshot().path, v->timeline(int(l.exporter))->snapshot().path);
    EXPECT_EQ(v->timeline(int(l.importer))->highlightedLane(), laneOf(l.importer, l.importPool));
    EXPECT_TRUE(m->indexFor(int(l.importer), ProcessTreeModel::NodeKind::Pool, l.importPool)
                    .data(ProcessTreeModel::HighlightedRole)
                    .toBool());
    // A stream highlights only itself.
    const StreamTimeline& st = v->timeline(int(l.exporter))->snapshot().timeline->streams.front();
    w.select({Selection::Stream, 0, st.info.handle, {}});
    EXPECT_EQ(v->timeline(int(l.importer))->highlightedLane(), -1);
    EXPECT_TRUE(v->highlightedPools().empty());

    // Opening one trace goes back to the single view, with the pools & streams dock.
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.openFile(sample("pools.poolscope"));
    ASSERT_TRUE(shown.wait(60000));
    EXPECT_EQ(w.modes()->mode(), WindowModes::Mode::Single);
    EXPECT_FALSE(dock->isVisible());
}

// A torchrun job recorded on one H100 (two ranks sharing GPU 0 through gloo: run.sh's gpt2_ddp
// on a one-GPU machine): the launcher, which never allocated, and its two ranks.
TEST(MultiProcessView, TorchrunRanksEachAGroupTheIdleLauncherCollapsed) {
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    const QStringList files = {sample("torchrun-rank1.poolscope"),
                               sample("torchrun-launcher.poolscope"),
                               sample("torchrun-rank0.poolscope")};
    ASSERT_TRUE(openAndWait(w, files));
    ASSERT_EQ(w.modes()->mode(), WindowModes::Mode::Processes);
    MultiProcessView* v = w.modes()->processes();
    const MergeTruth truth = mergeTruth(files);
    ASSERT_EQ(truth.tree.size(), 3u);
    // (Once seen with two groups under a loaded CI run, as the IPC pair's test was: the view's
    // problems say which file failed, and why.)
    ASSERT_EQ(v->processCount(), 3) << v->problemsText().toStdString();
    int firstBusy = -1;
    for (int g = 0; g < 3; ++g) {
        const size_t in = truth.tree[size_t(g)].input;
        const bool idle = truth.timelines[in]->eventCount == 0;
        EXPECT_EQ(v->groupCollapsed(g), idle) << g;
        EXPECT_EQ(v->groupTitle(g).contains(QStringLiteral("nothing allocated")), idle);
        if (!idle && firstBusy < 0) firstBusy = g;
        if (truth.tree[size_t(g)].depth > 0) {
            EXPECT_TRUE(v->groupTitle(g).contains(
                QStringLiteral("child of pid %1").arg(truth.inputs[in].process.parentPid)));
        }
    }
    // The launcher comes first (the ranks' parent) and is the idle one.
    EXPECT_TRUE(v->groupCollapsed(0));
    ASSERT_EQ(firstBusy, 1);
    // The docks follow the first process that allocated, not the launcher.
    EXPECT_EQ(v->activeProcess(), firstBusy);
    const size_t busyIn = truth.tree[size_t(firstBusy)].input;
    EXPECT_EQ(w.snapshot().timeline->eventCount, truth.timelines[busyIn]->eventCount);
    // The expanded ranks share the page; the collapsed launcher takes only its header.
    EXPECT_FALSE(v->timeline(0)->isVisible());
    EXPECT_TRUE(v->timeline(1)->isVisible());
    EXPECT_TRUE(v->timeline(2)->isVisible());
}

TEST(MultiProcessView, ADamagedFileIsNamedAndTheOthersStillOpen) {
    QTemporaryDir dir;
    const QString broken = dir.filePath("broken-rank.poolscope");
    {
        // The first half of a real trace: SQLite cannot read what is left.
        QFile in(sample("churn.poolscope"));
        ASSERT_TRUE(in.open(QIODevice::ReadOnly));
        const QByteArray bytes = in.readAll();
        QFile out(broken);
        ASSERT_TRUE(out.open(QIODevice::WriteOnly));
        out.write(bytes.left(bytes.size() / 2));
    }
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    QSignalSpy failed(w.modes()->processes(), &MultiProcessView::loadFailed);
    ASSERT_TRUE(
        openAndWait(w, {sample("ipc-parent.poolscope"), broken, sample("ipc-child.poolscope")}));
    MultiProcessView* v = w.modes()->processes();
    EXPECT_EQ(v->processCount(), 2);
    ASSERT_EQ(failed.size(), 1);
    EXPECT_FALSE(failed.first().at(1).toBool()); // two of the three opened
    const QStringList problems = failed.first().first().toStringList();
    ASSERT_EQ(problems.size(), 1);
    EXPECT_TRUE(problems.first().contains("broken-rank.poolscope"))
        << problems.first().toStdString();
    EXPECT_TRUE(v->problemsText().contains("broken-rank.poolscope"));
    auto* box = w.findChild<QMessageBox*>("loadErrorBox");
    ASSERT_NE(box, nullptr);
    EXPECT_TRUE(box->text().contains(broken));
    box->close();

    // A copy of the real child trace whose event_counts table lies (a hand-damaged copy): it
    // opens with what is intact, is named as damaged, and is still linked to its parent.
    const QString lying = dir.filePath("hand-damaged-child.poolscope");
    ASSERT_TRUE(QFile::copy(sample("ipc-child.poolscope"), lying));
    QFile::setPermissions(lying, QFile::ReadOwner | QFile::WriteOwner);
    {
        sqlite3* db = nullptr;
        ASSERT_EQ(sqlite3_open(lying.toUtf8().constData(), &db), SQLITE_OK);
        EXPECT_EQ(sqlite3_exec(db, "UPDATE event_counts SET count = 4611686018427387904", nullptr,
                               nullptr, nullptr),
                  SQLITE_OK);
        sqlite3_close(db);
    }
    failed.clear();
    ASSERT_TRUE(openAndWait(w, {sample("ipc-parent.poolscope"), lying}));
    EXPECT_EQ(v->processCount(), 2);
    ASSERT_EQ(failed.size(), 1);
    EXPECT_TRUE(failed.first().first().toStringList().join(' ').contains(
        "hand-damaged-child.poolscope is damaged"));
    EXPECT_EQ(
        v->processes().links.size(),
        mergeTruth({sample("ipc-parent.poolscope"), sample("ipc-child.poolscope")}).links.size());
    if (auto* b = w.findChild<QMessageBox*>("loadErrorBox")) b->close();

    // Nothing readable: the window stays as it was and says why.
    QSignalSpy loadFailed(&w, &MainWindow::loadFailed);
    w.openFiles({broken, dir.filePath("missing.poolscope")});
    ASSERT_TRUE(loadFailed.wait(30000));
    EXPECT_TRUE(loadFailed.first().first().toString().contains("missing.poolscope"));
    EXPECT_TRUE(loadFailed.first().first().toString().contains("broken-rank.poolscope"));
    EXPECT_EQ(w.modes()->mode(), WindowModes::Mode::Processes);
    EXPECT_EQ(v->processCount(), 2); // what was shown stays
}

TEST(DiffTableModel, RealRunsUnderTheModelTesterMatchTheCoreDiff) {
    const auto r = loadAll({sample("churn.poolscope"), sample("pools.poolscope")}, true);
    ASSERT_TRUE(r[0].report && r[1].report);
    auto d = std::make_shared<const interop::TraceDiff>(
        interop::diffTraces({r[0].report.get(), r[0].snap.timeline.get(), r[0].snap.stacks.get()},
                            {r[1].report.get(), r[1].snap.timeline.get(), r[1].snap.stacks.get()}));
    DiffTableModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.setDiff(d);
    model.setShowUnchanged(true);
    // Every pool of the diff, every value, as core formats it.
    const QModelIndex pools = model.index(1, 0);
    ASSERT_EQ(pools.data().toString(), QStringLiteral("Pools"));
    ASSERT_EQ(model.rowCount(pools), int(d->pools.size()));
    for (int e = 0; e < model.rowCount(pools); ++e) {
        const interop::DiffEntity& ent = d->pools[size_t(e)];
        const QModelIndex row = model.index(e, 0, pools);
        EXPECT_EQ(row.data().toString().toStdString(), ent.key);
        ASSERT_EQ(model.rowCount(row), int(ent.values.size()));
        for (int k = 0; k < model.rowCount(row); ++k) {
            const interop::DiffValue& val = ent.values[size_t(k)];
            EXPECT_EQ(model.index(k, DiffTableModel::A, row).data().toString().toStdString(),
                      interop::diffValueText(val, true));
            EXPECT_EQ(model.index(k, DiffTableModel::B, row).data().toString().toStdString(),
                      interop::diffValueText(val, false));
            const QModelIndex delta = model.index(k, DiffTableModel::Delta, row);
            EXPECT_EQ(delta.data().toString().toStdString(), interop::diffDeltaText(val));
            const int dir = interop::diffDirection(val);
            const QVariant colour = delta.data(Qt::ForegroundRole);
            EXPECT_EQ(colour.isValid(),
                      dir != 0 || (val.unit == interop::DiffValue::Unit::Text && val.changed()));
            if (dir != 0) {
                const QColor c = colour.value<QBrush>().color();
                EXPECT_EQ(dir > 0, c.red() > c.green()) << val.metric; // red up, green down
            }
        }
    }
    // Only what differs: fewer rows, none unchanged.
    model.setShowUnchanged(false);
    int shown = 0;
    for (int e = 0; e < model.rowCount(model.index(1, 0)); ++e) {
        const QModelIndex row = model.index(e, 0, model.index(1, 0));
        for (int k = 0; k < model.rowCount(row); ++k) {
            ++shown;
            EXPECT_FALSE(model.index(k, DiffTableModel::Delta, row).data().toString() ==
                         QStringLiteral("0"));
        }
    }
    size_t changed = 0;
    for (const auto& ent : d->pools)
        for (const auto& val : ent.values)
            changed += val.changed();
    EXPECT_EQ(size_t(shown), changed);
}

// Two runs larger than the window holds (POOLSCOPE_WINDOW_MAX_EVENTS at its floor; generated
// traces of 300,000 and 400,000 events): the plots show their beginnings, and the table the whole
// runs' figures, as `poolscope diff` takes them (one streaming read each), not the beginnings'.
TEST(CompareView, RunsLargerThanTheWindowHoldsAreComparedWhole) {
    const QString pa = synth::syntheticTracePath(300000), pb = synth::syntheticTracePath(400000);
    auto whole = [](const QString& path, Report& report, interop::DiffFacts& facts) {
        auto r = TraceReader::open(path.toStdString());
        ASSERT_TRUE(r);
        auto st = (*r)->stacks();
        ASSERT_TRUE(st);
        auto got = interop::readForDiff(**r, &*st, path.toStdString(), {}, {});
        ASSERT_TRUE(got);
        report = std::move(got->report);
        facts = std::move(got->facts);
    };
    Report repA, repB;
    interop::DiffFacts factsA, factsB;
    whole(pa, repA, factsA);
    whole(pb, repB, factsB);
    const std::string want = interop::diffToJson(
        interop::diffTraces({&repA, nullptr, nullptr, &factsA}, {&repB, nullptr, nullptr, &factsB}));
    qputenv("POOLSCOPE_WINDOW_MAX_EVENTS", "100000");
    {
        MainWindow w;
        w.resize(1600, 1000);
        w.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
        QSignalSpy shown(&w, &MainWindow::snapshotShown);
        w.compareFiles(pa, pb);
        ASSERT_TRUE(shown.wait(120000));
        ASSERT_EQ(w.modes()->mode(), WindowModes::Mode::Compare);
        CompareView* c = w.modes()->compare();
        EXPECT_TRUE(c->snapshotA().timeline->limited);
        EXPECT_TRUE(c->snapshotB().timeline->limited);
        const auto d = c->model()->diff();
        ASSERT_NE(d, nullptr);
        EXPECT_EQ(interop::diffToJson(*d), want);
        // The events compared are all of each trace's, not the 100,000 the plots hold.
        ASSERT_FALSE(d->totals.empty());
        const interop::DiffValue& events = d->totals[1];
        ASSERT_EQ(events.metric, "events");
        EXPECT_EQ(*events.a, repA.eventCount);
        EXPECT_EQ(*events.b, repB.eventCount);
        EXPECT_GT(*events.a, 200000u);
        EXPECT_GT(*events.b, *events.a);
        // Each plot's title says it holds the beginning and that the table compares everything.
        const QString title = c->findChild<QLabel*>(QStringLiteral("plotTitleA"))->text();
        EXPECT_TRUE(title.contains(QString::fromStdString(formatCount(repA.eventCount) + " events over")))
            << title.toStdString();
        EXPECT_TRUE(title.contains(QStringLiteral("all of them compared in the table")));
        if (const char* dir = std::getenv("POOLSCOPE_SCREENSHOT_DIR"))
            w.grab().save(QString::fromUtf8(dir) + QStringLiteral("/compare-large.png"));
    }
    qunsetenv("POOLSCOPE_WINDOW_MAX_EVENTS");
}

TEST(CompareView, TwoRunsPlotsAlignedAndTheDiffTable) {
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(QTest::qWaitForWindowExposed(&w));
    QSignalSpy shown(&w, &MainWindow::snapshotShown);
    w.compareFiles(sample("churn.poolscope"), sample("pools.poolscope"));
    ASSERT_TRUE(shown.wait(60000));
    ASSERT_EQ(w.modes()->mode(), WindowModes::Mode::Compare);
    for (QDockWidget* d : w.findChildren<QDockWidget*>())
        EXPECT_FALSE(d->isVisible()) << d->objectName().toStdString();
    CompareView* c = w.modes()->compare();
    // Neither has NVTX ranges: lined up by start.
    const auto& ta = *c->snapshotA().timeline;
    const auto& tb = *c->snapshotB().timeline;
    EXPECT_EQ(c->alignment().basis, interop::RunAlignment::Basis::Start);
    EXPECT_EQ(c->plotA()->origin(), ta.t0);
    EXPECT_EQ(c->plotB()->origin(), tb.t0);
    EXPECT_FALSE(c->alignChoice()->isEnabled());
    // One time axis and one byte scale.
    c->setViewRange(1'000'000, 5'000'000);
    const QCPRange ra = c->plotA()->plot()->xAxis->range(), rb = c->plotB()->plot()->xAxis->range();
    EXPECT_DOUBLE_EQ(ra.lower, rb.lower);
    EXPECT_DOUBLE_EQ(ra.upper, rb.upper);
    EXPECT_DOUBLE_EQ(c->plotA()->plot()->yAxis->range().upper,
                     c->plotB()->plot()->yAxis->range().upper);
    // The table is the core diff of these two files.
    const auto d = c->model()->diff();
    ASSERT_NE(d, nullptr);
    auto ra2 = TraceReader::open(sample("churn.poolscope").toStdString());
    auto rb2 = TraceReader::open(sample("pools.poolscope").toStdString());
    const Report repA = interop::reportForDiff(**ra2, ta, c->snapshotA().path.toStdString());
    const Report repB = interop::reportForDiff(**rb2, tb, c->snapshotB().path.toStdString());
    const auto want = interop::diffTraces({&repA, &ta, c->snapshotA().stacks.get()},
                                          {&repB, &tb, c->snapshotB().stacks.get()});
    EXPECT_EQ(interop::diffToJson(*d), interop::diffToJson(want));
    // View > Zoom In: both plots, about the middle.
    w.modes()->zoomBy(2.0);
    EXPECT_EQ(c->viewRange().second - c->viewRange().first, 2'000'000);
    EXPECT_DOUBLE_EQ(c->plotA()->plot()->xAxis->range().lower,
                     c->plotB()->plot()->xAxis->range().lower);
    // Choosing a pool matched in both runs highlights it in both plots (the other pools dimmed).
    const QModelIndex pools = c->model()->index(1, 0);
    const QModelIndex both = findRow(
        *c->model(),
        [&](const QModelIndex& i) {
            return c->model()->kindOf(i) == DiffTableModel::RowKind::Pool &&
                   i.data(DiffTableModel::HandleARole).toULongLong() &&
                   i.data(DiffTableModel::HandleBRole).toULongLong();
        },
        pools);
    ASSERT_TRUE(both.isValid());
    auto dimmed = [](WatermarkPlot* p) {
        int n = 0;
        for (int g = 0; g < p->plot()->graphCount(); ++g)
            n += p->plot()->graph(g)->pen().color().alpha() == 70;
        return n;
    };
    EXPECT_EQ(dimmed(c->plotB()), 0);
    c->table()->setCurrentIndex(both);
    // pools.poolscope has two explicit pools besides the default one: theirs are dimmed now.
    EXPECT_GT(dimmed(c->plotB()), 0);
    EXPECT_EQ(dimmed(c->plotA()), 0); // churn has the default pool only

    // Closing goes back to where the window was, the docks as they were.
    c->findChild<QPushButton*>("closeComparison")->click();
    EXPECT_EQ(w.modes()->mode(), WindowModes::Mode::Single);
    EXPECT_TRUE(w.findChild<QDockWidget*>("detailsDock")->isVisible());
    EXPECT_TRUE(w.findChild<QDockWidget*>("eventsDock")->isVisible());
}

TEST(CompareView, LinesUpTheFirstCommonNvtxRange) {
    const auto r = loadAll({sample("callsites.poolscope"), sample("callsites.poolscope")}, true);
    CompareView c;
    c.resize(1400, 900);
    c.setTraces(r[0], r[1]);
    const StackTables* st = r[0].snap.stacks.get();
    const auto common = interop::commonNvtxRanges(st, r[1].snap.stacks.get());
    ASSERT_FALSE(common.empty());
    ASSERT_EQ(c.alignChoice()->count(), int(common.size()) + 1);
    const auto want =
        interop::alignRuns(*r[0].snap.timeline, st, *r[1].snap.timeline, r[1].snap.stacks.get());
    EXPECT_EQ(c.alignment().basis, interop::RunAlignment::Basis::NvtxRange);
    EXPECT_EQ(c.alignment().range, common.front());
    EXPECT_EQ(c.plotA()->origin(), want.originA);
    EXPECT_EQ(c.plotB()->origin(), want.originB);
    // A run against itself: every call site the same, none listed but counted.
    const QModelIndex sites = c.model()->index(3, 0);
    EXPECT_EQ(c.model()->rowCount(sites), 0);
    ASSERT_NE(c.model()->diff(), nullptr);
    EXPECT_EQ(
        c.model()->index(3, DiffTableModel::Delta).data().toString(),
        QStringLiteral("%1 with no difference not listed").arg(c.model()->diff()->sites.size()));
    // By start instead.
    c.alignChoice()->setCurrentIndex(0);
    emit c.alignChoice()->activated(0);
    EXPECT_EQ(c.alignment().basis, interop::RunAlignment::Basis::Start);
    EXPECT_EQ(c.plotA()->origin(), r[0].snap.timeline->t0);
}

TEST(CompareView, AFileThatCannotBeReadIsNamed) {
    QTemporaryDir dir;
    const QString junk = dir.filePath("not-a-trace.poolscope");
    QFile f(junk);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("this is not a trace\n");
    f.close();
    MainWindow w;
    QSignalSpy failed(&w, &MainWindow::loadFailed);
    w.compareFiles(sample("churn.poolscope"), junk);
    ASSERT_TRUE(failed.wait(30000));
    EXPECT_TRUE(failed.first().first().toString().contains("not-a-trace.poolscope"));
    EXPECT_EQ(w.modes()->mode(), WindowModes::Mode::Single);
    auto* box = w.findChild<QMessageBox*>("loadErrorBox");
    ASSERT_NE(box, nullptr);
    EXPECT_TRUE(box->text().contains(junk));
}
