#pragma once
// The most recent events of a live session, for the events table. Bounded: a long run would
// otherwise hold every event twice (the timeline keeps what it draws; the whole run is in the
// trace file, which the window opens when the run ends). Events are kept in blocks that are
// immutable once full, so a query running on a worker thread reads a fixed set of them while
// new events keep arriving on the UI thread.

#include "EventFilter.h"
#include "poolscope/Event.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

namespace poolscope::ui {

class LiveEventLog {
public:
    // 100,000 events: 9.6 MB, and half the table's own row cap (EventsPanel::kRowCap).
    static constexpr size_t kDefaultCapacity = 100000;
    explicit LiveEventLog(size_t capacity = kDefaultCapacity, size_t blockEvents = 4096);

    void append(std::span<const Event> events);
    void clear();
    size_t size() const { return held_; }           // events held now
    uint64_t received() const { return received_; } // since the last clear()
    size_t capacity() const { return capacity_; }

    // Answers queries over the events held at this call (later ones need a new provider), in
    // arrival (seq) order; the events table asks for all of them (at most the capacity).
    EventProvider provider() const;

private:
    void seal();

    size_t capacity_;
    size_t blockEvents_;
    std::deque<std::shared_ptr<const std::vector<Event>>> blocks_; // full blocks, oldest first
    std::vector<Event> open_;                                      // the block being filled
    size_t held_ = 0;
    uint64_t received_ = 0;
};

} // namespace poolscope::ui
