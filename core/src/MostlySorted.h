#pragma once
// A min-queue for what arrives nearly in order (internal to core).

#include <deque>
#include <functional>
#include <queue>
#include <vector>

namespace poolscope::detail {

// A min-queue for items that mostly arrive in order (by time, at the events' pace): an item not
// below the last one queued in order joins that run's back, the others a heap, and the lesser of
// the two fronts comes out first. Items compare by a total order (operator>), so they come out
// exactly as from one heap, without a heap's cache misses on every push and pop of a long queue.
template <class T>
class MostlySorted {
public:
    void push(T v) {
        if (run_.empty() || !(run_.back() > v))
            run_.push_back(std::move(v));
        else
            heap_.push(std::move(v));
    }
    bool empty() const { return run_.empty() && heap_.empty(); }
    size_t size() const { return run_.size() + heap_.size(); }
    const T& top() const { return fromHeap() ? heap_.top() : run_.front(); }
    void pop() {
        if (fromHeap())
            heap_.pop();
        else
            run_.pop_front();
    }

private:
    bool fromHeap() const { return run_.empty() || (!heap_.empty() && run_.front() > heap_.top()); }
    std::deque<T> run_;
    std::priority_queue<T, std::vector<T>, std::greater<>> heap_;
};

} // namespace poolscope::detail
