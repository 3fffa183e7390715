#include "WhatIfPanel.h"

#include "poolscope/Units.h"

#include <QCheckBox>
#include <QComboBox>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <limits>
#include <time.h>

namespace poolscope::ui {

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

QString qb(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}
QString qc(uint64_t v) {
    return QString::fromStdString(formatCount(v));
}
QString signedBytes(uint64_t now, uint64_t before) {
    if (now == before) return QStringLiteral("=");
    return QString::fromStdString(
        formatBytesSigned(int64_t(now) - int64_t(before)));
}
QString signedCount(uint64_t now, uint64_t before) {
    if (now == before) return QStringLiteral("=");
    // The same signs as core's formatBytesSigned beside it.
    return now > before ? QStringLiteral("+") + qc(now - before)
                        : QStringLiteral("-") + qc(before - now);
}

// The field's form of a threshold: exact (whole MiB for granule multiples), so reading it back
// gives the same value, which the three-digit human form would not.
QString fieldText(uint64_t v) {
    if (v == kMax) return QStringLiteral("max");
    if (v == 0) return QStringLiteral("0 B");
    if (v % (uint64_t{1} << 20) == 0) return QStringLiteral("%1 MiB").arg(v >> 20);
    if (v % 1024 == 0) return QStringLiteral("%1 KiB").arg(v >> 10);
    return QStringLiteral("%1 B").arg(v);
}

QString thresholdName(uint64_t v) {
    return v == kMax ? QObject::tr("max (never release)") : qb(v);
}

enum Row { PeakReserved, Releases, Growths, MeanIdle, MaxIdle, RowCount };

} // namespace

