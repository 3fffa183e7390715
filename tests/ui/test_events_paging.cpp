// The events table over more matches than it holds (issue #15): the exact row count, pages
// fetched as rows come into view, stale pages dropped on a filter change, sorting only where
// every match is held, and an event selected far from the start. The generated trace (20,000
// events) stands for a large one: the table's row cap and page size are lowered to match.
#include "EventsPanel.h"
#include "TestTrace.h"
#include "poolscope/TraceReader.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QScrollBar>
#include <QSignalSpy>
#include <QTableView>
#include <QTest>
#include <QThread>
#include <QToolButton>
#include <QWheelEvent>
#include <climits>
#include <gtest/gtest.h>

using namespace poolscope;
using namespace poolscope::ui;
using namespace poolscope::synth;

namespace {

constexpr size_t kCap = 1000, kPage = 100, kPages = 4;

// A hand-built source around the file's: page fetches past the first page wait, whatever the
// table's cancel flag says, until the test opens the gate (an old filter's page answering
// after the new filter's rows are shown).
class GatedSource final : public EventSource {
public:
    explicit GatedSource(EventProvider inner) : inner_(std::move(inner)) {}
    EventCountResult count(const EventFilter& f, const std::atomic<bool>& c) const override {
        return inner_->count(f, c);
    }
    EventQueryResult page(const EventFilter& f, uint64_t skip, size_t cap,
                          const std::atomic<bool>&) const override {
        if (skip > 0) {
            ++waiting;
            while (!open) QThread::msleep(2);
            --waiting;
        }
        return inner_->page(f, skip, cap, std::atomic<bool>{false});
    }
    bool countsCheaply(const EventFilter& f) const override { return inner_->countsCheaply(f); }
    mutable std::atomic<bool> open{true};
    mutable std::atomic<int> waiting{0};

private:
    EventProvider inner_;
};

class EventsPaging : public ::testing::Test {
protected:
    void SetUp() override {
        path_ = syntheticTracePath(20000);
        tl_ = loadTimeline(path_);
        ASSERT_TRUE(tl_);
        auto r = TraceReader::open(path_.toStdString());
        ASSERT_TRUE(r.ok());
        reader_ = std::move(*r);
        panel_.setPaging(kCap, kPage, kPages);
        panel_.resize(900, 400);
        panel_.show();
        ASSERT_TRUE(QTest::qWaitForWindowExposed(&panel_));
        // The whole trace, not the timeline's visible range.
        panel_.findChildren<QCheckBox*>().front()->setChecked(false);
    }

    bool open(std::shared_ptr<GatedSource>* gated = nullptr) {
        QSignalSpy done(&panel_, &EventsPanel::queryFinished);
        TraceSnapshot s = TraceSnapshot::fromTimeline(tl_, "synthetic");
        s.path = path_;
        EventProvider p = fileEventProvider(path_, tl_->t0, tl_->t1, tl_->eventCount);
        if (gated) {
            *gated = std::make_shared<GatedSource>(p);
            p = *gated;
        }
        panel_.setSource(s, p);
        return done.wait(30000);
    }
    bool requery(const std::function<void()>& change) {
        QSignalSpy done(&panel_, &EventsPanel::queryFinished);
        change();
        return done.wait(30000);
    }
    QAction* kindAction(const QString& text) {
        for (QAction* a : panel_.findChild<QToolButton*>()->menu()->actions())
            if (a->text() == text) return a;
        ADD_FAILURE() << "no kind action " << text.toStdString();
        return nullptr;
    }
    std::vector<Event> reference() {
        auto v = reader_->events(panel_.filter());
        EXPECT_TRUE(v.ok());
        return v ? *v : std::vector<Event>{};
    }
    // Repaints until every row in the window is fetched (pages come on worker threads).
    bool windowLoaded() {
        EventTableModel* m = panel_.model();
        for (int i = 0; i < 200; ++i) {
            panel_.view()->viewport()->repaint(); // data() asks for the missing pages
            bool all = true;
            for (int r = 0; r < m->rowCount(); ++r)
                if (m->base() + uint64_t(r) < m->totalRows() && !m->eventAt(r)) all = false;
            if (all) return true;
            QSignalSpy page(&panel_, &EventsPanel::pageLoaded);
            page.wait(500);
        }
        return false;
    }

    QString path_;
    std::shared_ptr<const Timeline> tl_;
    std::unique_ptr<TraceReader> reader_;
    EventsPanel panel_;
};

} // namespace

