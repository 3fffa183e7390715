#include "TraceSink.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "ControlHook.h"
#include "poolscope/EventFields.h"

namespace poolscope::collector {

namespace {
constexpr int kActivityWaitPasses = 100; // passes (~1 ms each) a record waits for its API event
constexpr size_t kRecentSyncs = 8192;
constexpr auto kCommitEvery = std::chrono::milliseconds(100);

std::string threadName(uint32_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/comm");
    std::string name;
    std::getline(f, name);
    return name;
}

void sortBySeq(std::vector<Event>& v) {
    auto bySeq = [](const Event& a, const Event& b) { return a.seq < b.seq; };
    if (!std::is_sorted(v.begin(), v.end(), bySeq)) std::sort(v.begin(), v.end(), bySeq);
}

bool isSync(EventKind k) {
    return k == EventKind::StreamSynchronize || k == EventKind::EventSynchronize ||
           k == EventKind::ContextSynchronize;
}
} // namespace

TraceSink::TraceSink(std::unique_ptr<TraceWriter> writer, RingRegistry& rings,
                     std::atomic<uint64_t>& seq, size_t spoolEvents)
    : writer_(std::move(writer)), rings_(rings), seq_(seq), spool_(spoolEvents),
      lastCommit_(std::chrono::steady_clock::now()), start_(lastCommit_) {}

TraceSink::~TraceSink() = default;

void TraceSink::addDevice(const DeviceInfo& d) {
    std::lock_guard lock(inMutex_);
    inDevices_.push_back(d);
}
void TraceSink::addPool(const PoolInfo& p) {
    std::lock_guard lock(inMutex_);
    inPools_.push_back(p);
}
void TraceSink::addPoolAttributes(std::span<const PoolAttributeValue> values) {
    std::lock_guard lock(inMutex_);
    inPoolAttributes_.insert(inPoolAttributes_.end(), values.begin(), values.end());
}
void TraceSink::addActivity(const PoolActivity& a) {
    std::lock_guard lock(inMutex_);
    inActivity_.push_back({a, 0});
}
void TraceSink::setProcess(const ProcessInfo& p) {
    std::lock_guard lock(inMutex_);
    inProcess_ = std::make_unique<ProcessInfo>(p);
}
void TraceSink::setMeta(const std::string& key, const std::string& value) {
    std::lock_guard lock(inMutex_);
    inMeta_.emplace_back(key, value);
}

void TraceSink::drainRings(bool final) {
    clock_.recalibrate();
    // At the end (or a fatal signal's flush) whatever the drainer has not reached yet is taken
    // too; both fill under the spool's lock.
    if (final || !drainer_.load(std::memory_order_acquire)) spool_.fill(rings_);
    spool_.take(taken_, gaps_);
    for (Event& e : taken_) {
        // The hot path stores raw clock ticks; the trace holds monotonic ns.
        const auto ticks = static_cast<uint64_t>(e.tsNs);
        e.tsNs = clock_.toNs(ticks);
        // A cudaFree's duration comes as ticks too (enter to exit).
        if (e.kind == EventKind::DeviceFree && e.aux != 0 && e.aux < ticks) {
            const int64_t enter = clock_.toNs(ticks - e.aux);
            e.aux = e.tsNs > enter ? static_cast<uint64_t>(e.tsNs - enter) : 0;
        }
        if (e.kind == EventKind::Sample)
            samples_.push_back(e);
        else
            batch_.push_back(e);
    }
    uint64_t dropped = 0;
    const size_t n = rings_.count();
    for (size_t i = 0; i < n; ++i)
        if (EventRing* r = rings_.at(i)) dropped += r->dropped.load(std::memory_order_relaxed);
    dropped_ = dropped;
}

void TraceSink::noteThread(uint32_t tid) {
    if (tid == 0 || !threadsSeen_.insert(tid).second) return;
    writer_->addThread(ThreadInfo{tid, threadName(tid)});
}

// At drain time: what activity records are matched against (synchronizes, trims, pools by the
// correlation id of the call that created or first used them).
void TraceSink::noteEarly(const Event& e) {
    switch (e.kind) {
    case EventKind::Alloc:
        if (e.pool && earlyPools_.insert(e.pool).second) poolByCorrelation_[e.correlation] = e.pool;
        break;
    case EventKind::PoolCreate:
    case EventKind::PoolImport:
        if (e.result == 0 && e.pool) poolByCorrelation_[e.correlation] = e.pool;
        break;
    case EventKind::PoolTrimTo:
        if (e.correlation) trims_.insert(e.correlation);
        while (trims_.size() > kRecentSyncs) trims_.erase(trims_.begin());
        break;
    case EventKind::ImplicitRelease:
        // Seen by the collector itself at a synchronize: CUPTI's record of it is a duplicate.
        if (e.correlation) synthesized_.insert(e.correlation);
        while (synthesized_.size() > kRecentSyncs) synthesized_.erase(synthesized_.begin());
        break;
    default:
        if (isSync(e.kind) && e.correlation) {
            syncs_[e.correlation] = SyncMark{e.seq, e.pool, e.tsNs, e.device, e.tid, e.stream};
            syncsByTime_[e.tsNs] = e.correlation;
            while (syncs_.size() > kRecentSyncs) syncs_.erase(syncs_.begin());
            while (syncsByTime_.size() > kRecentSyncs) syncsByTime_.erase(syncsByTime_.begin());
        }
        break;
    }
}

// At write time, in seq order, through the replay: a Free takes its pool and size from the
// Alloc that returned its pointer, and derived `used` values are filled in. Done here, after
// the hold-back, because only then is the order final: a free takes its number before the
// driver releases the block, but may publish it after another thread's alloc already reused
// the address. Entities the events reveal are written as they appear.
void TraceSink::complete(Event& e) {
    noteThread(e.tid);
    const replay::Fact& f = replay_.complete(e);
    // A pool the collector never saw created (made before it started) is still an entity.
    if (e.kind == EventKind::Alloc && f.newPool && e.pool) {
        PoolInfo p;
        p.handle = e.pool;
        p.device = e.device;
        writer_->addPool(p);
    }
    if (e.result != 0) return;
    switch (e.kind) {
    case EventKind::PoolCreate:
    case EventKind::PoolImport:
        if (e.pool) writer_->addPool(replay_.pools()[f.pool].info);
        break;
    case EventKind::StreamCreate:
        writer_->addStream(replay_.streams()[f.stream].info);
        break;
    default:
        break;
    }
}

void TraceSink::resolveActivity(bool final) {
    {
        std::lock_guard lock(inMutex_);
        activity_.insert(activity_.end(), inActivity_.begin(), inActivity_.end());
        inActivity_.clear();
    }
    std::vector<PendingActivity> keep;
    for (PendingActivity& pa : activity_) {
        const PoolActivity& a = pa.a;
        const bool giveUp = final || pa.age >= kActivityWaitPasses;
        if (a.op == PoolActivity::Op::Created) {
            auto it = poolByCorrelation_.find(a.correlation);
            if (it != poolByCorrelation_.end()) {
                if (a.address) poolByAddress_[a.address] = it->second;
            } else if (!giveUp) {
                ++pa.age;
                keep.push_back(pa);
            }
            continue;
        }
        if (a.op != PoolActivity::Op::Trimmed) continue;
        // An explicit cuMemPoolTrimTo: its event already carries the watermarks read after it.
        // A release the collector saw itself at the synchronize: already in the trace.
        if (trims_.count(a.correlation) || synthesized_.count(a.correlation)) continue;
        SyncMark* mark = nullptr;
        auto it = syncs_.find(a.correlation);
        if (it != syncs_.end()) {
            mark = &it->second;
        } else if (!giveUp) {
            ++pa.age;
            keep.push_back(pa);
            continue;
        } else {
            // No synchronize with this correlation id (e.g. the runtime's id): the first
            // synchronize to return after the release is the one that performed it.
            auto t = syncsByTime_.lower_bound(a.tsNs);
            if (t != syncsByTime_.end() && t->first - a.tsNs < 1'000'000'000) {
                if (synthesized_.count(t->second)) continue;
                auto s = syncs_.find(t->second);
                if (s != syncs_.end()) mark = &s->second;
            }
        }
        Event e;
        ReleaseFields{a.size, std::nullopt}.into(e);
        e.correlation = a.correlation;
        e.device = static_cast<int16_t>(a.device);
        e.reserved = a.size;
        e.used = a.utilized;
        e.flags = kHasWatermarks;
        e.tsNs = a.tsNs;
        auto addr = poolByAddress_.find(a.address);
        if (addr != poolByAddress_.end()) e.pool = addr->second;
        bool inSlot = false;
        if (mark) {
            if (!e.pool) e.pool = mark->pool;
            e.tid = mark->tid;
            e.stream = mark->stream;
            if (e.tsNs > mark->tsNs || e.tsNs == 0) e.tsNs = mark->tsNs;
            if (mark->slotsUsed < int(kReleaseSlots) && mark->seq >= kReleaseSlots) {
                e.seq = mark->seq - kReleaseSlots + uint64_t(mark->slotsUsed++);
                inSlot = true;
            }
        }
        if (!inSlot) {
            e.seq = seq_.fetch_add(1, std::memory_order_relaxed);
            // A fresh number puts the release after events that came later (up to the activity
            // wait, ~100 ms): its reading, taken at the release, is older than theirs and would
            // set the pool back. The event still records the release and the reserved it left
            // (stage() does the same for a slot that was already written past).
            e.flags &= static_cast<uint8_t>(~kHasWatermarks);
        }
        batch_.push_back(e);
    }
    activity_.swap(keep);
}

Status TraceSink::flushEntities() {
    std::vector<DeviceInfo> devices;
    std::vector<PoolInfo> pools;
    std::vector<PoolAttributeValue> attributes;
    std::vector<std::pair<std::string, std::string>> meta;
    std::unique_ptr<ProcessInfo> process;
    {
        std::lock_guard lock(inMutex_);
        devices.swap(inDevices_);
        pools.swap(inPools_);
        attributes.swap(inPoolAttributes_);
        meta.swap(inMeta_);
        process.swap(inProcess_);
    }
    if (process)
        if (Status s = writer_->setProcess(*process); !s) return s;
    for (const DeviceInfo& d : devices) {
        if (Status s = writer_->addDevice(d); !s) return s;
        if (live_) live_->onDevice(d);
    }
    for (const PoolInfo& p : pools) {
        replay_.declarePool(p);
        if (Status s = writer_->addPool(p); !s) return s;
        if (live_) live_->onPool(p);
    }
    for (const PoolAttributeValue& a : attributes)
        if (Status s = writer_->addPoolAttribute(a); !s) return s;
    for (auto& [k, v] : meta)
        if (Status s = writer_->setMeta(k, v); !s) return s;
    return {};
}

Status TraceSink::pump(bool final) {
    const auto t0 = std::chrono::steady_clock::now();
    // Entities first: events may name a device or default pool registered just now.
    if (Status s = flushEntities(); !s) return s;
    drainRings(final);
    sortBySeq(batch_);
    for (const Event& e : batch_) noteEarly(e);
    resolveActivity(final);
    stage();
    Status s = writeOut(final);
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - t0)
                           .count();
    if (!final && ns > maxPassNs_) maxPassNs_ = ns;
    return s;
}

