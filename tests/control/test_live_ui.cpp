// The live session's GUI parts, offscreen, against the in-process control server and the fake
// driver: the Knobs panel shows the driver's read-back, live events reach snapshots, the launch
// dialog builds a spec, the QProcess wrapper reports through signals, Attach lists targets.
#include "AttachDialog.h"
#include "KnobsPanel.h"
#include "LaunchDialog.h"
#include "EventTableModel.h"
#include "EventsPanel.h"
#include "LiveController.h"
#include "LiveEventLog.h"
#include "LiveSession.h"
#include "MainWindow.h"
#include "ServerFixture.h"
#include "TargetProcess.h"
#include "WhatIfPanel.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QTableView>
#include <QTest>
#include <QThread>
#include <functional>
#include <set>

using namespace poolscope;
using namespace poolscope::control;
using namespace poolscope::control::test;
using namespace poolscope::ui;

namespace {

// Spins the event loop until cond holds or the deadline passes.
bool waitFor(const std::function<bool()>& cond, int ms = 5000) {
    QElapsedTimer t;
    t.start();
    while (!cond()) {
        if (t.elapsed() > ms) return false;
        QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
        QThread::msleep(2);
    }
    return true;
}

// n events on one stream of `pool`: 4 KiB allocated, then freed, n / 2 times.
std::vector<Event> allocFreePairs(uint64_t pool, uint64_t n) {
    std::vector<Event> ev;
    for (uint64_t i = 0; i < n; ++i) {
        Event e;
        e.seq = i + 1;
        e.tsNs = 1000 + int64_t(i) * 10;
        e.kind = i % 2 ? EventKind::Free : EventKind::Alloc;
        e.pool = pool;
        e.stream = 0x5000;
        e.ptr = 0x7000000 + (i / 2) * 4096;
        e.size = 4096;
        ev.push_back(e);
    }
    return ev;
}

class LiveUiTest : public ServerTest {
protected:
    void attach(LiveSession& s) {
        startServer();
        QString err = s.attach(QString::fromStdString(server_->socketPath()));
        ASSERT_TRUE(err.isEmpty()) << err.toStdString();
    }
};

} // namespace

TEST_F(LiveUiTest, KnobsPanelShowsDriverReadBack) {
    LiveSession session;
    attach(session);
    KnobsPanel panel(&session);
    ASSERT_EQ(panel.poolBox()->count(), 2);
    EXPECT_TRUE(panel.isEnabled());
    panel.selectPool(0x1000);
    EXPECT_EQ(panel.currentPool(), 0x1000u);
    EXPECT_TRUE(panel.reuseToggle(PoolAttr::ReuseAllowOpportunistic)->isChecked());

    driver_.alloc(0x1000, 300 << 20);
    driver_.free(0x1000, 200 << 20);
    panel.presetMax()->click();
    ASSERT_TRUE(waitFor([&] { return driver_.state(0x1000).releaseThreshold == ~uint64_t{0}; }));
    ASSERT_TRUE(waitFor([&] { return panel.statusLabel()->text().contains("read-back"); }));
    EXPECT_TRUE(panel.reportedLabel()->text().contains("max (UINT64_MAX)"))
        << panel.reportedLabel()->text().toStdString();

    // The panel shows what the driver reports, even when it is not what was asked.
    driver_.clampThresholdTo(1 << 30);
    panel.thresholdValue()->setValue(4);
    panel.thresholdUnit()->setCurrentIndex(3); // GiB
    panel.applyThreshold()->click();
    ASSERT_TRUE(waitFor([&] { return panel.statusLabel()->text().contains("requested"); }));
    EXPECT_TRUE(panel.statusLabel()->text().contains("1.00 GiB"))
        << panel.statusLabel()->text().toStdString();
    EXPECT_TRUE(panel.reportedLabel()->text().contains("threshold 1.00 GiB"));

    panel.reuseToggle(PoolAttr::ReuseAllowOpportunistic)->click(); // user unticks it
    ASSERT_TRUE(waitFor([&] { return !driver_.state(0x1000).reuseAllowOpportunistic; }));

    panel.trimValue()->setValue(0);
    panel.trimButton()->click();
    ASSERT_TRUE(waitFor([&] { return panel.statusLabel()->text().contains("Trimmed"); }));
    EXPECT_EQ(driver_.state(0x1000).reservedCurrent, 100u << 20);
    panel.resetButton()->click();
    ASSERT_TRUE(waitFor([&] { return panel.statusLabel()->text().contains("reset"); }));

    auto ev = driver_.knobChanges();
    ASSERT_EQ(ev.size(), 5u);
    for (const auto& e : ev) {
        EXPECT_EQ(e.kind, EventKind::KnobChange);
        EXPECT_EQ(e.variant, uint8_t(KnobOrigin::Gui));
    }
}

