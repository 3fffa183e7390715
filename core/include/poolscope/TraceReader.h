#pragma once
// Opens and validates a .poolscope trace and answers entity and time-range queries. Read-only.
// Each kind of bad file has its own ErrorCode and a message written for a person.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/PoolSummary.h"
#include "poolscope/Result.h"
#include "poolscope/Stacks.h"

struct sqlite3;

namespace poolscope {

namespace view {
struct EventFilter;
struct ChunkIndexRow;
} // namespace view
namespace detail {
struct OwnTail;
struct VerifiedChunks;
} // namespace detail

// What a filtered read (TraceReader::forEachMatchingChunk) did with the event chunks of its time
// range: each is counted once.
struct FilteredReadStats {
    uint64_t chunks = 0;         // chunks whose time range meets the filter's
    uint64_t decoded = 0;        // decoded and tested event by event (damaged ones included)
    uint64_t skippedByIndex = 0; // passed over on their header and chunk_index row: not read
    // No usable index row: passed over on their header's kinds once their data's checksum
    // held (read, not decoded).
    uint64_t skippedByKinds = 0;
    // Answered by their chunk_headers kind counts (a kind-only filter, the chunk wholly inside
    // its time range): counted or skipped past (FilteredReadOptions) once their data's checksum
    // held (read, not decoded).
    uint64_t answeredByCounts = 0;
    // Of those, answered without reading their data: a read sharing this header scan
    // (setReuseHeaderScan, adoptScan) had already found their checksum holding.
    uint64_t answeredFromVerified = 0;
    uint64_t matched = 0; // matching events, those skipped or only counted included
};

// A filtered read's page (issue #15): the first `skip` matches are passed over, without reading
// the chunks whose kind counts say how many they hold; countOnly: no events are handed out,
// only counted (TraceReader::countMatching).
struct FilteredReadOptions {
    uint64_t skip = 0;
    bool countOnly = false;
};

// A part of a trace found damaged (issue #12): what, in words a person can act on, and how many
// events it loses or puts in doubt (0 when none or unknown).
struct TraceDamage {
    std::string what;
    uint64_t events = 0;
};

// One chunk row's header as the reader found it valid (issue #15: a time range's detail is read
// from the chunks whose headers overlap it, TimelineRange.h).
struct ChunkHeaderInfo {
    int64_t id = 0;
    uint64_t firstSeq = 0, lastSeq = 0;
    int64_t tMin = 0, tMax = 0;
    uint64_t count = 0;
    uint64_t kinds = 0; // bit (1 << kind) per kind present
};

struct TraceSummary {
    int schemaVersion = 0;
    uint64_t eventCount = 0;   // events in the chunk rows not known to be damaged
    uint64_t sampleCount = 0;
    int64_t firstTsNs = 0; // over events and samples; 0/0 for an empty trace
    int64_t lastTsNs = 0;
    // From event_counts, each clamped to eventCount; when the table disagrees with the chunks,
    // damage() says so.
    std::map<EventKind, uint64_t> countsByKind;
};

class TraceReader {
public:
    static Result<std::unique_ptr<TraceReader>> open(const std::string& path);
    // A whole trace file's bytes held in memory (a fuzz input; a trace received rather than
    // stored): copied, then read exactly as open() reads a file, with the same checks and
    // errors. `name` stands for the path in messages.
    static Result<std::unique_ptr<TraceReader>> openImage(std::string_view image,
                                                          const std::string& name);
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
    // Where the collector lost events, time order; empty for traces without the table.
    Result<std::vector<DropGap>> dropGaps() const;
    // The pools' settable attributes as first read by the collector (pool_initial_attributes); empty
    // for traces without the table. Rows that cannot be such a value (an attribute outside 1-4,
    // a reuse policy other than 0/1) are left out and reported by tableDamage().
    Result<std::vector<PoolAttributeValue>> poolAttributes() const;
    Result<TraceSummary> summary() const;
    // Call sites (Stacks.h): every row of the format-4 tables; empty for older formats and for
    // traces recorded without stacks. A row that breaks the tables' rules (a frame beyond a
    // stack's depth limit, a negative id) fails with ErrorCode::Corrupt.
    Result<StackTables> stacks() const;

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
    // Events in the chunk rows whose headers are valid (0 on error): at most kChunkEvents a row,
    // so a bound for allocations that no value in the file can inflate.
    uint64_t chunkedEventCount() const;