TEST_F(EventsPaging, RowCountIsTheExactCountAndTheEndShowsTheLastMatches) {
    ASSERT_TRUE(open());
    ASSERT_TRUE(panel_.paged());
    auto count = reader_->countMatching(panel_.filter());
    ASSERT_TRUE(count.ok());
    ASSERT_GT(*count, kCap);
    EXPECT_EQ(panel_.rowTotal(), *count);
    // The view holds a window of rows, never the count.
    EXPECT_LT(uint64_t(panel_.model()->rowCount()), *count);
    EXPECT_TRUE(panel_.pageScrollBar()->isVisible());
    EXPECT_TRUE(panel_.status()->text().contains(QLocale().toString(qulonglong(*count))))
        << panel_.status()->text().toStdString();
    const std::vector<Event> ref = reference();
    ASSERT_EQ(ref.size(), *count);

    QScrollBar* bar = panel_.pageScrollBar();
    bar->setValue(bar->maximum());
    EventTableModel* m = panel_.model();
    // Not fetched yet: a placeholder (the last page was never read).
    EXPECT_EQ(m->data(m->index(0, EventTableModel::Seq)).toString(), QStringLiteral("…"));
    ASSERT_TRUE(windowLoaded());
    const uint64_t last = m->base() + uint64_t(m->rowCount()) - 1;
    EXPECT_EQ(last, ref.size() - 1) << "the window ends at the last match";
    for (int r = 0; r < m->rowCount(); ++r)
        EXPECT_EQ(m->eventAt(r)->seq, ref[m->base() + uint64_t(r)].seq) << "row " << r;
    // Through the middle and back: the pages held stay bounded.
    for (int v : {bar->maximum() / 2, bar->maximum() / 3, 0, bar->maximum() / 5}) {
        bar->setValue(v);
        ASSERT_TRUE(windowLoaded());
        for (int r = 0; r < m->rowCount(); ++r)
            ASSERT_EQ(m->eventAt(r)->seq, ref[m->base() + uint64_t(r)].seq);
        EXPECT_LE(m->pagesHeld(), kPages);
    }
}

// Counting needs the matches read (a stream filter): the first rows, then the count.
TEST_F(EventsPaging, AFilterThatIsNotCountedCheaplyPagesToo) {
    ASSERT_TRUE(open());
    auto* streamBox = panel_.findChildren<QComboBox*>().front();
    ASSERT_GE(streamBox->count(), 2);
    ASSERT_TRUE(requery([&] { streamBox->setCurrentIndex(1); }));
    ASSERT_TRUE(panel_.filter().stream.has_value());
    const std::vector<Event> ref = reference();
    ASSERT_GT(ref.size(), kCap);
    ASSERT_TRUE(panel_.paged());
    EXPECT_EQ(panel_.rowTotal(), ref.size());
    panel_.pageScrollBar()->setValue(panel_.pageScrollBar()->maximum());
    ASSERT_TRUE(windowLoaded());
    EventTableModel* m = panel_.model();
    EXPECT_EQ(m->eventAt(m->rowCount() - 1)->seq, ref.back().seq);
}

TEST_F(EventsPaging, AFilterChangeDropsThePagesOfTheOldOne) {
    std::shared_ptr<GatedSource> gate;
    ASSERT_TRUE(open(&gate));
    ASSERT_TRUE(panel_.paged());
    QScrollBar* bar = panel_.pageScrollBar();
    gate->open = false;
    bar->setValue(bar->maximum() / 2);
    panel_.view()->viewport()->repaint(); // a page of the old filter asked for
    for (int i = 0; i < 500 && gate->waiting == 0; ++i) QTest::qWait(10);
    ASSERT_EQ(gate->waiting, 1) << "the old filter's page fetch did not start";
    // Back to the top, where the new filter's rows come with its answer.
    bar->setValue(0);
    ASSERT_TRUE(requery([&] { kindAction("Allocations")->setChecked(false); }));
    gate->open = true; // the old page answers now
    for (int i = 0; i < 500 && gate->waiting > 0; ++i) QTest::qWait(10);
    QTest::qWait(200);
    const std::vector<Event> ref = reference();
    ASSERT_TRUE(panel_.paged());
    ASSERT_EQ(panel_.rowTotal(), ref.size());
    EventTableModel* m = panel_.model();
    size_t checked = 0;
    for (uint64_t row = 0; row < m->totalRows(); ++row)
        if (const Event* e = m->eventAtAbsolute(row)) {
            ASSERT_NE(e->kind, EventKind::Alloc) << "a row of the old filter at " << row;
            ASSERT_EQ(e->seq, ref[row].seq) << "row " << row;
            ++checked;
        }
    EXPECT_GT(checked, 0u);
    bar->setValue(bar->maximum() / 2);
    ASSERT_TRUE(windowLoaded());
    for (int r = 0; r < m->rowCount(); ++r)
        ASSERT_EQ(m->eventAt(r)->seq, ref[m->base() + uint64_t(r)].seq);
}

