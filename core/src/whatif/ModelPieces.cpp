// A tape's ops through the pool model in pieces at once (PoolModel::runInPieces, issue #15),
// and a trace's recording model joined from pieces (recordPiece, joinRecording: below).
//
// A piece after the first starts from a guess and keeps its state at checkpoints, at doubling
// distances from its start: a guess meets the true state within a few per cent of a piece's
// ops on the traces measured (docs/PERFORMANCE.md, session 34), so few checkpoints are needed
// and the model goes through at most twice the ops it had to. Where the model that went
// through every op before a piece reaches a checkpoint in the same state, every op after it
// changes both alike: the piece's state at its end is the model's, and its figures from there
// on (sums as differences, maxima per stretch between checkpoints, growths and the reserved
// series as they were noted) are added to the model's.
#include <algorithm>
#include <atomic>
#include <latch>
#include <limits>
#include <new>
#include <thread>

#include "PoolModelPool.h"
#include "RoundUp.h"

namespace poolscope::whatif {

namespace {
// The first checkpoint, this many ops into a piece; each next one twice as far.
constexpr size_t kFirstCheck = 256;
enum : int { kNotYet, kGuessed, kFailed }; // a piece's guess
} // namespace

struct PoolModel::Piece {
    size_t from = 0, to = 0, allocs = 0; // its ops [from, to); the Alloc ops before `from`
    // What its ops change of the next pieces' guesses, per pool index (skim()).
    struct Skim {
        bool seen = false, named = false, reset = false, knobSet[4] = {}, maxSet = false;
        Op init;
        replay::Knob knobs[4];
        uint64_t maxSize = 0;
        // Bytes allocated less bytes freed since the reset, where there was one: modulo 2^64, as
        // a hostile trace's sizes may be anything (a guess: a wrong one is never joined).
        uint64_t live = 0;
    };
    std::vector<Skim> skim;
    size_t skimAllocs = 0;
    std::unique_ptr<PoolModel> g;        // its guess
    struct Check {
        size_t op; // the state before tape.ops[op]
        std::vector<Pool> pools;
    };
    std::vector<Check> checks;
    std::atomic<int> state{kNotYet};
};

void PoolModel::skim(const Tape& tape, Piece& piece, uint32_t only) const {
    std::vector<Piece::Skim>& out = piece.skim;
    auto at = [&out](uint32_t i) -> Piece::Skim& {
        if (i >= out.size()) [[unlikely]]
            out.resize(size_t(i) + 1);
        Piece::Skim& k = out[i];
        k.seen = true;
        return k;
    };
    size_t allocs = 0;
    for (size_t i = piece.from; i < piece.to; ++i) {
        const Op& op = tape.ops[i];
        allocs += op.kind == Op::Kind::Alloc;
        // (None of the kinds below is one that every pool follows.)
        if (only != replay::kNone && op.pool != only) continue;
        switch (op.kind) {
        case Op::Kind::Alloc:
            if (op.stream != replay::kNone)
                at(op.pool).live += detail::roundUp(op.value, cal_.blockAlign);
            break;
        case Op::Kind::Free:
        case Op::Kind::Drop:
            at(op.pool).live -= detail::roundUp(op.value, cal_.blockAlign);
            break;
        case Op::Kind::Init: {
            Piece::Skim& k = at(op.pool);
            k.named = true;
            k.init = op;
            break;
        }
        case Op::Kind::Knob: {
            Piece::Skim& k = at(op.pool);
            if (op.attr < 4) {
                k.knobs[op.attr] = replay::Knob{op.value, op.flag != 0};
                k.knobSet[op.attr] = true;
            } else {
                k.maxSize = op.value;
                k.maxSet = true;
            }
            break;
        }
        case Op::Kind::Reset: {
            Piece::Skim& k = at(op.pool);
            k.reset = true;
            k.live = 0;
            break;
        }
        default: break;
        }
    }
    piece.skimAllocs = allocs;
}

void PoolModel::takeSkim(const Piece& piece) {
    for (uint32_t i = 0; i < piece.skim.size(); ++i) {
        const Piece::Skim& k = piece.skim[i];
        if (!k.seen) continue;
        if (k.named) apply(k.init, 0, 0);
        else if (i >= pools_.size() || !pools_[i].init) init(i, 0, -1); // as the model's own
        Pool& p = pools_[i];
        for (int a = 0; a < 4; ++a)
            if (k.knobSet[a]) p.knobs[a] = k.knobs[a];
        if (k.maxSet) p.maxSize = k.maxSize;
        // A guess: frees the model would not let past the live bytes are not told apart, and
        // more freed than live is none.
        const uint64_t before = k.reset ? 0 : p.live, live = before + k.live;
        const bool negative = k.live > std::numeric_limits<uint64_t>::max() / 2 ? live > before : false;
        p.live = negative ? 0 : live;
    }
}

void PoolModel::guessStart() {
    logSeries_ = keepSeries_;
    for (Pool& p : pools_) {
        for (detail::Pending& q : p.pend) q.clear();
        p.pendTotal = 0;
        p.reserved = detail::roundUp(p.live, cal_.growthGranule);
        p.free = p.reserved - p.live;
        PoolPrediction fresh;
        fresh.handle = p.out.handle;
        fresh.device = p.out.device;
        p.out = std::move(fresh);
        p.idleArea = {};
        p.firstIdle = 0;
        p.seriesLog.clear();
    }
}

void PoolModel::checkpoint(Piece& g, size_t op) {
    Piece::Check c{op, {}};
    c.pools.reserve(pools_.size());
    for (Pool& p : pools_) {
        p.loggedAt = p.seriesLog.size();
        p.growthsAt = p.out.growthAllocs.size();
        // The copy without what only grows (the figures' lists): their lengths say where it was.
        auto growths = std::move(p.out.growthAllocs);
        auto log = std::move(p.seriesLog);
        c.pools.push_back(p);
        p.out.growthAllocs = std::move(growths);
        p.seriesLog = std::move(log);
        // Each stretch's maxima on their own, to be taken from whichever stretch on is joined.
        p.out.peakReserved = 0;
        p.out.peakReservedTsNs = 0;
        p.out.maxIdle = 0;
        p.out.peakLive = 0;
    }
    g.checks.push_back(std::move(c));
}

bool PoolModel::join(Piece& g, size_t check) {
    const std::vector<Pool>& at = g.checks[check].pools;
    if (!samePools(pools_, at)) return false;
    std::vector<Pool>& end = g.g->pools_;
    static const Pool none;
    auto of = [](const std::vector<Pool>& v, size_t i) -> const Pool& {
        return i < v.size() ? v[i] : none;
    };
    // What the joined figures need of the model's own first: the idle area's last change at
    // the same time, and the growths the piece dropped past its list's length not needed.
    for (size_t i = 0; i < end.size(); ++i) {
        const Pool &t = of(pools_, i), &s = of(at, i), &e = end[i];
        if (s.idleArea.timed) {
            if (!t.idleArea.timed || t.idleArea.lastTs != s.idleArea.lastTs) return false;
        } else if (e.idleArea.timed && t.idleArea.timed && e.idleArea.firstTs < t.idleArea.lastTs) {
            return false;
        }
        const size_t after = e.out.growthAllocs.size() - s.growthsAt;
        if (e.out.growthAllocs.size() >= kKeptGrowths && t.out.growthAllocs.size() + after < kKeptGrowths)
            return false;
    }
    if (pools_.size() < end.size()) pools_.resize(end.size());
    for (size_t i = 0; i < end.size(); ++i) {
        Pool& t = pools_[i];
        const Pool& s = of(at, i);
        Pool e = std::move(end[i]);
        PoolPrediction o = std::move(t.out);
        o.handle = e.out.handle;
        o.device = e.out.device;
        o.touched |= e.out.touched;
        o.releases += e.out.releases - s.out.releases;
        o.releasedBytes += e.out.releasedBytes - s.out.releasedBytes;
        o.trims += e.out.trims - s.out.trims;
        o.growths += e.out.growths - s.out.growths;
        o.grownBytes += e.out.grownBytes - s.out.grownBytes;
        o.failedAllocs += e.out.failedAllocs - s.out.failedAllocs;
        auto stretch = [&o](const PoolPrediction& p) {
            if (p.peakReserved > o.peakReserved) {
                o.peakReserved = p.peakReserved;
                o.peakReservedTsNs = p.peakReservedTsNs;
            }
            o.maxIdle = std::max(o.maxIdle, p.maxIdle);
            o.peakLive = std::max(o.peakLive, p.peakLive);
        };
        for (size_t c = check + 1; c < g.checks.size(); ++c) stretch(of(g.checks[c].pools, i).out);
        stretch(e.out);
        for (size_t k = s.growthsAt; k < e.out.growthAllocs.size() && o.growthAllocs.size() < kKeptGrowths; ++k)
            o.growthAllocs.push_back(e.out.growthAllocs[k]);
        if (keepSeries_)
            for (size_t k = s.loggedAt; k < e.seriesLog.size(); ++k)
                o.reserved.push(e.seriesLog[k].first, e.seriesLog[k].second);
        detail::IdleArea a = t.idleArea;
        uint64_t firstIdle = t.firstIdle;
        if (s.idleArea.timed) {
            a.area += e.idleArea.area - s.idleArea.area;
            a.lastTs = e.idleArea.lastTs;
        } else if (e.idleArea.timed && !t.idleArea.timed) {
            a = e.idleArea;
            firstIdle = e.firstIdle;
        } else if (e.idleArea.timed) {
            // The model's first change after the checkpoint was the piece's first.
            a.area += static_cast<unsigned __int128>(detail::span(a.lastTs, e.idleArea.firstTs)) *
                          e.firstIdle + e.idleArea.area;
            a.lastTs = e.idleArea.lastTs;
        }
        e.out = std::move(o);
        e.idleArea = a;
        e.firstIdle = firstIdle;
        e.seriesLog.clear();
        e.loggedAt = e.growthsAt = 0;
        t = std::move(e);
    }
    return true;
}

std::vector<PoolPrediction> PoolModel::runInPieces(const Tape& tape, std::optional<uint64_t> onlyPool,
                                                   size_t pieces, unsigned threads, PieceStats* stats) {
    const uint32_t only = onlyIndex(tape, onlyPool);
    if (onlyPool && only == replay::kNone) return {};
    const size_t n = tape.ops.size();
    pieces = std::min(pieces, n);
    if (pieces <= 1 || threads <= 1) return run(tape, onlyPool);
    std::vector<Piece> ps(pieces);
    for (size_t k = 0; k < pieces; ++k) {
        ps[k].from = n * k / pieces;
        ps[k].to = n * (k + 1) / pieces;
    }
    // The helpers skim every piece but the last at once, and the last to finish makes the
    // guesses of that, in order (little work: a few pools a piece); then they guess every piece
    // but the first, while this model goes through the first. Where making the guesses fails
    // (out of memory), no piece is guessed: the model goes through each itself.
    std::atomic<size_t> nextSkim{0}, skimsLeft{pieces - 1}, next{1};
    bool noGuesses = false; // (read after guessesMade)
    std::unique_ptr<PoolModel> origin = clone(); // this one moves on meanwhile
    origin->keepSeries_ = false;
    std::latch guessesMade(1);
    // (A helper that runs out of memory says so: the model goes through that piece itself.)
    std::atomic<bool> skimFailed{false};
    auto makeGuesses = [&] {
        try {
            if (skimFailed) throw std::bad_alloc();
            std::unique_ptr<PoolModel> before = std::move(origin);
            for (size_t k = 1; k < pieces; ++k) {
                before->takeSkim(ps[k - 1]);
                ps[k].allocs = ps[k - 1].allocs + ps[k - 1].skimAllocs;
                ps[k - 1].skim = {};
                ps[k].g = before->clone();
                ps[k].g->keepSeries_ = keepSeries_;
                ps[k].g->guessStart();
            }
        } catch (...) {
            next.store(pieces);
            noGuesses = true;
        }
        guessesMade.count_down();
    };
    auto helper = [&] {
        for (size_t k; (k = nextSkim.fetch_add(1)) + 1 < pieces;) {
            try {
                skim(tape, ps[k], only);
            } catch (...) {
                skimFailed = true;
            }
            if (skimsLeft.fetch_sub(1) == 1) makeGuesses();
        }
        guessesMade.wait();
        for (size_t k; (k = next.fetch_add(1)) < pieces;) {
            Piece& p = ps[k];
            try {
                size_t allocs = p.allocs;
                for (size_t at = p.from, len = kFirstCheck; at < p.to; len *= 2) {
                    const size_t stop = std::min(p.to, p.from + len);
                    p.g->step(tape, at, stop, allocs, only);
                    at = stop;
                    if (at < p.to) p.g->checkpoint(p, at);
                }
                p.state.store(kGuessed);
            } catch (...) {
                p.state.store(kFailed);
            }
            p.state.notify_all();
        }
    };
    std::vector<std::jthread> helpers;
    for (unsigned t = 1; t < std::min<size_t>(threads, pieces); ++t) helpers.emplace_back(helper);

    PieceStats st;
    st.pieces = pieces - 1;
    size_t allocs = 0;
    step(tape, 0, ps[0].to, allocs, only);
    guessesMade.wait();
    for (size_t k = 1; k < pieces; ++k) {
        Piece& p = ps[k];
        if (noGuesses) {
            step(tape, p.from, p.to, allocs, only);
            continue;
        }
        int s = p.state.load();
        for (; s != kGuessed && s != kFailed; s = p.state.load()) p.state.wait(s);
        if (s == kFailed) {
            step(tape, p.from, p.to, allocs, only);
            p.g.reset();
            p.checks = {};
            continue;
        }
        size_t at = p.from;
        bool joined = false;
        for (size_t c = 0; c < p.checks.size() && !joined; ++c) {
            step(tape, at, p.checks[c].op, allocs, only);
            at = p.checks[c].op;
            joined = join(p, c);
        }
        if (joined) {
            ++st.joined;
            st.opsTwice += at - p.from;
            allocs = k + 1 < pieces ? ps[k + 1].allocs : 0;
        } else {
            step(tape, at, p.to, allocs, only);
            st.opsTwice += p.to - p.from;
        }
        p.g.reset();
        p.checks = {};
    }
    helpers.clear();
    if (stats) *stats = st;
    return collect(tape, only);
}

// ---- A trace's recording in pieces (issue #15) ----
//
// A piece's recording model sees only its piece's facts. What the ops it writes depend on from
// before (which pools were first seen, their knobs as last read, the frees made visible so far)
// and what the recorded side does (the reserved and used bytes last recorded, the most held
// since the last release, the recorded times) is taken from the replay's start where the replay
// holds it, and checked against the recording of every piece before when the piece is joined;
// the one thing it cannot take, the most held since the last release, stays open until the
// piece's first release or trim, whose count is decided at the join.

void PoolModel::recordPiece(const replay::Replay& start, bool seeded) {
    recordingPiece_ = true;
    recordOnly_ = true;
    pieceSeeds_.assign(start.pools().size(), {0, 0});
    seenCleared_.assign(start.streams().size(), 0);
    if (seeded) {
        for (size_t i = 0; i < start.pools().size(); ++i)
            pieceSeeds_[i] = {start.pools()[i].reserved, start.pools()[i].used};
        for (size_t s = 0; s < start.streams().size(); ++s) seenCleared_[s] = start.streams()[s].clearedBytes;
    }
    seenClearedSeed_ = seenCleared_;
}

void PoolModel::seedPool(uint32_t i, size_t initOp) {
    Pool& p = pools_[i];
    p.initOp = initOp;
    p.initOps = tape_ ? tape_->ops.size() - initOp : 0;
    std::copy(std::begin(p.knobs), std::end(p.knobs), std::begin(p.initKnobs));
    p.initMaxSize = p.maxSize;
    if (i < pieceSeeds_.size()) {
        p.seedReserved = p.recReserved = pieceSeeds_[i].first;
        p.seedUsed = p.recUsed = pieceSeeds_[i].second;
    }
    p.recHighOpen = true;
}

bool PoolModel::joinRecording(PoolModel& piece, Tape& pieceTape, Tape& into) {
    auto sameKnobs = [](const replay::Knob (&a)[4], const replay::Knob (&b)[4]) {
        for (int k = 0; k < 4; ++k)
            if (a[k].known != b[k].known || a[k].value != b[k].value) return false;
        return true;
    };
    const size_t nSeen = std::max(seenCleared_.size(), piece.seenClearedSeed_.size());
    for (size_t s = 0; s < nSeen; ++s) {
        const uint64_t mine = s < seenCleared_.size() ? seenCleared_[s] : 0;
        const uint64_t theirs = s < piece.seenClearedSeed_.size() ? piece.seenClearedSeed_[s] : 0;
        if (mine != theirs) return false;
    }
    std::vector<std::pair<size_t, size_t>> skip; // ops written at first sight of a known pool
    for (uint32_t i = 0; i < piece.pools_.size(); ++i) {
        const Pool& p = piece.pools_[i];
        if (!p.init) continue;
        const bool known = i < pools_.size() && pools_[i].init;
        const uint64_t reserved = known ? pools_[i].recReserved : 0, used = known ? pools_[i].recUsed : 0;
        if (p.seedReserved != reserved || p.seedUsed != used) return false;
        if (!known) continue;
        const Pool& w = pools_[i];
        if (!sameKnobs(p.initKnobs, w.knobs) || p.initMaxSize != w.maxSize) return false;
        // Its records up to the model's latest time added nothing there: the first one past it
        // must be among those it kept.
        if (p.recTimed && w.recTimed && p.recLastTs > w.recLastTs &&
            (p.recMaxima.empty() || p.recMaxima.back().ts <= w.recLastTs))
            return false;
        skip.emplace_back(p.initOp, p.initOp + p.initOps);
    }
    std::sort(skip.begin(), skip.end());
    size_t from = 0;
    for (const auto& [a, b] : skip) {
        into.ops.insert(into.ops.end(), pieceTape.ops.begin() + static_cast<std::ptrdiff_t>(from),
                        pieceTape.ops.begin() + static_cast<std::ptrdiff_t>(a));
        from = b;
    }
    into.ops.insert(into.ops.end(), pieceTape.ops.begin() + static_cast<std::ptrdiff_t>(from), pieceTape.ops.end());
    into.allocSeq.insert(into.allocSeq.end(), pieceTape.allocSeq.begin(), pieceTape.allocSeq.end());
    pieceTape = Tape{};
    if (pools_.size() < piece.pools_.size()) pools_.resize(piece.pools_.size());
    for (uint32_t i = 0; i < piece.pools_.size(); ++i) {
        Pool& p = piece.pools_[i];
        if (!p.init) continue;
        Pool& w = pools_[i];
        if (!w.init) {
            // First seen in the piece: it started where a model that never saw it stands.
            if (p.firstRelease && p.firstReleaseLeft < p.firstReleaseHigh) p.out.recordedReleases++;
            p.recHighOpen = p.firstRelease = false;
            w = std::move(p);
            continue;
        }
        if (p.firstRelease && p.firstReleaseLeft < std::max(w.recHighSinceRelease, p.firstReleaseHigh))
            w.out.recordedReleases++;
        w.out.recordedReleases += p.out.recordedReleases;
        w.out.recordedGrowths += p.out.recordedGrowths;
        w.out.recordedPeakReserved = std::max(w.out.recordedPeakReserved, p.out.recordedPeakReserved);
        w.out.recordedMaxIdle = std::max(w.out.recordedMaxIdle, p.out.recordedMaxIdle);
        w.out.recordedKnown |= p.out.recordedKnown;
        w.out.touched |= p.out.touched;
        w.recHighSinceRelease = p.recHighOpen ? std::max(w.recHighSinceRelease, p.recHighSinceRelease)
                                              : p.recHighSinceRelease;
        if (p.recTimed) {
            if (!w.recTimed) {
                w.recTimed = true;
                w.recFirstTs = p.recFirstTs;
                w.recIdleArea = p.recIdleArea;
                w.recLastTs = p.recLastTs;
            } else if (p.recLastTs > w.recLastTs) {
                // The area goes on from this model's latest time at the first of the piece's
                // records past it, with the idle bytes held up to that one.
                const auto past = std::upper_bound(
                    p.recMaxima.begin(), p.recMaxima.end(), w.recLastTs,
                    [](int64_t t, const Pool::RecordMax& m) { return t < m.ts; });
                w.recIdleArea += static_cast<unsigned __int128>(detail::span(w.recLastTs, past->ts)) *
                                     past->idle + (p.recIdleArea - past->areaAfter);
                w.recLastTs = p.recLastTs;
            }
        }
        w.recReserved = p.recReserved;
        w.recUsed = p.recUsed;
        std::copy(std::begin(p.knobs), std::end(p.knobs), std::begin(w.knobs));
        w.maxSize = p.maxSize;
    }
    seenCleared_ = piece.seenCleared_;
    lastTs_ = std::max(lastTs_, piece.lastTs_);
    return true;
}

} // namespace poolscope::whatif
