#pragma once
// Which events the events table shows, and where they come from. An EventSource answers the
// table's two questions about a filter, how many events match and which match from the n-th on,
// so that a file (TraceReader) and a live session (its own buffer) feed the same table, and a
// table over 100 M events holds only the rows on screen (issue #15).

#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/view/EventFilter.h"

#include <QString>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace poolscope::ui {

// The filter itself is Qt-free (poolscope/view/EventFilter.h).
using view::EventFilter;

struct EventQueryResult {
    std::vector<Event> events;
    bool truncated = false; // more matches exist after these
    QString error;
    // What the rows are drawn from, when not the whole trace (a live session's latest events):
    // a few words after the row count, and a sentence for its tooltip.
    QString note;
    QString noteDetail;
};

struct EventCountResult {
    uint64_t total = 0;
    QString error;
};

// The matches of a filter are numbered from 0 in seq order (the order a trace's chunks and a
// live session's buffer hold them); both calls run on worker threads and may be called from
// several at once, and stop early (with whatever they have) once cancel is set.
class EventSource {
public:
    virtual ~EventSource() = default;
    // The exact number of matches.
    virtual EventCountResult count(const EventFilter& f, const std::atomic<bool>& cancel) const = 0;
    // At most cap matches from the skip-th on; truncated when more follow.
    virtual EventQueryResult page(const EventFilter& f, uint64_t skip, size_t cap,
                                  const std::atomic<bool>& cancel) const = 0;
    // True when count() does not read the matching events (a file's kinds-and-time filter is
    // counted from its chunk headers): the table then counts before it fetches any row.
    virtual bool countsCheaply(const EventFilter&) const { return false; }
};

using EventProvider = std::shared_ptr<const EventSource>;

// Queries a trace file through TraceReader::forEachMatchingChunk (each call opens its own
// reader, so calls never share an SQLite connection across threads): chunks that cannot match
// are not decoded, and a page's skipped matches are counted from chunk headers where the filter
// allows. The trace's span bounds the filter's times; eventCount is not needed any more.
EventProvider fileEventProvider(const QString& path, int64_t traceT0, int64_t traceT1,
                                uint64_t eventCount);

} // namespace poolscope::ui
