#include "AdviceFeed.h"

#include <algorithm>

namespace poolscope::detail {

// The spill and the never-releasing model on a thread of their own, given each step's ops.
struct AdviceFeed::Follower {
    explicit Follower(AdviceFeed& feed)
        : steps([this, &feed](Handed& h) {
              tape.streamHandles.insert(tape.streamHandles.end(), h.newStreams.begin(), h.newStreams.end());
              poolHandles.insert(poolHandles.end(), h.newPools.begin(), h.newPools.end());
              tape.ops.swap(h.ops);
              tape.allocSeq.swap(h.allocSeq);
              feed.follow(tape, poolHandles, h.events);
              tape.ops.swap(h.ops);
              tape.allocSeq.swap(h.allocSeq);
          }) {}
    whatif::Tape tape;                 // the step being followed, with every stream seen
    std::vector<uint64_t> poolHandles; // every pool seen
    HandOff<Handed> steps;             // last: stopped before the tape goes
};

AdviceFeed::AdviceFeed(replay::Replay& report, bool threaded, bool spill,
                       const whatif::Calibration& c, bool follower, bool racesThread)
    : asRecorded_({}, c), neverReleasing_(whatif::neverReleasing(), c),
      races_(c.growthGranule, c.blockAlign), cal_(c),
      thread_(threaded ? std::make_unique<ReplayThread>([this] { step(); }) : nullptr),
      replay_(threaded ? &thread_->replay() : &report), racesReplay_(replay_) {
    if (spill) spill_ = std::make_unique<whatif::TapeSpill>();
    asRecorded_.recordInto(&tape_);
    replay_->subscribe(&asRecorded_, whatif::PoolModel::kindMask());
    if (follower && racesThread) {
        raceRecord_ = std::make_unique<whatif::RaceRecord>();
        racer_ = std::make_unique<HandOff<whatif::RaceInputs>>(
            [this](whatif::RaceInputs& r) { races_.follow(r); });
        racer_->start();
        replay_->subscribe(raceRecord_.get(), whatif::RaceBounds::kindMask());
    } else {
        replay_->subscribe(&races_, whatif::RaceBounds::kindMask());
    }
    if (follower) {
        asRecorded_.recordOnly(true);
        followed_ = std::make_unique<whatif::LaneModel>(
            std::vector<std::optional<uint64_t>>{std::nullopt, whatif::neverReleasing().releaseThreshold}, c);
        // Without a thread to be had, the steps are followed on the models' thread as given.
        follower_ = std::make_unique<Follower>(*this);
        follower_->steps.start();
    }
}

AdviceFeed::AdviceFeed(FromPieces, bool spill, const whatif::Calibration& c)
    : asRecorded_({}, c), neverReleasing_(whatif::neverReleasing(), c), races_(c.growthGranule, c.blockAlign),
      cal_(c), replay_(nullptr), racesReplay_(nullptr), fromPieces_(true) {
    if (spill) {
        spill_ = std::make_unique<whatif::TapeSpill>();
        spiller_ = std::make_unique<HandOff<Spilled>>([this](Spilled& sp) {
            spillTape_.streamHandles.insert(spillTape_.streamHandles.end(), sp.newStreams.begin(), sp.newStreams.end());
            spillPools_.insert(spillPools_.end(), sp.newPools.begin(), sp.newPools.end());
            spillTape_.ops.swap(sp.ops);
            spillTape_.allocSeq.swap(sp.allocSeq);
            toSpill(spillTape_, spillPools_, sp.notes, sp.events, sp.now);
            spillTape_.ops.swap(sp.ops);
            spillTape_.allocSeq.swap(sp.allocSeq);
        });
        spiller_->start();
    }
    racer_ = std::make_unique<HandOff<whatif::RaceInputs>>([this](whatif::RaceInputs& r) { races_.follow(r); });
    racer_->start();
    followed_ = std::make_unique<whatif::LaneModel>(
        std::vector<std::optional<uint64_t>>{std::nullopt, whatif::neverReleasing().releaseThreshold}, c);
    follower_ = std::make_unique<Follower>(*this);
    follower_->steps.start();
}

AdviceFeed::~AdviceFeed() {
    if (fromPieces_) {
        stopFollower(true);
        if (spiller_) spiller_->stop(true);
        if (racer_) racer_->stop(true);
    } else if (thread_) {
        thread_.reset(); // its replay and the models' last calls go with it
        stopFollower(true);
        if (racer_) racer_->stop(true);
    } else {
        replay_->unsubscribe(&asRecorded_);
        racesReplay_->unsubscribe(&races_);
        if (raceRecord_) replay_->unsubscribe(raceRecord_.get());
        stopFollower(true);
        if (racer_) racer_->stop(true);
    }
    // Questions still following an unfinished spill stop there (they go before it).
    if (spill_) spill_->abandon();
}

void AdviceFeed::askAhead(unsigned threads, uint64_t events, std::function<unsigned()> idle,
                          whatif::Speculation::Yield yield, std::array<size_t, 2> lanes) {
    aheadThreads_ = threads;
    aheadEvents_ = events;
    aheadIdle_ = std::move(idle);
    aheadYield_ = yield;
    aheadLanes_ = lanes;
}

std::vector<whatif::Speculation*> AdviceFeed::ahead() const {
    std::vector<whatif::Speculation*> out;
    for (const auto& w : ahead_) out.push_back(w.get());
    return out;
}

// At each of the first four sixths of the trace, the never-releasing peak; at the second and
// fourth, a wave of questions: the candidates of the peak so far, and of the peak the trace
// would end with if it went on rising as it did over the last sixth (a program holding more and
// more), those not asked yet. The first wave asks the reuse policies some pool has off.
// Fed from pieces, a wave the idle CPUs could not take then is asked at a later step where they
// can (`retry`: no sixth reached at this one): the pieces take every CPU while they last.
void AdviceFeed::askWave(const std::vector<uint64_t>& poolHandles, uint64_t events, const ModelsNow& now,
                         bool retry) {
    const uint64_t top = now.neverTop;
    if (!retry) tops_.push_back({events, top});
    const size_t n = tops_.size();
    size_t wave = n;
    if (n != 2 && n != 4) {
        if (owedWave_ == 0) return;
        wave = owedWave_;
    }
    owedWave_ = 0;
    // Every question follows every pool there: a program with many pools gets them after the
    // read, asked only of the pools with something to decide.
    if (poolHandles.size() > kMaxAheadPools) return;
    const TopAt& before = tops_[n - 2];
    uint64_t rising = top;
    if (top > before.top && events > before.events && aheadEvents_ > events) {
        const long double slope = static_cast<long double>(top - before.top) /
                                  static_cast<long double>(events - before.events);
        rising = top + static_cast<uint64_t>(slope * static_cast<long double>(aheadEvents_ - events));
    }
    std::vector<uint64_t> ask;
    for (uint64_t peak : {top, rising}) {
        std::vector<uint64_t> cands = whatif::candidatesUpTo(peak, cal_);
        // The last is at or above every pool's never-releasing peak where it is the trace's:
        // never asked (the never-releasing answer stands for it).
        if (!cands.empty()) cands.pop_back();
        for (uint64_t t : cands)
            if (std::find(askedAhead_.begin(), askedAhead_.end(), t) == askedAhead_.end() &&
                std::find(ask.begin(), ask.end(), t) == ask.end())
                ask.push_back(t);
    }
    std::sort(ask.begin(), ask.end()); // the search deals the last (the highest) first
    // A policy is asked only of the pools that ran with it off: the first wave asks those some
    // pool has off by then (one turned off later is asked after the read).
    const unsigned policies = ahead_.empty() ? now.policiesOff : 0;
    if (ask.empty() && policies == 0) return;
    const unsigned threads = aheadIdle_ ? std::min(aheadThreads_, aheadIdle_()) : aheadThreads_;
    if (threads < 4) { // (what is not asked here is asked after the read)
        if (fromPieces_) owedWave_ = wave;
        return;
    }
    try {
        // The candidates as lanes of LaneModels, each on a thread of its own, which must step the
        // whole trace in what is left of the read: 4/6 of it for the first wave, 2/6 for the
        // second. On the 16-core hosts a PoolModel steps a trace in about a fifth of the read's
        // time and a LaneModel of n lanes costs about 1.5 + 0.13 n of one (docs/PERFORMANCE.md):
        // 8 lanes, then 3 (the second wave's were measured done before the read).
        const size_t asked = aheadLanes_[wave == 2 ? 0 : 1];
        const size_t perModel = asked ? asked : wave == 2 ? 8 : 3;
        ahead_.push_back(std::make_unique<whatif::Speculation>(*spill_, policies, ask, cal_,
                                                               threads, aheadEvents_,
                                                               whatif::Speculation::kSlack,
                                                               perModel, aheadYield_));
        askedAhead_.insert(askedAhead_.end(), ask.begin(), ask.end());
    } catch (...) { // (memory) asked after the read instead
    }
}

void AdviceFeed::racesOn(replay::Replay& other) {
    if (racer_) {
        replay_->unsubscribe(raceRecord_.get());
        racer_.reset();
        raceRecord_.reset();
        replay_->subscribe(&races_, whatif::RaceBounds::kindMask());
    }
    racesReplay_->unsubscribe(&races_);
    racesReplay_ = &other;
    other.subscribe(&races_, whatif::RaceBounds::kindMask());
}

void AdviceFeed::follow(whatif::Tape& tape, const std::vector<uint64_t>& poolHandles,
                        uint64_t events) {
    const whatif::Op* ops = tape.ops.data();
    if (followed_)
        followed_->feed(ops, ops + tape.ops.size(), tape.allocSeq.data(), tape.allocSeq.size(),
                        tape.streamHandles, followedMutes_);
    else
        neverReleasing_.feed(ops, ops + tape.ops.size(), tape.allocSeq.data(), tape.allocSeq.size(),
                             tape.streamHandles, noMute_);
    if (!spill_) return;
    // For the questions asked ahead: how far the read is, and each pool's releases under the
    // recorded settings so far (a twentieth of them at the end is what the advice allows a
    // candidate).
    notes_.clear();
    if (aheadThreads_) {
        notes_.push_back(events);
        for (uint32_t i = 0; i < poolHandles.size(); ++i) notes_.push_back(recordedReleasesOf(i));
    }
    const ModelsNow now = modelsNow();
    if (spiller_) {
        // The ops go on to the spill's thread; this one's tape gets that thread's spent buffers.
        Spilled sp = spiller_->spare();
        sp.ops.clear();
        sp.allocSeq.clear();
        sp.ops.swap(tape.ops);
        sp.allocSeq.swap(tape.allocSeq);
        sp.newStreams.assign(tape.streamHandles.begin() + static_cast<std::ptrdiff_t>(streamsSpilled_),
                             tape.streamHandles.end());
        sp.newPools.assign(poolHandles.begin() + static_cast<std::ptrdiff_t>(poolsSpilled_), poolHandles.end());
        streamsSpilled_ = tape.streamHandles.size();
        poolsSpilled_ = poolHandles.size();
        sp.notes = notes_;
        sp.events = events;
        sp.now = now;
        spiller_->give(std::move(sp));
        return;
    }
    toSpill(tape, poolHandles, notes_, events, now);
}

void AdviceFeed::toSpill(const whatif::Tape& tape, const std::vector<uint64_t>& poolHandles,
                       const std::vector<uint64_t>& notes, uint64_t events, const ModelsNow& now) {
    spill_->append(tape, poolHandles, notes);
    const bool sixth = events >= aheadEvents_ / 6 * (tops_.size() + 1) && tops_.size() < 4;
    if (aheadThreads_ && spill_->ok() && (sixth || owedWave_ != 0)) askWave(poolHandles, events, now, !sixth);
}

AdviceFeed::ModelsNow AdviceFeed::modelsNow() const {
    ModelsNow now;
    now.neverTop = neverReleasingPeak();
    const PoolAttr attrs[3] = {PoolAttr::ReuseAllowOpportunistic, PoolAttr::ReuseFollowEventDependencies,
                               PoolAttr::ReuseAllowInternalDependencies};
    for (unsigned k = 0; k < 3; ++k)
        if (recordedPolicyOff(attrs[k])) now.policiesOff |= 1u << k;
    return now;
}

double AdviceFeed::followerCpu() const { return follower_ ? follower_->steps.cpuSeconds() : 0; }

double AdviceFeed::racesCpu() const { return racer_ ? racer_->cpuSeconds() : 0; }

double AdviceFeed::spillCpu() const { return spiller_ ? spiller_->cpuSeconds() : 0; }

void AdviceFeed::step() {
    if (fromPieces_) return;
    handRaces();
    const size_t streamsBefore = tape_.streamHandles.size(), poolsBefore = poolHandles_.size();
    tape_.seeStreams(*replay_);
    for (size_t i = poolHandles_.size(); i < replay_->pools().size(); ++i)
        poolHandles_.push_back(replay_->pools()[i].info.handle);
    if (!follower_) {
        follow(tape_, poolHandles_, replay_->eventCount());
        tape_.dropOps();
        return;
    }
    Handed h = follower_->steps.spare();
    h.ops.clear();
    h.allocSeq.clear();
    h.ops.swap(tape_.ops); // the recording model goes on into the spare buffers
    h.allocSeq.swap(tape_.allocSeq);
    h.newStreams.assign(tape_.streamHandles.begin() + static_cast<ptrdiff_t>(streamsBefore),
                        tape_.streamHandles.end());
    h.newPools.assign(poolHandles_.begin() + static_cast<ptrdiff_t>(poolsBefore), poolHandles_.end());
    h.events = replay_->eventCount();
    follower_->steps.give(std::move(h));
}

// Ends the follower once it has followed every step handed over (`drop`: at once, a read that
// ended early).
void AdviceFeed::stopFollower(bool drop) {
    if (follower_) follower_->steps.stop(drop);
}

void AdviceFeed::handRaces() {
    if (!racer_ || !raceRecord_ || raceRecord_->taken.inputs.empty()) return;
    whatif::RaceInputs next = racer_->spare();
    next.inputs.clear();
    next.devices.clear();
    std::swap(next, raceRecord_->taken); // the record goes on into the spare buffers
    racer_->give(std::move(next));
}

void AdviceFeed::end() {
    if (thread_) thread_->end();
    else step();
    stopFollower(false);
    if (spiller_) spiller_->stop(false); // after the follower, which hands it the last steps
    if (racer_) {
        handRaces(); // anything recorded after the models' last step
        racer_->stop(false);
    }
}

void AdviceFeed::piece(whatif::Tape& ops, whatif::RaceInputs& races, const replay::Replay& end) {
    // In steps of about a chunk's ops, as the read's are: the spill's steps are what the
    // questions decode at a time, on each of their threads.
    constexpr size_t kStepOps = size_t{1} << 16;
    const size_t total = ops.ops.size();
    const uint64_t eventsBefore = handedEvents_, eventsAfter = end.eventCount();
    size_t from = 0, allocs = 0;
    do {
        const size_t to = std::min(total, from + kStepOps);
        Handed h = follower_->steps.spare();
        h.ops.assign(ops.ops.begin() + static_cast<std::ptrdiff_t>(from), ops.ops.begin() + static_cast<std::ptrdiff_t>(to));
        size_t a = 0;
        for (const whatif::Op& op : h.ops) a += op.kind == whatif::Op::Kind::Alloc;
        a = std::min(a, ops.allocSeq.size() - allocs);
        h.allocSeq.assign(ops.allocSeq.begin() + static_cast<std::ptrdiff_t>(allocs),
                          ops.allocSeq.begin() + static_cast<std::ptrdiff_t>(allocs + a));
        allocs += a;
        h.newStreams.clear();
        h.newPools.clear();
        if (from == 0) {
            for (size_t i = streamsHanded_; i < end.streams().size(); ++i) h.newStreams.push_back(end.streams()[i].info.handle);
            streamsHanded_ = std::max(streamsHanded_, end.streams().size());
            for (size_t i = poolHandles_.size(); i < end.pools().size(); ++i) {
                poolHandles_.push_back(end.pools()[i].info.handle);
                h.newPools.push_back(poolHandles_.back());
            }
        }
        // (How far the read is, which the questions asked during it go by: in proportion.)
        h.events = to == total ? eventsAfter
                               : eventsBefore + static_cast<uint64_t>(static_cast<long double>(eventsAfter - eventsBefore) * to / total);
        follower_->steps.give(std::move(h));
        from = to;
    } while (from < total);
    handedEvents_ = eventsAfter;
    if (!races.inputs.empty()) {
        whatif::RaceInputs next = racer_->spare();
        next.inputs.clear();
        next.devices.clear();
        std::swap(next, races);
        racer_->give(std::move(next));
    }
}

void AdviceFeed::endPieces(std::unique_ptr<whatif::PoolModel> recording, replay::Replay last) {
    pieceRecording_ = std::move(recording);
    lastReplay_ = std::make_unique<replay::Replay>(std::move(last));
    replay_ = racesReplay_ = lastReplay_.get();
}

void AdviceFeed::finish() {
    if (fromPieces_) {
        if (!pieceRecording_) return; // no endPieces(): nothing was read to the end
        pieceRecording_->finishTape(tape_, *replay_);
        tape_.recorded = followed_->collect(kRecordedLane, tape_);
        if (spill_) spill_->finish(tape_);
        return;
    }
    asRecorded_.finishTape(tape_, *replay_);
    // The recorded side from the recording, the predictions from the model that followed its ops.
    if (followed_) tape_.recorded = followed_->collect(kRecordedLane, tape_);
    if (spill_) spill_->finish(tape_);
}

} // namespace poolscope::detail