WhatIfPanel::WhatIfPanel(QWidget* parent)
    : QWidget(parent), granule_(whatif::Calibration{}.growthGranule) {
    auto* top = new QVBoxLayout(this);
    top->setContentsMargins(6, 4, 6, 4);

    auto* poolRow = new QHBoxLayout;
    poolRow->addWidget(new QLabel(tr("Pool:"), this));
    poolBox_ = new QComboBox(this);
    poolBox_->setToolTip(tr("The pool the model is asked about (or pick it in Pools & streams)"));
    poolBox_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    poolRow->addWidget(poolBox_, 1);
    top->addLayout(poolRow);

    auto* thr = new QGroupBox(tr("Release threshold"), this);
    auto* tl = new QVBoxLayout(thr);
    auto* row = new QHBoxLayout;
    slider_ = new QSlider(Qt::Horizontal, thr);
    slider_->setToolTip(tr("Memory the pool keeps at a synchronize, in the driver's 32 MiB "
                           "granules; the right end is max: never release"));
    slider_->setPageStep(4);
    edit_ = new QLineEdit(thr);
    edit_->setToolTip(tr("A size such as 64 MiB, 1.5 GiB, 0 or max; rounded down to whole "
                         "32 MiB granules, as the driver keeps them"));
    edit_->setMaximumWidth(edit_->fontMetrics().horizontalAdvance(QStringLiteral("000000 MiB")) + 16);
    row->addWidget(slider_, 1);
    row->addWidget(edit_);
    tl->addLayout(row);
    rangeLabel_ = new QLabel(thr);
    rangeLabel_->setWordWrap(true);
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    rangeLabel_->setFont(small);
    tl->addWidget(rangeLabel_);
    top->addWidget(thr);

    auto* reuse = new QGroupBox(tr("Reuse policies"), this);
    auto* rl = new QVBoxLayout(reuse);
    follow_ = new QCheckBox(tr("Follow event dependencies"), reuse);
    follow_->setToolTip(tr("A stream that waited on an event may reuse what the recorded "
                           "stream freed before it"));
    opportunistic_ = new QCheckBox(tr("Allow opportunistic reuse"), reuse);
    opportunistic_->setToolTip(tr("Another stream's free may be reused once the GPU finished "
                                  "it (the model takes frees older than 2 ms)"));
    internal_ = new QCheckBox(tr("Allow internal dependencies"), reuse);
    internal_->setToolTip(tr("At the pool's size limit, the driver may wait on another "
                             "stream's frees instead of failing"));
    for (QCheckBox* c : {follow_, opportunistic_, internal_}) rl->addWidget(c);
    top->addWidget(reuse);

    auto* buttons = new QHBoxLayout;
    asRecorded_ = new QPushButton(tr("As recorded"), this);
    asRecorded_->setToolTip(tr("The settings the trace ended with"));
    apply_ = new QPushButton(tr("Apply to the running program"), this);
    buttons->addWidget(asRecorded_);
    buttons->addWidget(apply_, 1);
    top->addLayout(buttons);

    table_ = new QTableWidget(RowCount, 3, this);
    table_->setHorizontalHeaderLabels({tr("Recorded"), tr("Predicted"), tr("Change")});
    table_->setVerticalHeaderLabels({tr("Peak reserved"), tr("Implicit releases"),
                                     tr("Pool growths"), tr("Mean idle"), tr("Largest idle")});
    table_->verticalHeaderItem(MeanIdle)->setToolTip(
        tr("Reserved minus used, averaged over the pool's time in the trace"));
    table_->verticalHeaderItem(Releases)->setToolTip(
        tr("Synchronizes at which reserved memory dropped"));
    table_->verticalHeaderItem(Growths)->setToolTip(
        tr("Allocations at which reserved memory rose"));
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setSelectionMode(QAbstractItemView::NoSelection);
    table_->setFocusPolicy(Qt::NoFocus);
    table_->setWordWrap(false);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    for (int r = 0; r < RowCount; ++r)
        for (int c = 0; c < 3; ++c) {
            auto* it = new QTableWidgetItem;
            it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            table_->setItem(r, c, it);
        }
    table_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    fitTableHeight();
    top->addWidget(table_);
    // Wide enough for the row names and three values such as "-1.34 GiB" side by side: the
    // numbers are the point of the panel, so they are never cut (the dock takes this width).
    {
        const QFontMetrics fm = table_->fontMetrics();
        int rowNames = 0;
        for (int r = 0; r < RowCount; ++r)
            rowNames = std::max(rowNames, fm.horizontalAdvance(table_->verticalHeaderItem(r)->text()));
        const int value = std::max(fm.horizontalAdvance(QStringLiteral("+1,023 MiB")),
                                   fm.horizontalAdvance(tr("Predicted"))) + 14;
        setMinimumWidth(rowNames + 16 + 3 * value + 2 * table_->frameWidth() +
                        top->contentsMargins().left() + top->contentsMargins().right());
    }
    boundLabel_ = new QLabel(this);
    boundLabel_->setWordWrap(true);
    boundLabel_->setFont(small);
    top->addWidget(boundLabel_);

    auto* adv = new QGroupBox(tr("Advisor"), this);
    auto* al = new QVBoxLayout(adv);
    adviceText_ = new QLabel(adv);
    adviceText_->setWordWrap(true);
    adviceText_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    al->addWidget(adviceText_);
    useSuggestion_ = new QPushButton(tr("Use suggestion"), adv);
    useSuggestion_->setToolTip(tr("Sets the controls to the advisor's threshold and policies"));
    auto* ub = new QHBoxLayout;
    ub->addWidget(useSuggestion_);
    ub->addStretch(1);
    al->addLayout(ub);
    top->addWidget(adv);

    status_ = new QLabel(this);
    status_->setWordWrap(true);
    status_->setFont(small);
    top->addWidget(status_);
    top->addStretch(1);

    liveRetry_.setSingleShot(true);
    connect(&liveRetry_, &QTimer::timeout, this, [this] {
        if (active()) startTape();
    });
    tapeProgress_.setInterval(200);
    connect(&tapeProgress_, &QTimer::timeout, this, [this] {
        if (!tapeRunning_ || !tapeTotal_) return;
        const uint64_t total = tapeTotal_->load(), done = tapeDone_->load();
        setStatus(tr("Reading the trace for the model… %1 %")
                      .arg(total ? int(done * 100 / total) : 0));
    });
    connect(&tapeWatcher_, &QFutureWatcher<Prepared>::finished, this, &WhatIfPanel::onTapeDone);
    connect(&predictWatcher_, &QFutureWatcher<Shown>::finished, this,
            &WhatIfPanel::onPredictionDone);
    connect(&boundWatcher_, &QFutureWatcher<Bound>::finished, this, &WhatIfPanel::onBoundDone);

    connect(poolBox_, &QComboBox::currentIndexChanged, this, [this] {
        if (updating_) return;
        showPool();
    });
    connect(slider_, &QSlider::valueChanged, this, [this](int pos) {
        if (updating_) return;
        threshold_ = pos >= sliderSteps_ ? kMax : uint64_t(pos) * granule_;
        syncThresholdViews();
        requestPrediction();
    });
    connect(edit_, &QLineEdit::editingFinished, this, &WhatIfPanel::onEditFinished);
    for (QCheckBox* c : {follow_, opportunistic_, internal_})
        connect(c, &QCheckBox::toggled, this, [this] {
            if (!updating_) requestPrediction();
        });
    connect(asRecorded_, &QPushButton::clicked, this, &WhatIfPanel::showPool);
    connect(useSuggestion_, &QPushButton::clicked, this, [this] {
        const whatif::PoolAdvice* a = advice();
        if (!a || !a->any()) return;
        updating_ = true;
        if (a->thresholdAdvice) threshold_ = a->suggestedThreshold;
        for (const whatif::PoolAdvice::Policy& p : a->policies) {
            if (p.name == "reuse_follow_event_dependencies") follow_->setChecked(true);
            if (p.name == "reuse_allow_opportunistic") opportunistic_->setChecked(true);
            if (p.name == "reuse_allow_internal_dependencies") internal_->setChecked(true);
        }
        updating_ = false;
        updateSliderRange();
        syncThresholdViews();
        requestPrediction();
    });
    connect(apply_, &QPushButton::clicked, this, [this] {
        if (!live_ || !currentPool()) return;
        emit applyRequested(currentPool(), threshold_, follow_->isChecked(),
                            opportunistic_->isChecked(), internal_->isChecked());
        setStatus(tr("Sent to the running program through the Knobs: release threshold %1, "
                     "reuse policies %2 / %3 / %4 (the driver's read-back shows in the Knobs "
                     "panel).")
                      .arg(thresholdName(threshold_), follow_->isChecked() ? tr("on") : tr("off"),
                           opportunistic_->isChecked() ? tr("on") : tr("off"),
                           internal_->isChecked() ? tr("on") : tr("off")));
    });

    setSnapshot({});
}

