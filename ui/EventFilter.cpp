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
        const int64_t a = std::max(f.t0, traceT0);
        const int64_t b = f.t1 == INT64_MAX ? traceT1 + 1 : std::min(f.t1, traceT1 + 1);
        if (b <= a) return out;
        // About 200k events per chunk at the trace's average density: bounded memory even when
        // the range covers all of a 10M-event trace.
        const double density = double(std::max<uint64_t>(eventCount, 1)) /
                               double(std::max<int64_t>(traceT1 - traceT0, 1));
        const int64_t chunk = std::max<int64_t>(1, int64_t(200000.0 / density));
        for (int64_t t = a; t < b && !cancel.load(); t += chunk) {
            auto ev = (*reader)->events(t, std::min(b, t + chunk));
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
        }
        return out;
    };
}

} // namespace poolscope::ui
