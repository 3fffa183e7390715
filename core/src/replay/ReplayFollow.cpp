// A replay following a live set kept elsewhere (Replay::followLive, replay::LiveLead, or another
// replay's Replay::leadLive): each operation's outcome taken from the record, the blocks kept in
// a table by slot; and a replay making that record.
#include "poolscope/replay/Replay.h"

namespace poolscope::replay {

void Replay::followLive(const uint32_t* ops, size_t n) {
    follow_ = true;
    followNext_ = ops;
    followEnd_ = ops + n;
}

bool Replay::tapeTake(Block& out) {
    if (followNext_ == followEnd_) {
        followMissing_++;
        return false;
    }
    const uint32_t slot = *followNext_++;
    if (slot == kNoSlot) return false;
    if (slot >= slots_.size() || !slotLive_[slot]) {
        followMissing_++;
        return false;
    }
    out = slots_[slot];
    slotLive_[slot] = 0;
    slotsLive_--;
    return true;
}

void Replay::tapePut(Block& b) {
    if (followNext_ == followEnd_) {
        followMissing_++;
        return;
    }
    // A LiveLead (or a leading replay) hands out a slot given back before or the next new one:
    // anything past that, or a slot a block still holds, is a record of other events (and the
    // first would grow the table without bound).
    const uint32_t slot = *followNext_++;
    if (slot == kNoSlot || slot > slots_.size() || (slot < slots_.size() && slotLive_[slot])) {
        followMissing_++;
        return;
    }
    if (slot == slots_.size()) {
        slots_.emplace_back();
        slotLive_.push_back(0);
    }
    b.tag = slot;
    slots_[slot] = b;
    slotsLive_++;
    slotLive_[slot] = 1;
}

// Leading (leadLive): the slots handed out as a LiveLead hands them out.
void Replay::leadTake(const Block* found) {
    if (!found) {
        leadOut_->push_back(kNoSlot);
        return;
    }
    leadOut_->push_back(found->tag);
    leadSlots_.giveBack(found->tag);
}

void Replay::leadPut(Block& b) {
    b.tag = leadSlots_.hand();
    leadOut_->push_back(b.tag);
}

} // namespace poolscope::replay
