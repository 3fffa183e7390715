#include "EventFilter.h"

#include "poolscope/TraceReader.h"

#include <algorithm>

namespace poolscope::ui {

EventProvider fileEventProvider(const QString& path, int64_t traceT0, int64_t traceT1,
                                uint64_t eventCount) {
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
        // About 200k events per chunk at the trace's average density: bounded memory even when
        // the range covers all of a 10M-event trace.
        const double density = double(std::max<uint64_t>(eventCount, 1)) /
                               std::max(double(traceT1) - double(traceT0), 1.0);
        const int64_t chunk = int64_t(std::clamp(200000.0 / density, 1.0, 4.0e18));
        for (int64_t t = a; t < b && !cancel.load();) {
            int64_t next = 0;
            if (__builtin_add_overflow(t, chunk, &next) || next > b) next = b;
            auto ev = (*reader)->events(t, next);
            if (!ev) {
                out.error = QString::fromStdString(ev.error().message);
                return out;
            }
            for (const Event& e : ev.value()) {
                if (!f.matches(e)) continue;
                if (out.events.size() >= cap) {
                    out.truncated = true;
                    return out;
                }
                out.events.push_back(e);
            }
            t = next;
        }
        return out;
    };
}

} // namespace poolscope::ui
