// A trace through the replay with several pool models at once (one read of the trace for every
// question), and the advisor built on it.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "poolscope/replay/Replay.h"

#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope::whatif {

namespace {

// Declares the trace's entities to a replay and runs every event (samples merged in by time, as
// the timeline does) through it.
Status replayTrace(const TraceReader& reader, replay::Replay& replay, uint64_t& events,
                   const std::atomic<bool>* cancel = nullptr,
                   const std::function<void(uint64_t, uint64_t)>& progress = {}) {
    auto devices = reader.devices();
    if (!devices) return devices.error();
    auto pools = reader.pools();
    if (!pools) return pools.error();
    auto streams = reader.streams();
    if (!streams) return streams.error();
    replay.setDevices(std::move(*devices));
    for (const PoolInfo& p : *pools) replay.declarePool(p);
    for (const StreamInfo& s : *streams) replay.declareStream(s);
    auto samples = reader.samples(0, std::numeric_limits<int64_t>::min(),
                                  std::numeric_limits<int64_t>::max());
    if (!samples) return samples.error();
    const std::vector<Event>& ss = *samples;
    size_t si = 0;
    uint64_t total = 0;
    if (progress)
        if (auto sum = reader.summary()) total = sum->eventCount;
    bool cancelled = false;
    Status st = reader.forEachChunk([&](std::vector<Event>& chunk) {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            cancelled = true;
            return false;
        }
        for (const Event& e : chunk) {
            while (si < ss.size() && ss[si].tsNs <= e.tsNs) replay.apply(ss[si++]);
            replay.apply(e);
        }
        events += chunk.size();
        if (progress) progress(events, total);
        return true;
    });
    if (!st) return st.error();
    if (cancelled) return Error{ErrorCode::Cancelled, "cancelled"};
    while (si < ss.size()) replay.apply(ss[si++]);
    return {};
}

} // namespace

Result<Answers> predict(const TraceReader& reader, const std::vector<Question>& questions,
                        const Calibration& c, bool races) {
    replay::Replay replay;
    RaceBounds bounds(c.growthGranule, c.blockAlign);
    if (races) replay.subscribe(&bounds, RaceBounds::kindMask());
    std::vector<std::unique_ptr<PoolModel>> models;
    for (const Question& q : questions) {
        Calibration qc = c;
        if (q.opportunisticLagNs) qc.opportunisticLagNs = *q.opportunisticLagNs;
        auto m = std::make_unique<PoolModel>(q.all, qc);
        for (const auto& [h, s] : q.perPool) m->setPoolSettings(h, s);
        m->keepSeries(q.keepSeries);
        m->keepRecorded(q.keepRecorded);
        replay.subscribe(m.get(), PoolModel::kindMask());
        models.push_back(std::move(m));
    }
    Answers out;
    Status st = replayTrace(reader, replay, out.events);
    if (!st) return st.error();
    for (auto& m : models) out.perQuestion.push_back(m->result(replay));
    if (races) out.races = bounds.result(replay);
    return out;
}

