#pragma once
// What if: a CPU model of CUDA's stream-ordered pool, driven by the allocator replay
// (replay/Replay.h), that predicts what a recorded program's pools would have reserved under
// another release threshold or other reuse policies. docs/WHATIF.md is the long form.
//
// The model keeps bytes, not addresses. Per pool: reserved, live (the blocks handed out, each
// rounded up to Calibration::blockAlign), `free` (reserved bytes any stream may take) and, per
// stream, bytes freed on that stream that only that stream may take yet ("pending"). An
// allocation takes, in this order and in any mix (bytes are fungible: no fragmentation):
//   1. its own stream's pending bytes (same-stream reuse is always allowed);
//   2. the pool's free bytes;
//   3. with ReuseAllowOpportunistic, other streams' pending bytes freed at least
//      Calibration::opportunisticLagNs earlier (by then the GPU is assumed to have finished
//      them and the driver to know it: the trace does not show the GPU's progress);
//   4. otherwise the pool grows by the rest, rounded up to Calibration::growthGranule; with a
//      pool size limit that growth would pass, ReuseAllowInternalDependencies lets it take other
//      streams' pending bytes first (the driver inserts the wait), or the allocation fails.
// Pending bytes of stream S move:
//   - to the pool's free bytes at a synchronize that covers S's frees (cudaStreamSynchronize of
//     S, cudaEventSynchronize of an event recorded on S after them, a context synchronize);
//   - to stream T's pending bytes, with ReuseFollowEventDependencies, when T waits on an event
//     recorded on S after them (T may then reuse them; other streams still may not).
// A synchronize of any kind is an implicit release for every pool of its device: reserved drops
// to max(release threshold rounded down to the growth granule, the bytes still held by live
// blocks and uncleared pending frees rounded up to it), when that is lower.
// cudaMemPoolTrimTo(pool, keep) drops it to max(keep rounded up to the granule, the same floor).
// Addresses are not modelled: the driver keeps every granule a live block touches, so with
// scattered live blocks a release leaves more than this floor (docs/WHATIF.md). A pool created in the trace starts at 0 with the driver's
// defaults (threshold 0, every reuse policy on); a pool first seen later starts empty with the
// knobs the trace tells, defaults where it tells none.
//
// Which of these were measured on a GPU and which are guesses is stated per constant in
// Calibration below and in docs/WHATIF.md (tests/workloads/calibrate_pool.cu measures them).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "poolscope/Result.h"
#include "poolscope/Series.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/RaceRange.h"

namespace poolscope {
class TraceReader;
}

namespace poolscope::whatif {

// The driver's numbers the model depends on.
struct Calibration {
    // Reserved memory moves in steps of this size, at growth and at release.
    // Measured: every pool growth in the recorded samples (churn, pools, trims_oom, threads,
    // threads_race, gpt2, cupy, jax, torch_async: 256 growths, allocation sizes 64 KiB..832 MiB)
    // is a multiple of 32 MiB, and every implicit release leaves a multiple of 32 MiB
    // (H200 and H100, driver 580.159). calibrate_pool.cu measures it per size class.
    uint64_t growthGranule = uint64_t{32} << 20;
    // A block's footprint in the pool: its size rounded up to this. A guess (512 B, the
    // alignment cudaMallocAsync promises at least); calibrate_pool.cu measures the pointer
    // spacing of back-to-back small allocations.
    uint64_t blockAlign = 512;
    // Opportunistic reuse takes another stream's free only once the driver knows it finished on
    // the GPU, which the trace does not show. Measured: the calibration's "completed" case (the
    // free polled to completion with cudaEventQuery) is reused with the policy on and not with
    // it off; in churn (frees on B after event waits, a sync every ~1.5 ms) turning it on
    // changed nothing (peak 512 MiB either way, H100). A guess inside those bounds: a free
    // becomes opportunistically reusable this long after it was made.
    int64_t opportunisticLagNs = 2'000'000;
};

// A setting a what-if question changes; unset members follow what the trace recorded.
struct Settings {
    std::optional<uint64_t> releaseThreshold;
    std::optional<bool> followEventDependencies;
    std::optional<bool> allowOpportunistic;
    std::optional<bool> allowInternalDependencies;
    bool any() const {
        return releaseThreshold || followEventDependencies || allowOpportunistic ||
               allowInternalDependencies;
    }
};

// An allocation that made the modelled pool grow.
struct Growth {
    uint64_t seq = 0;
    int64_t tsNs = 0;
    uint64_t stream = 0; // handle
    uint64_t bytes = 0;  // the allocation's size
    uint64_t grownBy = 0;
};

// Per pool: what the trace recorded beside what the model predicts.
struct PoolPrediction {
    uint64_t handle = 0;
    int device = -1;
    bool touched = false; // allocations or frees reached this pool in the model

