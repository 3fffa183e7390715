#pragma once
// The writer side of the collector: drains every ring, puts events in sequence order, completes
// what the hot path could not know through the allocator replay (a Free's pool and size from its
// Alloc, derived used bytes), places the implicit releases CUPTI reports later in activity
// buffers, and writes batches through TraceWriter, committing at least every 100 ms. Owned and called by one thread (the writer thread); the add*() entry points
// are safe from any thread. Calls neither CUDA nor CUPTI, so tests drive it without a GPU.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "Clock.h"
#include "RingRegistry.h"
#include "Spool.h"
#include "Stacks.h"
#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/replay/Replay.h"

namespace poolscope::collector {

class LiveSink;

// A CUPTI_ACTIVITY_KIND_MEMORY_POOL record, reduced to what the sink needs.
struct PoolActivity {
    enum class Op : uint8_t { Created = 1, Destroyed = 2, Trimmed = 3 };
    Op op = Op::Trimmed;
    uint32_t correlation = 0;
    uint32_t device = 0;
    uint64_t address = 0;
    uint64_t size = 0;       // pool size after the operation
    uint64_t utilized = 0;
    int64_t tsNs = 0;        // CLOCK_MONOTONIC (the collector registers its own CUPTI clock)
};

// Synchronize events reserve this many sequence numbers just below their own, so the implicit
// releases CUPTI reports later can be placed before the synchronize that caused them.
inline constexpr uint64_t kReleaseSlots = 3;
// How long finished events wait before they are written (see TraceSink::pump): long enough for
// a thread preempted between taking its seq and publishing the event. When the implicit
// releases come only from CUPTI's activity records (watermark reads off), they arrive in
// buffers flushed every 50 ms and need the longer wait to be placed before their synchronize.
inline constexpr uint32_t kHoldBackMs = 30;
inline constexpr uint32_t kHoldBackForActivityMs = 150;

class TraceSink {
public:
    // spoolEvents: how many drained events may wait for the writer (Spool).
    TraceSink(std::unique_ptr<TraceWriter> writer, RingRegistry& rings, std::atomic<uint64_t>& seq,
              size_t spoolEvents = kDefaultSpoolEvents);
    static constexpr size_t kDefaultSpoolEvents = 262144;
    ~TraceSink();

    // Thread-safe: entity facts found by the collector's cold paths, and activity records.
    void addDevice(const DeviceInfo& d);
    void addPool(const PoolInfo& p);
    // A pool's settable attributes as read when the collector first saw it (PoolAttributes.h).
    void addPoolAttributes(std::span<const PoolAttributeValue> values);
    void addActivity(const PoolActivity& a);
    void setProcess(const ProcessInfo& p);
    void setMeta(const std::string& key, const std::string& value);

    void setLiveSink(LiveSink* live) { live_ = live; }
    // A drainer thread empties the rings into the spool (drainOnce); without one, pump() does.
    void setDrainerRunning(bool on) { drainer_.store(on, std::memory_order_release); }
    size_t drainOnce() { return spool_.fill(rings_); }
    // Diagnostics only (POOLSCOPE_BENCH_DISCARD=1): throws away what the drainer spooled.
    void discardSpool() {
        spool_.take(taken_, gaps_);
        taken_.clear();
        gaps_.clear();
    }
    // Call sites: each pass writes what the recorder interned since the last one (before the
    // events that name them, in the same transaction).
    void setStackRecorder(StackRecorder* s) { stacks_ = s; }
    void setHoldBackMs(uint32_t ms) { holdBackMs_ = ms; }

    // One writer pass: drain, order, resolve, write; commits when 100 ms have passed since the
    // last commit or when final. Events are written in seq order (the trace's chunks require it)
    // after a hold-back of kHoldBackMs, so a Free whose Alloc sits in another thread's ring and
    // an implicit release CUPTI reports late still land in order. final writes everything now
    // (exit, fatal signal) and gives up on frees still waiting for their alloc.
    // Returns the first write error (the collector then switches itself off).
    Status pump(bool final = false);
    Status close();

    uint64_t dropped() const { return dropped_; }
    size_t spoolPeak() const { return spool_.peak(); }
    uint64_t written() const { return written_; }

private:
    // An event waiting out the hold-back, with the time (ms since start) it was drained.
    struct Staged {
        Event e;
        uint32_t drainedMs;
    };
    struct SyncMark {
        uint64_t seq;        // the synchronize's own seq; releases go just below it
        uint64_t pool;
        int64_t tsNs;
        int16_t device;
        uint32_t tid;
        uint64_t stream;
        int slotsUsed = 0;
    };
    struct PendingActivity {
        PoolActivity a;
        int age = 0; // passes waited for its synchronize
    };

    void drainRings(bool final);
    void noteEarly(const Event& e);
    void complete(Event& e);
    void resolveActivity(bool final);
    Status flushEntities();
    void stage();
    Status writeOut(bool final);
    uint32_t nowMs() const;
    void noteThread(uint32_t tid);

    std::unique_ptr<TraceWriter> writer_;
    RingRegistry& rings_;
    std::atomic<uint64_t>& seq_;
    TickConverter clock_;
    LiveSink* live_ = nullptr;
    StackRecorder* stacks_ = nullptr;

    Spool spool_;
    std::atomic<bool> drainer_{false};
    std::vector<Event> taken_;    // this pass's events from the spool
    std::vector<SpoolGap> gaps_;  // lost events to mark in the trace
    int64_t maxPassNs_ = 0;       // the slowest pump(), for the trace's meta
    std::vector<Event> samples_;
    std::vector<Event> batch_;    // this pass's events (drained, plus resolved activity), by seq
    std::vector<Staged> staged_;  // from stagedHead_: held back so late events can slot in, by seq
    size_t stagedHead_ = 0;
    uint32_t holdBackMs_ = kHoldBackMs;
    std::vector<Event> out_;      // ready to write
    replay::Replay replay_;       // the written events, in their final order
    std::map<uint32_t, SyncMark> syncs_;        // recent synchronizes by correlation id
    std::set<uint32_t> trims_;                  // recent explicit trims by correlation id
    std::map<int64_t, uint32_t> syncsByTime_;   // sync exit time -> correlation
    std::unordered_map<uint32_t, uint64_t> poolByCorrelation_; // creates/imports/first allocs
    std::unordered_map<uint64_t, uint64_t> poolByAddress_;     // from CREATED activity records
    std::set<uint64_t> earlyPools_;
    std::set<uint32_t> synthesized_;            // synchronizes with a release seen at the call
    std::set<uint32_t> threadsSeen_;

    std::mutex inMutex_; // guards the in* members below
    std::vector<DeviceInfo> inDevices_;
    std::vector<PoolInfo> inPools_;
    std::vector<PoolAttributeValue> inPoolAttributes_;
    std::vector<PendingActivity> inActivity_;
    std::vector<std::pair<std::string, std::string>> inMeta_;
    std::unique_ptr<ProcessInfo> inProcess_;

    std::vector<PendingActivity> activity_;
    uint64_t dropped_ = 0;
    uint64_t droppedWritten_ = 0;
    uint64_t written_ = 0;
    uint64_t lastWrittenSeq_ = 0;
    std::chrono::steady_clock::time_point lastCommit_;
    std::chrono::steady_clock::time_point start_;
};

} // namespace poolscope::collector
