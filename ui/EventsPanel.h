#pragma once
// The events table with its filter bar. Queries run off the UI thread through an EventProvider;
// each query carries a generation number and stale answers are dropped.
// Up to rowCap matches are held whole (sortable). More are paged (issue #15): the row count is
// the exact number of matches, pages of rows are fetched as they come into view and at most
// maxPages are held, and the table scrolls a window of rows with its own scroll bar
// (EventTableModel). Sorting is off then: sorting the pages held would present a part as the
// whole.

#include "EventFilter.h"
#include "EventTableModel.h"
#include "TraceSnapshot.h"

#include <QFuture>
#include <QTimer>
#include <QWidget>
#include <atomic>
#include <memory>
#include <set>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QTableView;
class QToolButton;
class QMenu;
class QScrollBar;

namespace poolscope::ui {

class EventsPanel : public QWidget {
    Q_OBJECT
public:
    explicit EventsPanel(QWidget* parent = nullptr);
    ~EventsPanel() override;

    void setSource(const TraceSnapshot& s, EventProvider provider);
    // A live run: a newer snapshot and provider of the same run, many times a second. The rows
    // stay until the new query answers (no flicker), queries run at most once per debounce
    // interval however often this is called, and while the table is scrolled to its end it
    // follows the newest events. setSource() ends this mode.
    void updateSource(const TraceSnapshot& s, EventProvider provider);
    bool live() const { return live_; }
    void clear();
    // The timeline's visible range; followed while "Follow timeline" is checked.
    void setVisibleRange(int64_t t0, int64_t t1);
    // Selects and scrolls to the event if it is among the matches. Paged, it is found by
    // fetching pages (tsNs, the event's time, when known, points at the right one at once).
    void selectSeq(uint64_t seq, int64_t tsNs = INT64_MIN);
    EventFilter filter() const;
    EventTableModel* model() const { return model_; }
    QTableView* view() const { return view_; }
    QScrollBar* pageScrollBar() const { return scroll_; } // paged: moves the window of rows
    QLabel* status() const { return status_; }
    bool queryRunning() const { return running_ != nullptr; }
    bool paged() const { return model_->paged(); }
    uint64_t rowTotal() const { return model_->totalRows(); } // every match, held or not
    int64_t currentRow() const; // of all matches; -1 when none is selected
    // Scrolls so that this row (of all matches) is in view.
    void scrollToRow(uint64_t row);
    // Tests and benchmarks lower these (the defaults below).
    void setPaging(size_t rowCap, size_t pageRows, size_t maxPages);

    static constexpr size_t kRowCap = 200000;
    static constexpr size_t kPageRows = 2000;
    static constexpr size_t kMaxPages = 50; // 100,000 rows, ~10 MB

signals:
    void eventSelected(const poolscope::Event& e);
    void eventActivated(const poolscope::Event& e); // double-click: jump there
    void queryFinished(int rows);
    // Each result shown: a paged one may come before the whole (final) one of the same query.
    void rowsShown(quint64 total, bool paged, bool final);
    void pageLoaded(quint64 page);
    void seqLocated(qint64 row); // selectSeq's search on a paged table ended (-1: not a match)

private:
    void scheduleQuery();
    void runQuery();
    void rebuildFilterChoices();
    void fitNumberColumns(uint64_t topSeq); // Seq and Time, to their widest text
    struct Answer;
    void apply(quint64 generation, const std::shared_ptr<Answer>& a);
    void setPagedUi(bool paged);
    void updateWindow();       // paged: rows that fit, the scroll bar's range
    // Paged: the window's first row (of all matches), clamped to the last full window; the
    // scroll bar follows in its units (rows, or scrollScale_ rows each past INT_MAX rows).
    void setBase(uint64_t base);
    uint64_t maxBase() const;
    void reselect();           // paged: the selected row (of all) in the window
    void setCurrentRow(int64_t row, bool notify);
    void pumpPages();
    bool eventFilter(QObject* o, QEvent* e) override;

    struct Job {
        quint64 generation = 0;
        std::atomic<bool> cancel{false};
        QFuture<void> future;
    };

    EventTableModel* model_;
    QTableView* view_;
    QToolButton* kindButton_;
    QMenu* kindMenu_;
    QComboBox* streamBox_;
    QComboBox* poolBox_;
    QLineEdit* minSize_;
    QLineEdit* maxSize_;
    QCheckBox* follow_;
    QLabel* status_;
    QScrollBar* scroll_;
    // Rows a unit of scroll_ stands for: a QScrollBar counts in int, and a day's trace holds
    // about 2^31 events. 1 up to INT_MAX rows.
    uint64_t scrollScale_ = 1;
    double wheelRows_ = 0; // a wheel's part-rows not scrolled yet (scrollScale_ > 1)
    QTimer debounce_;

    TraceSnapshot snap_;
    EventProvider provider_;
    int64_t visible0_ = INT64_MIN, visible1_ = INT64_MAX;
    quint64 generation_ = 0;
    bool live_ = false;
    int autoSeqWidth_ = 0; // the Seq column's width as last set here
    int autoTimeWidth_ = 0, defaultTimeWidth_ = 0; // the Time column's, and as first set
    std::shared_ptr<Job> running_;
    std::vector<std::shared_ptr<Job>> jobs_;

    size_t rowCap_ = kRowCap, pageRows_ = kPageRows, maxPages_ = kMaxPages;
    // What the rows shown answer: page fetches ask the same, and answers of another generation
    // (an older filter) are dropped.
    quint64 shownGeneration_ = 0;
    EventFilter shownFilter_;
    EventProvider shownProvider_;
    std::set<uint64_t> wanted_; // pages asked for by the model, not fetched yet
    std::shared_ptr<Job> pageJob_, locateJob_;
    int64_t currentAbs_ = -1; // paged: the selected row of all matches
};

} // namespace poolscope::ui
