#pragma once
// Writes a .poolscope trace. Used by the collector's writer thread and by tests/benchmarks.
// Not thread-safe: one thread owns a writer. Rows go through prepared statements inside one open
// transaction; commit() ends it (the collector commits at least every 100 ms).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/EventCodec.h"
#include "poolscope/PoolSummary.h"
#include "poolscope/Result.h"
#include "poolscope/Schema.h"
#include "poolscope/Stacks.h"
#include "poolscope/view/EventFilter.h"

struct sqlite3;

namespace poolscope {

struct WriterOptions {
    bool wal = true;           // WAL while recording, so readers can follow a live trace
    bool synchronousOff = false; // benchmarks only: trade durability for speed
    // Write <path>.partial and rename it to path when close() succeeds, so that a file already
    // at path is replaced only by a complete trace (issue #12: a full disk while recording must
    // not destroy the last good trace). If writing fails, <path>.partial keeps what was
    // committed. The collector and `poolscope record` set it.
    bool replaceAtClose = false;
    // Event chunks in a zstd codec (kEventCodecVersion) where libzstd is found; false: always
    // codec 4 (tests that need the uncompressed layout, comparisons).
    bool compressEvents = true;
    // Benchmarks only: kZstdCodecVersion writes codec 5 instead of the newest (comparisons).
    int zstdCodec = 0;
    // Per-chunk pool summaries (pool_chunk_summary, PoolSummary.h); false: a trace without the
    // table, as written before it existed (benchmarks of its cost, tests of old traces).
    bool poolSummaries = true;
    // Each chunk's prev_last_seq, crc and events per kind in the narrow chunk_headers table
    // (schema.sql); false: a trace without it, as written before it existed.
    bool chunkHeaders = true;
    // The chunk's other header columns copied into its chunk_headers row (since 2026-11-28);
    // false: those columns are left NULL (tests of the scan without them).
    bool chunkHeaderCopies = true;
    // pool_block_summary (schema.sql), with poolSummaries; false: a trace without the table.
    bool blockSummaries = true;
};

// The file a replaceAtClose writer works in until close(): path + ".partial".
std::string partialPath(const std::string& path);
// Finishes a trace a replaceAtClose writer left in partialPath(path) without reaching close()
// (a program killed by a signal: the collector commits then, but cannot close from a signal
// handler): folds its WAL in and, if it reads as a trace, moves it to path. false when there is
// no partial file; an error (and the file left where it is) when it cannot be finished.
Result<bool> finishPartialTrace(const std::string& path);

class TraceWriter {
public:
    // Creates (truncating) a trace at path (or beside it: replaceAtClose). Errors: WriteFailed
    // with the reason in plain words.
    static Result<std::unique_ptr<TraceWriter>> create(const std::string& path,
                                                       const WriterOptions& options = {});
    ~TraceWriter();
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;

    Status setProcess(const ProcessInfo& p);
    Status addDevice(const DeviceInfo& d);
    Status addPool(const PoolInfo& p);       // insert or update by handle
    Status addStream(const StreamInfo& s);   // insert or update by handle
    Status addThread(const ThreadInfo& t);   // insert or update by tid
    Status addDropGap(const DropGap& g);
    // The first value written for a (pool, attribute) stays: it is what the pool started with.
    Status addPoolAttribute(const PoolAttributeValue& a);

    // Appends events (Sample kind goes to the samples table, the rest to event chunks). Give
    // events in seq order. Opens a transaction if none is open; nothing is durable until commit().
    Status append(std::span<const Event> events);
    Status append(const Event& e) { return append(std::span<const Event>(&e, 1)); }

    // Call-site rows (Stacks.h): inserts (or replaces, by key) everything in t. The collector's
    // writer adds only what is new since its last pass; rare next to events (one row set per
    // distinct stack), so the statements are prepared per call.
    Status addStacks(const StackTables& t);

    // Free-form key/value metadata (e.g. "dropped_events", "collector_disabled_reason").
    Status setMeta(const std::string& key, const std::string& value);

    Status commit();   // writes the partial chunk and ends the open transaction, if any
    Status close();    // commit, switch the journal out of WAL, close the file

    uint64_t eventsWritten() const { return eventsWritten_; }
    const std::string& path() const { return path_; } // the file being written

private:
    TraceWriter() = default;
    struct Statements;
    Status begin();
    Status flushChunk();
    // The open chunk's chunk_index row, after its event_chunks row (the last insert).
    Status writeChunkIndex(const schema::ChunkHeader& h, uint32_t chunkCrc);
    // The chunk just inserted: its chunk_headers row (schema.sql).
    Status writeChunkHeaders(const schema::ChunkHeader& h, uint32_t chunkCrc, uint64_t dataBytes);
    Status writePoolSummaries(uint32_t chunkCrc);
    Status writeBlock(); // blocks_'s rows to pool_block_summary // the chunk just inserted: its pool_chunk_summary rows
    Status exec(const char* sql);
    Error sqlError(const char* what) const;

    sqlite3* db_ = nullptr;
    std::unique_ptr<Statements> st_;
    bool inTransaction_ = false;
    mutable bool failed_ = false; // a write failed: the file is not complete (no rename)
    uint64_t eventsWritten_ = 0;
    struct OpenChunk {
        uint64_t count = 0, firstSeq = 0, lastSeq = 0, kinds = 0;
        int64_t tMin = 0, tMax = 0;
    } chunk_;                    // the chunk being filled
    // Holds the open chunk's encoded events: compressed (codec 5) where libzstd is found and
    // options allow, else codec 4 (a trace is always written; it is only larger).
    EventEncoder encoder_;
    view::ChunkIndexRow chunkIndex_; // the open chunk's chunk_index row
    PoolSummaryAccumulator poolSummaries_; // the open chunk's watermarks per pool
    bool writeSummaries_ = true;
    bool writeHeaders_ = true;
    bool writeHeaderCopies_ = true;
    bool writeBlocks_ = true;
    PoolBlockAccumulator blocks_; // the open block's rows, fed each chunk's summaries
    uint64_t prevLastSeq_ = 0;   // last_seq of the chunk written before (prev_last_seq)
    uint64_t counts_[kEventKindCount] = {};
    bool countsDirty_[kEventKindCount] = {};
    uint64_t countsAtChunk_[kEventKindCount] = {}; // counts_ when the open chunk began
    std::string path_;
    std::string finalPath_; // where close() moves path_ (== path_ without replaceAtClose)
};

} // namespace poolscope
