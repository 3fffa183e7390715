#pragma once
// The live set of pool blocks kept once for replays that follow it (Replay::followLive, issue #15).
// Internal to core.
//
// Only which slot each live pointer holds: for each operation an event makes on the live set, in
// the order Replay::apply makes them (an alloc takes its pointer, then puts it; a free and a
// cudaFree of a pool block take it; a pointer import takes it, then puts the mapping), the slot
// put or taken is written down, or Replay::kNoSlot for a take that found nothing. A slot is
// given back when its block is taken and handed out again (LiveSlots).
// The conditions under which an event touches the live set are Replay::apply's; ReplayFollowTest
// holds the two to the same facts on every sample and generated trace.

#include <cstdint>
#include <vector>

#include "FlatPtrMap.h"
#include "poolscope/Event.h"
#include "poolscope/EventFields.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::replay {

class LiveLead {
public:
    // `e` in seq order (samples make no operation and need not be given).
    void apply(const Event& e, std::vector<uint32_t>& ops) {
        switch (e.kind) {
        case EventKind::Alloc: {
            if (e.failed()) return;
            const uint64_t ptr = AllocFields::of(e).ptr;
            if (ptr == 0) return;
            take(ptr, ops);
            put(ptr, ops);
            return;
        }
        case EventKind::Free: {
            const uint64_t ptr = FreeFields::of(e).ptr;
            if (ptr == 0 || e.failed()) return;
            take(ptr, ops);
            return;
        }
        case EventKind::DeviceFree:
            if (e.failed() || e.ptr == 0) return;
            take(e.ptr, ops);
            return;
        case EventKind::PointerImport: {
            const uint64_t ptr = SharedPointerFields::of(e).ptr;
            if (e.failed() || ptr == 0) return;
            take(ptr, ops);
            put(ptr, ops);
            return;
        }
        default: return;
        }
    }
    // Starts loading the slot `e`'s pointer will be looked up in (a caller holding events ahead).
    void prefetch(const Event& e) const {
        if ((e.kind == EventKind::Alloc || e.kind == EventKind::Free) && e.ptr != 0) live_.prefetch(e.ptr);
    }
    size_t liveCount() const { return live_.size(); }

private:
    void take(uint64_t ptr, std::vector<uint32_t>& ops) {
        uint32_t slot = Replay::kNoSlot;
        if (live_.take(ptr, slot)) slots_.giveBack(slot);
        ops.push_back(slot);
    }
    void put(uint64_t ptr, std::vector<uint32_t>& ops) {
        const uint32_t slot = slots_.hand();
        live_.put(ptr, slot);
        ops.push_back(slot);
    }

    detail::FlatPtrMap<uint32_t> live_;
    LiveSlots slots_;
};

} // namespace poolscope::replay
