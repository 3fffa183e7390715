#include "EventFilter.h"

#include "poolscope/TraceReader.h"

#include <algorithm>
#include <thread>
#include <mutex>
#include <vector>

namespace poolscope::ui {

namespace {

class FileEventSource final : public EventSource {
public:
    FileEventSource(std::string file, int64_t t0, int64_t t1)
        : file_(std::move(file)), t0_(t0), t1_(t1) {}

    EventCountResult count(const EventFilter& f, const std::atomic<bool>& cancel) const override {
        EventCountResult out;
        EventFilter r;
        if (!ranged(f, r)) return out;
        auto reader = open(out.error);
        if (!reader) return out;
        // The chunks counted from their kind counts are checked on every CPU first (up to 8).
        reader->verifyAhead(r, std::clamp(std::thread::hardware_concurrency(), 1u, 8u), &cancel);
        // countMatching's read, with a place to cancel between chunks.
        FilteredReadStats stats;
        Status st = reader->forEachMatchingChunk(
            r, [&](std::vector<Event>&) { return !cancel.load(); }, &stats,
            FilteredReadOptions{0, true});
        if (!st && st.error().code != ErrorCode::Cancelled)
            out.error = QString::fromStdString(st.error().message);
        out.total = stats.matched;
        keepScan(*reader);
        return out;
    }

    EventQueryResult page(const EventFilter& f, uint64_t skip, size_t cap,
                          const std::atomic<bool>& cancel) const override {
        EventQueryResult out;
        EventFilter r;
        if (!ranged(f, r)) return out;
        auto reader = open(out.error);
        if (!reader) return out;
        // One chunk (4,096 events) at a time: memory is the rows kept, whatever the range.
        Status st = reader->forEachMatchingChunk(
            r,
            [&](std::vector<Event>& matches) {
                for (const Event& e : matches) {
                    if (out.events.size() >= cap) {
                        out.truncated = true;
                        return false;
                    }
                    out.events.push_back(e);
                }
                return !cancel.load();
            },
            nullptr, FilteredReadOptions{skip, false});
        if (!st && st.error().code != ErrorCode::Cancelled)
            out.error = QString::fromStdString(st.error().message);
        keepScan(*reader);
        return out;
    }

    bool countsCheaply(const EventFilter& f) const override {
        return !f.failedOnly && !f.stream && !f.pool && !f.sizeActive();
    }

private:
    // Each query opens its own reader: jobs never share an SQLite connection across threads.
    // They share the first one's header scan instead, and with it which chunks' data a read
    // found intact, so that a later kind filter's count reads no chunk again (adoptScan takes
    // it only while the file is unchanged).
    std::unique_ptr<TraceReader> open(QString& error) const {
        auto reader = TraceReader::open(file_);
        if (!reader) {
            error = QString::fromStdString(reader.error().message);
            return nullptr;
        }
        (*reader)->setReuseHeaderScan(true);
        std::shared_ptr<const TraceReader::SharedScan> scan;
        {
            std::lock_guard lock(scanMutex_);
            scan = scan_;
        }
        if (scan) (*reader)->adoptScan(scan);
        return std::move(*reader);
    }

    void keepScan(const TraceReader& reader) const {
        std::lock_guard lock(scanMutex_);
        if (!scan_) scan_ = reader.sharedScan();
    }

    // The filter's times bounded by the trace's span; false when nothing can match.
    bool ranged(const EventFilter& f, EventFilter& r) const {
        // A damaged trace may start at INT64_MIN or end at INT64_MAX: no sum or difference of
        // its times may overflow (UBSan, hostile.window under the debug preset).
        const int64_t end = t1_ == INT64_MAX ? INT64_MAX : t1_ + 1;
        const int64_t a = std::max(f.t0, t0_);
        const int64_t b = f.t1 == INT64_MAX ? end : std::min(f.t1, end);
        if (b <= a) return false;
        r = f;
        r.t0 = a;
        r.t1 = b;
        return true;
    }

    std::string file_;
    int64_t t0_, t1_;
    mutable std::mutex scanMutex_;
    mutable std::shared_ptr<const TraceReader::SharedScan> scan_;
};

} // namespace

EventProvider fileEventProvider(const QString& path, int64_t traceT0, int64_t traceT1,
                                [[maybe_unused]] uint64_t eventCount) {
    return std::make_shared<FileEventSource>(path.toStdString(), traceT0, traceT1);
}

} // namespace poolscope::ui