WhatIfPanel::~WhatIfPanel() {
    if (tapeCancel_) tapeCancel_->store(true);
    tapeWatcher_.disconnect(this);
    predictWatcher_.disconnect(this);
    boundWatcher_.disconnect(this);
    // The workers own what they use (shared pointers and copies); they only need to end.
    tapeWatcher_.waitForFinished();
    predictWatcher_.waitForFinished();
    boundWatcher_.waitForFinished();
}

QCheckBox* WhatIfPanel::policyBox(PoolAttr a) const {
    switch (a) {
    case PoolAttr::ReuseFollowEventDependencies: return follow_;
    case PoolAttr::ReuseAllowOpportunistic: return opportunistic_;
    case PoolAttr::ReuseAllowInternalDependencies: return internal_;
    default: return nullptr;
    }
}

bool WhatIfPanel::busy() const {
    return tapeRunning_ || running_ != 0 || boundRunning_;
}

uint64_t WhatIfPanel::currentPool() const {
    return poolBox_->currentData().toULongLong();
}

void WhatIfPanel::selectPool(uint64_t handle) {
    const int i = poolBox_->findData(QVariant::fromValue<qulonglong>(handle));
    if (i >= 0 && i != poolBox_->currentIndex()) poolBox_->setCurrentIndex(i);
}

void WhatIfPanel::setTapeSource(std::function<std::shared_ptr<const whatif::Tape>()> source) {
    tapeSource_ = std::move(source);
    liveTapeAge_.invalidate();
}

void WhatIfPanel::setActive(bool active) {
    dockActive_ = active;
    if (active) startTape();
}

void WhatIfPanel::setLive(bool live) {
    live_ = live;
    updateApply();
}

void WhatIfPanel::setStatus(const QString& text) {
    status_->setText(text);
}

const whatif::PoolPrediction* WhatIfPanel::recorded() const {
    return tape_ ? tape_->recordedPool(currentPool()) : nullptr;
}

