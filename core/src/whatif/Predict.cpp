// A trace through the replay with several pool models at once (one read of the trace for every
// question), and the advisor built on it.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <limits>
#include <memory>
#include <optional>

#include "poolscope/replay/Replay.h"

#include "poolscope/ChunksInOrder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/whatif/PoolModel.h"

#include "../analysis/AdviceFeed.h"
#include "../analysis/PieceRead.h"
#include "../analysis/ReplayThread.h"
#include "../replay/TraceEntities.h"
#include "QuestionSearch.h"
#include "TapeSpill.h"

namespace poolscope::whatif {

namespace {

// Declares the trace's entities to a replay and runs every event (samples merged in by time, as
// the timeline does) through it; and through the replays `beside` on threads of their own and
// the caller's `lent` ones (with its observers), the same chunks shared (a Replay is a
// function of its inputs: theirs make the same facts).
Status replayTrace(const TraceReader& reader, replay::Replay& replay, uint64_t& events,
                   const std::atomic<bool>* cancel = nullptr,
                   const std::function<void(uint64_t, uint64_t)>& progress = {},
                   const std::function<bool()>& afterChunk = {},
                   std::vector<std::unique_ptr<poolscope::detail::ReplayThread>>* beside = nullptr,
                   const std::vector<poolscope::detail::ReplayThread*>& lent = {}) {
    // The pools' attributes as the driver reported them at first sight, as every other replay of
    // the trace declares them (the report's, the window's): a model's recorded settings before
    // the first change the trace records are those.
    if (auto devices = poolscope::detail::declareTraceEntities(reader, replay, false); !devices)
        return devices.error();
    std::vector<PoolAttributeValue> knobs;
    if (auto attrs = reader.poolAttributes(); attrs) knobs = std::move(*attrs);
    auto declareKnobs = [&](replay::Replay& r) {
        for (const PoolAttributeValue& a : knobs) r.declareKnob(a.pool, a.attr, a.value);
    };
    declareKnobs(replay);
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    const std::vector<Event>& ss = *samples;
    poolscope::detail::ChunkShelf shelf;
    std::vector<poolscope::detail::ReplayThread*> threads;
    // Unless every replay ends, the threads are stopped here, before the samples and the chunks'
    // shelf they use go (and the caller's observers they call). `lent` threads are the caller's
    // (with its observers): stopped, not destroyed.
    bool ended = false;
    struct Stop {
        std::vector<std::unique_ptr<poolscope::detail::ReplayThread>>* beside;
        const std::vector<poolscope::detail::ReplayThread*>& lent;
        const bool& ended;
        ~Stop() {
            if (ended) return;
            for (poolscope::detail::ReplayThread* t : lent) t->abort();
            if (beside) beside->clear();
        }
    } stop{beside, lent, ended};
    if ((beside && !beside->empty()) || !lent.empty()) {
        auto tables = poolscope::detail::readTraceTables(reader);
        if (!tables) return tables.error();
        if (beside)
            for (auto& t : *beside) threads.push_back(t.get());
        threads.insert(threads.end(), lent.begin(), lent.end());
        for (poolscope::detail::ReplayThread* t : threads) {
            t->setEntities(tables->devices, tables->pools, tables->streams);
            declareKnobs(t->replay());
            t->expectSamples(&ss);
            t->start();
        }
    }
    poolscope::detail::SampleMerge merge;
    merge.expect(&ss);
    const uint64_t total = progress ? poolscope::detail::progressTotal(reader) : 0;
    bool cancelled = false, stopped = false;
    // One chunk on this thread's replay; false where afterChunk stops the read.
    auto applyChunk = [&](const std::vector<Event>& ev) {
        merge.chunk(ev, replay, [&](const Event& e) { replay.apply(e); });
        events += ev.size();
        if (progress) progress(events, total);
        if (afterChunk && !afterChunk()) {
            stopped = true;
            return false;
        }
        return true;
    };
    // Three replays or more: the live set kept once on a thread of its own (replay::LiveLead),
    // every replay following its record of each chunk instead of looking each block up itself
    // (TraceReport.cpp does the same). Declared after `stop`: it pushes to the threads, so it
    // goes first.
    std::unique_ptr<poolscope::detail::LiveFollow> live;
    if (threads.size() >= 2) live = std::make_unique<poolscope::detail::LiveFollow>(threads, replay, applyChunk);
    Status st = decodeChunksInOrder(reader, [&](std::vector<Event>& chunk) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            cancelled = true;
            return false;
        }
        if (live) return live->push(shelf.hold(chunk));
        poolscope::detail::SharedChunk shared;
        if (!threads.empty()) {
            shared = shelf.hold(chunk);
            for (poolscope::detail::ReplayThread* t : threads) t->push(shared);
        }
        return applyChunk(shared ? *shared : chunk);
    }, decodingThreadsBeside(), false);
    if (stopped) return {}; // (forEachChunk calls it a cancel)
    if (!st) return st.error();
    if (cancelled) return Error{ErrorCode::Cancelled, "cancelled"};
    if (live && !live->finish()) return {};
    merge.rest([&](const Event& e) { replay.apply(e); });
    for (poolscope::detail::ReplayThread* t : threads) t->end();
    ended = true;
    return poolscope::detail::followersInStep(live.get(), threads);
}

