#include "TraceLoader.h"

#include "poolscope/Symbolizer.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"

#include <QFileInfo>
#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>
#include <exception>

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
        TraceSnapshot snap;
        QString error;
        bool wasCancelled = false;
        // Nothing may escape the worker: QFuture keeps the exception and rethrows it from
        // waitForFinished(), i.e. from ~TraceLoader, and the window aborted on exit after a
        // damaged file that made the build throw (issue #12). The load fails with the reason.
        try {
            auto reader = TraceReader::open(job->path.toStdString());
            if (!reader) {
                error = QString::fromStdString(reader.error().message);
            } else {
                snap.path = QFileInfo(job->path).absoluteFilePath();
                snap.title = QFileInfo(job->path).fileName();
                if (auto p = (*reader)->process()) snap.process = p.value();
                job->phase = 1;
                BuildOptions options;
                options.progress = [&](uint64_t done, uint64_t total) {
                    job->done = done;
                    job->total = total;
                };
                options.cancel = &job->cancel;
                if (partialAfter.count() >= 0) {
                    options.partialAfter = partialAfter;
                    options.partialAfterEvents = partialAfterEvents;
                    // Runs on this thread while the build waits: the partial timeline is small (it
                    // is taken early), so its lane layout is quick.
                    options.onPartial = [&](std::shared_ptr<const Timeline> tl) {
                        TraceSnapshot part = snap;
                        part.layout = LaneLayout::build(*tl, &job->cancel);
                        if (!part.layout) return; // cancelled
                        part.timeline = std::move(tl);
                        QMetaObject::invokeMethod(
                            this, [this, g = job->generation, part] { partial(g, part); },
                            Qt::QueuedConnection);
                    };
                }
                // A damaged trace shows what is intact, and says what was left out.
                (*reader)->setSkipDamaged(true);
                auto tl = buildTimeline(**reader, options);
                for (const TraceDamage& d : (*reader)->damage())
                    snap.damage << (d.events ? tr("%1 (%2 events)")
                                                   .arg(QString::fromStdString(d.what))
                                                   .arg(d.events)
                                             : QString::fromStdString(d.what));
                if (!tl) {
                    if (tl.error().code == ErrorCode::Cancelled)
                        wasCancelled = true;
                    else
                        error = QString::fromStdString(tl.error().message);
                } else {
                    job->phase = 2;
                    snap.layout = LaneLayout::build(*tl.value(), &job->cancel);
                    if (!snap.layout) wasCancelled = true;
                    snap.timeline = tl.value();
                    // The call sites, named where the binaries (or their debug files, by
                    // build-id) are found on this machine; a trace recorded without stacks has
                    // none. Damaged stack tables leave the stacks out and say so.
                    job->phase = 3;
                    if (auto st = (*reader)->stacks()) {
                        if (!st->sites.empty()) symbolize(*st);
                        snap.stacks = std::make_shared<const StackTables>(std::move(*st));
                    } else {
                        snap.damage << tr("call stacks left out: %1")
                                           .arg(QString::fromStdString(st.error().message));
                    }
                }
            }
        } catch (const std::exception& e) {
            error = tr("Loading stopped on an internal error: %1. The file may be damaged.")
                        .arg(QString::fromLocal8Bit(e.what()));
        } catch (...) {
            error = tr("Loading stopped on an unknown internal error. The file may be damaged.");
        }
        if (job->cancel) wasCancelled = true;
        QMetaObject::invokeMethod(
            this,
            [this, g = job->generation, snap, error, wasCancelled] {
                finish(g, snap, error, wasCancelled);
            },
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
