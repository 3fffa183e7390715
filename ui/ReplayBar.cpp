#include "ReplayBar.h"

#include "poolscope/Units.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QStyle>
#include <QToolButton>
#include <algorithm>

namespace poolscope::ui {

namespace {
constexpr int kSliderSteps = 10000;
// Speeds: positive = multiple of real time; negative = whole trace in that many seconds.
const struct {
    const char* label;
    double value;
} kSpeeds[] = {{"0.01×", 0.01},
               {"0.1×", 0.1},
               {"1× (real time)", 1},
               {"10×", 10},
               {"100×", 100},
               {"whole trace in 10 s", -10},
               {"whole trace in 60 s", -60}};
} // namespace

ReplayBar::ReplayBar(QWidget* parent) : QWidget(parent) {
    playButton_ = new QToolButton(this);
    playButton_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
    playButton_->setToolTip(tr("Play / pause the replay (Space)"));
    clearButton_ = new QToolButton(this);
    clearButton_->setIcon(style()->standardIcon(QStyle::SP_MediaStop));
    clearButton_->setToolTip(tr("Remove the cursor: views show the whole trace"));
    speed_ = new QComboBox(this);
    for (const auto& s : kSpeeds)
        speed_->addItem(tr(s.label), s.value);
    speed_->setCurrentIndex(5);
    speed_->setToolTip(tr("Replay speed"));
    slider_ = new QSlider(Qt::Horizontal, this);
    slider_->setRange(0, kSliderSteps);
    slider_->setToolTip(tr("Scrub the replay cursor through the trace"));
    label_ = new QLabel(this);
    label_->setMinimumWidth(label_->fontMetrics().horizontalAdvance("cursor 00.000000 s / 00.0 s"));
    auto* lay = new QHBoxLayout(this);
    lay->setContentsMargins(4, 2, 4, 2);
    lay->addWidget(new QLabel(tr("Replay:"), this));
    lay->addWidget(playButton_);
    lay->addWidget(clearButton_);
    lay->addWidget(speed_);
    lay->addWidget(slider_, 1);
    lay->addWidget(label_);

    timer_.setInterval(33);
    connect(&timer_, &QTimer::timeout, this, &ReplayBar::tick);
    connect(playButton_, &QToolButton::clicked, this, [this] { playing() ? pause() : play(); });
    connect(clearButton_, &QToolButton::clicked, this, &ReplayBar::clearCursor);
    connect(slider_, &QSlider::valueChanged, this, [this](int v) {
        const int64_t t = t0_ + int64_t((double(t1_) - double(t0_)) * v / kSliderSteps);
        cursor_ = t;
        updateWidgets();
        emit cursorChanged(t);
    });
    updateWidgets();
}

void ReplayBar::setRange(int64_t t0, int64_t t1) {
    pause();
    t0_ = t0;
    t1_ = std::max(t1, t0 + 1);
    cursor_ = INT64_MIN;
    updateWidgets();
}

void ReplayBar::setCursor(int64_t t) {
    cursor_ = std::clamp(t, t0_, t1_);
    updateWidgets();
    emit cursorChanged(cursor_);
}

void ReplayBar::clearCursor() {
    pause();
    cursor_ = INT64_MIN;
    updateWidgets();
    emit cursorChanged(cursor_);
}

double ReplayBar::rate() const {
    const double v = speed_->currentData().toDouble();
    if (v > 0) return v;
    return (double(t1_) - double(t0_)) / (-v * 1e9);
}

void ReplayBar::play() {
    if (cursor_ == INT64_MIN || cursor_ >= t1_) cursor_ = t0_;
    clock_.start();
    timer_.start();
    playButton_->setIcon(style()->standardIcon(QStyle::SP_MediaPause));
    emit cursorChanged(cursor_);
}

void ReplayBar::pause() {
    timer_.stop();
    playButton_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
}

void ReplayBar::tick() {
    const int64_t wall = clock_.nsecsElapsed();
    clock_.restart();
    cursor_ = std::min(t1_, cursor_ + int64_t(double(wall) * rate()));
    if (cursor_ >= t1_) pause();
    updateWidgets();
    emit cursorChanged(cursor_);
}

void ReplayBar::updateWidgets() {
    const QSignalBlocker b(slider_);
    if (cursor_ == INT64_MIN) {
        slider_->setValue(0);
        label_->setText(
            tr("no cursor · %1").arg(QString::fromStdString(formatDuration(nsBetween(t0_, t1_)))));
    } else {
        slider_->setValue(int((double(cursor_) - double(t0_)) * kSliderSteps /
                              std::max(1.0, double(t1_) - double(t0_))));
        label_->setText(tr("cursor %1 / %2")
                            .arg(QString::fromStdString(formatDuration(nsBetween(t0_, cursor_))),
                                 QString::fromStdString(formatDuration(nsBetween(t0_, t1_)))));
    }
}

} // namespace poolscope::ui