// How many replays a pass with `observers` models and bounds follows: one per CPU in two (the
// rest decode), at most one per observer; one below 4 CPUs, where the decoding shares them.
// POOLSCOPE_PREDICT_REPLAYS sets the number (tests: the answers are the same on any).
size_t replaysFor(size_t observers) {
    if (const char* n = std::getenv("POOLSCOPE_PREDICT_REPLAYS"))
        return std::clamp<size_t>(std::strtoul(n, nullptr, 10), 1, std::max<size_t>(observers, 1));
    const unsigned cpus = std::thread::hardware_concurrency();
    if (cpus < 4 || observers < 2) return 1;
    return std::min<size_t>(observers, std::max(2u, cpus / 2));
}

} // namespace

Result<Answers> predict(const TraceReader& reader, const std::vector<Question>& questions,
                        const Calibration& c, bool races,
                        const std::function<void(uint64_t, uint64_t)>& progress) {
    // Each model (and the racing threads' bounds) follows one of the replays: the caller's, or
    // one on a thread of its own. It is asked for its result against the replay it followed.
    const size_t replays = replaysFor(questions.size() + (races ? 1 : 0));
    RaceBounds bounds(c.growthGranule, c.blockAlign);
    std::vector<std::unique_ptr<PoolModel>> models;
    replay::Replay replay;
    // (After the models and bounds, so that the threads, which call them, go first.)
    std::vector<std::unique_ptr<poolscope::detail::ReplayThread>> threads;
    for (size_t i = 1; i < replays; ++i) threads.push_back(std::make_unique<poolscope::detail::ReplayThread>());
    size_t next = 0;
    auto follow = [&](replay::Observer* o, uint32_t mask) -> const replay::Replay& {
        const size_t k = next++ % replays;
        replay::Replay& r = k == 0 ? replay : threads[k - 1]->replay();
        r.subscribe(o, mask);
        return r;
    };
    const replay::Replay* boundsReplay = races ? &follow(&bounds, RaceBounds::kindMask()) : nullptr;
    std::vector<const replay::Replay*> followed;
    for (const Question& q : questions) {
        Calibration qc = c;
        if (q.opportunisticLagNs) qc.opportunisticLagNs = *q.opportunisticLagNs;
        auto m = std::make_unique<PoolModel>(q.all, qc);
        for (const auto& [h, s] : q.perPool) m->setPoolSettings(h, s);
        m->keepSeries(q.keepSeries);
        m->keepRecorded(q.keepRecorded);
        followed.push_back(&follow(m.get(), PoolModel::kindMask()));
        models.push_back(std::move(m));
    }
    Answers out;
    Status st = replayTrace(reader, replay, out.events, nullptr, progress, {}, &threads);
    if (!st) return st.error();
    for (size_t i = 0; i < models.size(); ++i) out.perQuestion.push_back(models[i]->result(*followed[i]));
    if (races) out.races = bounds.result(*boundsReplay);
    return out;
}