    // Recorded (from the watermarks the trace carries; known only where it carries them)
    bool recordedKnown = false;
    uint64_t recordedPeakReserved = 0;
    uint64_t recordedReleases = 0;  // implicit releases that lowered reserved
    uint64_t recordedGrowths = 0;   // allocations at which reserved rose
    uint64_t recordedMaxIdle = 0;   // largest reserved - used
    uint64_t recordedMeanIdle = 0;  // reserved - used, averaged over the pool's time
    uint64_t recordedFinalReserved = 0;

    // Predicted
    uint64_t peakReserved = 0;
    int64_t peakReservedTsNs = 0;
    uint64_t releases = 0;         // synchronizes at which reserved dropped
    uint64_t releasedBytes = 0;
    uint64_t trims = 0;            // cudaMemPoolTrimTo calls that lowered reserved
    uint64_t growths = 0;
    uint64_t grownBytes = 0;
    uint64_t failedAllocs = 0;     // would not fit under the pool's size limit
    uint64_t maxIdle = 0;          // largest reserved - live
    uint64_t meanIdle = 0;         // reserved - live, averaged over the pool's time
    uint64_t finalReserved = 0;
    uint64_t peakLive = 0;
    std::vector<Growth> growthAllocs; // the first kKeptGrowths growths, in order
    Series reserved;                  // predicted reserved over time (when kept)

