#pragma once
// The reader's view of the event chunk rows (TraceReader's header scan), shared by
// TraceReader.cpp and ChunkHeaders.cpp. Private to core.

#include <atomic>
#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "poolscope/Schema.h"
#include "poolscope/TraceReader.h"

struct sqlite3;
struct sqlite3_stmt;

namespace poolscope {

struct TraceReader::ChunkRef {
    int64_t id = 0;
    schema::ChunkHeader h;
    uint32_t crc = 0;
    // h.prevLastSeq and crc came from the chunk's chunk_headers row, not from its own columns:
    // a read of its data reads them too, and its own win (TraceReader::ownTail).
    bool fromCopy = false;
    uint32_t kindCountsAt = UINT32_MAX; // its counts in ChunkIndex::kindCounts; none: UINT32_MAX
};

struct TraceReader::ChunkIndex {
    std::vector<ChunkRef> chunks; // rows whose headers hold up, in seq order
    bool byRowid = true;          // id order is seq order (rows as the writer left them)
    std::vector<TraceDamage> damage; // found in the headers and event_counts
    std::vector<bool> lossless;      // per damage: every event still reads (nothing lost)
    std::map<EventKind, uint64_t> counts; // event_counts, as stored (valid rows, count > 0)
    // Per chunk with a usable chunk_headers row, its events of each kind set in its header's
    // kinds, lowest kind first (popcount(kinds) entries from kindCountsAt).
    std::vector<uint16_t> kindCounts;
    // chunk_headers rows of kept chunks that are missing or fail their checks: (kMissing or
    // kBad, chunk id); unusable: the table could not be read.
    std::vector<std::pair<uint8_t, int64_t>> copyFindings;
    bool copyUnusable = false;
    // The kind counts, summed per kind, disagree with event_counts: none is used.
    bool kindCountsDisagree = false;
};

namespace detail {
// The chunks of one header scan whose data's checksum (and own header, against a chunk_headers
// copy) held when a filtered read read them. Readers that share the scan of the unchanged file
// then answer a kind filter's count for those chunks from their kind counts alone: the window's
// events table opens a reader per query, and each count read every chunk's data again (0.5 s of
// a 100 M-event trace's 0.55 s).
struct VerifiedChunks {
    VerifiedChunks(std::shared_ptr<const TraceReader::ChunkIndex> i, size_t n) : of(std::move(i)), ok(n) {}
    std::shared_ptr<const TraceReader::ChunkIndex> of; // positions are into this scan's chunks
    std::vector<std::atomic<uint8_t>> ok;
};
} // namespace detail

struct TraceReader::SharedScan {
    std::shared_ptr<const ChunkIndex> index;
    std::shared_ptr<const PoolSummaries> summaries;
    std::shared_ptr<detail::VerifiedChunks> verified; // of index, or null
    std::string path;
    int64_t size = -1, mtimeNs = -1; // the file's when taken
};

namespace detail {

// A chunk's own prev_last_seq and crc, read with its data (read: only for a chunk whose scan
// took them from chunk_headers).
struct OwnTail {
    bool read = false;
    bool ints = true;
    int64_t prev = 0, crc = 0;
    // first_seq, last_seq, t_min, t_max, count, kinds, codec as read with the data (header:
    // read; the scan may have taken them from chunk_headers too).
    bool header = false;
    int64_t words[7] = {};
    bool isBlob = true;  // the data's type and length, as read
    uint64_t bytes = 0;
};

// One event_chunks row's header columns as read, before any check.
struct RawChunkRow {
    int64_t id = 0;
    bool ints = true; // every header column is an integer
    schema::ChunkHeader h;
    int64_t count = 0;
    bool isBlob = false;
    uint64_t bytes = 0; // length(data)
    int64_t crc = 0;
    bool fromCopy = false; // prev_last_seq and crc from chunk_headers
    // The chunk's chunk_headers row: none read (no table, or not used), missing, or failing its
    // checks (row_crc, types, counts; listed twice).
    enum Copy : uint8_t { kNotRead, kUsed, kMissing, kBad } copy = kNotRead;
    std::vector<uint16_t> kindCounts; // from the chunk_headers row, when fromCopy
};

// Reads every event_chunks row's header columns in id order. In a format-3 trace with a
// chunk_headers table (and useCopy), prev_last_seq and crc, which SQLite stores after the data
// and reaches only through the data's overflow pages, come from the chunk's row in that table
// once it holds up against the row's other columns; otherwise (and for a chunk whose row does
// not) from event_chunks, as a reader without the table reads them.
class ChunkRowSource {
public:
    ChunkRowSource(sqlite3* db, int schemaVersion, bool useCopy);
    ~ChunkRowSource();
    ChunkRowSource(const ChunkRowSource&) = delete;
    ChunkRowSource& operator=(const ChunkRowSource&) = delete;
    bool ok() const { return ok_; }
    // SQLITE_ROW with r filled, SQLITE_DONE at the end, or SQLite's error code.
    int next(RawChunkRow& r);
    // The table is there but cannot be read as written (a column dropped): every chunk's own
    // columns are read.
    bool copyUnusable() const { return unusable_; }
    // The chunk ids came from event_chunks_by_time and every usable header from chunk_headers:
    // no page of event_chunks was read for them.
    bool wide() const { return wide_; }
    // wide: r's header from its own event_chunks row (a copy that did not hold, or lied).
    int ownRow(RawChunkRow& r);

private:
    bool stepCopy();
    bool copyRowHolds(const RawChunkRow& r, int64_t prev, int64_t crc, int64_t rowCrc,
                      const void* counts, int countBytes, std::vector<uint16_t>& out) const;
    int ownTail(RawChunkRow& r);
    bool openWide(sqlite3* db);
    int nextWide(RawChunkRow& r);