    // Damaged chunks (issue #12). Every read checks each chunk row's header (types, ranges,
    // overlaps, the sequence hole a deleted row leaves), event_counts against the chunks and,
    // when a chunk is read, its checksum (format 3) and its decoded events against its header.
    // By default a damaged chunk makes events()/forEachChunk() fail with ErrorCode::Corrupt.
    // With skipDamaged set they skip it instead, and damage() lists it: what is intact still
    // reads, and the caller says what was lost.
    void setSkipDamaged(bool skip) { skipDamaged_ = skip; }
    bool skipDamaged() const { return skipDamaged_; }
    // Everything found damaged so far (headers at the last read, chunks read since open), and
    // the lies found in the tables without a checksum (tableDamage()).
    std::vector<TraceDamage> damage() const;
    // What does not hold up in the tables no checksum covers: process (one row, a real pid),
    // devices (ordinals, memory sizes), pools and streams (devices they name, pool kinds, size
    // limits), ids listed twice, thread ids, watermark samples (negative or non-numeric values,
    // which samples() skips; pools that are not in the pools table), meta's dropped_events and,
    // once a filtered read or verifyChunks() has read them, chunk_index rows that are missing,
    // listed twice, fail their checksum or disagree with their decoded chunk.
    // Lossless warnings (events 0): what they concern is shown as read, or skipped where said.
    std::vector<TraceDamage> tableDamage() const;
    // Reads every chunk's data without building anything: checks the checksum (format 3) or,
    // for older files, decodes and compares with the header. Afterwards summary() and damage()
    // are exact. Fails only on I/O errors and newer codecs; damage goes to damage().
    // With `threads` (format 3, a file opened by path, a few hundred chunks a thread), the
    // checksums are read on that many threads first, each through a connection of its own, and
    // this reader reads and reports only the chunks they did not find intact (onThreads, when
    // given: how many those were).
    Status verifyChunks(unsigned threads = 1, size_t minPerThread = 256, size_t* onThreads = nullptr) const;
    // Filtered reads (issue #15): the events that match `filter` (view::EventFilter::matches),
    // seq order: the same as events(filter.t0, filter.t1) tested one by one, damage handled the
    // same way (skipDamaged), but a chunk no event of which can match is not decoded
    // (EventFilter::mayMatch): on its chunk_index row (schema.sql), whose own checksum binds it
    // to the chunk's header and crc, or, where it has no usable row, on its header's kinds once
    // its data's checksum holds (older formats: decoded). A missing, duplicated or failing row is
    // no index for that chunk, and tableDamage() says so. fn gets the matching events of each
    // chunk in the time range, in seq order (empty for one passed over: a place to cancel), and
    // returns false to stop (ErrorCode::Cancelled). stats, when given, is added to.
    // With options, matches before options.skip are not handed out (fn gets the rest), and a
    // chunk wholly inside the time range whose chunk_headers row counts its kinds is not
    // decoded when the filter tests only kinds and time (its matches are its counts, once its
    // data's checksum holds: the same as a full decode, damaged chunks included).
    Status forEachMatchingChunk(const view::EventFilter& filter,
                                const std::function<bool(std::vector<Event>& matches)>& fn,
                                FilteredReadStats* stats = nullptr,
                                const FilteredReadOptions& options = {}) const;
    // The first `cap` matching events after the first `skip`; truncated, when given, says
    // whether there were more.
    Result<std::vector<Event>> events(const view::EventFilter& filter, size_t cap = SIZE_MAX,
                                      bool* truncated = nullptr,
                                      FilteredReadStats* stats = nullptr,
                                      uint64_t skip = 0) const;
    // How many events match, exactly as a full decode would count them: for a filter of kinds
    // and time, each chunk wholly inside its range is counted from its chunk_headers kind
    // counts once its data's checksum holds (read, not decoded; those at the ends are decoded),
    // else by a filtered read. The counts' per-kind sums are checked against event_counts, and
    // a count that its decoded chunk contradicts is reported by tableDamage().
    Result<uint64_t> countMatching(const view::EventFilter& filter,
                                   FilteredReadStats* stats = nullptr) const;
    // Before such a count, with a reused header scan (setReuseHeaderScan): the data of the
    // chunks it would read only for their checksum, read on `threads` threads (each through a
    // connection of its own; the calling thread is one), those found intact marked as such for
    // this reader and those sharing its scan. The count then reads only the rest: the events
    // table's first count of a 2 G-event trace read 13 GB on one thread. Nothing is reported
    // here: a chunk that does not hold is left for the count, which reads and reports it as
    // before. Returns the chunks found intact. Threads get at least minPerThread chunks each
    // (fewer chunks: nothing is read ahead).
    size_t verifyAhead(const view::EventFilter& filter, unsigned threads,
                       const std::atomic<bool>* cancel = nullptr, size_t minPerThread = 256) const;
    // false: filtered reads leave chunk_index unread (the reference path of tests and benchmarks).
    void setUseChunkIndex(bool use) { useChunkIndex_ = use; }
    // false: the header scan reads every chunk's prev_last_seq and crc from event_chunks and no
    // kind counts, as for a trace without chunk_headers (benchmarks, tests).
    void setUseChunkHeaders(bool use) { useChunkHeaders_ = use; }
    // true: every read after the first reuses its header scan instead of scanning again (a scan
    // reads a page per chunk row: 0.15 s at 100 M events, and a window's load asked for four).
    // For a finished trace read by one reader: chunks a live recording appends later are not
    // seen. A reader that finds a chunk_headers lie scans again, as it must.
    void setReuseHeaderScan(bool reuse) { reuseScan_ = reuse; }
    bool reusesHeaderScan() const { return reuseScan_; }
    // The header scan and the pool summaries this reader has read (with setReuseHeaderScan),
    // for another reader of the same finished trace (adoptScan): the window's range reads then
    // read neither again (at 1 G events ~1 s each). Null when there is none, or this reader
    // found a chunk_headers lie.
    struct SharedScan;
    std::shared_ptr<const SharedScan> sharedScan() const;
    // This reader's reads reuse `scan` (from sharedScan() of another reader) while the file's
    // size and modification time are those it was taken at; otherwise it is ignored.
    void adoptScan(std::shared_ptr<const SharedScan> scan);
    // What `other`, a reader of the same trace that adopted this one's scan, found reading
    // chunks (damaged data, chunk_headers rows their chunk contradicts), taken as this reader's
    // own, in seq order as one read would have found them: a read split over several readers
    // (ChunksInOrder.h) then reports its damage through damage() of the first.
    void takeFindings(const TraceReader& other) const;
    // poolSummaries() without a copy (the window's range reads).
    Result<std::shared_ptr<const PoolSummaries>> poolSummariesShared() const;
    // What this reader's header scans read (tests, benchmarks): how many scans it made, and in
    // the last one how many chunks' headers came from event_chunks rows (each a page of the
    // file) rather than from chunk_headers.
    struct ScanStats {
        uint64_t scans = 0, headersFromChunkRows = 0;
    };
    ScanStats scanStats() const { return {scans_.load(), headersFromChunkRows_.load()}; }

