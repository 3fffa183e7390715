#include "EventFilter.h"

#include "poolscope/TraceReader.h"

#include <algorithm>
#include <vector>

namespace poolscope::ui {

EventProvider fileEventProvider(const QString& path, int64_t traceT0, int64_t traceT1,
                                [[maybe_unused]] uint64_t eventCount) {
    const std::string file = path.toStdString();
    return [=](const EventFilter& f, size_t cap, const std::atomic<bool>& cancel) {
        EventQueryResult out;
        auto reader = TraceReader::open(file);
        if (!reader) {
            out.error = QString::fromStdString(reader.error().message);
            return out;
        }
        // A damaged trace may start at INT64_MIN or end at INT64_MAX: no sum or difference of
        // its times may overflow (UBSan, hostile.window under the debug preset).
        const int64_t end = traceT1 == INT64_MAX ? INT64_MAX : traceT1 + 1;
        const int64_t a = std::max(f.t0, traceT0);
        const int64_t b = f.t1 == INT64_MAX ? end : std::min(f.t1, end);
        if (b <= a) return out;
        // One chunk (4,096 events) at a time, passing over chunks that cannot match on their
        // kinds and chunk_index rows (issue #15): memory is the rows kept, whatever the range.
        EventFilter ranged = f;
        ranged.t0 = a;
        ranged.t1 = b;
        Status st = (*reader)->forEachMatchingChunk(ranged, [&](std::vector<Event>& matches) {
            for (const Event& e : matches) {
                if (out.events.size() >= cap) {
                    out.truncated = true;
                    return false;
                }
                out.events.push_back(e);
            }
            return !cancel.load();
        });
        if (!st && st.error().code != ErrorCode::Cancelled)
            out.error = QString::fromStdString(st.error().message);
        return out;
    };
}

} // namespace poolscope::ui
