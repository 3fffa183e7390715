#pragma once
// Opens and validates a .poolscope trace and answers entity and time-range queries. Read-only.
// Each kind of bad file has its own ErrorCode and a message written for a person.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/Result.h"

struct sqlite3;

namespace poolscope {

struct TraceSummary {
    int schemaVersion = 0;
    uint64_t eventCount = 0;
    uint64_t sampleCount = 0;
    int64_t firstTsNs = 0; // over events and samples; 0/0 for an empty trace
    int64_t lastTsNs = 0;
    std::map<EventKind, uint64_t> countsByKind;
};

class TraceReader {
public:
    static Result<std::unique_ptr<TraceReader>> open(const std::string& path);
    ~TraceReader();
    TraceReader(const TraceReader&) = delete;
    TraceReader& operator=(const TraceReader&) = delete;

    const std::string& path() const { return path_; }
    int schemaVersion() const { return schemaVersion_; }

    Result<ProcessInfo> process() const;
    Result<std::vector<DeviceInfo>> devices() const;
    Result<std::vector<PoolInfo>> pools() const;
    Result<std::vector<StreamInfo>> streams() const;
    Result<std::vector<ThreadInfo>> threads() const;
    Result<std::map<std::string, std::string>> meta() const;
    Result<TraceSummary> summary() const;

    // Events with t0 <= tsNs < t1, in seq order. Samples are not included.
    Result<std::vector<Event>> events(int64_t t0, int64_t t1) const;
    // Streams every event (seq order) to fn; fn returns false to stop (cancel). progress, when
    // set, gets (done, total) every few thousand rows.
    Status forEachEvent(const std::function<bool(const Event&)>& fn,
                        const std::function<void(uint64_t, uint64_t)>& progress = {}) const;
    // Bulk reading, one chunk (a few thousand events) at a time, seq order: each chunk is decoded
    // into `chunk` (cleared first; its capacity is reused) and handed to fn, which may swap the
    // vector with another to keep the events (handing them to another thread) without a copy.
    // fn returns false to stop (ErrorCode::Cancelled). Rows are visited in rowid order when that
    // is seq order (always, for files TraceWriter wrote), so SQLite never sorts the blobs.
    Status forEachChunk(const std::function<bool(std::vector<Event>& chunk)>& fn) const;
    uint64_t chunkedEventCount() const; // sum of the chunks' counts (0 on error)
    // Periodic samples (Event with kind Sample) in t0 <= tsNs < t1, time order; pool 0 = all.
    Result<std::vector<Event>> samples(uint64_t pool, int64_t t0, int64_t t1) const;

private:
    TraceReader() = default;
    Error sqlError(const char* what) const;

    sqlite3* db_ = nullptr;
    std::string path_;
    int schemaVersion_ = 0;
};

} // namespace poolscope