TEST_F(LiveUiTest, KnobsPanelShowsRefusals) {
    LiveSession session;
    attach(session);
    KnobsPanel panel(&session);
    driver_.failNextSet("CUDA_ERROR_NOT_PERMITTED: operation not permitted");
    panel.presetZero()->click();
    ASSERT_TRUE(waitFor([&] { return panel.statusLabel()->text().startsWith("Refused"); }));
    EXPECT_TRUE(panel.statusLabel()->text().contains("CUDA_ERROR_NOT_PERMITTED"));
}

TEST_F(LiveUiTest, LiveEventsReachSnapshotsAndEndIsReported) {
    LiveSession session;
    session.setRefreshIntervalMs(20);
    attach(session);
    TraceSnapshot last;
    QObject::connect(&session, &LiveSession::snapshotReady,
                     [&](const TraceSnapshot& s) { last = s; });
    QString endedWhy;
    QObject::connect(&session, &LiveSession::ended, [&](const QString& w) { endedWhy = w; });
    server_->onEvents(allocFreePairs(0x1000, 100));
    ASSERT_TRUE(waitFor([&] { return last.valid() && last.timeline->eventCount == 100; }));
    EXPECT_EQ(session.eventsReceived(), 100u);
    EXPECT_EQ(last.timeline->allocations.size(), 50u);
    EXPECT_EQ(last.process.pid, 4242);
    server_->stop(); // the target exits
    ASSERT_TRUE(waitFor([&] { return !endedWhy.isEmpty(); }));
    EXPECT_FALSE(session.attached());
}

TEST_F(LiveUiTest, AttachDialogListsTargets) {
    startServer();
    AttachDialog d(nullptr, QString::fromStdString(dir_));
    ASSERT_EQ(d.list()->count(), 1);
    EXPECT_EQ(d.socketPath().toStdString(), server_->socketPath());
    EXPECT_TRUE(d.list()->item(0)->text().contains(QString::number(getpid())));
    server_->stop();
    d.refresh();
    EXPECT_EQ(d.list()->count(), 0);
    EXPECT_TRUE(d.socketPath().isEmpty());
}

TEST(LaunchDialogTest, BuildsSpecFromFields) {
    LaunchDialog d;
    d.programEdit()->setText("/usr/bin/python3");
    d.argumentsEdit()->setText("train.py --name \"my run\" -x");
    d.workingDirEdit()->setText("/tmp");
    d.environmentEdit()->setPlainText(
        "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync\n# comment\n\nA=b=c\n");
    d.traceEdit()->setText("/tmp/t.poolscope");
    LaunchSpec s = d.spec();
    EXPECT_EQ(s.program, "/usr/bin/python3");
    EXPECT_EQ(s.args, (std::vector<std::string>{"train.py", "--name", "my run", "-x"}));
    ASSERT_EQ(s.env.size(), 2u);
    EXPECT_EQ(s.env[0].first, "PYTORCH_CUDA_ALLOC_CONF");
    EXPECT_EQ(s.env[1].second, "b=c");
    EXPECT_TRUE(s.listen);
    EXPECT_EQ(s.tracePath, "/tmp/t.poolscope");

    d.programEdit()->clear();
    d.accept();
    EXPECT_EQ(d.result(), QDialog::Rejected) << "an incomplete spec is not accepted";
    EXPECT_FALSE(d.errorLabel()->text().isEmpty());
}

