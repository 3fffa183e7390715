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

#include <functional>
#include <memory>
#include <vector>

#include "TapeSpill.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope::whatif {

struct Search {
    struct Asked {
        std::unique_ptr<PoolModel> model;
        std::vector<uint64_t> pools;          // the handles it answers for
        std::vector<uint64_t> allowed;        // per pool: releases past this decide it (candidates)
        std::vector<uint8_t> mute;            // by replay pool index
        std::vector<uint32_t> index;          // per pool: its replay index, kNone until seen
        std::vector<uint64_t> diedAt;         // per pool: releases when decided, 0 while asked
        size_t left = 0;                      // pools still asked
        bool candidate = false;
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
            uint8_t mute = 1;
            for (size_t k = 0; k < a.pools.size(); ++k)
                if (a.pools[k] == handles[i] && a.index[k] == replay::kNone &&
                    a.diedAt[k] == 0) {
                    a.index[k] = i;
                    mute = 0;
                }
            a.mute.push_back(mute);
        }
    }
    static void stepOne(Asked& a, const Tape& tape, const std::vector<uint64_t>& poolHandles) {
        if (!a.left) return;
        seePools(a, poolHandles);
        a.model->feed(tape.ops.data(), tape.ops.data() + tape.ops.size(), tape.allocSeq.data(),
                      tape.allocSeq.size(), tape.streamHandles, a.mute);
        if (!a.candidate) return;
        for (size_t k = 0; k < a.pools.size(); ++k) {
            if (a.diedAt[k] || a.index[k] == replay::kNone) continue;
            const uint64_t n = a.model->releasesOf(a.index[k]);
            if (n > a.allowed[k]) {
                a.diedAt[k] = n;
                a.mute[a.index[k]] = 1;
                a.left--;
            }
        }
    }
    void step(const Tape& tape, const std::vector<uint64_t>& poolHandles) {
        for (Asked& a : asked) stepOne(a, tape, poolHandles);
    }
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

} // namespace poolscope::whatif