Result<Tape> recordTape(const TraceReader& reader, const std::atomic<bool>* cancel,
                        const std::function<void(uint64_t, uint64_t)>& progress) {
    const unsigned threads = std::min(std::thread::hardware_concurrency(), kMaxAdviceThreads);
    const auto sum = reader.summary();
    if (threads >= kRecordInPiecesFromThreads && sum && sum.value().eventCount >= kPiecesFromOps) {
        // A piece that cannot be joined (a start only guessed), or a file that cannot be opened
        // again, leaves the trace to be read in one read.
        auto cut = poolscope::detail::recordTapeInPieces(reader, threads, threads, cancel, progress);
        if (cut && *cut) return std::move(**cut);
        if (!cut && cut.error().code == ErrorCode::Cancelled) return cut.error();
    }
    return poolscope::detail::recordTapeInOneRead(reader, cancel, progress);
}

std::vector<PoolPrediction> predict(const Tape& tape, const Question& q, const Calibration& c,
                                    std::optional<uint64_t> onlyPool) {
    Calibration qc = c;
    if (q.opportunisticLagNs) qc.opportunisticLagNs = *q.opportunisticLagNs;
    PoolModel m(q.all, qc);
    for (const auto& [h, s] : q.perPool) m.setPoolSettings(h, s);
    m.keepSeries(q.keepSeries);
    // A long tape in as many pieces as threads, each helper guessing one while this thread goes
    // through the first (the window's What-if panel asks at every move of a slider).
    const unsigned threads = std::min(std::thread::hardware_concurrency(), kMaxAdviceThreads);
    if (tape.ops.size() >= kPiecesFromOps && threads >= 2)
        return m.runInPieces(tape, onlyPool, threads, threads);
    return m.run(tape, onlyPool);
}

TapeRecorder::TapeRecorder() { model_.recordInto(&tape_); }

Tape TapeRecorder::tape(const replay::Replay& r) const {
    Tape t;
    t.ops = tape_.ops;
    t.allocSeq = tape_.allocSeq;
    t.events = r.eventCount();
    model_.finishTape(t, r);
    return t;
}

namespace {

const PoolPrediction* find(const std::vector<PoolPrediction>& v, uint64_t handle) {
    for (const PoolPrediction& p : v)
        if (p.handle == handle) return &p;
    return nullptr;
}

} // namespace

namespace {

// A release or two (the program's last synchronize) costs nothing worth a change.
constexpr uint64_t kMinReleases = 3;

// The candidates for the never-releasing model's answers (candidatesUpTo).
std::vector<uint64_t> candidates(const std::vector<PoolPrediction>& never, const Calibration& c) {
    uint64_t top = 0;
    for (const PoolPrediction& p : never) top = std::max(top, p.peakReserved);
    return candidatesUpTo(top, c);
}

// Each reuse policy forced on (the first pass's questions 2 to 4).
std::vector<Question> policiesOn() {
    std::vector<Question> q(3);
    for (int k = 0; k < 3; ++k) q[size_t(k)].all = policyOn(k);
    return q;
}

} // namespace

// Candidate thresholds in granule steps up to the largest never-release peak (at most
// kCandidates + 1 of them, evenly spread, the peak itself last: each is a model on every event,
// and `report` runs this too).
std::vector<uint64_t> candidatesUpTo(uint64_t top, const Calibration& c) {
    const uint64_t g = std::max<uint64_t>(c.growthGranule, 1);
    constexpr uint64_t kCandidates = 24;
    std::vector<uint64_t> cands;
    if (top > 0) {
        const uint64_t steps = (top + g - 1) / g;
        const uint64_t stride = std::max<uint64_t>(1, (steps + kCandidates - 1) / kCandidates);
        for (uint64_t k = 0; k < steps; k += stride) cands.push_back(k * g);
        cands.push_back(steps * g);
    }
    return cands;
}

Settings policyOn(int k) {
    Settings s;
    if (k == 0) s.allowOpportunistic = true;
    if (k == 1) s.followEventDependencies = true;
    if (k == 2) s.allowInternalDependencies = true;
    return s;
}