TEST(TargetProcessTest, ReportsOutputAndExit) {
    TargetProcess p;
    QString out, err;
    int code = -1;
    qint64 pid = 0;
    QObject::connect(&p, &TargetProcess::started, [&](qint64 x) { pid = x; });
    QObject::connect(&p, &TargetProcess::output,
                     [&](const QString& t, bool e) { (e ? err : out) += t; });
    QObject::connect(&p, &TargetProcess::finished, [&](int c) { code = c; });
    LaunchPlan plan;
    plan.program = "/bin/sh";
    plan.argv = {"/bin/sh", "-c", "echo hello; echo oops >&2; echo $POOLSCOPE_TEST_VAR; exit 3"};
    plan.env = {"POOLSCOPE_TEST_VAR=from-plan", "PATH=/usr/bin:/bin"};
    p.start(plan);
    ASSERT_TRUE(waitFor([&] { return code != -1; }));
    EXPECT_GT(pid, 0);
    EXPECT_EQ(code, 3);
    EXPECT_TRUE(out.contains("hello"));
    EXPECT_TRUE(out.contains("from-plan"));
    EXPECT_TRUE(err.contains("oops"));

    QString crash, failed;
    QObject::connect(&p, &TargetProcess::crashed, [&](const QString& r) { crash = r; });
    plan.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
    p.start(plan);
    ASSERT_TRUE(waitFor([&] { return !crash.isEmpty(); }));

    QObject::connect(&p, &TargetProcess::failedToStart, [&](const QString& m) { failed = m; });
    plan.program = "/nonexistent/program";
    plan.argv = {plan.program};
    p.start(plan);
    ASSERT_TRUE(waitFor([&] { return !failed.isEmpty(); }));
    EXPECT_TRUE(failed.contains("/nonexistent/program"));
}

// The GUI's runner execs the same way as `poolscope record` (ChildExec): the program gets the
// plan's environment plus POOLSCOPE_ROOT_PID = its own pid (test_launchspec.cpp compares this
// environment with record's).
TEST(TargetProcessTest, ExecsThePlanWithItsOwnRootPid) {
    TargetProcess p;
    QByteArray out;
    int code = -1;
    qint64 pid = 0;
    QObject::connect(&p, &TargetProcess::started, [&](qint64 x) { pid = x; });
    QObject::connect(&p, &TargetProcess::output, [&](const QString& t, bool e) {
        if (!e) out += t.toLocal8Bit();
    });
    QObject::connect(&p, &TargetProcess::finished, [&](int c) { code = c; });
    LaunchSpec s;
    s.program = "env"; // a bare name, found in PATH
    s.args = {"-0"};
    s.tracePath = "/tmp/t.poolscope";
    s.collectorPath = "/opt/libpoolscope_collector.so";
    auto plan = buildLaunchPlan(s, currentEnvironment());
    ASSERT_TRUE(plan);
    p.start(*plan);
    ASSERT_TRUE(waitFor([&] { return code != -1; }));
    EXPECT_EQ(code, 0);
    ASSERT_GT(pid, 0);
    std::set<std::string> got;
    for (const QByteArray& e : out.split('\0'))
        if (!e.isEmpty()) got.insert(e.toStdString());
    auto want = plan->environmentFor(pid);
    EXPECT_EQ(got, std::set<std::string>(want.begin(), want.end()));
    EXPECT_TRUE(got.count(std::string(kEnvRootPid) + "=" + std::to_string(pid)));
}

TEST_F(LiveUiTest, ControllerFeedsTheMainWindow) {
    startServer();
    MainWindow w;
    LiveController* live = installLiveSession(&w);
    bool hasMenu = false;
    for (QAction* a : w.menuBar()->actions())
        hasMenu = hasMenu || a->text().contains("Live");
    EXPECT_TRUE(hasMenu);
    live->session()->setRefreshIntervalMs(20);
    QString err = live->attach(QString::fromStdString(server_->socketPath()));
    ASSERT_TRUE(err.isEmpty()) << err.toStdString();
    EXPECT_FALSE(live->knobsDock()->isHidden());
    std::vector<Event> ev(10);
    for (uint64_t i = 0; i < ev.size(); ++i) {
        ev[i].seq = i + 1;
        ev[i].tsNs = 5000 + int64_t(i);
        ev[i].kind = EventKind::Alloc;
        ev[i].pool = 0x1000;
        ev[i].ptr = 0x1000000 + i * 4096;
        ev[i].size = 4096;
    }
    server_->onEvents(ev);
    ASSERT_TRUE(waitFor(
        [&] { return w.snapshot().valid() && w.snapshot().timeline->eventCount == ev.size(); }));
    live->knobs()->presetMax()->click();
    ASSERT_TRUE(waitFor([&] { return driver_.state(0x1000).releaseThreshold == ~uint64_t{0}; }));
}