Result<Tape> recordTape(const TraceReader& reader, const std::atomic<bool>* cancel,
                        const std::function<void(uint64_t, uint64_t)>& progress) {
    replay::Replay replay;
    Tape tape;
    // Ops are about one per event: reserve for the trace's count (a bound for a damaged one).
    if (auto sum = reader.summary())
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

std::vector<PoolPrediction> predict(const Tape& tape, const Question& q, const Calibration& c,
                                    std::optional<uint64_t> onlyPool) {
    Calibration qc = c;
    if (q.opportunisticLagNs) qc.opportunisticLagNs = *q.opportunisticLagNs;
    PoolModel m(q.all, qc);
    for (const auto& [h, s] : q.perPool) m.setPoolSettings(h, s);
    m.keepSeries(q.keepSeries);
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

// Candidate thresholds in granule steps up to the largest never-release peak (at most
// kCandidates + 1 of them, evenly spread, the peak itself last: each is a model on every event,
// and `report` runs this too).
std::vector<uint64_t> candidates(const std::vector<PoolPrediction>& never, const Calibration& c) {
    const uint64_t g = std::max<uint64_t>(c.growthGranule, 1);
    constexpr uint64_t kCandidates = 24;
    uint64_t top = 0;
    for (const PoolPrediction& p : never) top = std::max(top, p.peakReserved);
    std::vector<uint64_t> cands;
    if (top > 0) {
        const uint64_t steps = (top + g - 1) / g;
        const uint64_t stride = std::max<uint64_t>(1, (steps + kCandidates - 1) / kCandidates);
        for (uint64_t k = 0; k < steps; k += stride) cands.push_back(k * g);
        cands.push_back(steps * g);
    }
    return cands;
}

// Each reuse policy forced on (the first pass's questions 2 to 4).
std::vector<Question> policiesOn() {
    std::vector<Question> q(3);
    q[0].all.allowOpportunistic = true;
    q[1].all.followEventDependencies = true;
    q[2].all.allowInternalDependencies = true;
    return q;
}

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

Result<std::vector<PoolAdvice>> advise(const TraceReader& reader, const Calibration& c) {
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
        auto r2 = predict(reader, q2, c);
        if (!r2) return r2.error();
        a2 = std::move(*r2);
    }
    const std::vector<PoolPrediction>* on[3] = {&a1->perQuestion[2], &a1->perQuestion[3],
                                                &a1->perQuestion[4]};
    return adviceFrom(a1->perQuestion[0], on, cands, a2.perQuestion, a1->races);
}

// The questions split over up to `threads` threads, each with its own reader of the same file and
// its own replay: the same answers (each model sees every event either way), in the same order.
static Result<Answers> predictOnThreads(const TraceReader& reader, const std::vector<Question>& questions,
                                 const Calibration& c, unsigned threads, bool races) {
    constexpr size_t kPerThread = 4; // below that a thread's own decoding costs more than it saves
    threads = std::min<unsigned>(threads, static_cast<unsigned>(questions.size() / kPerThread));
    if (threads < 2 || reader.path().empty()) return predict(reader, questions, c, races);
    std::vector<std::vector<Question>> parts(threads);
    for (size_t i = 0; i < questions.size(); ++i) parts[i % threads].push_back(questions[i]);
    std::vector<std::optional<Result<Answers>>> got(threads);
    std::vector<std::thread> workers;
    for (unsigned t = 1; t < threads; ++t)
        workers.emplace_back([&, t] {
            auto own = TraceReader::open(reader.path());
            if (!own) {
                got[t] = own.error();
                return;
            }
            (*own)->setSkipDamaged(reader.skipDamaged());
            got[t] = predict(**own, parts[t], c);
        });
    got[0] = predict(reader, parts[0], c, races);
    for (std::thread& w : workers) w.join();
    Answers out;
    out.perQuestion.resize(questions.size());
    for (unsigned t = 0; t < threads; ++t) {
        if (!*got[t]) return got[t]->error();
        Answers& a = **got[t];
        for (size_t k = 0; k < a.perQuestion.size(); ++k)
            out.perQuestion[k * threads + t] = std::move(a.perQuestion[k]);
        out.events = a.events;
        if (t == 0) out.races = std::move(a.races);
    }
    return out;
}

Result<std::vector<PoolAdvice>> adviseAfter(const TraceReader& reader,
                                            const std::vector<PoolPrediction>& asRecorded,
                                            const std::vector<PoolPrediction>& neverReleasing,
                                            const Calibration& c, bool parallel) {
    bool decide = false;
    for (const PoolPrediction& b : asRecorded)
        decide = decide || (b.touched && (b.releases >= kMinReleases || !b.allowOpportunistic ||
                                          !b.followEventDependencies || !b.allowInternalDependencies));
    const std::vector<PoolPrediction>* none[3] = {nullptr, nullptr, nullptr};
    if (!decide) return adviceFrom(asRecorded, none, {}, {}); // nothing to suggest to anyone
    const std::vector<uint64_t> cands = candidates(neverReleasing, c);
    std::vector<Question> q = policiesOn();
    for (uint64_t t : cands) {
        Question ct;
        ct.all.releaseThreshold = t;
        q.push_back(std::move(ct));
    }
    // Only the predictions are read, and only of pools the first read's models touched.
    for (Question& x : q) x.keepRecorded = false;
    // The same read gives the racing pools' ranges (a suggestion's peak is one interleaving's).
    auto a = parallel ? predictOnThreads(reader, q, c, std::thread::hardware_concurrency(), true)
                      : predict(reader, q, c, true);
    if (!a) return a.error();
    const std::vector<PoolPrediction>* on[3] = {&a->perQuestion[0], &a->perQuestion[1],
                                                &a->perQuestion[2]};
    const std::vector<std::vector<PoolPrediction>> byCandidate(a->perQuestion.begin() + 3,
                                                               a->perQuestion.end());
    return adviceFrom(asRecorded, on, cands, byCandidate, a->races);
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
