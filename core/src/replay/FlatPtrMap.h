#pragma once
// Open-addressing map from device pointer to a value held inline (the replay's live set:
// pointer -> its Block). std::unordered_map would heap-allocate a node per allocation: on
// 10M-event traces that is millions of small objects and most of the build time; holding the
// value beside the key keeps a free's lookup to the cache lines of one probe. Key 0 marks an
// empty slot (a null pointer is never a live allocation). The keys are an array of their own,
// beside the values': a probe, and most of all the miss of an alloc's check for a pointer
// still live, reads 8 bytes a slot instead of a slot's whole value (at 100 M events the replay's
// live set outgrew the second-level cache and that check missed it at nearly every alloc).

#include <cstdint>
#include <utility>
#include <vector>

namespace poolscope::detail {

template <class V> class FlatPtrMap {
public:
    FlatPtrMap() { rehash(64); }

    // The value stored for key, or nullptr.
    const V* find(uint64_t key) const {
        for (size_t i = home(key);; i = (i + 1) & mask_) {
            if (keys_[i] == key) return &values_[i];
            if (keys_[i] == 0) return nullptr;
        }
    }

    // Inserts or overwrites.
    void put(uint64_t key, const V& value) {
        if ((count_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
        size_t i = home(key);
        while (keys_[i] != 0 && keys_[i] != key) i = (i + 1) & mask_;
        if (keys_[i] == 0) ++count_;
        keys_[i] = key;
        values_[i] = value;
    }

    // Removes key, moving its value to out; false when absent.
    bool take(uint64_t key, V& out) {
        size_t i = home(key);
        while (keys_[i] != key) {
            if (keys_[i] == 0) return false;
            i = (i + 1) & mask_;
        }
        out = values_[i];
        // Backward-shift deletion: no tombstones, so lookups stay short after millions of frees.
        for (size_t j = i;;) {
            j = (j + 1) & mask_;
            if (keys_[j] == 0) break;
            const size_t k = home(keys_[j]);
            const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (stays) continue;
            keys_[i] = keys_[j];
            values_[i] = values_[j];
            i = j;
        }
        keys_[i] = 0;
        --count_;
        return true;
    }

    // Starts loading key's first probe (its key and value) into the cache: for a caller that
    // knows the next keys ahead. The live set outgrows the caches on long traces, and each of
    // its probes was then a miss paid in full.
    void prefetch(uint64_t key) const {
        const size_t i = home(key);
        __builtin_prefetch(&keys_[i], 1);
        __builtin_prefetch(&values_[i], 1);
    }

    size_t size() const { return count_; }
    // Room for n keys without a rehash. Before putting another map's entries: they come in its
    // slots' order, which is their hashes' order, and into a table smaller than theirs that
    // order piles them into one run.
    void reserve(size_t n) {
        size_t capacity = keys_.size();
        while (n * 2 > capacity) capacity *= 2;
        if (capacity != keys_.size()) rehash(capacity);
    }

    template <class F> void forEach(F&& f) const {
        for (size_t i = 0; i < keys_.size(); ++i)
            if (keys_[i] != 0) f(values_[i]);
    }
    template <class F> void forEachEntry(F&& f) const {
        for (size_t i = 0; i < keys_.size(); ++i)
            if (keys_[i] != 0) f(keys_[i], values_[i]);
    }

private:
    size_t home(uint64_t key) const {
        // Fibonacci hashing: device pointers are aligned, so the low bits carry nothing.
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void rehash(size_t capacity) {
        std::vector<uint64_t> oldKeys = std::move(keys_);
        std::vector<V> oldValues = std::move(values_);
        keys_.assign(capacity, 0);
        values_.assign(capacity, V{});
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c >>= 1) --shift_;
        count_ = 0;
        for (size_t i = 0; i < oldKeys.size(); ++i)
            if (oldKeys[i] != 0) put(oldKeys[i], oldValues[i]);
    }

    std::vector<uint64_t> keys_;
    std::vector<V> values_;
    size_t mask_ = 0;
    unsigned shift_ = 64;
    size_t count_ = 0;
};

} // namespace poolscope::detail
