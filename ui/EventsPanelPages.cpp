// EventsPanel's paged table (issue #15): the window of rows and its scroll bar, page fetches,
// and finding an event's row among more matches than are held.
#include "EventsPanel.h"

#include <QApplication>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QScrollBar>
#include <QTableView>
#include <QWheelEvent>
#include <QtConcurrent/QtConcurrentRun>
#include <algorithm>

namespace poolscope::ui {

void EventsPanel::setPagedUi(bool paged) {
    QHeaderView* h = view_->horizontalHeader();
    if (paged) {
        // Sorting the pages held would present a part as the whole: off, and said so.
        if (view_->isSortingEnabled()) {
            h->setSortIndicator(-1, Qt::AscendingOrder);
            view_->setSortingEnabled(false);
        }
        h->setSectionsClickable(false);
        h->setToolTip(tr("Sorting needs at most %L1 matching events; filter or zoom in to sort. "
                         "Rows are in time (sequence) order.")
                          .arg(rowCap_));
        view_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        scroll_->show();
    } else {
        scroll_->hide();
        view_->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
        if (!view_->isSortingEnabled()) {
            h->setSectionsClickable(true);
            view_->setSortingEnabled(true);
        }
        h->setToolTip(tr("Click a column header to sort by it; click again to reverse, a third "
                         "time for time order."));
    }
}

void EventsPanel::updateWindow() {
    if (!model_->paged()) return;
    // Only whole rows: the view must have nothing to scroll itself.
    const int rowH = std::max(1, view_->verticalHeader()->defaultSectionSize());
    const int rows = std::max(1, view_->viewport()->height() / rowH);
    model_->setWindowRows(rows);
    const uint64_t max = maxBase();
    scrollScale_ = max > uint64_t(INT_MAX) ? max / uint64_t(INT_MAX) + 1 : 1;
    {
        const QSignalBlocker b(scroll_);
        scroll_->setRange(0, int((max + scrollScale_ - 1) / scrollScale_));
        scroll_->setPageStep(int(std::max<uint64_t>(1, uint64_t(rows) / scrollScale_)));
        scroll_->setSingleStep(1);
    }
    setBase(model_->base());
}

uint64_t EventsPanel::maxBase() const {
    const uint64_t total = model_->totalRows();
    const auto rows = uint64_t(std::max(model_->rowCount(), 1));
    return total > rows ? total - rows : 0;
}

void EventsPanel::setBase(uint64_t base) {
    const uint64_t max = maxBase();
    base = std::min(base, max);
    model_->setBase(base);
    {
        const QSignalBlocker b(scroll_);
        // The last window is the bar's end even where the scale does not divide it.
        scroll_->setValue(base == max ? scroll_->maximum() : int(base / scrollScale_));
    }
    reselect();
}

void EventsPanel::reselect() {
    if (!model_->paged()) return;
    const QSignalBlocker b(view_->selectionModel());
    const int64_t r = currentAbs_ - int64_t(model_->base());
    if (currentAbs_ >= 0 && r >= 0 && r < model_->rowCount())
        view_->selectRow(int(r));
    else
        view_->selectionModel()->clear();
    view_->viewport()->update();
}

int64_t EventsPanel::currentRow() const {
    if (model_->paged()) return currentAbs_;
    return view_->currentIndex().isValid() ? view_->currentIndex().row() : -1;
}

void EventsPanel::scrollToRow(uint64_t row) {
    if (!model_->paged()) {
        view_->scrollTo(model_->index(int(row), 0), QAbstractItemView::PositionAtCenter);
        return;
    }
    const auto half = uint64_t(model_->rowCount() / 2);
    setBase(row > half ? row - half : 0);
}

void EventsPanel::setCurrentRow(int64_t row, bool notify) {
    const uint64_t total = model_->totalRows();
    if (!total) return;
    currentAbs_ = std::clamp<int64_t>(row, 0, int64_t(total) - 1);
    const int64_t base = int64_t(model_->base());
    if (currentAbs_ < base)
        setBase(uint64_t(currentAbs_));
    else if (currentAbs_ >= base + model_->rowCount())
        setBase(uint64_t(currentAbs_ - model_->rowCount() + 1));
    else
        reselect();
    if (notify)
        if (const Event* e = model_->eventAtAbsolute(uint64_t(currentAbs_))) emit eventSelected(*e);
}

bool EventsPanel::eventFilter(QObject* o, QEvent* e) {
    if (model_->paged()) {
        if (o == view_->viewport() && e->type() == QEvent::Resize) {
            QMetaObject::invokeMethod(this, &EventsPanel::updateWindow, Qt::QueuedConnection);
        } else if (o == view_->viewport() && e->type() == QEvent::Wheel) {
            // The window scrolls, not the view: by the bar's steps, or where a unit of the bar
            // is several rows, by the rows a notch scrolls.
            if (scrollScale_ == 1) {
                QApplication::sendEvent(scroll_, e);
            } else {
                wheelRows_ += double(static_cast<QWheelEvent*>(e)->angleDelta().y()) / 120.0 *
                              QApplication::wheelScrollLines();
                const auto whole = int64_t(wheelRows_);
                wheelRows_ -= double(whole);
                const int64_t to = int64_t(model_->base()) - whole;
                setBase(uint64_t(std::max<int64_t>(to, 0)));
            }
            return true;
        } else if (o == view_ && e->type() == QEvent::KeyPress) {
            // Keys that would leave the window move it instead.
            auto* k = static_cast<QKeyEvent*>(e);
            const int rows = model_->rowCount();
            const int64_t cur = currentAbs_ < 0 ? int64_t(model_->base()) : currentAbs_;
            const int64_t inWindow = cur - int64_t(model_->base());
            const bool ctrl = k->modifiers() & Qt::ControlModifier;
            switch (k->key()) {
            case Qt::Key_Down:
                if (inWindow < rows - 1) break;
                setCurrentRow(cur + 1, true);
                return true;
            case Qt::Key_Up:
                if (inWindow > 0) break;
                setCurrentRow(cur - 1, true);
                return true;
            case Qt::Key_PageDown:
                setBase(model_->base() + uint64_t(rows));
                setCurrentRow(cur + rows, true);
                return true;
            case Qt::Key_PageUp:
                setBase(model_->base() > uint64_t(rows) ? model_->base() - uint64_t(rows) : 0);
                setCurrentRow(cur - rows, true);
                return true;
            case Qt::Key_Home:
            case Qt::Key_End:
                if (!ctrl) break;
                setCurrentRow(k->key() == Qt::Key_Home ? 0 : int64_t(model_->totalRows()) - 1,
                              true);
                return true;
            default:
                break;
            }
        }
    }
    return QWidget::eventFilter(o, e);
}

void EventsPanel::pumpPages() {
    if (pageJob_ || !model_->paged() || !shownProvider_) return;
    // Only pages still in view: a fast scroll past a thousand pages fetches the last one.
    const uint64_t pr = model_->pageRows();
    const uint64_t w0 = model_->base();
    const uint64_t w1 = std::min(model_->totalRows(), w0 + uint64_t(model_->rowCount()));
    if (w1 <= w0) return;
    const uint64_t p0 = w0 / pr, p1 = (w1 - 1) / pr;
    for (auto it = wanted_.begin(); it != wanted_.end();) {
        if (*it < p0 || *it > p1 || model_->hasPage(*it)) {
            model_->forgetRequest(*it); // asked again when it comes back into view
            it = wanted_.erase(it);
        } else {
            ++it;
        }
    }
    if (wanted_.empty()) return;
    const uint64_t page = *wanted_.begin();
    std::erase_if(jobs_, [](const std::shared_ptr<Job>& j) { return j->future.isFinished(); });
    auto job = std::make_shared<Job>();
    job->generation = shownGeneration_;
    pageJob_ = job;
    jobs_.push_back(job);
    job->future = QtConcurrent::run([this, job, page, pr, f = shownFilter_,
                                     provider = shownProvider_] {
        auto r = std::make_shared<EventQueryResult>(provider->page(f, page * pr, pr, job->cancel));
        if (job->cancel) return;
        QMetaObject::invokeMethod(
            this,
            [this, job, page, r] {
                if (pageJob_ != job) return; // a new answer replaced the rows
                pageJob_.reset();
                wanted_.erase(page);
                if (!r->error.isEmpty()) {
                    // Left asked for: a page that fails is not fetched again at every repaint.
                    status_->setText(tr("error: %1").arg(r->error));
                    return;
                }
                model_->setPage(page, std::make_shared<const std::vector<Event>>(
                                          std::move(r->events)));
                reselect();
                emit pageLoaded(page);
                pumpPages();
            },
            Qt::QueuedConnection);
    });
}

void EventsPanel::selectSeq(uint64_t seq, int64_t tsNs) {
    if (!model_->paged()) {
        const int r = model_->rowOfSeq(seq);
        if (r < 0) return;
        const QSignalBlocker b(view_->selectionModel());
        view_->selectRow(r);
        view_->scrollTo(model_->index(r, 0), QAbstractItemView::PositionAtCenter);
        return;
    }
    if (const int64_t r = model_->absoluteRowOfSeq(seq); r >= 0) {
        scrollToRow(uint64_t(r));
        setCurrentRow(r, false);
        emit seqLocated(r);
        return;
    }
    if (!shownProvider_) return;
    if (locateJob_) locateJob_->cancel = true;
    std::erase_if(jobs_, [](const std::shared_ptr<Job>& j) { return j->future.isFinished(); });
    auto job = std::make_shared<Job>();
    job->generation = shownGeneration_;
    locateJob_ = job;
    jobs_.push_back(job);
    struct Found {
        int64_t row = -1;
        uint64_t page = 0;
        std::shared_ptr<const std::vector<Event>> rows;
    };
    job->future = QtConcurrent::run([this, job, seq, tsNs, f = shownFilter_,
                                     provider = shownProvider_, total = model_->totalRows(),
                                     pr = uint64_t(model_->pageRows())] {
        // Rows are in seq order: the event's row is the number of matches before it. Matches
        // before its time are nearly those (threads' clocks and seqs disagree by a few events
        // at most), so that count names its page at once; pages are then searched by their
        // seqs (galloping, then halving), which is exact whatever the estimate was.
        const std::atomic<bool>& cancel = job->cancel;
        const uint64_t pages = (total + pr - 1) / pr;
        uint64_t guess = pages / 2;
        if (tsNs != INT64_MIN) {
            EventFilter before = f;
            before.t1 = std::min(f.t1, tsNs);
            const uint64_t n = before.t1 > before.t0 ? provider->count(before, cancel).total : 0;
            guess = std::min(pages - 1, n / pr);
        }
        auto found = std::make_shared<Found>();
        uint64_t lo = 0, hi = pages; // the page holding seq, if any, is in [lo, hi)
        uint64_t p = guess, step = 1;
        bool below = false, above = false; // a page on that side was seen: halve from then on
        while (lo < hi && !cancel) {
            EventQueryResult r = provider->page(f, p * pr, pr, cancel);
            if (cancel || !r.error.isEmpty() || r.events.empty()) break;
            const auto& v = r.events;
            if (seq < v.front().seq) {
                hi = p;
                above = true;
            } else if (seq > v.back().seq) {
                lo = p + 1;
                below = true;
            } else {
                auto it = std::lower_bound(v.begin(), v.end(), seq,
                                           [](const Event& e, uint64_t s) { return e.seq < s; });
                if (it != v.end() && it->seq == seq) found->row = int64_t(p * pr) + (it - v.begin());
                found->page = p;
                found->rows = std::make_shared<const std::vector<Event>>(std::move(r.events));
                break;
            }
            if (lo >= hi) break;
            if (below && above)
                p = lo + (hi - lo) / 2;
            else
                p = std::clamp<uint64_t>(above ? (p >= step ? p - step : 0) : p + step, lo, hi - 1);
            step *= 2;
        }
        if (cancel) return;
        QMetaObject::invokeMethod(
            this,
            [this, job, found] {
                if (locateJob_ != job) return;
                locateJob_.reset();
                if (found->rows) model_->setPage(found->page, found->rows);
                if (found->row >= 0) {
                    scrollToRow(uint64_t(found->row));
                    setCurrentRow(found->row, false);
                }
                emit seqLocated(found->row);
            },
            Qt::QueuedConnection);
    });
}

} // namespace poolscope::ui
