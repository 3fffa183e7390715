// The What-if panel's work off the UI thread: the model's inputs (a tape of the trace's ops,
// read again, or copied from a live session's recorder), the prediction for the settings shown,
// and the racing threads' bound; each result comes back to the panel on the UI thread.
#include "WhatIfPanel.h"

#include "poolscope/TraceReader.h"

#include <QtConcurrent/QtConcurrentRun>
#include <exception>
#include <limits>

namespace poolscope::ui {

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
// A tape holds 32 bytes per event besides the timeline's own memory: past this the panel
// points to the command line instead of reading the trace again (30 M events: about 1 GiB).
constexpr uint64_t kMaxTapeEvents = 30'000'000;
// A live session's tape is copied from its recorder at most this often while the panel shows.
constexpr int kLiveRefreshMs = 2000;

} // namespace

void WhatIfPanel::startTape() {
    if (!snap_.valid() || snap_.timeline->partial || !active()) return;
    if (!liveSnapshot_ && snap_.timeline->pools.empty()) {
        setStatus(tr("This trace has no pool: nothing to model."));
        return;
    }
    std::shared_ptr<const whatif::Tape> liveTape;
    if (liveSnapshot_) {
        if (!tapeSource_) {
            setStatus(tr("This live view has no model inputs."));
            return;
        }
        if (liveTapeAge_.isValid() && liveTapeAge_.elapsed() < kLiveRefreshMs) {
            // Again once the interval is over: the events that arrived meanwhile may be the
            // last ones for a while (no snapshot would ask then).
            if (!liveRetry_.isActive())
                liveRetry_.start(int(kLiveRefreshMs - liveTapeAge_.elapsed()) + 1);
            return;
        }
        if (tapeRunning_) {
            tapeWanted_ = true;
            return;
        }
        liveTape = tapeSource_();
        liveTapeAge_.start();
        if (!liveTape) return;
    } else {
        if (tape_ || tapeRunning_) return;
        auto reader = TraceReader::open(snap_.path.toStdString());
        if (!reader) {
            setStatus(tr("The model cannot read %1: %2")
                          .arg(snap_.path, QString::fromStdString(reader.error().message)));
            return;
        }
        const uint64_t events = snap_.timeline->eventCount;
        if (events > kMaxTapeEvents) {
            setStatus(tr("This trace has %L1 events: the What-if panel models traces of up to "
                         "%L2 events (its inputs take 32 bytes an event). Ask the command line: "
                         "poolscope whatif %3 --release-threshold 64MiB")
                          .arg(events)
                          .arg(kMaxTapeEvents)
                          .arg(snap_.path));
            return;
        }
    }
    tapeCancel_ = std::make_shared<std::atomic<bool>>(false);
    tapeDone_ = std::make_shared<std::atomic<uint64_t>>(0);
    tapeTotal_ = std::make_shared<std::atomic<uint64_t>>(0);
    tapeRunning_ = true;
    if (!liveSnapshot_) {
        setStatus(tr("Reading the trace for the model…"));
        tapeProgress_.start();
    }
    const std::string path = snap_.path.toStdString();
    const quint64 gen = generation_;
    auto cancel = tapeCancel_;
    auto done = tapeDone_, total = tapeTotal_;
    tapeWatcher_.setFuture(QtConcurrent::run([path, gen, cancel, done, total, liveTape]() -> Prepared {
        Prepared p;
        p.generation = gen;
        // Nothing may escape the worker (QFuture would rethrow it in the destructor).
        try {
            std::shared_ptr<const whatif::Tape> tape = liveTape;
            if (!tape) {
                auto reader = TraceReader::open(path);
                if (!reader) {
                    p.error = QString::fromStdString(reader.error().message);
                    return p;
                }
                auto t = whatif::recordTape(**reader, cancel.get(), [&](uint64_t d, uint64_t n) {
                    done->store(d);
                    total->store(n);
                });
                if (!t) {
                    p.cancelled = t.error().code == ErrorCode::Cancelled;
                    p.error = QString::fromStdString(t.error().message);
                    return p;
                }
                tape = std::make_shared<const whatif::Tape>(std::move(*t));
            }
            // What the slider's range and the advisor need, once per tape.
            whatif::Question never;
            never.all.releaseThreshold = kMax;
            for (const whatif::PoolPrediction& pp : whatif::predict(*tape, never))
                p.neverReleasePeak[pp.handle] = pp.peakReserved;
            if (cancel->load()) {
                p.cancelled = true;
                return p;
            }
            p.advice = whatif::advise(*tape, {}, cancel.get());
            if (cancel->load()) {
                p.cancelled = true;
                return p;
            }
            p.tape = std::move(tape);
        } catch (const std::exception& e) {
            p.error = QString::fromUtf8(e.what());
        } catch (...) {
            p.error = QStringLiteral("unknown error");
        }
        return p;
    }));
}