    // The settings in force at the end (override or recorded)
    uint64_t releaseThreshold = 0;
    bool followEventDependencies = true;
    bool allowOpportunistic = true;
    bool allowInternalDependencies = true;
};

inline constexpr size_t kKeptGrowths = 1000;

// One input of the model, as the replay's facts give it. The model follows a replay by turning
// each fact into these and applying them; a Tape keeps them, so that the same model can be asked
// again under other settings without the trace or the replay (the window's What-if panel asks
// at every move of a slider). 32 bytes.
struct Op {
    enum class Kind : uint8_t {
        Init,         // pool `pool` first seen: handle `value`, device `aux` (int)
        Knob,         // pool's recorded knob `attr` (kKnob*) is `value`; `flag`: known
        Alloc,        // `value` bytes on `pool` from `stream` (its seq: Tape::allocSeq)
        Free,         // `value` bytes of `pool` freed on `stream`; `flag`: by cudaFree (no
                      // stream order: reusable at once)
        Drop,         // `value` live bytes of `pool` gone without their free
        Wait,         // stream `aux` waited on an event recorded on `stream` after `value` bytes
                      // of that stream's frees
        EventCleared, // `value` bytes freed on `stream` before a synchronized event
        StreamSync,   // device `aux` (int); StreamSync: stream `stream` (or replay::kNone)
        EventSync,
        ContextSync,
        Trim,         // cudaMemPoolTrimTo(`pool`, `value`)
        Reset,        // `pool` created or destroyed
    };
    int64_t ts = 0;
    uint64_t value = 0;
    uint32_t pool = replay::kNone;
    uint32_t stream = replay::kNone;
    uint32_t aux = 0;
    Kind kind = Kind::Init;
    uint8_t attr = 0;
    uint8_t flag = 0;
};
static_assert(sizeof(Op) == 32, "the tape holds one Op per event: keep it small");
// Op::attr of a Knob: the replay's knob index (replay::PoolState::knobIndex), or the size limit.
inline constexpr uint8_t kKnobMaxSize = 4;

// The model's inputs from one read of a trace (PoolModel::recordInto, recordTape), and what the
// recording model made of them under the recorded settings.
struct Tape {
    std::vector<Op> ops;
    std::vector<uint64_t> allocSeq;      // the seq of each Alloc op, in order
    std::vector<uint64_t> streamHandles; // by the ops' stream index
    // The pools a prediction covers, in replay order: their index in the ops, and the recording
    // model's result (the recorded side, the settings in force at the end, the prediction
    // under the recorded settings).
    std::vector<uint32_t> poolIndex;
    std::vector<PoolPrediction> recorded;
    std::vector<int64_t> recordedEnd; // the last recorded watermark's time, per pool
    int64_t lastTs = 0;
    uint64_t events = 0; // trace events read (samples excluded)
    size_t bytes() const {
        return ops.capacity() * sizeof(Op) + allocSeq.capacity() * 8 +
               streamHandles.capacity() * 8 + recorded.size() * sizeof(PoolPrediction);
    }
    // Names the replay's streams that streamHandles does not hold yet (the ops' stream index is
    // the replay's), for models that follow the ops as they come.
    void seeStreams(const replay::Replay& r) {
        for (size_t i = streamHandles.size(); i < r.streams().size(); ++i)
            streamHandles.push_back(r.streams()[i].info.handle);
    }
    // After every follower has read the ops taken so far.
    void dropOps() {
        ops.clear();
        allocSeq.clear();
    }
    const PoolPrediction* recordedPool(uint64_t handle) const {
        for (const PoolPrediction& p : recorded)
            if (p.handle == handle) return &p;
        return nullptr;
    }
};

class PoolModel final : public replay::Observer {
public:
    explicit PoolModel(Settings all = {}, Calibration c = {});
    ~PoolModel() override;
    PoolModel& operator=(const PoolModel&) = delete;
    // Settings for one pool (by handle) instead of `all`.
    void setPoolSettings(uint64_t handle, Settings s);
    void keepSeries(bool keep) { keepSeries_ = keep; }
    // Appends every input the model takes from the replay to `tape` (not owned) as it follows;
    // finishTape() completes it.
    void recordInto(Tape* tape) { tape_ = tape; }
    // Recording only (with recordInto): the ops, which pools they touched and the recorded
    // side, without the model's own predictions (for models that follow the tape instead).
    void recordOnly(bool only) { recordOnly_ = only; }
    void finishTape(Tape& tape, const replay::Replay& r) const;
    // Without the recorded figures (PoolPrediction::recorded*, the same for every model of a
    // trace, a quarter of a model's time): the predictions are unchanged (where the recorded
    // watermarks end is still kept: the mean idle's window ends there), and a pool the model
    // never touched is left out of result() even where the trace carried its watermarks.
    void keepRecorded(bool keep) { keepRecorded_ = keep; }
    // The event kinds the model needs (for Replay::subscribe).
    static uint32_t kindMask();
    void onFact(const replay::Fact& f, const replay::Replay& r) override;
    // In replay pool order; pools that neither allocated nor carried watermarks are left out.
    // `r` is the replay the model followed (for the knobs in force at the end).
    std::vector<PoolPrediction> result(const replay::Replay& r) const;
    // The model under these settings over a recorded tape: the same answers as following the
    // trace's replay (the recorded side is the tape's). With `onlyPool`, that pool alone (an
    // empty result when the tape has no such pool): the others' inputs are skipped.
    std::vector<PoolPrediction> run(const Tape& tape, std::optional<uint64_t> onlyPool = {});
    // Part of a tape still being recorded, as run() applies it, so that models can follow one
    // recording model's ops instead of each turning the replay's facts into ops:
    // `seq` the allocSeq of its Alloc ops in order (nSeq of them), `handles` by stream index.
    // The ops of a pool i with i < mute.size() && mute[i] are passed over: each pool's answers
    // depend only on its own ops and the synchronizes, so the others' are unchanged.
    void feed(const Op* first, const Op* last, const uint64_t* seq, size_t nSeq,
              const std::vector<uint64_t>& handles, const std::vector<uint8_t>& mute);
    // After feeding a whole tape (finishTape done): what run() would return.
    std::vector<PoolPrediction> collect(const Tape& tape, uint32_t only = replay::kNone);
    // The implicit releases the model predicted for pool i so far.
    uint64_t releasesOf(uint32_t i) const;
    // The largest peak reserved it predicted for any pool so far.
    uint64_t peakReservedSoFar() const;

    // For a split of the ops in time (issue #15; tests/bench/SplitModelsBench.cpp measures it):
    // a piece of the ops modelled from a guessed start is right from the op after which its
    // model is in the same state as the one that modelled every op before it.
    // A copy, recording into no tape.
    std::unique_ptr<PoolModel> clone() const;
    // Whether the ops to come would change both models alike: per pool the knobs and limit,
    // reserved, live and free bytes and each stream's pending frees (the figures so far aside).
    bool sameState(const PoolModel& o) const;
    // A guess at a piece's start: each pool's reserved bytes set to guess(pool, floor, now), at
    // least `floor` (its live and pending bytes rounded up to the growth granule) and rounded up
    // to the granule; its free bytes are the rest.
    void guessReserved(const std::function<uint64_t(uint32_t pool, uint64_t floor, uint64_t now)>& guess);
    // Every stream's pending frees made free, as if each had been synchronized.
    void forgetPending();
    uint64_t reservedOf(uint32_t pool) const;
    // Whether some pool ran with reuse policy `a` off so far, as the recorded knobs tell it.
    bool policyOffSoFar(PoolAttr a) const;