TEST_F(EventsPaging, SortsOnlyWhenEveryMatchIsHeld) {
    ASSERT_TRUE(open());
    ASSERT_TRUE(panel_.paged());
    QHeaderView* h = panel_.view()->horizontalHeader();
    EXPECT_FALSE(panel_.view()->isSortingEnabled());
    EXPECT_FALSE(h->sectionsClickable());
    EXPECT_TRUE(h->toolTip().contains(QStringLiteral("Sorting needs")));
    const uint64_t firstSeq = panel_.model()->eventAt(0)->seq;
    panel_.model()->sort(EventTableModel::Seq, Qt::DescendingOrder); // refused: a part only
    EXPECT_EQ(panel_.model()->eventAt(0)->seq, firstSeq);

    // A rare kind: every match held, sortable as before.
    ASSERT_TRUE(requery([&] {
        for (QAction* a : panel_.findChild<QToolButton*>()->menu()->actions())
            if (a->isCheckable() && a->objectName() != "failedOnly")
                a->setChecked(a->text() == QStringLiteral("Releases and trims") ||
                              a->text() == QStringLiteral("Attribute and knob changes"));
    }));
    ASSERT_FALSE(panel_.paged());
    const std::vector<Event> ref = reference();
    ASSERT_GE(ref.size(), 2u);
    ASSERT_LE(ref.size(), kCap);
    EXPECT_EQ(panel_.rowTotal(), ref.size());
    EXPECT_EQ(uint64_t(panel_.model()->rowCount()), ref.size());
    EXPECT_TRUE(panel_.view()->isSortingEnabled());
    EXPECT_TRUE(h->sectionsClickable());
    EXPECT_FALSE(panel_.pageScrollBar()->isVisible());
    panel_.view()->sortByColumn(EventTableModel::Seq, Qt::DescendingOrder);
    EXPECT_EQ(panel_.model()->eventAt(0)->seq, ref.back().seq);
}

// Counted cheaply and few enough to hold: the first page at once, then every row (sortable).
TEST_F(EventsPaging, AHoldableResultShowsItsFirstPageFirst) {
    panel_.setPaging(100000, kPage, kPages);
    QSignalSpy shown(&panel_, &EventsPanel::rowsShown);
    ASSERT_TRUE(open());
    ASSERT_EQ(shown.size(), 2);
    EXPECT_TRUE(shown[0][1].toBool());  // paged
    EXPECT_FALSE(shown[0][2].toBool()); // not final
    EXPECT_FALSE(shown[1][1].toBool());
    EXPECT_TRUE(shown[1][2].toBool());
    const std::vector<Event> ref = reference();
    EXPECT_EQ(shown[0][0].toULongLong(), ref.size());
    EXPECT_FALSE(panel_.paged());
    EXPECT_EQ(uint64_t(panel_.model()->rowCount()), ref.size());
    EXPECT_TRUE(panel_.view()->isSortingEnabled());
}