uint32_t TraceSink::nowMs() const {
    return static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - start_)
                                     .count());
}

void TraceSink::stage() {
    if (batch_.empty()) return;
    const uint32_t now = nowMs();
    sortBySeq(batch_);
    // An event older than what is already written (held up longer than the hold-back) gets a
    // fresh number: the trace stays in seq order, the event lands just after its real place.
    size_t late = 0;
    while (late < batch_.size() && batch_[late].seq <= lastWrittenSeq_ && lastWrittenSeq_) ++late;
    for (size_t i = 0; i < late; ++i) {
        batch_[i].seq = seq_.fetch_add(1, std::memory_order_relaxed);
        // A release's reading is of its own time, older than what was written since.
        if (batch_[i].kind == EventKind::ImplicitRelease)
            batch_[i].flags &= static_cast<uint8_t>(~kHasWatermarks);
    }
    if (late) std::rotate(batch_.begin(), batch_.begin() + long(late), batch_.end());
    auto bySeq = [](const Staged& a, const Staged& b) { return a.e.seq < b.e.seq; };
    // staged_[stagedHead_..] is the queue. Written events are dropped from the front only once
    // they are the larger half, so each event is moved O(1) times on average (a deque of
    // 96-byte events would allocate a block every five events).
    if (stagedHead_ > 0 && stagedHead_ * 2 >= staged_.size()) {
        staged_.erase(staged_.begin(), staged_.begin() + long(stagedHead_));
        stagedHead_ = 0;
    }
    const bool inOrder =
        staged_.size() == stagedHead_ || staged_.back().e.seq < batch_.front().seq;
    const size_t mid = staged_.size();
    for (const Event& e : batch_) staged_.push_back(Staged{e, now});
    if (!inOrder) {
        // Stragglers belong near the end: merge only the overlapping tail.
        auto from = std::upper_bound(staged_.begin() + long(stagedHead_),
                                     staged_.begin() + long(mid), staged_[mid], bySeq);
        std::inplace_merge(from, staged_.begin() + long(mid), staged_.end(), bySeq);
    }
    batch_.clear();
}

