#include "MultiTraceLoader.h"

#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>

namespace poolscope::ui {

MultiTraceLoader::MultiTraceLoader(QObject* parent) : QObject(parent) {}

MultiTraceLoader::~MultiTraceLoader() {
    if (running_) abandoned_.push_back(running_);
    for (auto& b : abandoned_)
        b->cancel = true;
    for (auto& b : abandoned_)
        for (QFuture<void>& f : b->futures) {
            try {
                f.waitForFinished();
            } catch (...) { // loadTraceFile catches everything; a destructor must not throw
            }
        }
}

void MultiTraceLoader::load(const QStringList& paths, const TraceLoadOptions& options) {
    cancel();
    auto batch = std::make_shared<Batch>();
    batch->generation = ++generation_;
    batch->paths = paths;
    batch->results.resize(size_t(paths.size()));
    running_ = batch;
    emit started(paths);
    emit progress(0, int(paths.size()));
    TraceLoadOptions o;
    o.ipc = options.ipc;
    o.report = options.report;
    for (int i = 0; i < paths.size(); ++i) {
        // The job holds the batch; `this` is only reached through a queued call, which Qt drops
        // once the loader is gone (and its destructor waits for the jobs anyway).
        batch->futures.push_back(QtConcurrent::run([this, batch, i, o] {
            TraceLoadResult r = loadTraceFile(batch->paths[i], batch->cancel, o);
            QMetaObject::invokeMethod(
                this,
                [this, batch, i, r = std::move(r)]() mutable { oneDone(batch, i, std::move(r)); },
                Qt::QueuedConnection);
        }));
    }
    if (paths.isEmpty()) oneDone(batch, -1, {});
}

void MultiTraceLoader::cancel() {
    if (!running_) return;
    running_->cancel = true;
    abandoned_.push_back(running_);
    running_.reset();
    emit cancelled();
}

void MultiTraceLoader::oneDone(const std::shared_ptr<Batch>& batch, int index, TraceLoadResult r) {
    if (index >= 0) {
        batch->results[size_t(index)] = std::move(r);
        ++batch->done;
    }
    if (batch->done < int(batch->paths.size())) {
        if (batch == running_) emit progress(batch->done, int(batch->paths.size()));
        return;
    }
    std::erase(abandoned_, batch); // every job of it has ended
    if (batch != running_) return; // cancelled or replaced
    running_.reset();
    emit progress(batch->done, int(batch->paths.size()));
    emit finished(batch->paths, batch->results);
}

} // namespace poolscope::ui