    sqlite3* db_ = nullptr;
    bool v3_ = false;
    bool ok_ = false;
    sqlite3_stmt* main_ = nullptr;
    sqlite3_stmt* copy_ = nullptr;  // chunk_headers in chunk order; null: not used
    sqlite3_stmt* tail_ = nullptr;  // one row's prev_last_seq and crc, for chunks without a copy
    bool copyRow_ = false;          // copy_ stands on a row
    bool unusable_ = false;
    bool wide_ = false;
    struct IndexedId {
        int64_t id, tMin, tMax;
    };
    std::vector<IndexedId> ids_; // wide: every chunk row's id and times, by id
    size_t at_ = 0;
    sqlite3_stmt* own_ = nullptr; // wide: one chunk's header columns by id
};

// The events per kind of a chunk_headers row (kind_counts) for a header's kinds: false when
// the bytes cannot be that (wrong length, a zero count, a sum other than count).
bool parseKindCounts(uint64_t kinds, uint64_t count, const void* bytes, size_t n,
                     std::vector<uint16_t>& out);

// Why a chunk row's header cannot be a chunk's in a trace of this format (empty when it can),
// and the events that costs.
std::pair<std::string, uint64_t> headerRefusal(const RawChunkRow& r, int schemaVersion);

// A chunk's own prev_last_seq and crc, looked up by id (its data's overflow pages are read);
// false when the row cannot be read.
bool readOwnTail(sqlite3* db, int64_t id, OwnTail& t);

// The header columns a data read selects after prev_last_seq and crc (they lie before the data
// in the row: free), and their reading into t from column `col` on.
#define POOLSCOPE_OWN_HEADER "first_seq,last_seq,t_min,t_max,count,kinds,codec"
void readOwnHeader(sqlite3_stmt* s, int col, OwnTail& t);

// The kind counts of idx's chunks against event_counts (idx->counts): the writer keeps both
// from the same events, so per kind the chunks' counts sum to at most the table's (exactly its,
// when every chunk has counts and the scan found no damage). Otherwise no count is used
// (kindCountsDisagree).
void crossCheckKindCounts(TraceReader::ChunkIndex& idx);

// A chunk's events of the kinds in mask (bit 1 << kind), from its kind counts at `at`.
uint64_t countKinds(const std::vector<uint16_t>& counts, uint32_t at, uint64_t kinds,
                    uint64_t mask);

} // namespace detail
} // namespace poolscope
