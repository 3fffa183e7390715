#include "LiveEventLog.h"

#include <QCoreApplication>
#include <algorithm>

namespace poolscope::ui {

LiveEventLog::LiveEventLog(size_t capacity, size_t blockEvents)
    : capacity_(std::max<size_t>(capacity, 1)), blockEvents_(std::max<size_t>(blockEvents, 1)) {
    open_.reserve(std::min(blockEvents_, capacity_));
}

void LiveEventLog::clear() {
    blocks_.clear();
    open_.clear();
    held_ = 0;
    received_ = 0;
}

void LiveEventLog::seal() {
    if (open_.empty()) return;
    blocks_.push_back(std::make_shared<const std::vector<Event>>(std::move(open_)));
    open_ = {};
    open_.reserve(std::min(blockEvents_, capacity_));
}

void LiveEventLog::append(std::span<const Event> events) {
    received_ += events.size();
    for (const Event& e : events) {
        open_.push_back(e);
        ++held_;
        if (open_.size() >= blockEvents_) seal();
    }
    // Whole blocks go, oldest first, once the newer ones alone reach the capacity: at most one
    // block more than the capacity is held.
    while (!blocks_.empty() && held_ - blocks_.front()->size() >= capacity_) {
        held_ -= blocks_.front()->size();
        blocks_.pop_front();
    }
}

namespace {

// The blocks held when the provider was made: full blocks are shared, the open one copied.
class LiveEventSource final : public EventSource {
public:
    LiveEventSource(std::vector<std::shared_ptr<const std::vector<Event>>> blocks,
                    uint64_t received, size_t held)
        : blocks_(std::move(blocks)), received_(received), held_(held) {}

    EventCountResult count(const EventFilter& f, const std::atomic<bool>& cancel) const override {
        EventCountResult out;
        for (const auto& b : blocks_) {
            if (cancel.load()) return out;
            for (const Event& e : *b) out.total += f.matches(e);
        }
        return out;
    }

    EventQueryResult page(const EventFilter& f, uint64_t skip, size_t cap,
                          const std::atomic<bool>& cancel) const override {
        EventQueryResult out;
        for (const auto& b : blocks_) {
            if (cancel.load()) return out;
            for (const Event& e : *b) {
                if (!f.matches(e)) continue;
                if (skip) {
                    --skip;
                } else if (out.events.size() >= cap) {
                    out.truncated = true;
                    break;
                } else {
                    out.events.push_back(e);
                }
            }
            if (out.truncated) break;
        }
        if (received_ > held_) {
            out.note =
                QCoreApplication::translate("LiveEventLog", "of the last %L1 received").arg(held_);
            out.noteDetail =
                QCoreApplication::translate(
                    "LiveEventLog", "A live session lists only its last %L1 of %L2 events received "
                                    "so far; the trace shows all of them when the run ends.")
                    .arg(held_)
                    .arg(received_);
        }
        return out;
    }

    // Its buffer is bounded (LiveEventLog's capacity): counting is one pass over it.
    bool countsCheaply(const EventFilter&) const override { return true; }

private:
    std::vector<std::shared_ptr<const std::vector<Event>>> blocks_;
    uint64_t received_;
    size_t held_;
};

} // namespace

EventProvider LiveEventLog::provider() const {
    std::vector<std::shared_ptr<const std::vector<Event>>> blocks(blocks_.begin(), blocks_.end());
    if (!open_.empty()) blocks.push_back(std::make_shared<const std::vector<Event>>(open_));
    return std::make_shared<LiveEventSource>(std::move(blocks), received_, held_);
}

} // namespace poolscope::ui