namespace {

// policyOn[k]: the answers with policy k forced on (opportunistic, follow event dependencies,
// internal dependencies); byCandidate[i]: with cands[i] as every pool's threshold.
std::vector<PoolAdvice> adviceFrom(const std::vector<PoolPrediction>& base,
                                   const std::vector<PoolPrediction>* const policyOn[3],
                                   const std::vector<uint64_t>& cands,
                                   const std::vector<std::vector<PoolPrediction>>& byCandidate,
                                   const std::vector<RaceRange>& races = {}) {
    std::vector<PoolAdvice> out;
    for (const PoolPrediction& b : base) {
        if (!b.touched) continue;
        PoolAdvice a;
        a.handle = b.handle;
        a.device = b.device;
        a.currentThreshold = b.releaseThreshold;
        a.currentReleases = b.releases;
        a.currentPeakReserved = b.peakReserved;
        a.currentMeanIdle = b.meanIdle;
        for (const RaceRange& r : races)
            if (r.handle == b.handle && r.racing()) {
                a.race = r;
                a.race->clampTo(b.peakReserved);
            }
        if (b.releases >= kMinReleases) {
            const uint64_t allowed = b.releases / 20; // removes at least 95%
            for (size_t i = 0; i < cands.size(); ++i) {
                const PoolPrediction* p = find(byCandidate[i], b.handle);
                if (!p || p->releases > allowed) continue;
                if (cands[i] > b.releaseThreshold) {
                    a.thresholdAdvice = true;
                    a.suggestedThreshold = cands[i];
                    a.suggestedReleases = p->releases;
                    a.suggestedPeakReserved = p->peakReserved;
                    a.suggestedMeanIdle = p->meanIdle;
                }
                break;
            }
        }
        const char* names[] = {"reuse_allow_opportunistic", "reuse_follow_event_dependencies",
                               "reuse_allow_internal_dependencies"};
        const bool was[] = {b.allowOpportunistic, b.followEventDependencies,
                            b.allowInternalDependencies};
        for (int k = 0; k < 3; ++k) {
            if (was[k]) continue;
            const PoolPrediction* p = find(*policyOn[k], b.handle);
            // Worth a change only when it lowers the peak by a tenth or more.
            if (p && p->peakReserved * 10 <= b.peakReserved * 9)
                a.policies.push_back({names[k], p->peakReserved});
        }
        out.push_back(std::move(a));
    }
    return out;
}

} // namespace

Settings neverReleasing() {
    Settings s;
    s.releaseThreshold = std::numeric_limits<uint64_t>::max();
    return s;
}

Result<std::vector<PoolAdvice>> adviseTwoReads(const TraceReader& reader, const Calibration& c) {
    // Pass 1: as recorded, never releasing, and each reuse policy forced on.
    std::vector<Question> q1(2);
    q1[1].all = neverReleasing();
    for (Question& q : policiesOn()) q1.push_back(std::move(q));
    auto a1 = predict(reader, q1, c, /*races=*/true);
    if (!a1) return a1.error();
    // Pass 2: the candidate thresholds.
    const std::vector<uint64_t> cands = candidates(a1->perQuestion[1], c);
    std::vector<Question> q2(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) q2[i].all.releaseThreshold = cands[i];
    Answers a2;
    if (!q2.empty()) {
        auto r2 = predict(reader, q2, c, false);
        if (!r2) return r2.error();
        a2 = std::move(*r2);
    }
    const std::vector<PoolPrediction>* on[3] = {&a1->perQuestion[2], &a1->perQuestion[3],
                                                &a1->perQuestion[4]};
    return adviceFrom(a1->perQuestion[0], on, cands, a2.perQuestion, a1->races);
}

