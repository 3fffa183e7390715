#pragma once
// The advisor's questions over the report's spill, on several threads (internal to core):
// adviseAfter (Predict.cpp) asks, these step the questions' models over the spilled ops.
//
// The advisor's second pass (adviseAfter): the three reuse policies forced on, for the pools
// that had them off, and the candidate thresholds, for the pools with something to decide. The
// ops come from the first read's spill (TapeSpill.h) or, failing that, from a recording model
// following a second read of the trace; every question's model follows them a step (a chunk of
// the trace) at a time, muted for the pools whose answer it does not give. A candidate is asked
// only below the first candidate at or above a pool's never-releasing peak (from there on the
// model is the never-releasing one: it never releases either) and stops for a pool as soon as
// its predicted releases pass what the advice allows (they only grow): the read ends once
// nothing is left to ask.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "LaneModel.h"
#include "TapeSpill.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope::whatif {

struct Search {
    struct Asked {
        // The question's model: its own, or lane `lane` of a LaneModel shared with other
        // candidates (Search::lanesForCandidates).
        std::unique_ptr<PoolModel> model;
        std::shared_ptr<LaneModel> lanes;
        uint32_t lane = 0;
        std::optional<uint64_t> threshold; // a candidate's, set where it has no other setting
        std::vector<uint64_t> pools;          // the handles it answers for
        std::vector<uint64_t> allowed;        // per pool: releases past this decide it (candidates)
        std::vector<uint8_t> mute;            // by replay pool index
        std::vector<uint32_t> index;          // per pool: its replay index, kNone until seen
        std::vector<uint64_t> diedAt;         // per pool: releases when decided, 0 while asked
        size_t left = 0;                      // pools still asked
        bool candidate = false;
        // Asked ahead (Speculation below): every pool, none decided on the way; instead each
        // pool's releases where they had risen at a step's end (by replay pool index), from
        // which adviseAfter reads the decision at the allowance it knows after the read.
        // (Four bytes a value, at most one a step each, at most kMaxKept in all: a count past
        // four bytes, or more values than that, spoil the question, which stops and is asked
        // after the read instead.)
        static constexpr size_t kMaxKept = size_t{1} << 18;
        bool ahead = false, spoiled = false;
        std::vector<std::vector<uint32_t>> releasesAtSteps;
        size_t kept = 0, maxKept = kMaxKept;
        // A candidate asked ahead stops following a pool whose releases are far past what the
        // advice is likely to allow at the trace's end (`stopped`, by pool index): the allowance is a
        // twentieth of the recorded settings' releases, which the spill's notes give so far, and
        // `aheadEvents` the trace's events to extrapolate them to. Where it stopped short of the
        // allowance found after the read, the question is asked again. All its pools stopped,
        // it stops (knowing the first `poolsAtStop` pools).
        uint64_t aheadEvents = 0, aheadSlack = 0;
        std::vector<uint8_t> stopped;
        size_t poolsAtStop = SIZE_MAX;

        uint64_t releasesOf(uint32_t pool) const {
            return lanes ? lanes->releasesOf(lane, pool) : model->releasesOf(pool);
        }
        std::vector<PoolPrediction> collect(const Tape& end) const {
            return lanes ? lanes->collect(lane, end) : model->collect(end);
        }
    };
    std::vector<Asked> asked;

    bool anyLeft() const {
        for (const Asked& a : asked)
            if (a.left) return true;
        return false;
    }
    // New pools of the replay (`handles`: each replay pool's handle, by index): muted unless
    // the question answers for them.
    static void seePools(Asked& a, const std::vector<uint64_t>& handles) {
        for (uint32_t i = static_cast<uint32_t>(a.mute.size()); i < handles.size(); ++i) {
            uint8_t mute = a.ahead ? 0 : 1;
            for (size_t k = 0; k < a.pools.size(); ++k)
                if (a.pools[k] == handles[i] && a.index[k] == replay::kNone &&
                    a.diedAt[k] == 0) {
                    a.index[k] = i;
                    mute = 0;
                }
            a.mute.push_back(mute);
        }
    }
    // The open questions of `share` one step further (`notes`: the spill's for the step,
    // TapeSpill::append, where it has them): each PoolModel fed, each LaneModel once for all its
    // lanes in the share (a LaneModel's questions are all in one share), then each question's
    // decisions.
    static void stepShare(const std::vector<Asked*>& share, const Tape& tape,
                          const std::vector<uint64_t>& poolHandles,
                          const std::vector<uint64_t>* notes = nullptr);
    // A candidate asked ahead, after a step: each pool's releases where they rose, and the
    // pools far past their likely allowance stopped (AdviceFeed's notes: the events so far, then
    // each pool's releases under the recorded settings).
    static void stepAhead(Asked& a, const std::vector<uint64_t>* notes);
    void step(const Tape& tape, const std::vector<uint64_t>& poolHandles) {
        std::vector<Asked*> all;
        for (Asked& a : asked) all.push_back(&a);
        stepShare(all, tape, poolHandles);
    }
    // The candidate questions (thresholds alone) as lanes of LaneModels instead of a PoolModel
    // each: `perModel` lanes at most to one, as evenly as that allows, dealt across the
    // thresholds' order (of m LaneModels, the g-th holds the g-th, (g+m)-th, ... candidate).
    void lanesForCandidates(size_t perModel, const Calibration& c);
};

