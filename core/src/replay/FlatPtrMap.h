#pragma once
// Open-addressing map from device pointer to a value held inline (the replay's live set:
// pointer -> its Block). std::unordered_map would heap-allocate a node per allocation: on
// 10M-event traces that is millions of small objects and most of the build time; holding the
// value beside the key keeps a free's lookup to the cache lines of one probe. Key 0 marks an
// empty slot (a null pointer is never a live allocation).

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
            if (slots_[i].key == key) return &slots_[i].value;
            if (slots_[i].key == 0) return nullptr;
        }
    }

    // Inserts or overwrites.
    void put(uint64_t key, const V& value) {
        if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
        size_t i = home(key);
        while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask_;
        if (slots_[i].key == 0) ++count_;
        slots_[i].key = key;
        slots_[i].value = value;
    }

    // Removes key, moving its value to out; false when absent.
    bool take(uint64_t key, V& out) {
        size_t i = home(key);
        while (slots_[i].key != key) {
            if (slots_[i].key == 0) return false;
            i = (i + 1) & mask_;
        }
        out = slots_[i].value;
        // Backward-shift deletion: no tombstones, so lookups stay short after millions of frees.
        for (size_t j = i;;) {
            j = (j + 1) & mask_;
            if (slots_[j].key == 0) break;
            const size_t k = home(slots_[j].key);
            const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (stays) continue;
            slots_[i] = slots_[j];
            i = j;
        }
        slots_[i].key = 0;
        --count_;
        return true;
    }

    size_t size() const { return count_; }

    template <class F> void forEach(F&& f) const {
        for (const Slot& s : slots_)
            if (s.key != 0) f(s.value);
    }

private:
    struct Slot {
        uint64_t key;
        V value;
    };
    size_t home(uint64_t key) const {
        // Fibonacci hashing: device pointers are aligned, so the low bits carry nothing.
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void rehash(size_t capacity) {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(capacity, Slot{0, V{}});
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c >>= 1) --shift_;
        count_ = 0;
        for (const Slot& s : old)
            if (s.key != 0) put(s.key, s.value);
    }

    std::vector<Slot> slots_;
    size_t mask_ = 0;
    unsigned shift_ = 64;
    size_t count_ = 0;
};

} // namespace poolscope::detail