const whatif::PoolAdvice* WhatIfPanel::advice() const {
    for (const whatif::PoolAdvice& a : advice_)
        if (a.handle == currentPool()) return &a;
    return nullptr;
}

std::shared_ptr<const Series> WhatIfPanel::predictedSeries() const {
    return shown_ ? shown_->series : nullptr;
}

whatif::Settings WhatIfPanel::settings() const {
    whatif::Settings s;
    const whatif::PoolPrediction* rec = recorded();
    if (!rec || threshold_ != rec->releaseThreshold) s.releaseThreshold = threshold_;
    if (!rec || follow_->isChecked() != rec->followEventDependencies)
        s.followEventDependencies = follow_->isChecked();
    if (!rec || opportunistic_->isChecked() != rec->allowOpportunistic)
        s.allowOpportunistic = opportunistic_->isChecked();
    if (!rec || internal_->isChecked() != rec->allowInternalDependencies)
        s.allowInternalDependencies = internal_->isChecked();
    return s;
}

void WhatIfPanel::setSnapshot(const TraceSnapshot& s) {
    const bool live = s.valid() && s.path.isEmpty();
    // The same document: a live session's next snapshot, or a progressive load's whole trace
    // after its beginning.
    const bool same = s.valid() && snap_.valid() &&
                      ((live && liveSnapshot_) ||
                       (!live && s.path == snap_.path && snap_.timeline->partial));
    snap_ = s;
    liveSnapshot_ = live;
    if (!same) {
        ++generation_;
        if (tapeCancel_) tapeCancel_->store(true);
        tape_.reset();
        advice_.clear();
        neverReleasePeak_.clear();
        shown_.reset();
        tapeWanted_ = false;
        liveTapeAge_.invalidate();
        liveRetry_.stop();
        emit predictedSeriesChanged(0, nullptr, {});
    }
    rebuildPools();
    if (!same) showPool(); // disabled until the model has read the new document
    if (!s.valid()) {
        setStatus(tr("Open a trace to ask what its pools would have done under another release "
                     "threshold or other reuse policies."));
    } else if (s.timeline->limited) {
        setStatus(tr("This trace is larger than the window holds (%L1 events): ask the command "
                     "line: poolscope whatif %2 --release-threshold 64MiB")
                      .arg(s.timeline->totalEvents)
                      .arg(s.path));
    } else if (!same || !tape_) {
        setStatus(s.timeline->partial ? tr("The model reads the trace once it is loaded.")
                                      : tr("The model reads the trace when this panel is shown."));
    }
    if (active()) startTape();
    updateApply();
}

// The whole table, never a scroll bar: the header and five rows, as the style sizes them (known
// only once the table is polished: again when shown).
void WhatIfPanel::fitTableHeight() {
    int h = table_->horizontalHeader()->sizeHint().height() + 2 * table_->frameWidth();
    for (int r = 0; r < RowCount; ++r) h += table_->verticalHeader()->sectionSize(r);
    table_->setFixedHeight(h);
}

void WhatIfPanel::showEvent(QShowEvent* e) {
    QWidget::showEvent(e);
    fitTableHeight();
    if (active()) startTape();
}

void WhatIfPanel::rebuildPools() {
    // The pools with a lane (as the plot draws them), by name; the one that reserved the most
    // is chosen first.
    QList<QPair<QString, uint64_t>> pools;
    uint64_t biggest = 0, biggestPeak = 0;
    if (snap_.valid()) {
        for (const PoolTimeline& p : snap_.timeline->pools) {
            if (snap_.layout->laneOfPool(p.info.handle) < 0) continue;
            pools.append({snap_.layout->poolName(p.info.handle), p.info.handle});
            if (!biggest || p.peakReserved > biggestPeak) {
                biggest = p.info.handle;
                biggestPeak = p.peakReserved;
            }
        }
    }
    bool same = pools.size() == poolBox_->count();
    for (int i = 0; same && i < pools.size(); ++i)
        same = poolBox_->itemText(i) == pools[i].first &&
               poolBox_->itemData(i).toULongLong() == pools[i].second;
    if (same) return; // a live session's next snapshot, most of the time
    const uint64_t keep = currentPool();
    updating_ = true;
    poolBox_->clear();
    for (const auto& [name, handle] : pools)
        poolBox_->addItem(name, QVariant::fromValue<qulonglong>(handle));
    int i = poolBox_->findData(QVariant::fromValue<qulonglong>(keep));
    if (i < 0) i = poolBox_->findData(QVariant::fromValue<qulonglong>(biggest));
    poolBox_->setCurrentIndex(i);
    updating_ = false;
    poolBox_->setEnabled(poolBox_->count() > 0);
    if (currentPool() != keep) showPool();
}