Result<std::vector<PoolAdvice>> advise(const TraceReader& reader, const Calibration& c,
                                       const std::function<void(uint64_t, uint64_t)>& progress,
                                       std::optional<bool> askAhead, std::optional<bool> threaded) {
    auto half = [&](uint64_t k) -> std::function<void(uint64_t, uint64_t)> {
        if (!progress) return {};
        return [&progress, k](uint64_t done, uint64_t total) {
            if (total) progress(k * 1000 + done * 1000 / total, 2000);
        };
    };
    // The first read: the recording model's ops (to the spill), the never-releasing model fed
    // from them, the racing threads' ranges. With CPUs to spare they are spread as `report`
    // spreads them: the recording model on a replay of its own, the spill and the two models
    // that follow its ops on another thread, the racing threads' ranges on the calling thread's
    // replay (all on one thread, the read was bound by them).
    const unsigned cpus = std::thread::hardware_concurrency();
    const bool onThreads = threaded.value_or(cpus >= kThreadedFromCpus);
    replay::Replay replay;
    poolscope::detail::AdviceFeed feed(replay, onThreads, /*spill=*/true, c, /*follower=*/onThreads);
    std::vector<poolscope::detail::ReplayThread*> lent;
    if (poolscope::detail::ReplayThread* t = feed.thread()) {
        feed.racesOn(replay);
        lent.push_back(t);
    }
    if (askAhead.value_or(cpus >= Speculation::kFromCpus))
        feed.askAhead(Speculation::threadsFor(cpus), poolscope::detail::progressTotal(reader));
    uint64_t events = 0;
    Status st = replayTrace(reader, replay, events, nullptr, half(0), [&] {
        if (!feed.thread()) feed.step();
        return true;
    }, nullptr, lent);
    if (!st) return st.error();
    feed.end();
    feed.finish();
    return adviseAfter(reader, feed.recorded(), feed.neverReleasing(), feed.races(),
                       /*sameReplay=*/true, c, feed.spill(), 0, half(1), feed.ahead());
}

namespace {

// The questions of adviseAfter's search, none of them answered yet.
Search ask(const std::vector<PoolPrediction>& asRecorded,
           const std::vector<PoolPrediction>& neverReleasing, const std::vector<uint64_t>& cands,
           bool sameReplay, const Calibration& c) {
    Search search;
    // Questions 0-2: each policy on, for the pools that had it off.
    for (int k = 0; k < 3; ++k) {
        Search::Asked a;
        a.model = std::make_unique<PoolModel>(policiesOn()[k].all, c);
        for (const PoolPrediction& b : asRecorded) {
            const bool was[] = {b.allowOpportunistic, b.followEventDependencies,
                                b.allowInternalDependencies};
            if (b.touched && !was[k]) a.pools.push_back(b.handle);
        }
        search.asked.push_back(std::move(a));
    }
    // Then one per candidate: the pools that still need it.
    for (uint64_t t : cands) {
        Settings s;
        s.releaseThreshold = t;
        Search::Asked a;
        a.model = std::make_unique<PoolModel>(s, c);
        a.candidate = true;
        a.threshold = t;
        for (const PoolPrediction& b : asRecorded) {
            if (!b.touched || b.releases < kMinReleases) continue;
            const PoolPrediction* never = sameReplay ? find(neverReleasing, b.handle) : nullptr;
            if (never && t >= never->peakReserved) continue; // the never-releasing answer
            a.pools.push_back(b.handle);
            a.allowed.push_back(b.releases / 20);
        }
        search.asked.push_back(std::move(a));
    }
    for (Search::Asked& a : search.asked) {
        a.model->keepRecorded(false);
        a.index.assign(a.pools.size(), replay::kNone);
        a.diedAt.assign(a.pools.size(), 0);
        a.left = a.pools.size();
    }

    return search;
}

// What the search would have answered for `a`, from the same question asked ahead (`s`, every
// pool, over the whole spill, `end` its finish()): its answers for a's pools, and where a
// candidate's releases for a pool passed what a allows at a step's end, the releases there (the
// search decides a pool at the first step's end they pass it, and asks no more of it). None
// where s stopped following one of a's pools before its releases passed that.
std::optional<std::vector<PoolPrediction>> answeredAhead(Search::Asked& s, const Search::Asked& a,
                                                         const Tape& end) {
    std::vector<uint64_t> decided(a.pools.size(), 0); // releases where decided; 0: not
    for (size_t k = 0; k < a.pools.size() && a.candidate; ++k) {
        uint32_t index = replay::kNone;
        for (size_t j = 0; j < end.recorded.size() && j < end.poolIndex.size(); ++j)
            if (end.recorded[j].handle == a.pools[k]) index = end.poolIndex[j];
        if (index < s.releasesAtSteps.size()) {
            const std::vector<uint32_t>& seen = s.releasesAtSteps[index];
            auto past = std::upper_bound(seen.begin(), seen.end(), a.allowed[k]);
            if (past != seen.end()) decided[k] = *past;
        }
        if (!decided[k] && (index >= s.poolsAtStop || (index < s.stopped.size() && s.stopped[index])))
            return std::nullopt;
    }
    const std::vector<PoolPrediction> got = s.collect(end);
    std::vector<PoolPrediction> out;
    for (size_t k = 0; k < a.pools.size(); ++k) {
        if (decided[k]) {
            PoolPrediction p;
            p.handle = a.pools[k];
            p.releases = decided[k];
            out.push_back(p);
        } else if (const PoolPrediction* p = find(got, a.pools[k])) {
            out.push_back(*p);
        }
    }
    return out;
}

} // namespace