    // Each chunk's watermarks per pool (pool_chunk_summary, PoolSummary.h), read without
    // decoding a chunk, for the chunks whose headers hold up and whose data was not found
    // damaged; present false for traces without the table. A chunk whose rows do not all hold
    // up (checksum, ranges, their count) has none (chunksWithout) and tableDamage() says so.
    // Rows of chunks that are not there or not intact are passed over. Memory: at most one
    // row per (intact chunk, pool), pools being those of the pools table plus at most
    // kMaxUnlistedSummaryPools others, whatever the table holds.
    Result<PoolSummaries> poolSummaries() const;
    static constexpr size_t kMaxUnlistedSummaryPools = 1024;
    // The same watermarks per block of schema::kBlockChunks chunks (pool_block_summary): rows
    // whose `chunk` is the block's first, read without the header scan or any chunk, so that a
    // first view of the whole trace costs a row per block and pool. present false when the
    // trace has no such table or any row does not hold up (tableDamage() says why): the caller
    // then uses poolSummaries(). A later poolSummaries() of this reader compares each block
    // with its chunks' rows and reports a block that differs (tableDamage()).
    Result<PoolSummaries> poolBlockSummaries() const;
    // The headers of the chunk rows that hold up, in seq order. Reuses the last header scan when
    // there is one (a finished trace's rows do not change; a live one is read through events()).
    Result<std::vector<ChunkHeaderInfo>> chunkHeaders() const;
    // Decodes the chunks with these ids (in seq order, ids not among chunkHeaders() skipped),
    // checked as forEachChunk checks them, and hands each to fn (false: ErrorCode::Cancelled).
    Status forEachChunkById(const std::vector<int64_t>& ids,
                            const std::function<bool(std::vector<Event>& chunk)>& fn) const;
    // Periodic samples (Event with kind Sample) in t0 <= tsNs < t1, time order; pool 0 = all.
    Result<std::vector<Event>> samples(uint64_t pool, int64_t t0, int64_t t1) const;
    // The driver's high watermarks over every valid sample, per pool: what the report and the
    // window give as a pool's peaks when read (racing threads make the per-event used values
    // miss the driver's UsedMemHigh). One aggregate query; memory bounded by the pools.
    struct SampleHighs {
        uint64_t reservedHigh = 0, usedHigh = 0;
    };
    Result<std::map<uint64_t, SampleHighs>> sampleHighs() const;
    static constexpr size_t kMaxSampleHighPools = 65536;

