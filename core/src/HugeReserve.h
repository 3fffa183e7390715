#pragma once
// One up-front allocation for a vector that will grow big, backed by transparent huge pages
// where the kernel offers them (Linux, THP "madvise" mode, the common default). A 10M-event
// timeline is ~600 MB of vectors: grown by doubling, each element is copied once or twice and
// every 4 KiB page faults in separately, a third of a build spent in the kernel. Reserved once
// and advised, the data is written in place and faults once per 2 MiB.
// Pages of the reservation that are never written are never faulted in, so reserving for an
// upper bound costs address space, not memory.

#include <cstdint>
#include <vector>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace poolscope::detail {

template <class T> void reserveHuge(std::vector<T>& v, size_t n) {
    if (n <= v.capacity()) return;
    v.reserve(n);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    constexpr uintptr_t kHuge = uintptr_t{2} << 20;
    const size_t bytes = v.capacity() * sizeof(T);
    if (bytes < 4 * kHuge) return; // small: not worth a system call
    // Only whole huge pages inside the block; the ends keep small pages. Advisory: failure is
    // harmless (no THP support), so the result is ignored.
    const auto begin = reinterpret_cast<uintptr_t>(v.data());
    const uintptr_t a = (begin + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t e = (begin + bytes) & ~(kHuge - 1);
    if (e > a) (void)madvise(reinterpret_cast<void*>(a), e - a, MADV_HUGEPAGE);
#endif
}

} // namespace poolscope::detail
