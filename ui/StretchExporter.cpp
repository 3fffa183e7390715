#include "StretchExporter.h"

#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/interop/Export.h"
#include "poolscope/interop/ProcessTree.h"

#include <QFileInfo>
#include <QMetaObject>
#include <QtConcurrent/QtConcurrentRun>
#include <cstdio>
#include <algorithm>
#include <exception>

namespace poolscope::ui {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }
} // namespace

StretchExporter::StretchExporter(QObject* parent) : QObject(parent) {}

StretchExporter::~StretchExporter() {
    cancel();
    try {
        future_.waitForFinished();
    } catch (...) {
    }
}

void StretchExporter::cancel() {
    if (cancel_) cancel_->store(true);
}

bool StretchExporter::start(const TraceSnapshot& shown, int64_t v0, int64_t v1, const QString& out) {
    if (busy() || !shown.valid() || shown.path.isEmpty()) return false;
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    const auto stop = cancel_;
    const std::string path = shown.path.toStdString(), outPath = out.toStdString();
    const auto scan = shown.scan;
    const auto stacks = shown.stacks;
    const ProcessInfo process = shown.process;
    const int64_t t0 = shown.timeline->t0;
    future_ = QtConcurrent::run([this, stop, path, outPath, scan, stacks, process, t0, v0, v1] {
        QString error, message;
        bool wasCancelled = false;
        try {
            auto reader = TraceReader::open(path);
            if (!reader) throw std::runtime_error(reader.error().message);
            if (scan) (*reader)->adoptScan(scan);
            interop::ExportInput parts;
            parts.process = process;
            if (auto threads = (*reader)->threads()) parts.threads = std::move(*threads);
            if (stacks) parts.stacks = *stacks; // symbolized at open, as the window shows them
            parts.label = QFileInfo(QString::fromStdString(path)).fileName().toStdString();
            auto ipc = interop::readIpcEvents(**reader);
            if (!ipc) throw std::runtime_error(ipc.error().message);
            parts.ipc = std::move(*ipc);
            std::FILE* f = std::fopen(outPath.c_str(), "wb");
            if (!f) throw std::runtime_error("cannot write " + outPath);
            NamesPassControl control;
            control.cancel = stop.get();
            int shown = -1;
            control.progress = [this, &shown](uint64_t d, uint64_t t) {
                const int p = t ? int(std::min<uint64_t>(d, t) * 100 / t) : 0;
                if (p == shown) return;
                shown = p;
                QMetaObject::invokeMethod(this, [this, p] { emit progress(p); }, Qt::QueuedConnection);
            };
            auto done = interop::writePerfettoStretch(**reader, std::move(parts), v0,
                                                      v1 == INT64_MAX ? v1 : v1 + 1, f, interop::kMaxStretchEvents, control);
            const bool closed = std::fclose(f) == 0;
            if (!done || !closed) {
                std::remove(outPath.c_str());
                wasCancelled = !done && done.error().code == ErrorCode::Cancelled;
                throw std::runtime_error(done ? "could not write " + outPath + " (disk full?)"
                                              : done.error().message);
            }
            message = tr("Wrote %1: %2 – %3, %4 entries. Open it at ui.perfetto.dev.")
                          .arg(QFileInfo(QString::fromStdString(outPath)).fileName(),
                               qs(formatDuration(nsBetween(t0, done->clipFromNs))),
                               qs(formatDuration(nsBetween(t0, done->clipUntilNs))),
                               qs(formatCount(done->stats.events)));
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        QMetaObject::invokeMethod(this, [this, error, message, wasCancelled] {
            if (wasCancelled)
                emit cancelled();
            else if (error.isEmpty())
                emit finished(message);
            else
                emit failed(error);
        }, Qt::QueuedConnection);
    });
    return true;
}

} // namespace poolscope::ui
