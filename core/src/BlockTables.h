#pragma once
// Event codec 6's tables (EventCodec.h, "Version 6"): the blocks a chunk allocated and has not
// freed, and the pointers it freed and has not handed out again, with which a free names its
// block and a reusing alloc its pointer. Internal to EventCodec.cpp.

#include <cstdint>
#include <cstring>
#include <vector>

#include "poolscope/Event.h"

namespace poolscope::codec6 {

// The two tables of the header comment: blocks allocated in this chunk and not yet freed (a
// free names one by its rank, newest first), and pointers freed in this chunk and not yet
// handed out again (an alloc that reuses one names it by its depth). Both keep their order
// (taking the last entry into a freed block's place instead costs 2-7 % more bytes on the
// samples) and are bounded, so a hostile chunk costs at most one table's move per event.
struct BlockTables {
    static constexpr uint32_t kLive = 1024, kFreed = 64;
    // Entries leaving a full table at once (the oldest), so that a full table is moved once per
    // so many additions rather than at each.
    static constexpr uint32_t kLiveDrop = 256, kFreedDrop = 16;
    struct Block {
        uint64_t ptr, size;
    };
    Block live[kLive];
    uint64_t freed[kFreed];
    uint32_t nLive = 0, nFreed = 0;
    // The bases of a pointer that no table predicts: the last such alloc's, free's, and other
    // event's pointer (allocs of new memory climb; a kind's handles repeat).
    uint64_t lastAlloc = 0, lastFree = 0, lastOther = 0;

    void reset() {
        nLive = nFreed = 0;
        lastAlloc = lastFree = lastOther = 0;
    }
    // (A free of the newest block, the usual case, moves nothing: no call then.)
    void dropLive(uint32_t i) {
        if (--nLive > i) std::memmove(live + i, live + i + 1, (nLive - i) * sizeof(Block));
    }
    void addLive(uint64_t ptr, uint64_t size) {
        if (nLive == kLive) [[unlikely]] {
            std::memmove(live, live + kLiveDrop, (kLive - kLiveDrop) * sizeof(Block));
            nLive -= kLiveDrop;
        }
        live[nLive++] = {ptr, size};
    }
    void dropFreed(uint32_t i) {
        if (--nFreed > i) std::memmove(freed + i, freed + i + 1, (nFreed - i) * 8);
    }
    void addFreed(uint64_t ptr) {
        if (nFreed == kFreed) [[unlikely]] {
            std::memmove(freed, freed + kFreedDrop, (kFreed - kFreedDrop) * 8);
            nFreed -= kFreedDrop;
        }
        freed[nFreed++] = ptr;
    }

    // Encoder: the real event e -> the residuals of ptr and size, and e's reference (0: none).
    uint32_t forward(Event& e) {
        uint32_t ref = 0;
        const uint64_t ptr = e.ptr, size = e.size;
        if (e.kind == EventKind::Alloc) {
            uint32_t i = nFreed;
            while (i > 0 && freed[i - 1] != ptr) --i;
            if (i > 0) {
                ref = nFreed - i + 1;
                e.ptr = 0;
                dropFreed(i - 1);
            } else {
                e.ptr = ptr - lastAlloc;
                lastAlloc = ptr;
            }
            addLive(ptr, size);
        } else if (e.kind == EventKind::Free) {
            uint32_t i = nLive;
            while (i > 0 && live[i - 1].ptr != ptr) --i;
            if (i > 0) {
                ref = nLive - i + 1;
                e.ptr = 0;
                e.size -= live[i - 1].size;
                dropLive(i - 1);
            } else {
                e.ptr = ptr - lastFree;
                lastFree = ptr;
            }
            addFreed(ptr);
        } else {
            e.ptr = ptr - lastOther;
            lastOther = ptr;
        }
        return ref;
    }
};

// The decoder's copy of the same tables: the live table holds each block's index into the
// chunk's allocations (4 bytes where the encoder moves 16), since a free of a block deep in the
// table moves every newer entry. One branch on the kind, each kind doing only its own work:
// measured faster than computing every kind's result and selecting (1-5 ns an event on the
// generator and the samples, docs/PERFORMANCE.md), though allocs and frees alternate
// unpredictably.
struct BlockTablesDecoder {
    static constexpr uint32_t kLive = BlockTables::kLive, kFreed = BlockTables::kFreed;
    std::vector<BlockTables::Block> allocs; // the chunk's, in order (+ 1 spare)
    uint32_t live[kLive + 1];
    uint64_t freed[kFreed + 1];
    uint32_t nLive = 0, nFreed = 0, nAllocs = 0;
    uint64_t lastAlloc = 0, lastFree = 0, lastOther = 0;

    void reset(uint64_t count) {
        allocs.resize(count + 1);
        nLive = nFreed = nAllocs = 0;
        live[0] = 0; // the spare slot always names an allocation of this chunk (or the spare)
        lastAlloc = lastFree = lastOther = 0;
    }
    // Residuals and reference (0 for other kinds) -> the real ptr and size; false for a
    // reference that names no entry of its table.
    bool inverse(uint64_t kind, uint64_t& ePtr, uint64_t& eSize, uint64_t ref) {
        const uint32_t r = static_cast<uint32_t>(ref);
        if (kind == uint64_t(EventKind::Alloc)) {
            if (ref > nFreed) return false;
            uint64_t ptr;
            if (r) {
                const uint32_t i = nFreed - r;
                ptr = ePtr + freed[i];
                if (--nFreed > i) std::memmove(freed + i, freed + i + 1, (nFreed - i) * 8);
            } else {
                ptr = ePtr + lastAlloc;
                lastAlloc = ptr;
            }
            ePtr = ptr;
            if (nLive == kLive) [[unlikely]] {
                std::memmove(live, live + BlockTables::kLiveDrop, (kLive - BlockTables::kLiveDrop) * 4);
                nLive -= BlockTables::kLiveDrop;
            }
            allocs[nAllocs] = {ptr, eSize};
            live[nLive++] = nAllocs++;
            return true;
        }
        if (kind == uint64_t(EventKind::Free)) {
            if (ref > nLive) return false;
            uint64_t ptr;
            if (r) {
                const uint32_t i = nLive - r;
                const BlockTables::Block& b = allocs[live[i]];
                ptr = ePtr + b.ptr;
                eSize += b.size;
                if (--nLive > i) std::memmove(live + i, live + i + 1, (nLive - i) * 4);
            } else {
                ptr = ePtr + lastFree;
                lastFree = ptr;
            }
            ePtr = ptr;
            if (nFreed == kFreed) [[unlikely]] {
                std::memmove(freed, freed + BlockTables::kFreedDrop, (kFreed - BlockTables::kFreedDrop) * 8);
                nFreed -= BlockTables::kFreedDrop;
            }
            freed[nFreed++] = ptr;
            return true;
        }
        if (ref) return false;
        ePtr += lastOther;
        lastOther = ePtr;
        return true;
    }
};

} // namespace poolscope::codec6