void WhatIfPanel::showPool() {
    const whatif::PoolPrediction* rec = recorded();
    const bool ready = rec != nullptr;
    for (QWidget* w : std::initializer_list<QWidget*>{slider_, edit_, follow_, opportunistic_,
                                                       internal_, asRecorded_})
        w->setEnabled(ready);
    if (rec) {
        updating_ = true;
        threshold_ = rec->releaseThreshold;
        follow_->setChecked(rec->followEventDependencies);
        opportunistic_->setChecked(rec->allowOpportunistic);
        internal_->setChecked(rec->allowInternalDependencies);
        updating_ = false;
    } else if (tape_ && currentPool()) {
        setStatus(tr("The model has nothing for this pool: no allocation reached it."));
    }
    updateSliderRange();
    syncThresholdViews();
    updateAdvice();
    updateApply();
    if (ready) requestPrediction();
    else updateNumbers();
}

void WhatIfPanel::updateSliderRange() {
    uint64_t top = granule_;
    if (auto it = neverReleasePeak_.find(currentPool()); it != neverReleasePeak_.end())
        top = std::max(top, it->second);
    if (const whatif::PoolPrediction* rec = recorded()) {
        top = std::max(top, rec->recordedPeakReserved);
        if (rec->releaseThreshold != kMax) top = std::max(top, rec->releaseThreshold);
    }
    if (threshold_ != kMax) top = std::max(top, threshold_);
    const uint64_t steps = std::min<uint64_t>((top + granule_ - 1) / granule_, 1u << 20);
    sliderSteps_ = int(steps) + 1;
    const QSignalBlocker b(slider_);
    slider_->setRange(0, sliderSteps_);
    const QString recordedText =
        recorded() ? tr(" The trace ended with %1.").arg(thresholdName(recorded()->releaseThreshold))
                   : QString();
    rangeLabel_->setText(tr("0 B to %1 in 32 MiB steps, then max (never release).%2")
                             .arg(qb(steps * granule_), recordedText));
}

void WhatIfPanel::syncThresholdViews() {
    const QSignalBlocker b1(slider_);
    const int pos = threshold_ == kMax ? sliderSteps_
                                       : int(std::min<uint64_t>(threshold_ / granule_,
                                                                uint64_t(sliderSteps_ - 1)));
    slider_->setValue(pos);
    edit_->setText(fieldText(threshold_));
}

void WhatIfPanel::setThreshold(uint64_t bytes) {
    threshold_ = bytes == kMax ? kMax : bytes - bytes % granule_;
    updateSliderRange();
    syncThresholdViews();
    requestPrediction();
}

void WhatIfPanel::onEditFinished() {
    const QString text = edit_->text().trimmed();
    if (text == fieldText(threshold_)) return;
    uint64_t v = 0;
    if (!parseBytes(text.toStdString(), v)) {
        setStatus(tr("Not a size: \"%1\". Type 64 MiB, 1.5 GiB, 0 or max.").arg(text));
        edit_->setText(fieldText(threshold_));
        return;
    }
    setThreshold(v);
}

void WhatIfPanel::requestPrediction() {
    if (!tape_ || !recorded()) return;
    ++request_;
    requestClock_.start();
    if (running_ == 0) startPrediction();
    // Else the running one is answered first, then the latest controls (onPredictionDone).
}