TEST_F(EventsPaging, SelectSeqFindsARowFarFromTheStart) {
    ASSERT_TRUE(open());
    ASSERT_TRUE(panel_.paged());
    const std::vector<Event> ref = reference();
    // With the event's time (the timeline's click) and without it (pages searched by seq).
    for (auto [k, withTime] : {std::pair{ref.size() * 3 / 4 + 17, true},
                               std::pair{ref.size() / 3 + 5, false},
                               std::pair{ref.size() - 1, true}}) {
        QSignalSpy located(&panel_, &EventsPanel::seqLocated);
        panel_.selectSeq(ref[k].seq, withTime ? ref[k].tsNs : INT64_MIN);
        if (located.isEmpty()) {
            ASSERT_TRUE(located.wait(30000));
        }
        ASSERT_EQ(located.front().front().toLongLong(), int64_t(k));
        EXPECT_EQ(panel_.currentRow(), int64_t(k));
        EventTableModel* m = panel_.model();
        const QModelIndex cur = panel_.view()->currentIndex();
        ASSERT_TRUE(cur.isValid());
        EXPECT_EQ(m->base() + uint64_t(cur.row()), k);
        ASSERT_NE(m->eventAt(cur.row()), nullptr);
        EXPECT_EQ(m->eventAt(cur.row())->seq, ref[k].seq);
    }
    // An event the filter leaves out: nothing selected, no row claimed.
    ASSERT_TRUE(requery([&] { kindAction("Allocations")->setChecked(false); }));
    const std::vector<Event> all = [&] {
        auto v = reader_->events(INT64_MIN, INT64_MAX);
        return v ? *v : std::vector<Event>{};
    }();
    auto alloc = std::find_if(all.begin() + long(all.size() / 2), all.end(),
                              [](const Event& e) { return e.kind == EventKind::Alloc; });
    ASSERT_NE(alloc, all.end());
    QSignalSpy located(&panel_, &EventsPanel::seqLocated);
    panel_.selectSeq(alloc->seq, alloc->tsNs);
    if (located.isEmpty()) {
        ASSERT_TRUE(located.wait(30000));
    }
    EXPECT_EQ(located.front().front().toLongLong(), -1);
}

// Keys that would leave the window of rows move it: the selection walks through every match.
TEST_F(EventsPaging, KeysMoveTheWindowPastItsEdges) {
    ASSERT_TRUE(open());
    ASSERT_TRUE(panel_.paged());
    EventTableModel* m = panel_.model();
    const int rows = m->rowCount();
    ASSERT_GT(rows, 2);
    panel_.view()->setFocus();
    panel_.view()->selectRow(rows - 1);
    ASSERT_EQ(panel_.currentRow(), rows - 1);
    QTest::keyClick(panel_.view(), Qt::Key_Down);
    EXPECT_EQ(panel_.currentRow(), rows);
    EXPECT_EQ(m->base(), 1u);
    EXPECT_EQ(panel_.view()->currentIndex().row(), rows - 1);
    QTest::keyClick(panel_.view(), Qt::Key_PageDown);
    EXPECT_EQ(panel_.currentRow(), 2 * rows);
    EXPECT_GE(m->base() + uint64_t(rows), uint64_t(2 * rows + 1));
    QTest::keyClick(panel_.view(), Qt::Key_End, Qt::ControlModifier);
    EXPECT_EQ(uint64_t(panel_.currentRow()), panel_.rowTotal() - 1);
    EXPECT_EQ(m->base() + uint64_t(rows), panel_.rowTotal());
    ASSERT_TRUE(windowLoaded());
    const std::vector<Event> ref = reference();
    ASSERT_NE(m->eventAt(panel_.view()->currentIndex().row()), nullptr);
    EXPECT_EQ(m->eventAt(panel_.view()->currentIndex().row())->seq, ref.back().seq);
    QTest::keyClick(panel_.view(), Qt::Key_Home, Qt::ControlModifier);
    EXPECT_EQ(panel_.currentRow(), 0);
    EXPECT_EQ(m->base(), 0u);
}

// More matches than a QScrollBar's int counts (a day's trace holds about 2^31 events): a
// hand-built source, not a recorded trace, answers 5,000,000,000 matches, each row's seq its
// row number and its time 700 ns after the one before (the file's first event copied), over
// the file's timeline stretched to their 58 minutes. Every row stays reachable: the bar's end is
// the last window, the keys and the wheel move by rows, and an event far past 2^31 is found.
// The last rows' times ("3499.999999 s") fit their column.
namespace {
class HugeSource final : public EventSource {
public:
    static constexpr uint64_t kTotal = 5'000'000'000;
    static constexpr int64_t kGapNs = 700;
    explicit HugeSource(Event like) : like_(like) {}
    EventCountResult count(const EventFilter&, const std::atomic<bool>&) const override { return {kTotal, {}}; }
    EventQueryResult page(const EventFilter&, uint64_t skip, size_t cap, const std::atomic<bool>&) const override {
        EventQueryResult r;
        for (uint64_t row = skip; row < kTotal && row < skip + cap; ++row) {
            Event e = like_;
            e.seq = row;
            e.tsNs = like_.tsNs + int64_t(row) * kGapNs;
            r.events.push_back(e);
        }
        r.truncated = skip + cap < kTotal;
        return r;
    }
    bool countsCheaply(const EventFilter&) const override { return true; }

private:
    Event like_;
};
} // namespace

