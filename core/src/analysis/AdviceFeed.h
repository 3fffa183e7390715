#pragma once
// The what-if advisor's inputs from the streaming report's one read (analysis/TraceReport.cpp):
// the recording pool model (its ops to the tape and the spill), the never-releasing model that
// follows those ops, and the racing threads' ranges. Internal to core.
//
// They follow the report's own replay (the reducer's), or with `threaded` a replay of their own
// on a thread of their own (ReplayThread.h): the models were about a third of the read.
// step() turns what the recording model took from a chunk into the spill's and the
// never-releasing model's input, on whichever thread follows, or with a follower hands it to a
// thread of its own that writes the spill and feeds the never-releasing model. With a follower
// the recording model only records, and the recorded settings' predictions come from the ops on
// the follower's thread (PoolModel::run's answers are those of following the replay): modelling
// was about two fifths of the models' thread. There the two predictions are two lanes of one
// LaneModel (the recorded threshold, and none reached), which keeps what they share once.

#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "../whatif/QuestionSearch.h"
#include "../whatif/TapeSpill.h"
#include "ReplayThread.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/PoolModel.h"
#include "poolscope/whatif/RaceRange.h"

namespace poolscope::detail {

class AdviceFeed {
public:
    // askAhead() asks no question ahead of a trace with more pools than this by then.
    static constexpr size_t kMaxAheadPools = 64;
    // `report`: the reducer's replay (or `advise`'s), followed where not threaded. `spill`: keep
    // the ops on disk for the questions after the read.
    // `follower`: the spill and the never-releasing model on another thread (threaded or not).
    // `racesThread` (with a follower): the racing threads' ranges on another, following what the
    // models' replay (or the report's) records for them (whatif::RaceRecord).
    AdviceFeed(replay::Replay& report, bool threaded, bool spill, const whatif::Calibration& c = {},
               bool follower = false, bool racesThread = false);
    // Fed from a read in pieces (detail::reportPieces) instead of following a replay: the
    // follower (the spill, the recorded settings' and the never-releasing predictions) and the
    // racing threads' ranges on threads of their own, given each joined piece in order
    // (piece()); at the end, the joined recording model and the replay after the last piece
    // (endPieces(), before end()).
    struct FromPieces {};
    AdviceFeed(FromPieces, bool spill, const whatif::Calibration& c = {});
    ~AdviceFeed();
    AdviceFeed(const AdviceFeed&) = delete;
    AdviceFeed& operator=(const AdviceFeed&) = delete;

    // Threaded: the thread, to be given the report's entities, knobs, samples (and any other
    // observers) and started; null otherwise.
    ReplayThread* thread() { return thread_.get(); }
    // Threaded, before the threads start: the racing threads' ranges follow `other` instead, a
    // replay of the same events on another thread (the report's analyses'), which must outlive
    // this feed's use of them. They were a fifth of the models' thread, the read's slowest.
    // Their own thread, if they had one, goes.
    void racesOn(replay::Replay& other);
    // Before the read, with a spill: the advisor's questions asked during it
    // (whatif::Speculation) on `threads` threads a wave, of a trace of `events` events; with
    // `idle` (the CPUs idle of late), no more than those, and no wave below 4.
    // `yield`: the questions' threads give way to the read's (whatif::Speculation::Yield).
    // `lanes`: the candidates as lanes of LaneModels of at most lanes[0] in the first wave and
    // lanes[1] in the second (0: as measured, 8 and 3).
    void askAhead(unsigned threads, uint64_t events, std::function<unsigned()> idle = {},
                  whatif::Speculation::Yield yield = whatif::Speculation::Yield::None,
                  std::array<size_t, 2> lanes = {});
    // Not threaded: after the report's replay applied a chunk (its samples included). Fed from
    // pieces: nothing.
    void step();
    // Fed from pieces: a joined piece's ops and racing threads' inputs (taken), and the replay's
    // state at its end; then, after the last, the model that recorded them all and that state.
    void piece(whatif::Tape& ops, whatif::RaceInputs& races, const replay::Replay& end);
    void endPieces(std::unique_ptr<whatif::PoolModel> recording, replay::Replay last);
    bool fromPieces() const { return fromPieces_; }
    // After the last chunk: the thread's end, or the last step.
    void end();
    // After end(), where the advisor runs: the recording model's tape (and the spill) finished.
    void finish();

    // After finish(): the inputs adviseAfter takes.
    const std::vector<whatif::PoolPrediction>& recorded() const { return tape_.recorded; }
    // With a follower (its thread, or its work on the models' thread where none could be had).
    bool hasFollower() const { return follower_ != nullptr; }
    // After end(): the CPU time of the follower's thread and of the ranges' (0 without one).
    double followerCpu() const;
    double racesCpu() const;
    double spillCpu() const; // fed from pieces: the spill's thread
    std::vector<whatif::PoolPrediction> neverReleasing() {
        return followed_ ? followed_->collect(kNeverLane, tape_) : neverReleasing_.collect(tape_);
    }
    std::vector<whatif::RaceRange> races() const { return races_.result(*racesReplay_); }
    whatif::TapeSpill* spill() { return spill_.get(); }
    // After end(): the questions asked during the read, if any were (for adviseAfter).
    std::vector<whatif::Speculation*> ahead() const;

private:
    // One step's ops for the follower, and the streams and pools first seen in it.
    struct Handed {
        std::vector<whatif::Op> ops;
        std::vector<uint64_t> allocSeq, newStreams, newPools;
        uint64_t events = 0; // the replay's, by the step's end
    };
    struct Follower;
    void follow(whatif::Tape& tape, const std::vector<uint64_t>& poolHandles, uint64_t events);
    void stopFollower(bool drop);
    void handRaces(); // what the models' replay recorded for the ranges, to their thread

