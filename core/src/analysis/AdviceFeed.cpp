#include "AdviceFeed.h"

namespace poolscope::detail {

AdviceFeed::AdviceFeed(replay::Replay& report, bool threaded, bool spill,
                       const whatif::Calibration& c)
    : asRecorded_({}, c), neverReleasing_(whatif::neverReleasing(), c),
      races_(c.growthGranule, c.blockAlign),
      thread_(threaded ? std::make_unique<ReplayThread>([this] { step(); }) : nullptr),
      replay_(threaded ? &thread_->replay() : &report), racesReplay_(replay_) {
    if (spill) spill_ = std::make_unique<whatif::TapeSpill>();
    asRecorded_.recordInto(&tape_);
    replay_->subscribe(&asRecorded_, whatif::PoolModel::kindMask());
    replay_->subscribe(&races_, whatif::RaceBounds::kindMask());
}

AdviceFeed::~AdviceFeed() {
    if (thread_) {
        thread_.reset(); // its replay and the models' last calls go with it
        return;
    }
    replay_->unsubscribe(&asRecorded_);
    racesReplay_->unsubscribe(&races_);
}

void AdviceFeed::racesOn(replay::Replay& other) {
    racesReplay_->unsubscribe(&races_);
    racesReplay_ = &other;
    other.subscribe(&races_, whatif::RaceBounds::kindMask());
}

void AdviceFeed::step() {
    tape_.seeStreams(*replay_);
    if (spill_) spill_->append(tape_, *replay_);
    const whatif::Op* ops = tape_.ops.data();
    neverReleasing_.feed(ops, ops + tape_.ops.size(), tape_.allocSeq.data(), tape_.allocSeq.size(),
                         tape_.streamHandles, noMute_);
    tape_.dropOps();
}

void AdviceFeed::end() {
    if (thread_) thread_->end();
    else step();
}

void AdviceFeed::finish() {
    asRecorded_.finishTape(tape_, *replay_);
    if (spill_) spill_->finish(tape_);
}

} // namespace poolscope::detail
