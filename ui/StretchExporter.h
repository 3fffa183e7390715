#pragma once
// File > Export Visible Stretch to Perfetto…: the stretch of the trace the timeline shows,
// written as `poolscope export --from --to` writes it (interop::writePerfettoStretch: the whole
// trace's names, the blocks live before the stretch, the stretch's chunks only), on a worker
// thread so that the window stays responsive while the names pass reads the trace.

#include "TraceSnapshot.h"

#include <QFuture>
#include <QObject>
#include <QString>
#include <atomic>
#include <cstdint>
#include <memory>

namespace poolscope::ui {

class StretchExporter : public QObject {
    Q_OBJECT
public:
    explicit StretchExporter(QObject* parent = nullptr);
    ~StretchExporter() override; // waits for a running export
    bool busy() const { return future_.isRunning(); }
    // Starts writing [v0, v1] of the trace file `shown` came from to `out`; false while another
    // export runs.
    bool start(const TraceSnapshot& shown, int64_t v0, int64_t v1, const QString& out);
    // Stops a running export at its next chunk: the half-written file is removed, cancelled()
    // follows.
    void cancel();

signals:
    void progress(int percent); // of the names pass, the long part
    void finished(const QString& message);
    void failed(const QString& message);
    void cancelled();

private:
    QFuture<void> future_;
    std::shared_ptr<std::atomic<bool>> cancel_;
};

} // namespace poolscope::ui