// The search over the spill on `threads` threads (2 or more), each with its own reader of the
// spill and its share of the open questions. False where a reader failed (the models are then
// part-fed: the caller starts over).
bool searchOnThreads(Search& search, const TapeSpill& spill, unsigned threads,
                     const std::function<void(uint64_t)>& stepped);
// The same with one thread decoding the spill for `threads` - 1 others stepping their shares
// (4 or more threads). False where the spill could not be read to its end while some question
// was open.
bool searchBroadcast(Search& search, const TapeSpill& spill, unsigned threads,
                     const std::function<void(uint64_t)>& stepped);
// The search over a read of the trace made on the calling thread, `threads` others (2 or more)
// stepping their shares of the questions over each step it gives, as searchBroadcast does over
// the spill. `read` makes the steps: it calls the given function with each step's ops (taken
// out of the tape: it gets empty buffers back) and the replay's pool handles, which answers
// false once nothing more is wanted; it returns false where it failed. False where the read
// failed, or a thread could not be had or ran out of memory (the models are then part-fed: the
// caller asks again).
using GiveStep = std::function<bool(Tape& running, const std::vector<uint64_t>& poolHandles)>;
bool searchWhileReading(Search& search, unsigned threads,
                        const std::function<bool(const GiveStep&)>& read);

// The questions' settings (Predict.cpp): reuse policy k (0: opportunistic, 1: follow event
// dependencies, 2: internal dependencies) forced on; the candidate thresholds for a largest
// never-releasing peak of `top`.
Settings policyOn(int k);
std::vector<uint64_t> candidatesUpTo(uint64_t top, const Calibration& c);

// The advisor's questions asked during the report's read, on cores the read leaves idle, so
// that few or none are left to ask after it. Which pools a question asks about, and the
// candidates themselves, are known only once the read is done (a pool's recorded releases, the
// largest never-releasing peak); so each is asked of every pool, decided for none on the way
// (Asked::ahead: a candidate only stops following a pool far past its likely allowance), and
// the candidates are those the caller foresees (AdviceFeed::askWave). After the read
// adviseAfter takes the answers of the questions it would ask that were asked ahead (the same
// model over the same steps: the same answers, a pool's decision read from its releases at
// each step), and asks only the rest.
class Speculation {
public:
    // Starts following `spill` as it is written, on `threads` threads (4 or more, as
    // searchBroadcast takes them): reuse policy k on where bit k of `policies` is set (k as in
    // policyOn), and each of `thresholds`. The spill must be finished or abandoned before the
    // speculation goes. `events`: the trace's (0: unknown, no candidate stops early); `slack`:
    // the releases a candidate follows a pool past four times its allowance so far, at least.
    static constexpr uint64_t kSlack = 64;
    // `perModel`: the thresholds as lanes of LaneModels of at most this many (each LaneModel on
    // one thread: the fewer, the less CPU, the more, the sooner the wave is done).
    // `yield`: the questions' threads give way to the read's (Yield below).
    enum class Yield : uint8_t { None, Nice, Idle };
    Speculation(const TapeSpill& spill, unsigned policies, const std::vector<uint64_t>& thresholds,
                const Calibration& c, unsigned threads, uint64_t events = 0,
                uint64_t slack = kSlack, size_t perModel = 1, Yield yield = Yield::None);
    ~Speculation();
    Speculation(const Speculation&) = delete;
    Speculation& operator=(const Speculation&) = delete;

    // Threads a wave takes on a machine of `cpus` hardware threads: all but 6 for the report's
    // read (decoding, the report's, the models', the analyses', the follower, the time merge;
    // its seventh, the series', needs about a quarter of a core), at least 4, at most
    // kMaxAdviceThreads; and from how many the questions are asked ahead by default.
    static unsigned threadsFor(unsigned cpus);
    static constexpr unsigned kFromCpus = 12;

    // Waits until the questions have followed the whole spill (after its finish()): false where
    // they could not (the spill failed or was abandoned, no thread to be had).
    bool wait();
    // After wait() returned true: the question asked with policy k on, or with threshold t
    // (null where none was).
    Search::Asked* policy(int k);
    Search::Asked* threshold(uint64_t t);

private:
    Search search_;
    int policyAt_[3] = {-1, -1, -1}; // index into search_.asked
    std::vector<uint64_t> thresholds_;
    std::thread thread_;
    bool ok_ = false;
};

namespace detail {
// Since the process started (tests, `report --timings`): the questions adviseAfter took from
// those asked ahead, and those it asked itself over the spill or the trace.
struct AheadCounts {
    uint64_t given = 0, asked = 0;
};
AheadCounts aheadCounts();
void countAhead(uint64_t given, uint64_t asked);
// Tests only: the values a candidate asked ahead keeps at most, instead of Asked::kMaxKept
// (0: that).
void setAheadKeptForTests(size_t n);
} // namespace detail

} // namespace poolscope::whatif