Result<std::vector<PoolAdvice>> adviseAfter(const TraceReader& reader,
                                            const std::vector<PoolPrediction>& asRecorded,
                                            const std::vector<PoolPrediction>& neverReleasing,
                                            const std::vector<RaceRange>& races,
                                            bool sameReplay, const Calibration& c,
                                            TapeSpill* spill, unsigned threads,
                                            const std::function<void(uint64_t, uint64_t)>& progress,
                                            const std::vector<Speculation*>& ahead) {
    bool decide = false;
    for (const PoolPrediction& b : asRecorded)
        decide = decide || (b.touched && (b.releases >= kMinReleases || !b.allowOpportunistic ||
                                          !b.followEventDependencies || !b.allowInternalDependencies));
    const std::vector<PoolPrediction>* none[3] = {nullptr, nullptr, nullptr};
    // Nothing to suggest to anyone (the racing pools' ranges still go with the answer).
    if (!decide) return adviceFrom(asRecorded, none, {}, {}, races);
    const std::vector<uint64_t> cands = candidates(neverReleasing, c);
    Search search = ask(asRecorded, neverReleasing, cands, sameReplay, c);
    // The questions asked during the read: answered here, and not asked again.
    std::vector<std::optional<std::vector<PoolPrediction>>> given(search.asked.size());
    for (Speculation* wave : ahead) {
        if (!spill || !sameReplay || !search.anyLeft() || !wave->wait()) continue;
        for (size_t q = 0; q < search.asked.size(); ++q) {
            Search::Asked& a = search.asked[q];
            Search::Asked* s = q < 3 ? wave->policy(int(q)) : wave->threshold(cands[q - 3]);
            if (!a.left || !s) continue;
            given[q] = answeredAhead(*s, a, spill->finished());
            if (given[q]) a.left = 0;
        }
    }
    {
        uint64_t taken = 0, open = 0;
        for (size_t q = 0; q < given.size(); ++q) {
            taken += given[q].has_value();
            open += search.asked[q].left != 0;
        }
        detail::countAhead(taken, open);
    }

    Tape tape;               // one step's ops at a time
    const Tape* end = &tape; // at the end, what the models' collect() reads
    bool whole = false, done = !search.anyLeft();
    // No more threads than open questions (each steps a share of them).
    if (threads == 0)
        threads = std::min(std::max(std::thread::hardware_concurrency(), 1u), kMaxAdviceThreads);
    size_t open = 0;
    for (const Search::Asked& a : search.asked) open += a.left != 0;
    // The open candidates as lanes of as many LaneModels as leave every thread stepping them
    // one share (after the read, every question is on the way to the answer).
    size_t candOpen = 0;
    for (const Search::Asked& a : search.asked) candOpen += a.left != 0 && a.candidate;
    const size_t steppers =
        std::max<size_t>(std::min<size_t>(threads >= 4 ? threads - 1 : threads, open), 1);
    const size_t models = steppers > open - candOpen ? steppers - (open - candOpen) : 1;
    const size_t perModel = (candOpen + models - 1) / models;
    search.lanesForCandidates(perModel, c);
    // The first read's ops, where they are the ones this read would make: its replay declared
    // the same and the spill holds every step.
    if (!done && spill) {
        bool left = true;
        threads = static_cast<unsigned>(std::min<size_t>(threads, open));
        std::function<void(uint64_t)> stepped;
        if (progress)
            stepped = [&progress, steps = spill->steps()](uint64_t n) { progress(n, steps); };
        if (sameReplay) {
            done = threads >= 4 ? searchBroadcast(search, *spill, threads, stepped)
                                : searchOnThreads(search, *spill, threads, stepped); // 1: this thread
            left = search.anyLeft();
        }
        detail::countSpill(done);
        if (done) {
            whole = left;
            end = &spill->finished();
        } else {
            // Models fed part of the spill start over.
            search = ask(asRecorded, neverReleasing, cands, sameReplay, c);
            search.lanesForCandidates(perModel, c);
            tape = Tape{};
        }
    }
    // Reading the trace again: one recording model on the calling thread's replay, the
    // questions stepped over its ops a chunk at a time, on the other threads where there are 2
    // or more (the same answers: each question's model gets the same steps).
    const unsigned stepping = static_cast<unsigned>(std::min<size_t>(threads - 1, open));
    for (bool onThreads : {stepping >= 2, false}) {
        if (done) break;
        replay::Replay replay;
        PoolModel lead;
        lead.keepRecorded(false);
        lead.recordInto(&tape);
        lead.recordOnly(true);
        replay.subscribe(&lead, PoolModel::kindMask());
        std::vector<uint64_t> handles;
        auto seen = [&] {
            tape.seeStreams(replay);
            for (size_t i = handles.size(); i < replay.pools().size(); ++i)
                handles.push_back(replay.pools()[i].info.handle);
        };
        uint64_t events = 0;
        Status st;
        if (onThreads) {
            const bool stepped = searchWhileReading(search, stepping, [&](const GiveStep& give) {
                st = replayTrace(reader, replay, events, nullptr, progress, [&] {
                    seen();
                    return give(tape, handles);
                });
                if (!st) return false;
                seen();
                give(tape, handles); // the samples after the last chunk
                return true;
            });
            if (!st) return st.error();
            if (!stepped) { // no threads to be had, or no memory on one: asked again on this one
                search = ask(asRecorded, neverReleasing, cands, sameReplay, c);
                search.lanesForCandidates(perModel, c);
                tape = Tape{};
                continue;
            }
            whole = search.anyLeft();
        } else {
            auto step = [&] {
                seen();
                search.step(tape, handles);
                tape.dropOps();
                return search.anyLeft();
            };
            st = replayTrace(reader, replay, events, nullptr, progress, step);
            if (!st) return st.error();
            whole = step();
        }
        if (whole) lead.finishTape(tape, replay);
        done = true;
    }
    // The answers adviceFrom reads: a decided candidate's releases (past what is allowed), the
    // never-releasing prediction at and above a pool's never-releasing peak.
    auto answers = [&](Search::Asked& a) {
        std::vector<PoolPrediction> got;
        if (whole) got = a.collect(*end);
        std::vector<PoolPrediction> out;
        for (size_t k = 0; k < a.pools.size(); ++k) {
            if (a.diedAt[k]) {
                PoolPrediction p;
                p.handle = a.pools[k];
                p.releases = a.diedAt[k];
                out.push_back(p);
            } else if (const PoolPrediction* p = find(got, a.pools[k])) {
                out.push_back(*p);
            }
        }
        return out;
    };
    std::vector<std::vector<PoolPrediction>> perQuestion;
    for (size_t q = 0; q < search.asked.size(); ++q)
        perQuestion.push_back(given[q] ? std::move(*given[q]) : answers(search.asked[q]));
    for (size_t i = 0; i < cands.size(); ++i)
        for (const PoolPrediction& b : asRecorded) {
            if (!b.touched || b.releases < kMinReleases || !sameReplay) continue;
            const PoolPrediction* never = find(neverReleasing, b.handle);
            if (never && cands[i] >= never->peakReserved) perQuestion[3 + i].push_back(*never);
        }
    const std::vector<PoolPrediction>* on[3] = {&perQuestion[0], &perQuestion[1], &perQuestion[2]};
    const std::vector<std::vector<PoolPrediction>> byCandidate(perQuestion.begin() + 3,
                                                               perQuestion.end());
    return adviceFrom(asRecorded, on, cands, byCandidate, races);
}

