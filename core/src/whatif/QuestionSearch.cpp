// The advisor's questions stepped over the report's spill on several threads
// (QuestionSearch.h).
#include "QuestionSearch.h"

#include "../analysis/ReplayThread.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

namespace poolscope::whatif {

namespace {

// A question's cost a step, in a PoolModel's: a LaneModel's lanes cost about an eighth of one
// each, and what it keeps once about one and a half (docs/PERFORMANCE.md).
double unitCost(size_t lanes) { return lanes == 0 ? 1.0 : 1.5 + 0.13 * static_cast<double>(lanes); }

// The open questions in n shares. Later questions cost more (the candidates' thresholds rise
// along the order, and with them how long they survive, the highest often to the end), so they
// are dealt from the last, each to the share with the least so far: the costliest alone, the
// cheapest paired up, and no share left holding two of the costliest while others hold one cheap
// one. A LaneModel's questions go to one share together, its cost that of its open lanes.
std::vector<std::vector<Search::Asked*>> dealShares(Search& search, unsigned n) {
    struct Unit {
        std::vector<Search::Asked*> asked;
        double cost = 0;
    };
    std::vector<Unit> units;
    for (Search::Asked& a : search.asked) {
        if (!a.left) continue;
        Unit* u = nullptr;
        if (a.lanes)
            for (Unit& v : units)
                if (v.asked.front()->lanes == a.lanes) u = &v;
        if (!u) u = &units.emplace_back();
        u->asked.push_back(&a);
    }
    for (size_t k = 0; k < units.size(); ++k) {
        const Search::Asked& a = *units[k].asked.front();
        // A question's place in the order stands for its cost.
        units[k].cost = static_cast<double>(k + 1) * unitCost(a.lanes ? units[k].asked.size() : 0);
    }
    std::vector<std::vector<Search::Asked*>> shares(n);
    std::vector<double> load(n, 0);
    for (size_t k = units.size(); k-- > 0;) {
        size_t least = 0;
        for (size_t s = 1; s < n; ++s)
            if (load[s] < load[least]) least = s;
        shares[least].insert(shares[least].end(), units[k].asked.begin(), units[k].asked.end());
        load[least] += units[k].cost;
    }
    return shares;
}

} // namespace

void Search::stepShare(const std::vector<Asked*>& share, const Tape& tape,
                       const std::vector<uint64_t>& poolHandles,
                       const std::vector<uint64_t>* notes) {
    const Op* first = tape.ops.data();
    const Op* last = first + tape.ops.size();
    std::vector<const std::vector<uint8_t>*> mutes;
    for (size_t q = 0; q < share.size(); ++q) {
        Asked& a = *share[q];
        if (!a.left) continue;
        seePools(a, poolHandles);
        if (!a.lanes) {
            a.model->feed(first, last, tape.allocSeq.data(), tape.allocSeq.size(),
                          tape.streamHandles, a.mute);
            continue;
        }
        // Once per LaneModel: at its first open question in the share.
        bool fed = false;
        for (size_t r = 0; r < q && !fed; ++r)
            fed = share[r]->left && share[r]->lanes == a.lanes;
        if (fed) continue;
        mutes.assign(a.lanes->lanes(), nullptr);
        for (size_t r = q; r < share.size(); ++r) {
            Asked& b = *share[r];
            if (b.left && b.lanes == a.lanes && b.lane < mutes.size()) {
                if (r > q) seePools(b, poolHandles);
                mutes[b.lane] = &b.mute;
            }
        }
        a.lanes->feed(first, last, tape.allocSeq.data(), tape.allocSeq.size(), tape.streamHandles,
                      mutes);
    }
    for (Asked* ap : share) {
        Asked& a = *ap;
        if (!a.left) continue;
        if (a.ahead) {
            if (a.candidate) stepAhead(a, notes);
            continue;
        }
        if (!a.candidate) continue;
        for (size_t k = 0; k < a.pools.size(); ++k) {
            if (a.diedAt[k] || a.index[k] == replay::kNone) continue;
            const uint64_t n = a.releasesOf(a.index[k]);
            if (n > a.allowed[k]) {
                a.diedAt[k] = n;
                a.mute[a.index[k]] = 1;
                a.left--;
            }
        }
    }
}

void Search::stepAhead(Asked& a, const std::vector<uint64_t>* notes) {
    a.releasesAtSteps.resize(a.mute.size());
    a.stopped.resize(a.mute.size());
    const bool bounded = notes && !notes->empty() && (*notes)[0] > 0 && a.aheadEvents > 0;
    bool all = true;
    for (uint32_t i = 0; i < a.releasesAtSteps.size(); ++i) {
        if (a.stopped[i]) continue;
        std::vector<uint32_t>& seen = a.releasesAtSteps[i];
        const uint64_t n = a.releasesOf(i);
        if (n > (seen.empty() ? 0 : seen.back())) {
            if (n > UINT32_MAX || ++a.kept > a.maxKept) {
                a.spoiled = true;
                a.left = 0;
                std::vector<std::vector<uint32_t>>().swap(a.releasesAtSteps);
                return;
            }
            seen.push_back(static_cast<uint32_t>(n));
        }
        // Four times the recorded releases' twentieth, as if they went on at their pace so
        // far to the trace's end, and a margin for the few early on.
        if (bounded && i + 1 < notes->size()) {
            const long double rate = static_cast<long double>((*notes)[i + 1]) /
                                     static_cast<long double>((*notes)[0]);
            const long double far = rate * static_cast<long double>(a.aheadEvents) / 5 +
                                    static_cast<long double>(a.aheadSlack);
            if (static_cast<long double>(n) > far) {
                a.stopped[i] = 1;
                a.mute[i] = 1;
                continue;
            }
        }
        all = false;
    }
    if (all && !a.stopped.empty()) {
        a.left = 0;
        a.poolsAtStop = a.stopped.size();
    }
}

void Search::lanesForCandidates(size_t perModel, const Calibration& c) {
    std::vector<Asked*> cands;
    for (Asked& a : asked)
        if (a.candidate && a.threshold && a.left) cands.push_back(&a);
    if (cands.empty()) return;
    perModel = std::max<size_t>(perModel, 1);
    const size_t models = (cands.size() + perModel - 1) / perModel;
    for (size_t g = 0; g < models; ++g) {
        std::vector<std::optional<uint64_t>> thresholds;
        for (size_t i = g; i < cands.size(); i += models) thresholds.push_back(cands[i]->threshold);
        auto lanes = std::make_shared<LaneModel>(std::move(thresholds), c);
        uint32_t lane = 0;
        for (size_t i = g; i < cands.size(); i += models) {
            cands[i]->model.reset();
            cands[i]->lanes = lanes;
            cands[i]->lane = lane++;
        }
    }
}

// The search over the spill on `threads` threads (2 or more), each with its own reader of the
// spill and its share of the open questions: a question's answer depends only on its own model
// and the ops, and each steps at the same boundaries as on one thread, so the answers are the
// same. False where a reader failed (the models are then part-fed: the caller starts over).
bool searchOnThreads(Search& search, const TapeSpill& spill, unsigned threads,
                     const std::function<void(uint64_t)>& stepped) {
    const std::vector<std::vector<Search::Asked*>> shares = dealShares(search, threads);
    std::atomic<bool> failed{false};
    auto run = [&](const std::vector<Search::Asked*>& share, bool caller) {
        try {
            TapeSpill::Reader reader(spill);
            Tape tape;
            std::vector<uint64_t> handles;
            auto open = [&] {
                for (const Search::Asked* a : share)
                    if (a->left) return true;
                return false;
            };
            bool left = open();
            while (left && !failed.load(std::memory_order_relaxed) && reader.next(tape, handles)) {
                Search::stepShare(share, tape, handles);
                left = open();
                if (caller && stepped) stepped(reader.steps());
            }
            if (!reader.ok() || (left && !reader.atEnd()))
                failed.store(true, std::memory_order_relaxed);
        } catch (...) { // (memory) the trace is read again on one thread instead
            failed.store(true, std::memory_order_relaxed);
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(threads - 1);
    try {
        for (unsigned t = 1; t < threads; ++t) pool.emplace_back(run, std::cref(shares[t]), false);
    } catch (...) { // no thread to be had: what started finishes, the rest falls back
        failed.store(true, std::memory_order_relaxed);
    }
    run(shares[0], true);
    for (std::thread& t : pool) t.join();
    return !failed.load();
}

namespace {

// Steps of ops handed from one producer (a reader of the spill, or a second read of the trace)
// to `consumers` threads, each stepping its share of the open questions over every step (the
// shares dealShares makes, stepped at the same boundaries as on one thread: the same answers).
// A step is held, read-only, until every thread still asking is past it; at most kDepth are
// held, and the producer is told to stop once no thread asks any more.
class Broadcast {
public:
    // Steps held at once: each thread's questions cost more on some steps than on others, and
    // with few held the fastest thread waits for the slowest at nearly every step
    // (docs/PERFORMANCE.md). A step is one chunk's ops, at most ~4 k: 32 hold a few MiB.
    static constexpr size_t kDepth = 32;

    Broadcast(Search& search, unsigned consumers)
        : consumers_(consumers), shares_(dealShares(search, consumers)), next_(consumers, 0),
          asking_(consumers, 1) {}

    // The producer's: `running`'s ops and allocation seqs go to the threads (`running` gets
    // empty buffers back, a spent step's), with copies of its stream handles, `handles` and
    // `notes` (swapped out). False once no thread asks any more or the search failed: nothing
    // more is wanted.
    bool give(Tape& running, const std::vector<uint64_t>& handles, std::vector<uint64_t>* notes) {
        std::shared_ptr<Step> step;
        {
            std::unique_lock lk(m_);
            for (;;) {
                // Drop the steps every thread still asking is done with (kept for their
                // buffers: a thread lets go of its step before it counts it done under this
                // lock, so no thread reads one kept).
                uint64_t low = UINT64_MAX;
                for (unsigned c = 0; c < consumers_; ++c)
                    if (asking_[c]) low = std::min(low, next_[c]);
                while (!window_.empty() && first_ < low) {
                    spent_.push_back(std::move(window_.front()));
                    window_.pop_front();
                    ++first_;
                }
                if (!anyAsking() || failed_) return false;
                if (window_.size() < kDepth) break;
                changed_.wait(lk);
            }
            if (!spent_.empty()) {
                step = std::move(spent_.back());
                spent_.pop_back();
            }
        }
        if (!step) step = std::make_shared<Step>();
        step->tape.ops.swap(running.ops);
        step->tape.allocSeq.swap(running.allocSeq);
        running.ops.clear();
        running.allocSeq.clear();
        step->tape.streamHandles = running.streamHandles;
        step->poolHandles = handles;
        step->notes.clear();
        if (notes) step->notes.swap(*notes);
        {
            std::lock_guard lk(m_);
            window_.push_back(std::move(step));
        }
        changed_.notify_all();
        return true;
    }
    // The producer's, once it has given every step (ok) or could not (the search fails).
    void end(bool ok) {
        {
            std::lock_guard lk(m_);
            failed_ = failed_ || !ok;
            ended_ = true;
        }
        changed_.notify_all();
    }
    void fail() { end(false); }
    // Consumer c's thread: its share over every step given. `stepped` gets the steps it has
    // done, where given.
    void consume(unsigned c, const std::function<void(uint64_t)>& stepped) {
        try {
            consumeShare(c, stepped);
        } catch (...) { // (memory) the models are part-fed: the caller asks again
            std::lock_guard lk(m_);
            failed_ = true;
            asking_[c] = 0;
        }
        changed_.notify_all();
    }
    bool failed() {
        std::lock_guard lk(m_);
        return failed_;
    }

private:
    struct Step {
        Tape tape;
        std::vector<uint64_t> poolHandles, notes;
    };
    bool anyAsking() const { return std::find(asking_.begin(), asking_.end(), 1) != asking_.end(); }
    void consumeShare(unsigned c, const std::function<void(uint64_t)>& stepped) {
        auto open = [&] {
            for (const Search::Asked* a : shares_[c])
                if (a->left) return true;
            return false;
        };
        bool left = open();
        while (left) {
            std::shared_ptr<const Step> step;
            {
                std::unique_lock lk(m_);
                changed_.wait(lk, [&] { return failed_ || ended_ || next_[c] < first_ + window_.size(); });
                if (failed_) return;
                if (next_[c] >= first_ + window_.size()) break; // ended: every step seen
                step = window_[next_[c] - first_];
            }
            Search::stepShare(shares_[c], step->tape, step->poolHandles, &step->notes);
            step.reset(); // before the lock: a step past every thread's is the producer's to reuse
            left = open();
            uint64_t done;
            {
                std::lock_guard lk(m_);
                done = ++next_[c];
                asking_[c] = left;
            }
            changed_.notify_all();
            if (stepped) stepped(done);
        }
        std::lock_guard lk(m_);
        asking_[c] = 0;
    }

    const unsigned consumers_;
    const std::vector<std::vector<Search::Asked*>> shares_;
    std::mutex m_;
    std::condition_variable changed_;
    std::deque<std::shared_ptr<Step>> window_; // steps first_ .. first_ + size - 1
    // Steps every thread is done with, for their buffers: the next steps' ops go into memory
    // already allocated instead of a new allocation per step.
    std::vector<std::shared_ptr<Step>> spent_;
    uint64_t first_ = 0;
    std::vector<uint64_t> next_;
    std::vector<char> asking_;
    bool ended_ = false, failed_ = false;
};

} // namespace

// The search over the spill with one thread decoding it and `threads` - 1 others stepping their
// shares of the questions over each step it decoded (4 or more threads: with a reader each, every
// thread decoded the whole spill, which at 8 threads cost about as much as its models), the
// calling thread one of them. A step is decoded once, and the decoding stops once no thread asks
// any more. The answers are those of searchOnThreads (the same shares, stepped at the same
// boundaries). False where the spill could not be read to its end while some question was open.
bool searchBroadcast(Search& search, const TapeSpill& spill, unsigned threads,
                     const std::function<void(uint64_t)>& stepped) {
    const unsigned consumers = threads - 1;
    Broadcast b(search, consumers);
    auto produce = [&] {
        try {
            TapeSpill::Reader reader(spill);
            Tape running; // the handles accumulate from step to step
            std::vector<uint64_t> handles, notes;
            while (reader.next(running, handles, &notes))
                if (!b.give(running, handles, &notes)) return b.end(true);
            b.end(reader.ok() && reader.atEnd());
        } catch (...) { // (memory) the trace is read again on one thread instead
            b.fail();
        }
    };
    std::vector<std::thread> pool;
    pool.reserve(consumers);
    try {
        pool.emplace_back(produce);
        for (unsigned c = 1; c < consumers; ++c) pool.emplace_back([&b, c] { b.consume(c, {}); });
    } catch (...) { // no thread to be had: what started finishes, the rest falls back
        b.fail();
    }
    if (!pool.empty()) b.consume(0, stepped);
    for (std::thread& t : pool) t.join();
    return !b.failed() && !pool.empty();
}

bool searchWhileReading(Search& search, unsigned threads,
                        const std::function<bool(const GiveStep&)>& read) {
    Broadcast b(search, threads);
    std::vector<std::thread> pool;
    pool.reserve(threads);
    try {
        if (poolscope::detail::replayThreadsSimulatedAway())
            throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
        for (unsigned c = 0; c < threads; ++c) pool.emplace_back([&b, c] { b.consume(c, {}); });
    } catch (...) { // no thread to be had: the caller asks on its own thread instead
        b.fail();
    }
    bool ok = false;
    if (!b.failed()) {
        try {
            ok = read([&b](Tape& running, const std::vector<uint64_t>& handles) {
                return b.give(running, handles, nullptr);
            });
        } catch (...) {
            ok = false;
        }
    }
    b.end(ok);
    for (std::thread& t : pool) t.join();
    return ok && !b.failed();
}

namespace {
std::atomic<uint64_t> gGiven{0}, gAsked{0};
std::atomic<size_t> gMaxKept{0};
} // namespace

namespace detail {
AheadCounts aheadCounts() { return {gGiven.load(), gAsked.load()}; }
void countAhead(uint64_t given, uint64_t asked) {
    gGiven.fetch_add(given);
    gAsked.fetch_add(asked);
}
void setAheadKeptForTests(size_t n) { gMaxKept.store(n); }
} // namespace detail

Speculation::Speculation(const TapeSpill& spill, unsigned policies,
                         const std::vector<uint64_t>& thresholds, const Calibration& c,
                         unsigned threads, uint64_t events, uint64_t slack, size_t perModel,
                         Yield yield)
    : thresholds_(thresholds) {
    auto add = [&](const Settings& s, bool candidate) {
        Search::Asked a;
        a.model = std::make_unique<PoolModel>(s, c);
        a.model->keepRecorded(false);
        a.candidate = candidate;
        if (candidate) a.threshold = s.releaseThreshold;
        a.ahead = true;
        a.aheadEvents = events;
        a.aheadSlack = slack;
        if (const size_t cap = gMaxKept.load()) a.maxKept = cap;
        a.left = 1; // never decided: asked to the spill's end (or stopped, see stepAhead)
        search_.asked.push_back(std::move(a));
    };
    for (int k = 0; k < 3; ++k)
        if (policies & (1u << k)) {
            policyAt_[k] = static_cast<int>(search_.asked.size());
            add(policyOn(k), false);
        }
    for (uint64_t t : thresholds_) {
        Settings s;
        s.releaseThreshold = t;
        add(s, true);
    }
    threads = std::max(threads, 4u);
    search_.lanesForCandidates(perModel, c);
    try {
        thread_ = std::thread([this, &spill, threads, yield] {
            // On Linux a thread's nice value and policy are its own, and the threads it starts
            // (searchBroadcast's) take them over. A refusal leaves them as they were: the same
            // answers, only sooner or later.
            if (yield == Yield::Nice) {
                setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
            } else if (yield == Yield::Idle) {
                sched_param none{};
                sched_setscheduler(0, SCHED_IDLE, &none);
            }
            bool ok = false;
            try {
                ok = searchBroadcast(search_, spill, threads, {});
            } catch (...) { // (memory, threads) the questions are asked after the read instead
            }
            ok_ = ok;
        });
    } catch (...) { // no thread to be had: nothing asked ahead
    }
}

unsigned Speculation::threadsFor(unsigned cpus) {
    return std::clamp(cpus > 6 ? cpus - 6 : 0u, 4u, kMaxAdviceThreads);
}

Speculation::~Speculation() {
    if (thread_.joinable()) thread_.join();
}

bool Speculation::wait() {
    if (thread_.joinable()) thread_.join();
    return ok_;
}

Search::Asked* Speculation::policy(int k) {
    return ok_ && k >= 0 && k < 3 && policyAt_[k] >= 0 ? &search_.asked[size_t(policyAt_[k])]
                                                       : nullptr;
}

Search::Asked* Speculation::threshold(uint64_t t) {
    if (!ok_) return nullptr;
    size_t first = 0;
    for (int at : policyAt_) first += at >= 0;
    for (size_t i = 0; i < thresholds_.size(); ++i)
        if (thresholds_[i] == t)
            return search_.asked[first + i].spoiled ? nullptr : &search_.asked[first + i];
    return nullptr;
}

} // namespace poolscope::whatif
