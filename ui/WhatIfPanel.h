#pragma once
// The What-if panel (issue #14): one pool at a time, a release threshold (slider in the
// driver's 32 MiB granules, and a field taking "64 MiB", "1.5 GiB", "max") and the three reuse
// policies; the pool model's predicted reserved curve goes to the plot as the controls move,
// recorded and predicted numbers side by side, the advisor's suggestion with "Use suggestion",
// and in a live session "Apply to the running program" (the window wires it to the Knobs).
//
// The model is asked about a whatif::Tape, its inputs recorded once per trace on a worker
// thread (a second read of the file, only once the panel is shown; in a live session, a copy
// of what the session's recorder holds). Each prediction then runs the model alone over the
// tape on a worker thread; moves that arrive while one runs are coalesced into the latest, so
// the window never waits and never falls behind the slider. docs/WHATIF.md, docs/PERFORMANCE.md.

#include "TraceSnapshot.h"
#include "poolscope/whatif/PoolModel.h"

#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QTimer>
#include <QWidget>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSlider;
class QTableWidget;

namespace poolscope::ui {

class WhatIfPanel : public QWidget {
    Q_OBJECT
public:
    explicit WhatIfPanel(QWidget* parent = nullptr);
    ~WhatIfPanel() override; // stops the tape's reading and waits for the workers

    void setSnapshot(const TraceSnapshot& s);
    // A live session's tape (null: none). Called when a live snapshot arrives, at most once a
    // second while the panel is shown.
    void setTapeSource(std::function<std::shared_ptr<const whatif::Tape>()> source);
    // In a dock: whether its tab is in front (QDockWidget::visibilityChanged). The trace is read
    // and the model asked only while someone can see the panel; without a dock, while shown.
    void setActive(bool active);
    bool active() const { return dockActive_ ? *dockActive_ : isVisible(); }
    // Whether "Apply to the running program" can reach a program.
    void setLive(bool live);
    bool live() const { return live_; }

    void selectPool(uint64_t handle); // a pool of the trace; others are ignored
    uint64_t currentPool() const;
    // The controls as numbers: the threshold in bytes (UINT64_MAX: never release) and each
    // reuse policy.
    uint64_t threshold() const { return threshold_; }
    void setThreshold(uint64_t bytes); // snapped down to the granule, as the driver keeps it
    // What is asked of the model: members equal to what the trace ended with stay unset, so
    // they follow the trace, with any change it made along the way.
    whatif::Settings settings() const;

    // State, for the window and tests.
    bool tapeReady() const { return bool(tape_); }
    const whatif::Tape* tape() const { return tape_.get(); }
    bool busy() const; // the tape is being read or a prediction runs
    // The prediction on screen (for the current pool and controls once predictionShown()).
    const whatif::PoolPrediction* prediction() const {
        return shown_ ? &shown_->pred : nullptr;
    }
    std::shared_ptr<const Series> predictedSeries() const;
    const whatif::PoolAdvice* advice() const; // the current pool's, if the advisor has one
    double lastLatencyMs() const { return lastLatencyMs_; } // control change -> numbers shown
    double lastModelMs() const { return lastModelMs_; }     // the model's own time
    double lastModelCpuMs() const { return shown_ ? shown_->modelCpuMs : 0; } // its CPU time
    int predictionsStarted() const { return started_; }     // coalescing leaves most moves out

    QComboBox* poolBox() const { return poolBox_; }
    QSlider* thresholdSlider() const { return slider_; }
    QLineEdit* thresholdEdit() const { return edit_; }
    QCheckBox* policyBox(PoolAttr a) const;
    QPushButton* useSuggestionButton() const { return useSuggestion_; }
    QPushButton* asRecordedButton() const { return asRecorded_; }
    QPushButton* applyButton() const { return apply_; }
    QTableWidget* numbers() const { return table_; }
    QLabel* adviceLabel() const { return adviceText_; }
    QLabel* rangeNote() const { return boundLabel_; } // the opportunistic lower bound
    QLabel* statusLabel() const { return status_; }