// The events table during a live run (it stayed empty: nothing gave it a source): it lists
// the events as they arrive and, scrolled to its end, follows the newest.
TEST_F(LiveUiTest, EventsTableFillsAndFollowsTheRun) {
    startServer();
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    LiveController* live = installLiveSession(&w);
    live->session()->setRefreshIntervalMs(20);
    ASSERT_TRUE(live->attach(QString::fromStdString(server_->socketPath())).isEmpty());
    EventTableModel* model = w.events()->model();
    std::vector<Event> ev = allocFreePairs(0x1000, 400);
    server_->onEvents(std::vector<Event>(ev.begin(), ev.begin() + 200));
    ASSERT_TRUE(waitFor([&] { return model->rowCount() == 200; }))
        << "rows: " << model->rowCount();
    EXPECT_TRUE(w.events()->live());
    // Not scrolled by the user: the table follows the run to its newest row.
    server_->onEvents(std::vector<Event>(ev.begin() + 200, ev.end()));
    ASSERT_TRUE(waitFor([&] { return model->rowCount() == 400; }))
        << "rows: " << model->rowCount();
    QTableView* view = w.events()->view();
    ASSERT_TRUE(waitFor([&] {
        const int last = view->rowAt(view->viewport()->height() - 2);
        const Event* e = model->eventAt(last);
        return e && e->seq == 400;
    })) << "the newest event is not in view";
    // Scrolled up by the user: it stays on the rows shown.
    view->scrollToTop();
    const Event* top = model->eventAt(view->rowAt(0));
    ASSERT_NE(top, nullptr);
    const uint64_t topSeq = top->seq;
    std::vector<Event> more = allocFreePairs(0x1000, 500);
    server_->onEvents(std::vector<Event>(more.begin() + 400, more.end()));
    ASSERT_TRUE(waitFor([&] { return model->rowCount() == 500; }));
    EXPECT_EQ(model->eventAt(view->rowAt(0))->seq, topSeq);
    // The filter boxes' lists stay as they are while no stream or pool comes or goes: they were
    // cleared and refilled at every refresh, under the user's open box.
    auto* streams = w.events()->findChildren<QComboBox*>().value(0);
    ASSERT_NE(streams, nullptr);
    QSignalSpy removed(streams->model(), &QAbstractItemModel::rowsRemoved);
    std::vector<Event> later = allocFreePairs(0x1000, 600);
    server_->onEvents(std::vector<Event>(later.begin() + 500, later.end()));
    ASSERT_TRUE(waitFor([&] { return model->rowCount() == 600; }));
    EXPECT_EQ(removed.count(), 0);
    // For a look at the live window (the fake driver's pools, not a GPU's).
    if (const char* dir = std::getenv("POOLSCOPE_SCREENSHOT_DIR")) {
        view->scrollToBottom();
        QTest::qWait(300);
        w.grab().save(QString::fromUtf8(dir) + "/live-fake-driver.png");
    }
}

// The live table holds the latest events only: whole blocks of the oldest go once the newer
// ones fill the capacity, and a query over them says what it is drawn from.
TEST(LiveEventLogTest, KeepsTheNewestEventsWithinItsCapacity) {
    LiveEventLog log(10, 4);
    std::vector<Event> ev = allocFreePairs(0x1000, 25);
    log.append(std::span(ev).first(7));
    log.append(std::span(ev).subspan(7));
    EXPECT_EQ(log.received(), 25u);
    EXPECT_GE(log.size(), 10u);
    EXPECT_LT(log.size(), 14u); // at most one block over the capacity
    std::atomic<bool> cancel{false};
    EventQueryResult all = log.provider()->page(EventFilter{}, 0, 1000, cancel);
    ASSERT_EQ(all.events.size(), log.size());
    EXPECT_EQ(all.events.back().seq, 25u);
    EXPECT_EQ(all.events.front().seq, 25u - log.size() + 1);
    for (size_t i = 1; i < all.events.size(); ++i)
        EXPECT_EQ(all.events[i].seq, all.events[i - 1].seq + 1);
    EXPECT_FALSE(all.note.isEmpty());
    // Filters apply; the count is the matches held, and pages number them in seq order.
    EventFilter frees;
    frees.kindMask = EventFilter::bit(EventKind::Free);
    const uint64_t nFrees = log.provider()->count(frees, cancel).total;
    ASSERT_GT(nFrees, 3u);
    EventQueryResult capped = log.provider()->page(frees, 0, 3, cancel);
    ASSERT_EQ(capped.events.size(), 3u);
    EXPECT_TRUE(capped.truncated);
    EventQueryResult last = log.provider()->page(frees, nFrees - 3, 3, cancel);
    ASSERT_EQ(last.events.size(), 3u);
    EXPECT_FALSE(last.truncated);
    EXPECT_EQ(last.events.back().seq, 24u);
    for (const Event& e : capped.events)
        EXPECT_EQ(e.kind, EventKind::Free);
    // A provider sees the events held when it was made, not later ones.
    EventProvider before = log.provider();
    std::vector<Event> later = allocFreePairs(0x1000, 27);
    log.append(std::span(later).subspan(25));
    EXPECT_EQ(before->page(EventFilter{}, 0, 1000, cancel).events.back().seq, 25u);
    EXPECT_EQ(log.provider()->page(EventFilter{}, 0, 1000, cancel).events.back().seq, 27u);
    log.clear();
    EXPECT_EQ(log.size(), 0u);
    EXPECT_TRUE(log.provider()->page(EventFilter{}, 0, 1000, cancel).events.empty());
}

