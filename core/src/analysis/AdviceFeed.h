#pragma once
// The what-if advisor's inputs from the streaming report's one read (analysis/TraceReport.cpp):
// the recording pool model (its ops to the tape and the spill), the never-releasing model that
// follows those ops, and the racing threads' ranges. Internal to core.
//
// They follow a replay of the trace. On one thread that is the report's own replay (the
// reducer's). With `threaded`, a replay of their own, on a thread of their own: the same events
// and samples in the same order make the same facts (Replay is a function of its inputs). The
// models were about a third of the read, the report's replay analyses (pending frees, hazards,
// fragmentation) a tenth; both go to this thread (follow()), so that the read's two halves take
// about as long, at the cost of a second replay. The chunks are shared, not copied: each is held
// until both threads are done with it, and at most kDepth wait for this one.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "../whatif/TapeSpill.h"
#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/replay/Replay.h"
#include "poolscope/whatif/PoolModel.h"
#include "poolscope/whatif/RaceRange.h"

namespace poolscope::detail {

class AdviceFeed {
public:
    using Chunk = std::shared_ptr<const std::vector<Event>>;

    // `report`: the reducer's replay, followed where not threaded. `spill`: keep the ops on disk
    // for the questions after the read.
    AdviceFeed(replay::Replay& report, bool threaded, bool spill);
    ~AdviceFeed(); // stops and joins the thread (a read that ended early)
    AdviceFeed(const AdviceFeed&) = delete;
    AdviceFeed& operator=(const AdviceFeed&) = delete;

    bool threaded() const { return threaded_; }
    // The entities the report's replay was given, before the first event (threaded only: the
    // report's replay is the one followed otherwise).
    void setEntities(const std::vector<DeviceInfo>& devices, const std::vector<PoolInfo>& pools,
                     const std::vector<StreamInfo>& streams);
    void declareKnob(uint64_t pool, PoolAttr attr, uint64_t value);
    // Threaded, before the first chunk: another observer for the feed's replay to drive (the
    // report's own analyses, off the report's thread). Not owned; read it after end().
    void follow(replay::Observer* o, uint32_t kindMask);
    // The samples the report merges in by time (threaded: merged the same way on the feed's
    // thread). Must outlive the feed's end().
    void expectSamples(const std::vector<Event>* samples) { samples_ = samples; }

    // Threaded: the chunk in `chunk` moves into a shared holder handed to the feed's thread
    // (waiting while kDepth are queued), and `chunk` gets a spare buffer for the reader. The
    // holder is returned for the caller's own pass over the events.
    Chunk share(std::vector<Event>& chunk);
    // Not threaded: after the report's replay applied a chunk (its samples included).
    void step();
    // After the last chunk: the rest of the samples, the last step, the thread joined.
    void end();
    // After end(), where the advisor runs: the recording model's tape (and the spill) finished.
    void finish();

    // After finish(): the inputs adviseAfter takes.
    const std::vector<whatif::PoolPrediction>& recorded() const { return tape_.recorded; }
    std::vector<whatif::PoolPrediction> neverReleasing();
    std::vector<whatif::RaceRange> races() const { return races_.result(*replay_); }
    whatif::TapeSpill* spill() { return spill_.get(); }

private:
    static constexpr size_t kDepth = 4;

    void run();
    void apply(const std::vector<Event>& chunk);
    void addSample(Event s);
    std::vector<Event> spareBuffer();

    bool threaded_;
    replay::Replay own_;
    replay::Replay* replay_;
    whatif::PoolModel asRecorded_, neverReleasing_;
    whatif::RaceBounds races_;
    whatif::Tape tape_;
    std::unique_ptr<whatif::TapeSpill> spill_;
    const std::vector<uint8_t> noMute_;
    const std::vector<Event>* samples_ = nullptr;
    size_t nextSample_ = 0;

    std::mutex m_;
    std::condition_variable notEmpty_, notFull_;
    std::deque<Chunk> queue_;
    std::vector<std::vector<Event>> spares_;
    bool stop_ = false, done_ = false;
    std::thread thread_; // last: started once the members above exist
};

} // namespace poolscope::detail