    struct ChunkRef;
    struct ChunkIndex;

private:
    TraceReader() = default;
    Error sqlError(const char* what) const;
    Status checkFormat(const std::function<bool()>& hasMagic);
    Result<std::shared_ptr<const ChunkIndex>> scanChunks() const;
    Result<std::shared_ptr<const ChunkIndex>> indexForReading() const;
    Result<std::shared_ptr<const ChunkIndex>> lastIndex() const; // index_, else a scan
    // Checks and decodes one chunk's data into out; damage is recorded, not returned.
    // `damaged` gets the damage's description (empty when intact); decode false: a chunk with a
    // checksum is only checked, not decoded.
    Status readChunk(const ChunkRef& c, std::string_view data, std::vector<Event>& out,
                     std::string& damaged, bool decode) const;
    // Reads and checks the chunks of `list` (see visitChunkData) and hands each intact one to
    // fn (false from fn: ErrorCode::Cancelled). strict: the first damaged chunk fails the read
    // (ErrorCode::Corrupt); otherwise it is recorded and passed over. decode as readChunk's.
    Status decodeChunks(const std::vector<ChunkRef>& list, bool byRowid, bool decode, bool strict,
                        const std::function<bool(std::vector<Event>&)>& fn) const;
    void addDamage(int64_t chunkId, TraceDamage d) const;
    // A thread's share of verifyAhead or verifyChunks: the data of idx's chunks at `positions`
    // checked as a filtered read checks them (own header, checksum), each that holds marked in
    // `v`; false where the read stopped (cancelled, or a row could not be read).
    bool markIntact(const ChunkIndex& idx, const std::vector<size_t>& positions,
                    detail::VerifiedChunks& v, const std::atomic<bool>* cancel) const;
    // markIntact over `todo` in contiguous shares on `threads` threads (the calling one among
    // them), each through a reader of its own on this file.
    void markIntactOnThreads(const ChunkIndex& idx, const std::vector<size_t>& todo, unsigned threads,
                             detail::VerifiedChunks& v, const std::atomic<bool>* cancel) const;
    // chunk_index rows of idx's chunks, by position; valid[i] when chunk i's row holds. What does
    // not hold is kept for tableDamage().
    Status chunkIndexRows(const ChunkIndex& idx, std::vector<view::ChunkIndexRow>& rows,
                          std::vector<char>& valid) const;
    void appendIndexDamage(std::vector<TraceDamage>& out) const;
    // chunk_headers (ChunkHeaders.cpp): `own` is `copied` with the chunk's own prev_last_seq
    // and crc, read with its data; a copy that differs is a lie (noted, and the table is not
    // used again by this reader); own columns that cannot be a chunk's set `damaged`.
    void ownTail(const ChunkRef& copied, const detail::OwnTail& tail, ChunkRef& own,
                 std::string& damaged) const;
    // A decoded chunk's events per kind against its chunk_headers counts.
    void checkKindCounts(const ChunkIndex& idx, const ChunkRef& c,
                         const std::vector<Event>& events) const;
    void noteCopyLie(int64_t chunkId) const;
    void appendCopyDamage(std::vector<TraceDamage>& out) const;
    // poolSummaries' work; damage (when set) gets what does not hold up in the table.
    Result<PoolSummaries> scanPoolSummaries(std::vector<TraceDamage>* damage) const;
    Error firstDamageError(const std::string& what) const;
    // PoolBlocks.cpp: the blocks read by poolBlockSummaries() against the per-chunk rows of
    // the chunks in coveredIds (sorted), and what the two found, for tableDamage().
    void checkBlocks(const PoolSummaries& full, const std::vector<int64_t>& coveredIds) const;
    void appendBlockDamage(std::vector<TraceDamage>& out) const;