std::vector<PoolAdvice> advise(const Tape& tape, const Calibration& c,
                               const std::atomic<bool>* cancel) {
    bool cancelled = false;
    auto ask = [&](const std::vector<Question>& qs) {
        std::vector<std::vector<PoolPrediction>> out;
        for (const Question& q : qs) {
            if (cancel && cancel->load(std::memory_order_relaxed)) {
                cancelled = true;
                break;
            }
            out.push_back(predict(tape, q, c));
        }
        return out;
    };
    std::vector<Question> q1(2);
    q1[1].all = neverReleasing();
    for (Question& q : policiesOn()) q1.push_back(std::move(q));
    const auto a1 = ask(q1);
    if (cancelled) return {};
    const std::vector<uint64_t> cands = candidates(a1[1], c);
    std::vector<Question> q2(cands.size());
    for (size_t i = 0; i < cands.size(); ++i) q2[i].all.releaseThreshold = cands[i];
    const auto a2 = ask(q2);
    if (cancelled) return {};
    const std::vector<PoolPrediction>* on[3] = {&a1[2], &a1[3], &a1[4]};
    return adviceFrom(a1[0], on, cands, a2);
}

std::string adviceText(const PoolAdvice& a, const std::string& poolName) {
    std::string s;
    if (a.thresholdAdvice) {
        s = poolName + ": a release threshold of " + formatBytes(a.suggestedThreshold) +
            " (now " +
            (a.currentThreshold == std::numeric_limits<uint64_t>::max()
                 ? std::string("max")
                 : formatBytes(a.currentThreshold)) +
            ") would remove " + formatCount(a.currentReleases - a.suggestedReleases) + " of " +
            formatCount(a.currentReleases) +
            " predicted implicit releases, for a peak reserved of " +
            formatBytes(a.suggestedPeakReserved) + " (" +
            formatBytesSigned(static_cast<int64_t>(a.suggestedPeakReserved) -
                              static_cast<int64_t>(a.currentPeakReserved)) +
            ") and " +
            formatBytesSigned(static_cast<int64_t>(a.suggestedMeanIdle) -
                              static_cast<int64_t>(a.currentMeanIdle)) +
            " idle on average";
    }
    for (const PoolAdvice::Policy& p : a.policies) {
        s += s.empty() ? poolName + ": " : "; ";
        s += "turning " + p.name + " on would lower the predicted peak reserved from " +
             formatBytes(a.currentPeakReserved) + " to " + formatBytes(p.peakReservedOn);
    }
    // A suggestion's peak is the recorded interleaving's; where threads race on the pool, the
    // order of their calls moves the peak within the range whatever the settings.
    if (!s.empty() && a.race && a.race->low < a.race->high)
        s += "; " + std::to_string(a.race->threads) + " threads race on this pool: with any settings "
             "its peak reserved may lie anywhere in " + formatBytes(a.race->low) + " – " +
             formatBytes(a.race->high) + " depending on how they interleave";
    if (!s.empty()) s += " (what-if model, docs/WHATIF.md)";
    return s;
}

} // namespace poolscope::whatif

namespace poolscope::detail {

Result<whatif::Tape> recordTapeInOneRead(const TraceReader& reader, const std::atomic<bool>* cancel,
                                         const std::function<void(uint64_t, uint64_t)>& progress) {
    using namespace whatif;
    auto sum = reader.summary();
    replay::Replay replay;
    Tape tape;
    // Ops are about one per event: reserve for the trace's count (a bound for a damaged one).
    if (sum)
        tape.ops.reserve(std::min<uint64_t>(sum->eventCount, uint64_t{1} << 26));
    PoolModel model;
    model.recordInto(&tape);
    replay.subscribe(&model, PoolModel::kindMask());
    Status st = replayTrace(reader, replay, tape.events, cancel, progress);
    if (!st) return st.error();
    model.finishTape(tape, replay);
    tape.ops.shrink_to_fit();
    return tape;
}

} // namespace poolscope::detail