    // A recording model (recordInto, recordOnly) for a piece of a trace read in pieces (issue
    // #15), before the piece's replay `start` applies its first event: with `seeded`, the
    // recorded reserved and used bytes and the frees made visible so far are the replay's
    // there (a later piece's); without, none (the first piece's).
    void recordPiece(const replay::Replay& start, bool seeded);
    // This recording model (the pieces before, joined) goes on with `piece`'s recording, the
    // piece's ops appended to `into`, less what its first sight of a pool this model knew wrote.
    // False (nothing changed) where the piece started from something other than this model's
    // state (a pool's knobs, recorded bytes or frees made visible), or its records reached back
    // before this model's latest further than it kept them.
    bool joinRecording(PoolModel& piece, Tape& pieceTape, Tape& into);
    // What run() answers, with the tape's ops cut into `pieces` modelled at once on `threads`
    // threads (the calling thread one of them; 1 or one piece: run() itself). The first piece
    // goes on from this model's state; each later one from a guess (the pools and knobs the
    // ops before it name, their live bytes, no pending frees, the reserved bytes at their
    // floor), with its state kept at checkpoints. The model then goes on through each piece
    // only until its state is a checkpoint's (sameState) and takes the rest from the piece,
    // or through all of it where none is. The same answers as run() (WhatIfPiecesTest).
    struct PieceStats {
        size_t pieces = 0, joined = 0; // pieces after the first; those taken from a checkpoint on
        uint64_t opsTwice = 0;         // ops of a guessed piece the model went through again
    };
    std::vector<PoolPrediction> runInPieces(const Tape& tape, std::optional<uint64_t> onlyPool,
                                            size_t pieces, unsigned threads,
                                            PieceStats* stats = nullptr);

private:
    PoolModel(const PoolModel&) = default; // clone()
    struct Pool;
    Pool& pool(uint32_t i, const replay::Replay& r);
    [[gnu::noinline]] Pool& poolSlow(uint32_t i, const replay::Replay& r);
    void syncKnobs(uint32_t i, const replay::Replay& r);
    void toTape(const Op& op) {
        if (tape_) [[unlikely]]
            tape_->ops.push_back(op);
    }
    void cleared(const replay::Fact& f, const replay::Replay& r);
    void recorded(const replay::Fact& f, const replay::Replay& r);
    // The model proper: one per Op kind, shared by both ways in.
    void apply(const Op& op, uint64_t seq, uint64_t streamHandle);
    void init(uint32_t i, uint64_t handle, int device);
    Pool& at(uint32_t i);
    void alloc(const Op& op, uint64_t seq, uint64_t streamHandle);
    void freeBlock(const Op& op);
    void waitMove(const Op& op);
    void eventCleared(const Op& op);
    void release(const Op& op);
    void trim(const Op& op);
    void account(Pool& p, int64_t ts);
    void setReserved(Pool& p, uint64_t v, int64_t ts);
    PoolPrediction finalPrediction(uint32_t i, int64_t end) const;
    static uint32_t onlyIndex(const Tape& tape, std::optional<uint64_t> onlyPool);
    // The tape's ops [from, to) (`allocs`: the Alloc ops before `from`, moved past them).
    void step(const Tape& tape, size_t from, size_t to, size_t& allocs, uint32_t only);
    static bool samePools(const std::vector<Pool>& a, const std::vector<Pool>& b);
    // ModelPieces.cpp
    struct Piece;
    // What a piece's ops change of what the next pieces' guesses start from (the pools' names,
    // knobs and live bytes), taken on its own; then taken in, in order; then a guess made.
    void skim(const Tape& tape, Piece& p, uint32_t only) const;
    void takeSkim(const Piece& p);
    void seedPool(uint32_t i, size_t initOp); // recordPiece(): a pool first seen
    void guessStart();
    void checkpoint(Piece& g, size_t op);
    bool join(Piece& g, size_t check);
    bool logSeries_ = false; // a piece's guess: setReserved() notes into Pool::seriesLog
    // recordPiece(): the recorded (reserved, used) of each pool at the piece's start, and the
    // frees made visible there (seenCleared_ as it began).
    bool recordingPiece_ = false;
    std::vector<std::pair<uint64_t, uint64_t>> pieceSeeds_;
    std::vector<uint64_t> seenClearedSeed_;

