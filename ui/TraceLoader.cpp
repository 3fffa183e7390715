#include "TraceLoader.h"

#include "TraceLoad.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>

namespace poolscope::ui {

TraceLoader::TraceLoader(QObject* parent) : QObject(parent) {
    // Progress is polled from atomics rather than signalled per batch: the worker never waits
    // on the UI and the UI never gets flooded.
    poll_.setInterval(100);
    connect(&poll_, &QTimer::timeout, this, [this] {
        if (!running_) return;
        const uint64_t total = running_->total.load(), done = running_->done.load();
        const int phase = running_->phase.load();
        int pct = total ? int(done * 90 / total) : 0;
        if (phase == 2) pct = 95;
        if (phase == 3) pct = 97;
        emit progress(pct, phase == 0   ? tr("Opening")
                           : phase == 1 ? tr("Reading events")
                           : phase == 2 ? tr("Laying out lanes")
                                        : tr("Naming call sites"));
    });
}

TraceLoader::~TraceLoader() {
    if (running_) running_->cancel = true;
    for (auto& j : abandoned_)
        j->cancel = true;
    // The worker catches everything; this is a second guard, as a destructor must not throw.
    auto wait = [](Job& j) {
        try {
            j.future.waitForFinished();
        } catch (...) {
        }
    };
    if (running_) wait(*running_);
    for (auto& j : abandoned_)
        wait(*j);
}

void TraceLoader::load(const QString& path) {
    cancel();
    auto job = std::make_shared<Job>();
    job->generation = ++generation_;
    job->path = path;
    running_ = job;
    emit started(path);
    poll_.start();
    // The job owns a reference to its own state; `this` is only touched through a queued call,
    // which Qt drops if the loader is gone (and the destructor waits for jobs anyway).
    const auto partialAfter = partialAfter_;
    const uint64_t partialAfterEvents = partialAfterEvents_;
    job->future = QtConcurrent::run([this, job, partialAfter, partialAfterEvents] {
        TraceLoadOptions o;
        o.phase = &job->phase;
        o.progress = [&](uint64_t done, uint64_t total) {
            job->done = done;
            job->total = total;
        };
        o.shortFirstLoad = true; // the window reads the rest by range (RangeLoader)
        o.partialAfter = partialAfter;
        o.partialAfterEvents = partialAfterEvents;
        o.onPartial = [this, g = job->generation](const TraceSnapshot& part) {
            QMetaObject::invokeMethod(
                this, [this, g, part] { partial(g, part); }, Qt::QueuedConnection);
        };
        TraceLoadResult r = loadTraceFile(job->path, job->cancel, o);
        QMetaObject::invokeMethod(
            this,
            [this, g = job->generation, snap = std::move(r.snap), error = r.error,
             wasCancelled = r.cancelled] { finish(g, snap, error, wasCancelled); },
            Qt::QueuedConnection);
    });
}

void TraceLoader::cancel() {
    if (!running_) return;
    running_->cancel = true;
    const QString path = running_->path;
    abandoned_.push_back(running_);
    running_.reset();
    poll_.stop();
    emit cancelled(path);
}

void TraceLoader::partial(quint64 generation, const TraceSnapshot& snap) {
    if (!running_ || generation != running_->generation) return; // stale or cancelled
    emit partialLoaded(snap);
}

void TraceLoader::finish(quint64 generation, TraceSnapshot snap, QString error, bool wasCancelled) {
    std::erase_if(abandoned_,
                  [&](const std::shared_ptr<Job>& j) { return j->generation == generation; });
    if (!running_ || generation != running_->generation) return; // stale: a newer load won
    const QString path = running_->path;
    running_.reset();
    poll_.stop();
    if (wasCancelled)
        emit cancelled(path);
    else if (!error.isEmpty())
        emit failed(path, error);
    else
        emit loaded(snap);
}

} // namespace poolscope::ui
