#include "RangeLoader.h"

#include "TraceLoad.h"
#include "poolscope/TimelineRange.h"
#include "poolscope/TraceReader.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>
#include <exception>

namespace poolscope::ui {

RangeLoader::RangeLoader(QObject* parent) : QObject(parent) {
    timer_.setSingleShot(true);
    timer_.setInterval(250);
    connect(&timer_, &QTimer::timeout, this, &RangeLoader::start);
}

RangeLoader::~RangeLoader() {
    timer_.stop();
    if (running_) running_->cancel = true;
    for (auto& j : abandoned_) j->cancel = true;
    auto wait = [](Job& j) {
        try {
            j.future.waitForFinished();
        } catch (...) {
        }
    };
    if (running_) wait(*running_);
    for (auto& j : abandoned_) wait(*j);
}

void RangeLoader::cancel() {
    timer_.stop();
    if (!running_) return;
    running_->cancel = true;
    abandoned_.push_back(running_);
    running_.reset();
}

void RangeLoader::viewChanged(const TraceSnapshot& shown, int64_t v0, int64_t v1) {
    if (!shown.valid() || shown.path.isEmpty() || !shown.timeline->limited || v1 <= v0) {
        cancel();
        return;
    }
    const Timeline& tl = *shown.timeline;
    const double span = double(std::max<int64_t>(1, tl.t1 - tl.t0));
    // Whole-trace views keep the overview; a view inside the loaded range needs nothing.
    if (double(v1 - v0) >= kWholeTraceFraction * span ||
        (v0 >= tl.loadedFromNs && v1 <= tl.loadedUntilNs)) {
        cancel();
        return;
    }
    cancel(); // an older view's load is outdated
    pendingSnap_ = shown;
    pending0_ = v0;
    pending1_ = v1;
    timer_.start();
}

void RangeLoader::start() {
    auto job = std::make_shared<Job>();
    job->generation = ++generation_;
    running_ = job;
    const TraceSnapshot base = pendingSnap_;
    const int64_t v0 = pending0_, v1 = pending1_;
    emit loading(v0, v1);
    job->future = QtConcurrent::run([this, job, base, v0, v1] {
        TraceSnapshot snap = base; // everything but the timeline and its layout
        snap.timeline.reset();
        snap.layout.reset();
        QString error;
        bool tooMany = false;
        uint64_t events = 0;
        const uint64_t limit = windowRangeEventLimit();
        try {
            auto reader = TraceReader::open(base.path.toStdString());
            if (!reader) {
                error = QString::fromStdString(reader.error().message);
            } else {
                (*reader)->setSkipDamaged(true);
                (*reader)->adoptScan(base.scan);
                // Half a view more on each side when that fits: a small pan stays loaded.
                const int64_t w = (v1 - v0) / 2;
                int64_t a = v0 - w, b = v1 + w;
                auto plan = planTimelineRange(**reader, a, b);
                if (plan && plan->events > limit) {
                    a = v0;
                    b = v1;
                    plan = planTimelineRange(**reader, a, b);
                }
                if (!plan) {
                    error = QString::fromStdString(plan.error().message);
                } else if (plan->events > limit) {
                    tooMany = true;
                    events = plan->events;
                } else {
                    RangeBuildOptions o;
                    o.cancel = &job->cancel;
                    o.maxEvents = limit;
                    auto tl = buildTimelineRange(**reader, a, b, o);
                    if (!tl) {
                        if (tl.error().code != ErrorCode::Cancelled)
                            error = QString::fromStdString(tl.error().message);
                    } else {
                        snap.layout = LaneLayout::build(**tl, &job->cancel);
                        snap.timeline = *tl;
                    }
                }
            }
        } catch (const std::exception& e) {
            error = QString::fromLocal8Bit(e.what());
        } catch (...) {
            error = QStringLiteral("an unknown internal error");
        }
        QMetaObject::invokeMethod(
            this,
            [this, g = job->generation, snap, error, tooMany, events, limit, v0, v1] {
                std::erase_if(abandoned_, [&](const std::shared_ptr<Job>& j) {
                    return j->generation == g;
                });
                if (!running_ || running_->generation != g) return; // outdated or cancelled
                const bool cancelled = running_->cancel;
                running_.reset();
                if (cancelled) return;
                if (!error.isEmpty())
                    emit failed(error);
                else if (tooMany)
                    emit tooLarge(v0, v1, events, limit);
                else if (snap.valid())
                    emit loaded(snap);
            },
            Qt::QueuedConnection);
    });
}

} // namespace poolscope::ui
