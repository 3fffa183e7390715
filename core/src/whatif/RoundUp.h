#pragma once
// The pool model's granule arithmetic, shared by the model and the interleavings' range: a
// hostile trace's sizes must saturate, not wrap.

#include <cstdint>
#include <limits>

namespace poolscope::whatif::detail {

inline uint64_t roundUp(uint64_t v, uint64_t step) {
    if (step == 0) return v;
    // The granule and the block alignment are powers of two: a mask, not a division, on the
    // pool model's every allocation and free.
    const uint64_t r = (step & (step - 1)) == 0 ? v & (step - 1) : v % step;
    if (r == 0) return v;
    const uint64_t add = step - r;
    return v > std::numeric_limits<uint64_t>::max() - add ? std::numeric_limits<uint64_t>::max()
                                                          : v + add;
}

} // namespace poolscope::whatif::detail