    Settings all_;
    std::unordered_map<uint64_t, Settings> perPool_;
    Calibration cal_;
    bool keepSeries_ = false;
    bool keepRecorded_ = true;
    bool recordOnly_ = false;
    std::vector<Pool> pools_;
    std::vector<uint64_t> seenCleared_; // per replay stream: its clearedBytes already applied
    int64_t lastTs_ = 0;
    Tape* tape_ = nullptr;
};

// A whole trace through the replay with one model per question, in one pass: answers[i] is
// the prediction under questions[i] (its per-pool settings, or `all` for every pool).
struct Question {
    Settings all;
    std::unordered_map<uint64_t, Settings> perPool;
    bool keepSeries = false;
    bool keepRecorded = true; // PoolModel::keepRecorded
    // Instead of Calibration::opportunisticLagNs: 0 asks for the lower bound (every free another
    // stream made is reusable at once, as if the GPU were never behind).
    std::optional<int64_t> opportunisticLagNs;
};
struct Answers {
    std::vector<std::vector<PoolPrediction>> perQuestion;
    uint64_t events = 0;
    // With `races`: per pool that allocated, the range its peak lies in across the interleavings
    // of the threads allocating from it (RaceRange.h; not clamped to any prediction).
    std::vector<RaceRange> races;
};
// `progress` gets (events read, events in the trace) after each chunk.
Result<Answers> predict(const TraceReader& reader, const std::vector<Question>& questions,
                        const Calibration& c = {}, bool races = false,
                        const std::function<void(uint64_t, uint64_t)>& progress = {});

// Tapes and traces this long (ops, events) or longer are modelled and recorded in pieces.
inline constexpr size_t kPiecesFromOps = size_t{1} << 20;
inline constexpr unsigned kRecordInPiecesFromThreads = 4;

// One read of a trace into a Tape, for asking many questions later without reading it again.
// With kRecordInPiecesFromThreads hardware threads or more, a trace of kPiecesFromOps events or
// more is read in as many pieces at once (the same tape; read whole where the pieces cannot be
// joined): on a 16-core host 0.37 of one read's time, on 4 threads 0.67 (docs/PERFORMANCE.md).
// `cancel` (checked between chunks) makes it return ErrorCode::Cancelled; `progress` gets
// (events read, events in the trace).
Result<Tape> recordTape(const TraceReader& reader, const std::atomic<bool>* cancel = nullptr,
                        const std::function<void(uint64_t, uint64_t)>& progress = {});
// A question over a tape (what predict() answers from the trace), optionally for one pool only.
// From kPiecesFromOps ops on, with 2 or more hardware threads, in pieces on every one of them
// (at most kMaxAdviceThreads: PoolModel::runInPieces); the same answers.
std::vector<PoolPrediction> predict(const Tape& tape, const Question& q, const Calibration& c = {},
                                    std::optional<uint64_t> onlyPool = {});

// Records a Tape while following a replay someone else drives (a live session's timeline).
class TapeRecorder final : public replay::Observer {
public:
    TapeRecorder();
    static uint32_t kindMask() { return PoolModel::kindMask(); }
    void onFact(const replay::Fact& f, const replay::Replay& r) override { model_.onFact(f, r); }
    // A copy of what was recorded so far, completed against `r` (the replay followed).
    Tape tape(const replay::Replay& r) const;
    uint64_t ops() const { return tape_.ops.size(); }

private:
    Tape tape_;
    PoolModel model_;
};

// The advisor: per pool with at least 3 predicted implicit releases under the recorded
// settings, the smallest release threshold (in granule steps) that removes at least 95% of them, what it costs in predicted peak and mean idle
// reserved memory, and reuse-policy changes that lower the predicted peak.
struct PoolAdvice {
    uint64_t handle = 0;
    int device = -1;
    uint64_t currentThreshold = 0;
    uint64_t currentReleases = 0;      // predicted under the recorded settings
    uint64_t currentPeakReserved = 0;  // predicted under the recorded settings
    uint64_t currentMeanIdle = 0;
    bool thresholdAdvice = false;      // a change is suggested
    uint64_t suggestedThreshold = 0;
    uint64_t suggestedReleases = 0;
    uint64_t suggestedPeakReserved = 0;
    uint64_t suggestedMeanIdle = 0;
    // reuse policies: each one that is off and, turned on, lowers the predicted peak by >= 10%
    struct Policy {
        std::string name; // "reuse_allow_opportunistic", ...
        uint64_t peakReservedOn = 0;
    };
    std::vector<Policy> policies;
    // Where threads race on the pool (a trace read, not a tape): its peak under any settings
    // lies in this range (RaceRange.h), whatever the advice predicts for one interleaving.
    std::optional<RaceRange> race;
    bool any() const { return thresholdAdvice || !policies.empty(); }
};
// One read of the trace with the models the streaming report's read has (the ops kept in a
// TapeSpill), then adviseAfter: the same advice as every question asked on every event over two
// reads. `progress` gets (done, total) over both: the read's events, then the spill's steps, each
// half of the total. `askAhead`: the questions asked during the read too, on the cores it leaves
// idle (as `report` asks them; unset: with 12 or more hardware threads). `threaded`: the read's
// models on threads beside the calling one, as `report` has them (unset: with
// kThreadedFromCpus or more hardware threads). The same advice either way.
inline constexpr unsigned kThreadedFromCpus = 6;
Result<std::vector<PoolAdvice>> advise(const TraceReader& reader, const Calibration& c = {},
                                       const std::function<void(uint64_t, uint64_t)>& progress = {},
                                       std::optional<bool> askAhead = std::nullopt,
                                       std::optional<bool> threaded = std::nullopt);
// Every question on every event, over two reads of the trace (the first for the candidates'
// never-releasing peak): what advise() answered before it asked fewer questions over one read.
// Kept as the reference the tests hold advise() and adviseAfter() to.
Result<std::vector<PoolAdvice>> adviseTwoReads(const TraceReader& reader, const Calibration& c = {});
// The same advice for a reader that has already followed the trace once with two models
// (the streaming report): PoolModel(Settings{}) and PoolModel(neverReleasing()), whose results
// are given, and RaceBounds (`races`). Reads the trace again only where some pool has something
// to decide (3 or more predicted releases, or a reuse policy off), for the candidate thresholds
// (they depend on the whole trace's never-releasing peak) and the reuse policies turned on, and
// only as far as an answer is still open. sameReplay: the first read's replay saw what this
// one's sees (the same entities and first attributes declared, as every read of the trace
// declares them), so the never-releasing answers stand for the candidate thresholds at or
// above a pool's never-releasing peak; false asks those too, the tests' check of that shortcut. `spill`: the first read's ops on disk
// (the report's TapeSpill, internal to core), read instead of the trace where sameReplay holds
// and the spill is whole; otherwise the trace is read again. `threads`: how many threads step
// the questions over the spill, each reading it itself (0: the hardware's, at most
// kMaxAdviceThreads; 1: the calling thread alone); the answers are the same whatever the
// number. Reading the trace again is done on the calling thread, its questions stepped on
// `threads` - 1 others beside it where that is 3 or more. `progress` gets (steps of the spill, all of them) as the calling
// thread's questions step over it, or (events, the trace's) where the trace is read again.
Settings neverReleasing();
// The most threads the questions get: a 16-core host still gained from 8 to 16
// (docs/PERFORMANCE.md).
inline constexpr unsigned kMaxAdviceThreads = 16;
class TapeSpill;
class Speculation;
// `ahead`: questions already asked over the spill during the read (the report's, internal to
// core), whose answers are taken where they are the ones this would ask; with the same
// calibration.
Result<std::vector<PoolAdvice>> adviseAfter(const TraceReader& reader,
                                            const std::vector<PoolPrediction>& asRecorded,
                                            const std::vector<PoolPrediction>& neverReleasing,
                                            const std::vector<RaceRange>& races,
                                            bool sameReplay, const Calibration& c = {},
                                            TapeSpill* spill = nullptr, unsigned threads = 0,
                                            const std::function<void(uint64_t, uint64_t)>& progress = {},
                                            const std::vector<Speculation*>& ahead = {});
// The same from a tape (the same answers: the questions run over the recorded inputs). Setting
// *cancel stops it between questions, with no advice.
std::vector<PoolAdvice> advise(const Tape& tape, const Calibration& c = {},
                               const std::atomic<bool>* cancel = nullptr);
// One sentence for a person (the report's Finding), naming the pool as `poolName`.
std::string adviceText(const PoolAdvice& a, const std::string& poolName);

} // namespace poolscope::whatif
