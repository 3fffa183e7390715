#include "KnobsPanel.h"

#include "LiveSession.h"
#include "poolscope/Units.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace poolscope::ui {

using namespace poolscope::control;

namespace {

QString bytes(uint64_t v) {
    return QString::fromStdString(formatBytes(v));
}

QComboBox* unitBox(int defaultIndex) {
    auto* b = new QComboBox;
    b->addItems({"B", "KiB", "MiB", "GiB", "TiB"});
    b->setCurrentIndex(defaultIndex);
    return b;
}

QDoubleSpinBox* valueBox() {
    auto* s = new QDoubleSpinBox;
    s->setRange(0, 1024 * 1024);
    s->setDecimals(2);
    s->setValue(0);
    return s;
}

} // namespace

uint64_t KnobsPanel::toBytes(double value, int unitIndex) {
    double b = value * std::pow(1024.0, std::clamp(unitIndex, 0, 4));
    if (b <= 0) return 0;
    if (b >= 18446744073709551615.0) return ~uint64_t{0};
    return uint64_t(std::llround(b));
}

KnobsPanel::KnobsPanel(LiveSession* session, QWidget* parent) : QWidget(parent), session_(session) {
    auto* top = new QVBoxLayout(this);
    poolBox_ = new QComboBox;
    poolBox_->setToolTip(tr("The pool these knobs act on"));
    top->addWidget(poolBox_);

    auto* thr = new QGroupBox(tr("Release threshold"));
    auto* tl = new QVBoxLayout(thr);
    auto* row = new QHBoxLayout;
    thresholdValue_ = valueBox();
    thresholdUnit_ = unitBox(2);
    applyThreshold_ = new QPushButton(tr("Apply"));
    row->addWidget(thresholdValue_, 1);
    row->addWidget(thresholdUnit_);
    row->addWidget(applyThreshold_);
    tl->addLayout(row);
    auto* presets = new QHBoxLayout;
    presetZero_ = new QPushButton(tr("0"));
    presetZero_->setToolTip(tr("Release everything unused at each synchronize"));
    presetUsed_ = new QPushButton(tr("Current used"));
    presetUsed_->setToolTip(tr("Keep what is in use now cached"));
    presetMax_ = new QPushButton(tr("UINT64_MAX"));
    presetMax_->setToolTip(tr("Never release at synchronize (cache everything)"));
    presets->addWidget(presetZero_);
    presets->addWidget(presetUsed_);
    presets->addWidget(presetMax_);
    tl->addLayout(presets);
    top->addWidget(thr);

    auto* reuse = new QGroupBox(tr("Reuse policies"));
    auto* rl = new QVBoxLayout(reuse);
    follow_ = new QCheckBox(tr("Follow event dependencies"));
    opportunistic_ = new QCheckBox(tr("Allow opportunistic reuse"));
    internal_ = new QCheckBox(tr("Allow internal dependencies"));
    for (QCheckBox* c : {follow_, opportunistic_, internal_})
        rl->addWidget(c);
    top->addWidget(reuse);

    auto* trim = new QGroupBox(tr("Trim"));
    auto* trl = new QHBoxLayout(trim);
    trimValue_ = valueBox();
    trimUnit_ = unitBox(2);
    trimButton_ = new QPushButton(tr("Trim to"));
    trimButton_->setToolTip(tr("Release unused memory down to this size (memory in use stays)"));
    trl->addWidget(trimButton_);
    trl->addWidget(trimValue_, 1);
    trl->addWidget(trimUnit_);
    top->addWidget(trim);

    resetButton_ = new QPushButton(tr("Reset watermarks"));
    resetButton_->setToolTip(tr("Reset the reserved and used high watermarks to current values"));
    top->addWidget(resetButton_);

    reported_ = new QLabel;
    reported_->setWordWrap(true);
    reported_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(reported_);
    status_ = new QLabel;
    status_->setWordWrap(true);
    top->addWidget(status_);
    top->addStretch(1);

    connect(poolBox_, &QComboBox::currentIndexChanged, this, &KnobsPanel::showPool);
    connect(applyThreshold_, &QPushButton::clicked, this, [this] {
        setThreshold(toBytes(thresholdValue_->value(), thresholdUnit_->currentIndex()));
    });
    connect(presetZero_, &QPushButton::clicked, this, [this] { setThreshold(0); });
    connect(presetMax_, &QPushButton::clicked, this, [this] { setThreshold(~uint64_t{0}); });
    connect(presetUsed_, &QPushButton::clicked, this, [this] {
        if (const PoolState* p = session_->pool(currentPool())) setThreshold(p->usedCurrent);
    });
    // clicked (not toggled): only the user's clicks send requests, never our own updates.
    auto toggle = [this](QCheckBox* box, PoolAttr a) {
        connect(box, &QCheckBox::clicked, this, [this, a](bool on) {
            if (!currentPool()) return;
            status_->setText(tr("Setting %1...").arg(QString::fromUtf8(attrCliName(a).data())));
            session_->setAttribute(currentPool(), a, on ? 1 : 0);
        });
    };
    toggle(follow_, PoolAttr::ReuseFollowEventDependencies);
    toggle(opportunistic_, PoolAttr::ReuseAllowOpportunistic);
    toggle(internal_, PoolAttr::ReuseAllowInternalDependencies);
    connect(trimButton_, &QPushButton::clicked, this, [this] {
        if (!currentPool()) return;
        status_->setText(tr("Trimming..."));
        session_->trimTo(currentPool(), toBytes(trimValue_->value(), trimUnit_->currentIndex()));
    });
    connect(resetButton_, &QPushButton::clicked, this, [this] {
        if (!currentPool()) return;
        status_->setText(tr("Resetting watermarks..."));
        session_->resetWatermarks(currentPool());
    });

    connect(session_, &LiveSession::poolsChanged, this, &KnobsPanel::rebuildPools);
    connect(session_, &LiveSession::knobApplied, this, &KnobsPanel::onAck);
    connect(session_, &LiveSession::requestFailed, this,
            [this](const QString& m) { status_->setText(tr("Refused: %1").arg(m)); });
    connect(session_, &LiveSession::ended, this, [this](const QString& why) {
        setEnabled(false);
        status_->setText(tr("Session ended: %1").arg(why));
    });
    rebuildPools();
}

