#pragma once
// Replay controls: a time cursor with play/pause, speed and a scrubber. It owns only the cursor
// time and the clock; the main window fans the cursor out to the views.

#include <QElapsedTimer>
#include <QTimer>
#include <QWidget>
#include <cstdint>

class QComboBox;
class QLabel;
class QSlider;
class QToolButton;

namespace poolscope::ui {

class ReplayBar : public QWidget {
    Q_OBJECT
public:
    explicit ReplayBar(QWidget* parent = nullptr);

    void setRange(int64_t t0, int64_t t1); // the trace's extent; resets the cursor
    void setCursor(int64_t t);             // from a click elsewhere; emits cursorChanged
    int64_t cursor() const { return cursor_; }
    bool playing() const { return timer_.isActive(); }
    void play();
    void pause();
    void clearCursor();
    // Trace nanoseconds per wall-clock nanosecond for the chosen speed.
    double rate() const;

signals:
    void cursorChanged(qint64 t); // INT64_MIN: no cursor (views show the whole trace)

private:
    void tick();
    void updateWidgets();

    QToolButton* playButton_;
    QToolButton* clearButton_;
    QComboBox* speed_;
    QSlider* slider_;
    QLabel* label_;
    QTimer timer_;
    QElapsedTimer clock_;
    int64_t t0_ = 0, t1_ = 1;
    int64_t cursor_ = INT64_MIN;
};

} // namespace poolscope::ui