    sqlite3* db_ = nullptr;
    std::string path_;
    int schemaVersion_ = 0;
    uint64_t fileBytes_ = 0; // an image's size: bounds event_counts, like a file's size
    bool isImage_ = false;
    bool skipDamaged_ = false;
    mutable std::mutex mutex_; // guards the two below (chunks may be read on another thread)
    mutable std::shared_ptr<const ChunkIndex> index_;   // the last header scan
    mutable std::map<int64_t, TraceDamage> chunkDamage_; // found reading data, by chunk id
    bool useChunkIndex_ = true;
    // chunk_index findings (guarded by mutex_): (what, chunk id) from the last load of the
    // rows, and the rows found to disagree with their decoded chunk, by chunk id.
    mutable std::vector<std::pair<int, int64_t>> indexFindings_;
    mutable std::vector<int64_t> indexLies_;
    bool useChunkHeaders_ = true;
    bool reuseScan_ = false;
    // chunk_headers rows found to disagree with their chunk (guarded by mutex_); once one has,
    // this reader reads every chunk's own columns.
    mutable std::vector<int64_t> copyLies_;
    mutable std::atomic<bool> distrustCopy_{false};
    // pool_block_summary as poolBlockSummaries() read it, and what was found (mutex_).
    mutable std::shared_ptr<const std::vector<PoolBlockSummary>> blocks_;
    mutable std::shared_ptr<const PoolSummaries> summaries_; // with reuseScan_ (mutex_)
    // With reuseScan_ (mutex_): the chunks of index_ whose data a read found intact, shared
    // with the readers that adopt this one's scan.
    mutable std::shared_ptr<detail::VerifiedChunks> verified_;
    mutable std::string blockFinding_;
    mutable uint64_t blockDiffer_ = 0;
    mutable int64_t blockFirstDiffer_ = 0;
    mutable std::atomic<uint64_t> scans_{0}, headersFromChunkRows_{0};
    mutable std::once_flag tablesOnce_;
    mutable std::vector<TraceDamage> tableDamage_;
};

} // namespace poolscope