void WhatIfPanel::onTapeDone() {
    tapeRunning_ = false;
    tapeProgress_.stop();
    Prepared p = tapeWatcher_.result();
    if (p.generation != generation_) {
        // A document opened since: its own read starts now.
        if (active()) startTape();
        return;
    }
    if (!p.tape) {
        if (!p.cancelled)
            setStatus(tr("The model could not read the trace: %1").arg(p.error));
        return;
    }
    // The controls start from what the trace recorded for the pool, once the tape has it (a
    // live session's first tape may hold no event of it yet).
    const bool first = !recorded();
    tape_ = std::move(p.tape);
    advice_ = std::move(p.advice);
    neverReleasePeak_ = std::move(p.neverReleasePeak);
    emit tapeLoaded();
    if (first) {
        showPool();
    } else {
        // A live refresh: the same controls over more events.
        updateSliderRange();
        updateAdvice();
        requestPrediction();
    }
    updateApply();
    if (tapeWanted_) {
        tapeWanted_ = false;
        liveTapeAge_.invalidate();
        if (active()) startTape();
    }
}

void WhatIfPanel::startPrediction() {
    const uint64_t pool = currentPool();
    running_ = request_;
    ++started_;
    whatif::Question q;
    q.perPool[pool] = settings();
    q.keepSeries = true;
    auto tape = tape_;
    Shown s;
    s.generation = generation_;
    s.request = request_;
    s.pool = pool;
    predictWatcher_.setFuture(QtConcurrent::run([tape, q, s]() mutable -> Shown {
        try {
            QElapsedTimer t;
            t.start();
            timespec c0{}, c1{};
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
            auto out = whatif::predict(*tape, q, {}, s.pool);
            if (!out.empty()) {
                s.pred = std::move(out[0]);
                s.series = std::make_shared<const Series>(std::move(s.pred.reserved));
                s.pred.reserved = {};
            }
            s.modelMs = double(t.nsecsElapsed()) / 1e6;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            s.modelCpuMs = double(c1.tv_sec - c0.tv_sec) * 1e3 + double(c1.tv_nsec - c0.tv_nsec) / 1e6;
        } catch (...) {
            s.series.reset();
        }
        return s;
    }));
}

void WhatIfPanel::onPredictionDone() {
    Shown s = predictWatcher_.result();
    running_ = 0;
    if (s.generation == generation_ && s.pool == currentPool() && s.series) {
        // Shown even when the controls moved on since: the curve follows a dragged slider.
        shown_ = std::move(s);
        lastModelMs_ = shown_->modelMs;
        const QString name = snap_.valid() ? snap_.layout->poolName(shown_->pool) : QString();
        emit predictedSeriesChanged(shown_->pool, shown_->series,
                                    tr("%1 predicted reserved").arg(name));
        updateNumbers();
    }
    // Jobs run one at a time, each for the controls as they were when it started: the
    // controls moved since, so their latest state is asked now (the moves between coalesce).
    if (tape_ && request_ != s.request) {
        startPrediction();
        return;
    }
    if (shown_ && shown_->request == request_ && shown_->generation == generation_) {
        startBound();
        lastLatencyMs_ = double(requestClock_.nsecsElapsed()) / 1e6;
        setStatus(tr("Predicted in %1 ms (the model alone: %2 ms over %L3 recorded inputs).")
                      .arg(lastLatencyMs_, 0, 'f', 0)
                      .arg(lastModelMs_, 0, 'f', 0)
                      .arg(qulonglong(tape_ ? tape_->ops.size() : 0)));
        emit predictionShown();
    }
}

// The model takes another stream's free only 2 ms after it; the GPU may have been faster. The
// other end of the range (every such free reusable at once) is a second run of the model,
// asked once the curve is on screen: it only adds a sentence under the numbers.
void WhatIfPanel::startBound() {
    if (!shown_ || shown_->hasLowerBound || !shown_->pred.allowOpportunistic || !tape_) return;
    if (boundRunning_) {
        boundPending_ = true;
        return;
    }
    boundRunning_ = true;
    whatif::Question q;
    q.perPool[shown_->pool] = settings();
    q.opportunisticLagNs = 0;
    auto tape = tape_;
    Bound b{generation_, shown_->request, shown_->pool, {}};
    boundWatcher_.setFuture(QtConcurrent::run([tape, q, b]() mutable -> Bound {
        try {
            auto low = whatif::predict(*tape, q, {}, b.pool);
            if (!low.empty()) b.low = std::move(low[0]);
        } catch (...) {
            b.pool = 0;
        }
        return b;
    }));
}

void WhatIfPanel::onBoundDone() {
    boundRunning_ = false;
    const Bound b = boundWatcher_.result();
    if (shown_ && b.pool && b.generation == shown_->generation && b.request == shown_->request &&
        b.pool == shown_->pool) {
        shown_->lowerBound = b.low;
        shown_->hasLowerBound = true;
        updateNumbers();
    }
    if (boundPending_) {
        boundPending_ = false;
        startBound();
    }
}

} // namespace poolscope::ui
