#include "AdviceFeed.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

namespace poolscope::detail {

// The spill and the never-releasing model on a thread of their own: steps handed over in
// order, at most kDepth waiting, their buffers given back for the next.
struct AdviceFeed::Follower {
    static constexpr size_t kDepth = 4;
    std::mutex m;
    std::condition_variable ready, room;
    std::deque<Handed> queue;
    std::vector<Handed> spares;
    bool end = false, drop = false;
    std::thread thread;
    whatif::Tape tape;                   // the step being followed, with every stream seen
    std::vector<uint64_t> poolHandles;   // every pool seen
};

AdviceFeed::AdviceFeed(replay::Replay& report, bool threaded, bool spill,
                       const whatif::Calibration& c, bool follower)
    : asRecorded_({}, c), neverReleasing_(whatif::neverReleasing(), c),
      races_(c.growthGranule, c.blockAlign),
      thread_(threaded ? std::make_unique<ReplayThread>([this] { step(); }) : nullptr),
      replay_(threaded ? &thread_->replay() : &report), racesReplay_(replay_) {
    if (spill) spill_ = std::make_unique<whatif::TapeSpill>();
    asRecorded_.recordInto(&tape_);
    replay_->subscribe(&asRecorded_, whatif::PoolModel::kindMask());
    replay_->subscribe(&races_, whatif::RaceBounds::kindMask());
    if (threaded && follower) {
        follower_ = std::make_unique<Follower>();
        try {
            if (replayThreadsSimulatedAway())
                throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
            follower_->thread = std::thread([this] {
                Follower& f = *follower_;
                for (;;) {
                    Handed h;
                    {
                        std::unique_lock lk(f.m);
                        f.ready.wait(lk, [&] { return f.end || !f.queue.empty(); });
                        if (f.queue.empty() || f.drop) return;
                        h = std::move(f.queue.front());
                        f.queue.pop_front();
                    }
                    f.room.notify_one();
                    f.tape.streamHandles.insert(f.tape.streamHandles.end(), h.newStreams.begin(), h.newStreams.end());
                    f.poolHandles.insert(f.poolHandles.end(), h.newPools.begin(), h.newPools.end());
                    f.tape.ops.swap(h.ops);
                    f.tape.allocSeq.swap(h.allocSeq);
                    follow(f.tape, f.poolHandles);
                    f.tape.ops.swap(h.ops);
                    f.tape.allocSeq.swap(h.allocSeq);
                    std::lock_guard lk(f.m);
                    f.spares.push_back(std::move(h));
                }
            });
        } catch (const std::system_error&) {
            follower_.reset(); // no thread to be had: step() follows on the models' thread
        }
    }
}

AdviceFeed::~AdviceFeed() {
    if (thread_) {
        thread_.reset(); // its replay and the models' last calls go with it
        stopFollower(true);
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

void AdviceFeed::follow(whatif::Tape& tape, const std::vector<uint64_t>& poolHandles) {
    if (spill_) spill_->append(tape, poolHandles);
    const whatif::Op* ops = tape.ops.data();
    neverReleasing_.feed(ops, ops + tape.ops.size(), tape.allocSeq.data(), tape.allocSeq.size(),
                         tape.streamHandles, noMute_);
}

void AdviceFeed::step() {
    const size_t streamsBefore = tape_.streamHandles.size(), poolsBefore = poolHandles_.size();
    tape_.seeStreams(*replay_);
    for (size_t i = poolHandles_.size(); i < replay_->pools().size(); ++i)
        poolHandles_.push_back(replay_->pools()[i].info.handle);
    if (!follower_) {
        follow(tape_, poolHandles_);
        tape_.dropOps();
        return;
    }
    Follower& f = *follower_;
    Handed h;
    {
        std::lock_guard lk(f.m);
        if (!f.spares.empty()) {
            h = std::move(f.spares.back());
            f.spares.pop_back();
        }
    }
    h.ops.clear();
    h.allocSeq.clear();
    h.ops.swap(tape_.ops); // the recording model goes on into the spare buffers
    h.allocSeq.swap(tape_.allocSeq);
    h.newStreams.assign(tape_.streamHandles.begin() + static_cast<ptrdiff_t>(streamsBefore),
                        tape_.streamHandles.end());
    h.newPools.assign(poolHandles_.begin() + static_cast<ptrdiff_t>(poolsBefore), poolHandles_.end());
    std::unique_lock lk(f.m);
    f.room.wait(lk, [&] { return f.queue.size() < Follower::kDepth; });
    f.queue.push_back(std::move(h));
    lk.unlock();
    f.ready.notify_one();
}

// Ends the follower once it has followed every step handed over (`drop`: at once, a read that
// ended early).
void AdviceFeed::stopFollower(bool drop) {
    if (!follower_) return;
    {
        std::lock_guard lk(follower_->m);
        follower_->end = true;
        follower_->drop = drop;
    }
    follower_->ready.notify_all();
    if (follower_->thread.joinable()) follower_->thread.join();
    follower_.reset();
}

void AdviceFeed::end() {
    if (thread_) thread_->end();
    else step();
    stopFollower(false);
}

void AdviceFeed::finish() {
    asRecorded_.finishTape(tape_, *replay_);
    if (spill_) spill_->finish(tape_);
}

} // namespace poolscope::detail