    const std::vector<uint8_t> noMute_;
    whatif::PoolModel asRecorded_, neverReleasing_;
    // With a follower: the recorded settings' and the never-releasing predictions, fed the ops
    // (asRecorded_ only records, neverReleasing_ is not fed).
    static constexpr size_t kRecordedLane = 0, kNeverLane = 1;
    std::unique_ptr<whatif::LaneModel> followed_;
    const std::vector<const std::vector<uint8_t>*> followedMutes_{&noMute_, &noMute_};
    whatif::RaceBounds races_;
    whatif::Tape tape_;
    std::unique_ptr<whatif::TapeSpill> spill_;
    // Questions asked during the read, in waves (after the spill: they go first, the spill
    // abandoned), and the never-releasing peak at each of the trace's first four sixths.
    // What a wave reads of the models, taken where they are stepped: the never-releasing
    // model's largest peak so far, and the reuse policies (bit k: ReuseAllowOpportunistic,
    // ReuseFollowEventDependencies, ReuseAllowInternalDependencies) recorded off so far.
    struct ModelsNow {
        uint64_t neverTop = 0;
        unsigned policiesOff = 0;
    };
    ModelsNow modelsNow() const;
    void askWave(const std::vector<uint64_t>& poolHandles, uint64_t events, const ModelsNow& now, bool retry);
    size_t owedWave_ = 0; // fed from pieces: the wave (2 or 4) the idle CPUs could not take yet
    // A step's ops and notes to the spill, then a wave if one is due.
    void toSpill(const whatif::Tape& tape, const std::vector<uint64_t>& poolHandles,
                 const std::vector<uint64_t>& notes, uint64_t events, const ModelsNow& now);
    // The recorded settings' predictions so far (the follower's, where there is one), and the
    // never-releasing model's largest peak.
    uint64_t recordedReleasesOf(uint32_t pool) const {
        return followed_ ? followed_->releasesOf(kRecordedLane, pool) : asRecorded_.releasesOf(pool);
    }
    bool recordedPolicyOff(PoolAttr a) const {
        return followed_ ? followed_->policyOffSoFar(a) : asRecorded_.policyOffSoFar(a);
    }
    uint64_t neverReleasingPeak() const {
        return followed_ ? followed_->peakReservedSoFar(kNeverLane) : neverReleasing_.peakReservedSoFar();
    }
    std::vector<std::unique_ptr<whatif::Speculation>> ahead_;
    std::vector<uint64_t> askedAhead_; // thresholds
    struct TopAt {
        uint64_t events, top;
    };
    std::vector<TopAt> tops_;
    whatif::Calibration cal_;
    unsigned aheadThreads_ = 0;
    uint64_t aheadEvents_ = 0;
    std::function<unsigned()> aheadIdle_;
    whatif::Speculation::Yield aheadYield_ = whatif::Speculation::Yield::None;
    std::array<size_t, 2> aheadLanes_{};
    std::vector<uint64_t> notes_; // the spill's, a step's (the follower's, where it has one)
    std::vector<uint64_t> poolHandles_; // the replay's pools' handles, as far as stepped
    std::unique_ptr<Follower> follower_; // after the models: stopped before they go
    // With a thread for the ranges: what the models' replay records for them, handed over a
    // step at a time.
    std::unique_ptr<whatif::RaceRecord> raceRecord_;
    std::unique_ptr<HandOff<whatif::RaceInputs>> racer_; // after races_: stopped before it goes
    std::unique_ptr<ReplayThread> thread_; // after the models: stopped before they go
    replay::Replay* replay_;
    replay::Replay* racesReplay_; // replay_, or the one racesOn() gave
    // Fed from pieces: the recording model joined and the replay's last state (endPieces), the
    // streams handed to the follower so far.
    bool fromPieces_ = false;
    // Fed from pieces, with a spill: the spill written, and the waves asked, on a thread of its
    // own, given each step the follower stepped (its ops, then its streams, pools and notes).
    struct Spilled {
        std::vector<whatif::Op> ops;
        std::vector<uint64_t> allocSeq, newStreams, newPools, notes;
        uint64_t events = 0;
        ModelsNow now;
    };
    whatif::Tape spillTape_;          // the spill's thread's: the step, with every stream seen
    std::vector<uint64_t> spillPools_; // the spill's thread's: every pool seen
    size_t streamsSpilled_ = 0, poolsSpilled_ = 0; // the follower's: handed to that thread
    std::unique_ptr<HandOff<Spilled>> spiller_;    // stopped (end(), ~AdviceFeed) after the follower
    std::unique_ptr<whatif::PoolModel> pieceRecording_;
    std::unique_ptr<replay::Replay> lastReplay_;
    size_t streamsHanded_ = 0;
    uint64_t handedEvents_ = 0;
};

} // namespace poolscope::detail