void WhatIfPanel::updateNumbers() {
    const bool have = shown_ && shown_->pool == currentPool() && snap_.valid();
    auto set = [&](int r, const QString& rec, const QString& pred, const QString& change) {
        table_->item(r, 0)->setText(rec);
        table_->item(r, 1)->setText(pred);
        table_->item(r, 2)->setText(change);
    };
    if (!have) {
        for (int r = 0; r < RowCount; ++r) set(r, {}, {}, {});
        boundLabel_->clear();
        return;
    }
    const whatif::PoolPrediction& p = shown_->pred;
    const bool known = p.recordedKnown;
    const QString none = tr("n/a");
    set(PeakReserved, known ? qb(p.recordedPeakReserved) : none, qb(p.peakReserved),
        known ? signedBytes(p.peakReserved, p.recordedPeakReserved) : QString());
    set(Releases, known ? qc(p.recordedReleases) : none, qc(p.releases),
        known ? signedCount(p.releases, p.recordedReleases) : QString());
    set(Growths, known ? qc(p.recordedGrowths) : none, qc(p.growths),
        known ? signedCount(p.growths, p.recordedGrowths) : QString());
    set(MeanIdle, known ? qb(p.recordedMeanIdle) : none, qb(p.meanIdle),
        known ? signedBytes(p.meanIdle, p.recordedMeanIdle) : QString());
    set(MaxIdle, known ? qb(p.recordedMaxIdle) : none, qb(p.maxIdle),
        known ? signedBytes(p.maxIdle, p.recordedMaxIdle) : QString());
    QStringList notes;
    if (shown_->hasLowerBound && shown_->lowerBound.peakReserved != p.peakReserved)
        notes << tr("If the GPU finished other streams' frees at once (opportunistic reuse "
                    "without the model's 2 ms lag): peak %1, %2 releases. The trace cannot "
                    "tell which.")
                     .arg(qb(shown_->lowerBound.peakReserved), qc(shown_->lowerBound.releases));
    if (p.failedAllocs)
        notes << tr("%L1 allocations would fail at the pool's size limit.").arg(p.failedAllocs);
    if (!known) notes << tr("The trace carries no watermarks for this pool: n/a.");
    boundLabel_->setText(notes.join(QLatin1Char(' ')));
}

void WhatIfPanel::updateAdvice() {
    const QString name = snap_.valid() ? snap_.layout->poolName(currentPool()) : QString();
    const whatif::PoolAdvice* a = advice();
    if (snap_.valid() && snap_.timeline->pools.empty()) {
        adviceText_->setText(tr("No pool, no advice."));
    } else if (snap_.valid() && snap_.timeline->limited) {
        adviceText_->setText(tr("The advisor needs the whole trace: poolscope advise %1")
                                 .arg(snap_.path));
    } else if (!tape_) {
        adviceText_->setText(snap_.valid() ? tr("The advisor answers once the model has read "
                                                "the trace.")
                                           : QString());
    } else if (!a) {
        adviceText_->setText(tr("Nothing to suggest for %1: no allocation reached it.").arg(name));
    } else if (!a->any()) {
        adviceText_->setText(
            a->currentReleases < 3
                ? tr("Nothing to suggest for %1: the model predicts %2 under the recorded "
                     "settings (the advisor looks for a threshold from 3 on), and no reuse "
                     "policy that is off would lower the peak by 10 %.")
                      .arg(name, a->currentReleases == 0   ? tr("no implicit release")
                                 : a->currentReleases == 1 ? tr("one implicit release")
                                                           : tr("%1 implicit releases")
                                                                 .arg(qc(a->currentReleases)))
                : tr("Nothing to suggest for %1: no threshold up to the pool's peak removes "
                     "95 % of its %2 predicted implicit releases, and no reuse policy that is "
                     "off would lower the peak by 10 %.")
                      .arg(name, qc(a->currentReleases)));
    } else {
        adviceText_->setText(QString::fromStdString(whatif::adviceText(*a, name.toStdString())));
    }
    useSuggestion_->setEnabled(a && a->any());
}

void WhatIfPanel::updateApply() {
    const bool can = live_ && tape_ && recorded();
    apply_->setEnabled(can);
    if (!live_)
        apply_->setToolTip(tr("Only in a live session: start one with Live > Launch or attach "
                              "with Live > Attach."));
    else if (!can)
        apply_->setToolTip(tr("Waits for the model's inputs and a pool with allocations."));
    else
        apply_->setToolTip(tr("Sets this pool's release threshold and reuse policies in the "
                              "running program through the Knobs (the driver's read-back shows "
                              "in the Knobs panel)."));
}

} // namespace poolscope::ui
