#pragma once
// Loads several traces at once off the UI thread (the window's lanes per process and its compare
// mode): one loadTraceFile per file on Qt's thread pool, results handed out together, in the
// order the files were given, once the last one is in. A file that cannot be read does not stop
// the others: its result carries the error. A newer batch cancels the older one.

#include "TraceLoad.h"

#include <QFuture>
#include <QObject>
#include <QStringList>
#include <memory>
#include <vector>

namespace poolscope::ui {

class MultiTraceLoader : public QObject {
    Q_OBJECT
public:
    explicit MultiTraceLoader(QObject* parent = nullptr);
    ~MultiTraceLoader() override; // cancels and waits for the running jobs

    // Only options.ipc and options.report are used (no partial snapshots here).
    void load(const QStringList& paths, const TraceLoadOptions& options);
    void cancel();
    bool busy() const { return running_ != nullptr; }

signals:
    void started(const QStringList& paths);
    void progress(int filesDone, int files);
    // Every file's result, parallel to `paths`.
    void finished(const QStringList& paths,
                  const std::vector<poolscope::ui::TraceLoadResult>& results);
    void cancelled();

private:
    struct Batch {
        quint64 generation = 0;
        QStringList paths;
        std::vector<TraceLoadResult> results;
        int done = 0;
        std::atomic<bool> cancel{false};
        std::vector<QFuture<void>> futures;
    };
    void oneDone(const std::shared_ptr<Batch>& batch, int index, TraceLoadResult r);

    quint64 generation_ = 0;
    std::shared_ptr<Batch> running_;
    std::vector<std::shared_ptr<Batch>> abandoned_;
};

} // namespace poolscope::ui