Status TraceSink::writeOut(bool final) {
    if (stacks_) {
        StackTables t;
        stacks_->drain(t, [this](int64_t ticks) { return clock_.toNs(static_cast<uint64_t>(ticks)); });
        if (Status s = writer_->addStacks(t); !s) return s;
    }
    const uint32_t now = nowMs();
    for (; stagedHead_ < staged_.size(); ++stagedHead_) {
        Staged& st = staged_[stagedHead_];
        if (!final && now - st.drainedMs < holdBackMs_) break;
        lastWrittenSeq_ = st.e.seq;
        complete(st.e);
        out_.push_back(st.e);
    }
    if (stagedHead_ == staged_.size()) {
        staged_.clear();
        stagedHead_ = 0;
    }
    if (!out_.empty()) {
        if (Status s = writer_->append(out_); !s) return s;
        written_ += out_.size();
        if (live_) live_->onEvents(out_);
    }
    if (!samples_.empty()) {
        if (Status s = writer_->append(samples_); !s) return s;
        if (live_) live_->onEvents(samples_);
    }
    out_.clear();
    samples_.clear();
    for (const SpoolGap& g : gaps_) {
        DropGap d;
        d.tsNs = clock_.toNs(g.gap.firstTicks);
        d.durationNs = clock_.toNs(g.gap.lastTicks) - d.tsNs;
        d.tid = g.tid;
        d.count = g.gap.count;
        if (Status s = writer_->addDropGap(d); !s) return s;
    }
    gaps_.clear();
    if (dropped_ != droppedWritten_) {
        if (Status s = writer_->setMeta("dropped_events", std::to_string(dropped_)); !s) return s;
        droppedWritten_ = dropped_;
    }
    const auto t = std::chrono::steady_clock::now();
    if (final || t - lastCommit_ >= kCommitEvery) {
        lastCommit_ = t;
        return writer_->commit();
    }
    return {};
}

Status TraceSink::close() {
    Status s = pump(true);
    if (!s) return s;
    if (writer_) {
        if (droppedWritten_ == 0)
            if (Status m = writer_->setMeta("dropped_events", std::to_string(dropped_)); !m)
                return m;
        // How close the writer came to losing events: the spool's high-water mark against its
        // bound, and the slowest writer pass.
        // The stack mode as it ended: the Python frame reader checks its layout at the first
        // walks and may have turned itself off since the start.
        if (stacks_)
            if (Status m = writer_->setMeta("stacks", stacks_->describe()); !m) return m;
        for (const auto& [k, v] :
             {std::pair<const char*, std::string>{"spool_peak_events", std::to_string(spool_.peak())},
              {"spool_max_events", std::to_string(spool_.maxEvents())},
              {"writer_max_pass_ms", std::to_string(maxPassNs_ / 1'000'000)}})
            if (Status m = writer_->setMeta(k, v); !m) return m;
        return writer_->close();
    }
    return {};
}

} // namespace poolscope::collector
