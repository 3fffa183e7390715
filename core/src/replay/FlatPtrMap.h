#pragma once
// Open-addressing map from device pointer to a 64-bit value (the replay's live set: pointer ->
// the slot of its Block).
// std::unordered_map would heap-allocate a node per allocation: on 10M-event traces that is
// millions of small objects and most of the build time. Key 0 marks an empty slot (a null
// pointer is never a live allocation).

#include <cstdint>
#include <vector>

namespace poolscope::detail {

class FlatPtrMap {
public:
    FlatPtrMap() { rehash(64); }

    static constexpr uint64_t kAbsent = ~uint64_t{0};

    // Returns the value stored for key, or kAbsent.
    uint64_t find(uint64_t key) const {
        for (size_t i = home(key);; i = (i + 1) & mask_) {
            if (keys_[i] == key) return vals_[i];
            if (keys_[i] == 0) return kAbsent;
        }
    }

    // Inserts or overwrites.
    void put(uint64_t key, uint64_t value) {
        if ((count_ + 1) * 2 > keys_.size()) rehash(keys_.size() * 2);
        size_t i = home(key);
        while (keys_[i] != 0 && keys_[i] != key) i = (i + 1) & mask_;
        if (keys_[i] == 0) ++count_;
        keys_[i] = key;
        vals_[i] = value;
    }

    // Removes key and returns its value, or kAbsent when absent.
    uint64_t take(uint64_t key) {
        size_t i = home(key);
        while (keys_[i] != key) {
            if (keys_[i] == 0) return kAbsent;
            i = (i + 1) & mask_;
        }
        const uint64_t value = vals_[i];
        // Backward-shift deletion: no tombstones, so lookups stay short after millions of frees.
        for (size_t j = i;;) {
            j = (j + 1) & mask_;
            if (keys_[j] == 0) break;
            const size_t k = home(keys_[j]);
            const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (stays) continue;
            keys_[i] = keys_[j];
            vals_[i] = vals_[j];
            i = j;
        }
        keys_[i] = 0;
        --count_;
        return value;
    }

    size_t size() const { return count_; }

private:
    size_t home(uint64_t key) const {
        // Fibonacci hashing: device pointers are aligned, so the low bits carry nothing.
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }
    void rehash(size_t capacity) {
        std::vector<uint64_t> oldKeys = std::move(keys_);
        std::vector<uint64_t> oldVals = std::move(vals_);
        keys_.assign(capacity, 0);
        vals_.assign(capacity, 0);
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c >>= 1) --shift_;
        count_ = 0;
        for (size_t i = 0; i < oldKeys.size(); ++i)
            if (oldKeys[i] != 0) put(oldKeys[i], oldVals[i]);
    }

    std::vector<uint64_t> keys_;
    std::vector<uint64_t> vals_;
    size_t mask_ = 0;
    unsigned shift_ = 64;
    size_t count_ = 0;
};

} // namespace poolscope::detail