uint64_t KnobsPanel::currentPool() const {
    return poolBox_->currentData().toULongLong();
}

void KnobsPanel::selectPool(uint64_t handle) {
    int i = poolBox_->findData(QVariant::fromValue<qulonglong>(handle));
    if (i >= 0) poolBox_->setCurrentIndex(i);
}

void KnobsPanel::rebuildPools() {
    const uint64_t keep = currentPool();
    {
        QSignalBlocker block(poolBox_);
        poolBox_->clear();
        for (const PoolState& p : session_->pools())
            poolBox_->addItem(tr("Pool 0x%1 (device %2, %3)")
                                  .arg(p.info.handle, 0, 16)
                                  .arg(p.info.device)
                                  .arg(QString::fromUtf8(poolKindName(p.info.kind).data())),
                              QVariant::fromValue<qulonglong>(p.info.handle));
    }
    if (keep) selectPool(keep);
    setEnabled(session_->attached() && poolBox_->count() > 0);
    showPool();
}

void KnobsPanel::showPool() {
    const PoolState* p = session_->pool(currentPool());
    if (!p) {
        reported_->setText(session_->attached() ? tr("No pool yet: the target has not used the "
                                                     "stream-ordered allocator.")
                                                : tr("Not connected."));
        return;
    }
    QSignalBlocker b1(follow_), b2(opportunistic_), b3(internal_);
    follow_->setChecked(p->reuseFollowEventDependencies);
    opportunistic_->setChecked(p->reuseAllowOpportunistic);
    internal_->setChecked(p->reuseAllowInternalDependencies);
    reported_->setText(
        tr("Driver reports: threshold %1 · reserved %2 (high %3) · used %4 (high %5)")
            .arg(bytes(p->releaseThreshold), bytes(p->reservedCurrent), bytes(p->reservedHigh),
                 bytes(p->usedCurrent), bytes(p->usedHigh)));
}

void KnobsPanel::apply(uint64_t pool, uint64_t threshold, bool follow, bool opportunistic,
                       bool internal) {
    selectPool(pool);
    if (currentPool() != pool) {
        status_->setText(tr("Pool 0x%1 is not one of the running program's pools.")
                             .arg(pool, 0, 16));
        return;
    }
    status_->setText(tr("Setting the release threshold to %1 and the reuse policies (from What "
                        "if)...")
                         .arg(bytes(threshold)));
    session_->setAttribute(pool, PoolAttr::ReleaseThreshold, threshold);
    session_->setAttribute(pool, PoolAttr::ReuseFollowEventDependencies, follow ? 1 : 0);
    session_->setAttribute(pool, PoolAttr::ReuseAllowOpportunistic, opportunistic ? 1 : 0);
    session_->setAttribute(pool, PoolAttr::ReuseAllowInternalDependencies, internal ? 1 : 0);
}

void KnobsPanel::setThreshold(uint64_t b) {
    if (!currentPool()) return;
    status_->setText(tr("Setting release threshold to %1...").arg(bytes(b)));
    session_->setAttribute(currentPool(), PoolAttr::ReleaseThreshold, b);
}

void KnobsPanel::onAck(const Ack& a) {
    if (a.op == Op::Set) {
        QString what = QString::fromUtf8(attrCliName(PoolAttr(a.attr)).data());
        QString value =
            attrIsBoolean(PoolAttr(a.attr)) ? (a.value ? tr("on") : tr("off")) : bytes(a.value);
        QString text = tr("%1 is now %2 (driver read-back)").arg(what, value);
        if (a.value != a.requested) text += tr("; %1 was requested").arg(bytes(a.requested));
        status_->setText(text);
    } else if (a.op == Op::TrimTo) {
        status_->setText(tr("Trimmed: reserved %1 -> %2").arg(bytes(a.oldValue), bytes(a.value)));
    } else if (a.op == Op::ResetWatermarks) {
        status_->setText(
            tr("Watermarks reset: reserved high %1 -> %2").arg(bytes(a.oldValue), bytes(a.value)));
    }
    if (a.pool == currentPool()) showPool();
}

} // namespace poolscope::ui

namespace poolscope::ui {

QCheckBox* KnobsPanel::reuseToggle(PoolAttr a) const {
    switch (a) {
    case PoolAttr::ReuseFollowEventDependencies:
        return follow_;
    case PoolAttr::ReuseAllowOpportunistic:
        return opportunistic_;
    case PoolAttr::ReuseAllowInternalDependencies:
        return internal_;
    default:
        return nullptr;
    }
}

} // namespace poolscope::ui
