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

EventProvider LiveEventLog::provider() const {
    std::vector<std::shared_ptr<const std::vector<Event>>> blocks(blocks_.begin(), blocks_.end());
    if (!open_.empty()) blocks.push_back(std::make_shared<const std::vector<Event>>(open_));
    const uint64_t received = received_;
    const size_t held = held_;
    return [blocks = std::move(blocks), received, held](const EventFilter& f, size_t cap,
                                                        const std::atomic<bool>& cancel) {
        EventQueryResult out;
        for (const auto& b : blocks) {
            if (cancel.load()) return out;
            for (const Event& e : *b)
                if (f.matches(e)) out.events.push_back(e);
        }
        if (out.events.size() > cap) {
            out.events.erase(out.events.begin(),
                             out.events.begin() + std::ptrdiff_t(out.events.size() - cap));
            out.truncated = true;
        }
        if (received > held) {
            out.note =
                QCoreApplication::translate("LiveEventLog", "of the last %L1 received").arg(held);
            out.noteDetail =
                QCoreApplication::translate(
                    "LiveEventLog", "A live session lists only its last %L1 of %L2 events received "
                                    "so far; the trace shows all of them when the run ends.")
                    .arg(held)
                    .arg(received);
        }
        return out;
    };
}

} // namespace poolscope::ui