    // The slider's positions: k granules, and one past the last for "max".
    uint64_t granule() const { return granule_; }

signals:
    void tapeLoaded();
    // A prediction for the controls as they are now is on screen.
    void predictionShown();
    // The predicted reserved series of a pool, for the plot (null: none), with its legend name.
    void predictedSeriesChanged(quint64 pool, std::shared_ptr<const poolscope::Series> series,
                                const QString& label);
    // "Apply to the running program": the threshold and the three policies for this pool.
    void applyRequested(quint64 pool, quint64 threshold, bool followEventDependencies,
                        bool allowOpportunistic, bool allowInternalDependencies);

protected:
    void showEvent(QShowEvent* e) override;

private:
    struct Prepared {
        quint64 generation = 0;
        std::shared_ptr<const whatif::Tape> tape;
        std::vector<whatif::PoolAdvice> advice;
        std::map<uint64_t, uint64_t> neverReleasePeak; // by pool handle
        QString error;
        bool cancelled = false;
    };
    struct Shown {
        quint64 generation = 0;
        quint64 request = 0;
        uint64_t pool = 0;
        whatif::PoolPrediction pred;
        bool hasLowerBound = false;
        whatif::PoolPrediction lowerBound; // opportunistic reuse with no lag
        std::shared_ptr<const Series> series;
        double modelMs = 0;
        double modelCpuMs = 0; // the worker thread's CPU time (a loaded machine stretches wall)
    };

    struct Bound {
        quint64 generation = 0;
        quint64 request = 0;
        uint64_t pool = 0;
        whatif::PoolPrediction low;
    };
    void startBound();
    void onBoundDone();
    void startTape();
    void onTapeDone();
    void requestPrediction();
    void startPrediction();
    void onPredictionDone();
    void rebuildPools();
    void showPool();           // the controls for the current pool, as recorded
    void syncThresholdViews(); // slider and field from threshold_
    void updateSliderRange();
    void updateNumbers();
    void updateAdvice();
    void updateApply();
    void onEditFinished();
    void setStatus(const QString& text);
    void fitTableHeight();
    const whatif::PoolPrediction* recorded() const; // the tape's, for the current pool

    TraceSnapshot snap_;
    quint64 generation_ = 0; // a new document
    bool liveSnapshot_ = false;
    std::function<std::shared_ptr<const whatif::Tape>()> tapeSource_;
    bool live_ = false;
    QElapsedTimer liveTapeAge_;
    std::optional<bool> dockActive_;
    QTimer liveRetry_;

    std::shared_ptr<const whatif::Tape> tape_;
    std::vector<whatif::PoolAdvice> advice_;
    std::map<uint64_t, uint64_t> neverReleasePeak_;
    QFutureWatcher<Prepared> tapeWatcher_;
    std::shared_ptr<std::atomic<bool>> tapeCancel_;
    std::shared_ptr<std::atomic<uint64_t>> tapeDone_, tapeTotal_;
    QTimer tapeProgress_;
    bool tapeRunning_ = false;
    bool tapeWanted_ = false; // a (re)read is due when the current one ends

    QFutureWatcher<Shown> predictWatcher_;
    quint64 request_ = 0;      // the latest control change
    quint64 running_ = 0;      // the request the running prediction answers (0: none runs)
    int started_ = 0;
    QElapsedTimer requestClock_;
    std::optional<Shown> shown_;
    QFutureWatcher<Bound> boundWatcher_;
    bool boundRunning_ = false, boundPending_ = false;
    double lastLatencyMs_ = 0, lastModelMs_ = 0;

    uint64_t granule_;
    uint64_t threshold_ = 0;
    int sliderSteps_ = 1; // granule positions; max is sliderSteps_
    bool updating_ = false;

    QComboBox* poolBox_;
    QSlider* slider_;
    QLineEdit* edit_;
    QLabel* rangeLabel_;
    QCheckBox* follow_;
    QCheckBox* opportunistic_;
    QCheckBox* internal_;
    QPushButton* asRecorded_;
    QPushButton* apply_;
    QTableWidget* table_;
    QLabel* boundLabel_;
    QLabel* adviceText_;
    QPushButton* useSuggestion_;
    QLabel* status_;
};

} // namespace poolscope::ui