TEST_F(EventsPaging, RowsPastTwoToThe31AreReachable) {
    QSignalSpy done(&panel_, &EventsPanel::queryFinished);
    auto first = reader_->events(view::EventFilter{}, 1);
    ASSERT_TRUE(first.ok());
    ASSERT_FALSE(first->empty());
    auto stretched = std::make_shared<Timeline>(*tl_);
    stretched->t1 = std::max(stretched->t1, first->front().tsNs + int64_t(HugeSource::kTotal) * HugeSource::kGapNs);
    TraceSnapshot s = TraceSnapshot::fromTimeline(stretched, "hand-built: 5 G matches");
    s.path = path_;
    panel_.setSource(s, std::make_shared<HugeSource>(first->front()));
    ASSERT_TRUE(done.wait(30000));
    ASSERT_TRUE(panel_.paged());
    const uint64_t total = HugeSource::kTotal;
    ASSERT_EQ(panel_.rowTotal(), total);
    EventTableModel* m = panel_.model();
    const auto rows = uint64_t(m->rowCount());
    ASSERT_GT(rows, 1u);
    auto shows = [&](uint64_t row) { return m->base() <= row && row < m->base() + rows; };

    // The bar's end is the last window.
    QScrollBar* bar = panel_.pageScrollBar();
    EXPECT_LE(bar->maximum(), INT_MAX);
    bar->setValue(bar->maximum());
    EXPECT_EQ(m->base(), total - rows);
    ASSERT_TRUE(windowLoaded());
    EXPECT_EQ(m->eventAt(int(rows) - 1)->seq, total - 1);
    // Its middle is the middle of the rows, not of the first 2^31.
    bar->setValue(bar->maximum() / 2);
    EXPECT_GT(m->base(), total / 2 - total / 100);
    EXPECT_LT(m->base(), total / 2 + total / 100);

    // Ctrl+End: the last row selected and in view; Page Up moves the window by its rows.
    panel_.view()->setFocus();
    QTest::keyClick(panel_.view(), Qt::Key_End, Qt::ControlModifier);
    EXPECT_EQ(panel_.currentRow(), int64_t(total - 1));
    EXPECT_TRUE(shows(total - 1)) << m->base();
    ASSERT_TRUE(windowLoaded());
    const QString lastTime = m->data(m->index(int(rows) - 1, EventTableModel::Time)).toString();
    EXPECT_TRUE(lastTime.startsWith(QStringLiteral("3499.99"))) << lastTime.toStdString();
    EXPECT_GE(panel_.view()->columnWidth(EventTableModel::Time),
              panel_.view()->fontMetrics().horizontalAdvance(lastTime) + 8)
        << lastTime.toStdString() << " is cut off";
    const uint64_t before = m->base();
    QTest::keyClick(panel_.view(), Qt::Key_PageUp);
    EXPECT_EQ(m->base(), before - rows);
    EXPECT_TRUE(shows(uint64_t(panel_.currentRow())));

    // A wheel notch down: three rows, as on a trace of fewer rows.
    const uint64_t atWheel = m->base();
    QPoint mid = panel_.view()->viewport()->rect().center();
    QWheelEvent wheel(mid, panel_.view()->viewport()->mapToGlobal(mid), QPoint(), QPoint(0, -120),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(panel_.view()->viewport(), &wheel);
    EXPECT_EQ(m->base(), atWheel + uint64_t(QApplication::wheelScrollLines()));

    // An event found by its seq, far past 2^31, from the start of the table.
    QTest::keyClick(panel_.view(), Qt::Key_Home, Qt::ControlModifier);
    EXPECT_EQ(m->base(), 0u);
    const uint64_t far = 4'321'000'123;
    QSignalSpy located(&panel_, &EventsPanel::seqLocated);
    panel_.selectSeq(far);
    ASSERT_TRUE(located.count() > 0 || located.wait(30000));
    EXPECT_EQ(located.takeFirst().at(0).toLongLong(), qint64(far));
    EXPECT_EQ(panel_.currentRow(), int64_t(far));
    EXPECT_TRUE(shows(far)) << m->base();
    ASSERT_TRUE(windowLoaded());
    EXPECT_EQ(m->eventAt(int(far - m->base()))->seq, far);
}