int main(int argc, char** argv) {
    if (!std::getenv("QT_QPA_PLATFORM")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

// A pool the target had before the window attached but never announced (a device's default
// pool is never created: the collector learns it at its first use, as with PyTorch on the H100):
// the first events naming it make the session ask, and the Knobs panel and the timeline then
// know its kind.
TEST_F(LiveUiTest, APoolFirstNamedByEventsIsLearntFromTheTarget) {
    LiveSession session;
    session.setRefreshIntervalMs(20);
    KnobsPanel panel(&session);
    attach(session);
    ASSERT_EQ(session.pool(0x3000), nullptr);
    driver_.addPool(0x3000, 0, PoolKind::Explicit);
    TraceSnapshot last;
    QObject::connect(&session, &LiveSession::snapshotReady,
                     [&](const TraceSnapshot& s) { last = s; });
    server_->onEvents(allocFreePairs(0x3000, 10));
    ASSERT_TRUE(waitFor([&] { return session.pool(0x3000) != nullptr; }));
    ASSERT_TRUE(waitFor([&] {
        if (!last.valid()) return false;
        const PoolTimeline* p = last.timeline->pool(0x3000);
        return p && p->info.kind == PoolKind::Explicit;
    }));
    bool listed = false;
    for (int i = 0; i < panel.poolBox()->count(); ++i)
        listed = listed || panel.poolBox()->itemData(i).toULongLong() == 0x3000;
    EXPECT_TRUE(listed);
}

// What if in a live session (issue #14): the panel predicts the running program's pool from the
// events received so far, and "Apply to the running program" sets the chosen threshold and
// policies through the Knobs panel's own requests; the driver's state is what counts. Outside
// the session the button is disabled and says why.
TEST_F(LiveUiTest, WhatIfAppliesTheChosenSettingsToTheRunningProgram) {
    startServer();
    MainWindow w;
    w.resize(1600, 1000);
    w.show();
    LiveController* live = installLiveSession(&w);
    live->session()->setRefreshIntervalMs(20);
    WhatIfPanel* p = w.whatIf();
    EXPECT_FALSE(p->applyButton()->isEnabled());
    EXPECT_TRUE(p->applyButton()->toolTip().contains("live session"));
    QString err = live->attach(QString::fromStdString(server_->socketPath()));
    ASSERT_TRUE(err.isEmpty()) << err.toStdString();
    w.showWhatIf();
    server_->onEvents(allocFreePairs(0x1000, 100));
    ASSERT_TRUE(waitFor([&] {
        return w.snapshot().valid() && w.snapshot().timeline->eventCount == 100;
    }));
    p->selectPool(0x1000);
    // The session's tape is refreshed at most every 2 s.
    ASSERT_TRUE(waitFor([&] { return p->tapeReady() && p->prediction() && !p->busy(); }, 10000));
    EXPECT_EQ(p->currentPool(), 0x1000u);
    EXPECT_EQ(p->tape()->allocSeq.size(), 50u);
    EXPECT_EQ(p->prediction()->peakLive, 4096u); // one 4 KiB block at a time
    ASSERT_TRUE(p->applyButton()->isEnabled());

    // 64 MiB typed, opportunistic reuse unticked, then applied.
    p->thresholdEdit()->setFocus();
    p->thresholdEdit()->selectAll();
    QTest::keyClicks(p->thresholdEdit(), "64 MiB");
    QTest::keyClick(p->thresholdEdit(), Qt::Key_Return);
    p->policyBox(PoolAttr::ReuseAllowOpportunistic)->click();
    ASSERT_TRUE(waitFor([&] { return !p->busy(); }));
    EXPECT_EQ(p->threshold(), uint64_t{64} << 20);
    ASSERT_TRUE(driver_.state(0x1000).reuseAllowOpportunistic);
    p->applyButton()->click();
    ASSERT_TRUE(waitFor([&] {
        const PoolState s = driver_.state(0x1000);
        return s.releaseThreshold == (uint64_t{64} << 20) && !s.reuseAllowOpportunistic;
    }));
    const PoolState s = driver_.state(0x1000);
    EXPECT_TRUE(s.reuseFollowEventDependencies);
    EXPECT_TRUE(s.reuseAllowInternalDependencies);
    EXPECT_EQ(driver_.state(0x2000).releaseThreshold, 0u); // the other pool is left alone
    // The Knobs panel made the requests and shows the driver's answers.
    EXPECT_FALSE(live->knobsDock()->isHidden());
    EXPECT_EQ(live->knobs()->currentPool(), 0x1000u);
    ASSERT_TRUE(waitFor([&] { return live->knobs()->statusLabel()->text().contains("read-back"); }));
    size_t fromGui = 0;
    for (const Event& e : driver_.knobChanges())
        fromGui += e.variant == uint8_t(KnobOrigin::Gui);
    EXPECT_EQ(fromGui, 4u);

    // The program ends: nothing left to apply to.
    server_->stop();
    ASSERT_TRUE(waitFor([&] { return !p->applyButton()->isEnabled(); }));
    EXPECT_FALSE(p->live());
}

// The live view named "GPU 0" without its model until the saved trace opened: the hello came
// before the target's first CUDA call on the device. Events naming a device the hello did not
// list make the session ask, and the timeline's device lane gets its name.
TEST_F(LiveUiTest, ADeviceFirstUsedAfterTheHelloIsNamed) {
    driver_.setDevices({});
    LiveSession session;
    session.setRefreshIntervalMs(20);
    attach(session);
    ASSERT_FALSE(session.knowsDevice(0));
    driver_.setDevices({{0, "Fake GPU 0", 80ull << 30, "GPU-0"}});
    TraceSnapshot last;
    QObject::connect(&session, &LiveSession::snapshotReady,
                     [&](const TraceSnapshot& s) { last = s; });
    std::vector<Event> ev = allocFreePairs(0x1000, 10);
    for (Event& e : ev)
        e.device = 0;
    server_->onEvents(ev);
    ASSERT_TRUE(waitFor([&] { return session.knowsDevice(0); }));
    ASSERT_TRUE(waitFor([&] {
        if (!last.valid()) return false;
        for (const view::Lane& l : last.layout->lanes)
            if (l.kind == LaneKind::Device && l.device == 0)
                return l.subtitle.find("Fake GPU 0") != std::string::npos;
        return false;
    }));
    ASSERT_EQ(last.timeline->devices.size(), 1u);
    EXPECT_EQ(last.timeline->devices[0].totalMemory, 80ull << 30);
}

// The live view knows each pool's reuse policies and threshold from the target's pool listing
// (the driver's values), not only from the first change the program makes.
TEST_F(LiveUiTest, PoolAttributesComeFromTheTargetsListing) {
    LiveSession session;
    session.setRefreshIntervalMs(20);
    attach(session);
    TraceSnapshot last;
    QObject::connect(&session, &LiveSession::snapshotReady,
                     [&](const TraceSnapshot& s) { last = s; });
    server_->onEvents(allocFreePairs(0x1000, 10));
    ASSERT_TRUE(waitFor([&] { return last.valid() && last.timeline->eventCount == 10; }));
    const PoolTimeline* p = last.timeline->pool(0x1000);
    ASSERT_NE(p, nullptr);
    for (const Series* s : {&p->reuseFollowEventDependencies, &p->reuseAllowOpportunistic,
                            &p->reuseAllowInternalDependencies, &p->releaseThreshold}) {
        ASSERT_FALSE(s->empty());
        EXPECT_EQ(s->t.front(), last.timeline->t0);
    }
    EXPECT_EQ(p->reuseAllowOpportunistic.valueAt(last.timeline->t1), 1u);
    EXPECT_EQ(p->releaseThreshold.valueAt(last.timeline->t1), 0u);
}
