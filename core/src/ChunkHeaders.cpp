// The header scan's row source and the chunk_headers table (schema.sql, issue #15): each chunk's
// prev_last_seq and crc, and its events per kind, read without touching the chunk's data.
#include "ChunkScan.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <sqlite3.h>

#include "poolscope/view/EventFilter.h"

namespace poolscope::detail {

namespace {
sqlite3_stmt* prepare(sqlite3* db, const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) {
        sqlite3_finalize(s);
        return nullptr;
    }
    return s;
}

bool hasTable(sqlite3* db, const char* name) {
    sqlite3_stmt* s = prepare(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?");
    if (!s) return false;
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    const bool yes = sqlite3_step(s) == SQLITE_ROW;
    sqlite3_finalize(s);
    return yes;
}

bool isInt(sqlite3_stmt* s, int col) { return sqlite3_column_type(s, col) == SQLITE_INTEGER; }

// first_seq, last_seq, t_min, t_max, count, kinds, codec, typeof(data), length(data) from column
// `at` on, as both the own-row and the scan's statements select them.
void readHeaderColumns(sqlite3_stmt* s, int at, RawChunkRow& r) {
    for (int col = at; col < at + 7; ++col) r.ints &= isInt(s, col);
    r.h.firstSeq = static_cast<uint64_t>(sqlite3_column_int64(s, at));
    r.h.lastSeq = static_cast<uint64_t>(sqlite3_column_int64(s, at + 1));
    r.h.tMin = sqlite3_column_int64(s, at + 2);
    r.h.tMax = sqlite3_column_int64(s, at + 3);
    r.count = sqlite3_column_int64(s, at + 4);
    r.h.count = static_cast<uint64_t>(r.count);
    r.h.kinds = static_cast<uint64_t>(sqlite3_column_int64(s, at + 5));
    r.h.codec = sqlite3_column_int64(s, at + 6);
    const auto* type = reinterpret_cast<const char*>(sqlite3_column_text(s, at + 7));
    r.isBlob = type && std::string_view(type) == "blob";
    r.bytes = static_cast<uint64_t>(sqlite3_column_int64(s, at + 8));
}
} // namespace

bool parseKindCounts(uint64_t kinds, uint64_t count, const void* bytes, size_t n,
                     std::vector<uint16_t>& out) {
    const size_t kindsSet = size_t(std::popcount(kinds));
    if (n != 2 * kindsSet || !bytes) return false;
    const auto* b = static_cast<const unsigned char*>(bytes);
    const size_t before = out.size();
    uint64_t sum = 0;
    for (size_t i = 0; i < kindsSet; ++i) {
        const uint16_t c = uint16_t(b[2 * i] | (b[2 * i + 1] << 8));
        if (c == 0 || c > schema::kChunkEvents) {
            out.resize(before);
            return false;
        }
        sum += c;
        out.push_back(c);
    }
    if (sum != count) {
        out.resize(before);
        return false;
    }
    return true;
}

ChunkRowSource::ChunkRowSource(sqlite3* db, int schemaVersion, bool useCopy) : db_(db) {
    v3_ = schemaVersion >= schema::kChunkChecksumVersion;
    const bool copy = v3_ && useCopy && hasTable(db, "chunk_headers");
    // Without the copy the scan is the one every reader made before the table existed.
    main_ = prepare(db, copy ? "SELECT id,first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                               "typeof(data),length(data) FROM event_chunks ORDER BY id"
                        : v3_ ? "SELECT id,first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                                "typeof(data),length(data),prev_last_seq,crc FROM event_chunks "
                                "ORDER BY id"
                              : "SELECT id,first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                                "typeof(data),length(data) FROM event_chunks ORDER BY id");
    ok_ = main_ != nullptr;
    if (!ok_ || !copy) return;
    if (openWide(db)) return;
    copy_ = prepare(db, "SELECT chunk,prev_last_seq,crc,kind_counts,row_crc,"
                        "typeof(chunk)='integer' AND typeof(prev_last_seq)='integer' AND "
                        "typeof(crc)='integer' AND typeof(kind_counts)='blob' AND "
                        "typeof(row_crc)='integer' FROM chunk_headers ORDER BY chunk");
    tail_ = prepare(db, "SELECT prev_last_seq,crc FROM event_chunks WHERE id=?1");
    if (!copy_ || !tail_) {
        // An altered table (a column dropped): read every chunk's own columns.
        sqlite3_finalize(copy_);
        sqlite3_finalize(tail_);
        copy_ = tail_ = nullptr;
        sqlite3_finalize(main_);
        main_ = prepare(db, "SELECT id,first_seq,last_seq,t_min,t_max,count,kinds,codec,"
                            "typeof(data),length(data),prev_last_seq,crc FROM event_chunks "
                            "ORDER BY id");
        ok_ = main_ != nullptr;
        unusable_ = true;
        return;
    }
    copyRow_ = stepCopy();
}

// The copies of every header column (since 2026-11-28): the chunk ids from the time index, the
// rest from chunk_headers. false (nothing kept): a table written before them, or without them.
bool ChunkRowSource::openWide(sqlite3* db) {
    sqlite3_stmt* first = prepare(db, "SELECT typeof(first_seq) FROM chunk_headers ORDER BY chunk "
                                      "LIMIT 1");
    const bool copied = first && sqlite3_step(first) == SQLITE_ROW &&
                        std::string_view(reinterpret_cast<const char*>(
                            sqlite3_column_text(first, 0) ? sqlite3_column_text(first, 0)
                                                          : reinterpret_cast<const unsigned char*>(
                                                                ""))) == "integer";
    sqlite3_finalize(first);
    if (!copied) return false;
    sqlite3_stmt* ids = prepare(db, "SELECT id,t_min,t_max FROM event_chunks INDEXED BY "
                                    "event_chunks_by_time");
    // Column 5 is unused (the narrow query's types column); types are checked here, per
    // column: typeof() in SQL compared 13 strings a row (~0.2 s at 1 G events).
    copy_ = prepare(db, "SELECT chunk,prev_last_seq,crc,kind_counts,row_crc,NULL,"
                        "first_seq,last_seq,t_min,t_max,count,kinds,codec,data_bytes "
                        "FROM chunk_headers ORDER BY chunk");
    own_ = prepare(db, "SELECT first_seq,last_seq,t_min,t_max,count,kinds,codec,typeof(data),"
                       "length(data),prev_last_seq,crc FROM event_chunks WHERE id=?1");
    bool ok = ids && copy_ && own_;
    int rc = SQLITE_DONE;
    while (ok && (rc = sqlite3_step(ids)) == SQLITE_ROW)
        ids_.push_back({sqlite3_column_int64(ids, 0), sqlite3_column_int64(ids, 1),
                        sqlite3_column_int64(ids, 2)});
    ok &= rc == SQLITE_DONE;
    sqlite3_finalize(ids);
    if (!ok) {
        sqlite3_finalize(copy_);
        sqlite3_finalize(own_);
        copy_ = own_ = nullptr;
        ids_.clear();
        return false;
    }
    std::sort(ids_.begin(), ids_.end(),
              [](const IndexedId& a, const IndexedId& b) { return a.id < b.id; });
    wide_ = true;
    copyRow_ = stepCopy();
    return true;
}

int ChunkRowSource::ownRow(RawChunkRow& r) {
    sqlite3_reset(own_);
    sqlite3_bind_int64(own_, 1, r.id);
    const int rc = sqlite3_step(own_);
    if (rc != SQLITE_ROW) return rc == SQLITE_DONE ? SQLITE_CORRUPT : rc;
    sqlite3_stmt* s = own_;
    // A copy used first and found lying is reported as a lie (noteCopyLie), not as bad.
    if (r.copy == RawChunkRow::kUsed) r.copy = RawChunkRow::kNotRead;
    r.ints = true;
    r.fromCopy = false;
    r.kindCounts.clear();
    readHeaderColumns(s, 0, r);
    r.ints &= isInt(s, 9) && isInt(s, 10);
    r.h.prevLastSeq = static_cast<uint64_t>(sqlite3_column_int64(s, 9));
    r.crc = sqlite3_column_int64(s, 10);
    return SQLITE_ROW;
}

int ChunkRowSource::nextWide(RawChunkRow& r) {
    if (at_ >= ids_.size()) return SQLITE_DONE;
    const IndexedId x = ids_[at_++];
    r = RawChunkRow{};
    r.id = x.id;
    while (copyRow_ && sqlite3_column_int64(copy_, 0) < r.id) copyRow_ = stepCopy();
    bool used = false, seen = false;
    if (copyRow_ && sqlite3_column_int64(copy_, 0) == r.id) {
        seen = true;
        sqlite3_stmt* c = copy_;
        RawChunkRow w = r;
        w.h.firstSeq = static_cast<uint64_t>(sqlite3_column_int64(c, 6));
        w.h.lastSeq = static_cast<uint64_t>(sqlite3_column_int64(c, 7));
        w.h.tMin = sqlite3_column_int64(c, 8);
        w.h.tMax = sqlite3_column_int64(c, 9);
        w.count = sqlite3_column_int64(c, 10);
        w.h.count = static_cast<uint64_t>(w.count);
        w.h.kinds = static_cast<uint64_t>(sqlite3_column_int64(c, 11));
        w.h.codec = sqlite3_column_int64(c, 12);
        w.bytes = static_cast<uint64_t>(sqlite3_column_int64(c, 13));
        w.isBlob = true; // its length is the copy's, under row_crc; the data read checks the rest
        const int64_t prev = sqlite3_column_int64(c, 1), crc = sqlite3_column_int64(c, 2);
        std::vector<uint16_t> kc;
        // The index's times are the chunk row's own: a copy that names others is not its.
        bool types = sqlite3_column_type(c, 3) == SQLITE_BLOB;
        for (int col : {0, 1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13}) types &= isInt(c, col);
        used = types && w.h.tMin == x.tMin && w.h.tMax == x.tMax &&
               copyRowHolds(w, prev, crc, sqlite3_column_int64(c, 4), sqlite3_column_blob(c, 3),
                            sqlite3_column_bytes(c, 3), kc);
        if (used) {
            w.h.prevLastSeq = static_cast<uint64_t>(prev);
            w.crc = crc;
            w.kindCounts = std::move(kc);
            r = std::move(w);
        }
        copyRow_ = stepCopy();
        while (copyRow_ && sqlite3_column_int64(copy_, 0) == r.id) {
            used = false;
            r = RawChunkRow{};
            r.id = x.id;
            copyRow_ = stepCopy();
        }
    }
    if (used) {
        r.fromCopy = true;
        r.copy = RawChunkRow::kUsed;
        return SQLITE_ROW;
    }
    r.copy = seen ? RawChunkRow::kBad : RawChunkRow::kMissing;
    return ownRow(r);
}

ChunkRowSource::~ChunkRowSource() {
    sqlite3_finalize(own_);
    sqlite3_finalize(main_);
    sqlite3_finalize(copy_);
    sqlite3_finalize(tail_);
}

bool ChunkRowSource::stepCopy() { return sqlite3_step(copy_) == SQLITE_ROW; }

bool ChunkRowSource::copyRowHolds(const RawChunkRow& r, int64_t prev, int64_t crc, int64_t rowCrc,
                                  const void* counts, int countBytes,
                                  std::vector<uint16_t>& out) const {
    if (!r.ints || !r.isBlob || crc < 0 || crc > int64_t{0xFFFFFFFF} || rowCrc < 0 ||
        rowCrc > int64_t{0xFFFFFFFF} || countBytes < 0)
        return false;
    schema::ChunkHeader h = r.h;
    h.prevLastSeq = static_cast<uint64_t>(prev);
    const std::string_view kc(static_cast<const char*>(counts ? counts : ""), size_t(countBytes));
    if (schema::chunkHeaderRowChecksum(h, uint32_t(crc), r.bytes, kc) != uint32_t(rowCrc))
        return false;
    return parseKindCounts(h.kinds, h.count, kc.data(), kc.size(), out);
}

// The chunk's own prev_last_seq and crc (a lookup by id: its data's overflow pages are read).
int ChunkRowSource::ownTail(RawChunkRow& r) {
    sqlite3_reset(tail_);
    sqlite3_bind_int64(tail_, 1, r.id);
    const int rc = sqlite3_step(tail_);
    if (rc != SQLITE_ROW) return rc == SQLITE_DONE ? SQLITE_CORRUPT : rc;
    r.ints &= isInt(tail_, 0) && isInt(tail_, 1);
    r.h.prevLastSeq = static_cast<uint64_t>(sqlite3_column_int64(tail_, 0));
    r.crc = sqlite3_column_int64(tail_, 1);
    return SQLITE_ROW;
}

int ChunkRowSource::next(RawChunkRow& r) {
    if (wide_) return nextWide(r);
    const int rc = sqlite3_step(main_);
    if (rc != SQLITE_ROW) return rc;
    sqlite3_stmt* s = main_;
    r = RawChunkRow{};
    r.id = sqlite3_column_int64(s, 0);
    r.ints = isInt(s, 0);
    readHeaderColumns(s, 1, r);
    if (!copy_) {
        if (v3_) {
            r.ints &= isInt(s, 10) && isInt(s, 11);
            r.h.prevLastSeq = static_cast<uint64_t>(sqlite3_column_int64(s, 10));
            r.crc = sqlite3_column_int64(s, 11);
        }
        return SQLITE_ROW;
    }
    // Both tables in id order: the copy's cursor only moves forward.
    while (copyRow_ && sqlite3_column_int64(copy_, 0) < r.id) copyRow_ = stepCopy();
    bool used = false, seen = false;
    if (copyRow_ && sqlite3_column_int64(copy_, 0) == r.id) {
        seen = true;
        const bool types = sqlite3_column_int(copy_, 5) != 0;
        const int64_t prev = sqlite3_column_int64(copy_, 1), crc = sqlite3_column_int64(copy_, 2);
        const int64_t rowCrc = sqlite3_column_int64(copy_, 4);
        const void* counts = sqlite3_column_blob(copy_, 3);
        const int countBytes = sqlite3_column_bytes(copy_, 3);
        std::vector<uint16_t> kc;
        used = types && copyRowHolds(r, prev, crc, rowCrc, counts, countBytes, kc);
        if (used) {
            r.h.prevLastSeq = static_cast<uint64_t>(prev);
            r.crc = crc;
            r.kindCounts = std::move(kc);
        }
        // A second row for the chunk (a table rebuilt without its key): neither is used.
        copyRow_ = stepCopy();
        while (copyRow_ && sqlite3_column_int64(copy_, 0) == r.id) {
            used = false;
            r.kindCounts.clear();
            copyRow_ = stepCopy();
        }
    }
    if (used) {
        r.fromCopy = true;
        r.copy = RawChunkRow::kUsed;
        return SQLITE_ROW;
    }
    r.copy = seen ? RawChunkRow::kBad : RawChunkRow::kMissing;
    return ownTail(r);
}

} // namespace poolscope::detail

namespace poolscope::detail {

bool readOwnTail(sqlite3* db, int64_t id, OwnTail& t) {
    sqlite3_stmt* s = prepare(db, "SELECT prev_last_seq,crc FROM event_chunks WHERE id=?1");
    if (!s) return false;
    sqlite3_bind_int64(s, 1, id);
    const bool ok = sqlite3_step(s) == SQLITE_ROW;
    if (ok) {
        t.read = true;
        t.ints = isInt(s, 0) && isInt(s, 1);
        t.prev = sqlite3_column_int64(s, 0);
        t.crc = sqlite3_column_int64(s, 1);
    }
    sqlite3_finalize(s);
    return ok;
}

void readOwnHeader(sqlite3_stmt* s, int col, OwnTail& t) {
    t.header = true;
    for (int i = 0; i < 7; ++i) {
        t.ints &= isInt(s, col + i);
        t.words[i] = sqlite3_column_int64(s, col + i);
    }
}

void crossCheckKindCounts(TraceReader::ChunkIndex& idx) {
    uint64_t sums[64] = {};
    bool all = true;
    for (const TraceReader::ChunkRef& c : idx.chunks) {
        if (c.kindCountsAt == UINT32_MAX) {
            all = false;
            continue;
        }
        size_t i = c.kindCountsAt;
        for (uint64_t rest = c.h.kinds; rest; rest &= rest - 1, ++i)
            sums[std::countr_zero(rest)] += idx.kindCounts[i];
    }
    // Exact only when nothing was refused and event_counts agrees with the chunks: a refused
    // chunk's events are in the table but in no kept chunk.
    all &= idx.damage.empty();
    bool ok = true;
    for (unsigned k = 0; k < 64; ++k) {
        const auto it = idx.counts.find(static_cast<EventKind>(k));
        const uint64_t table = it == idx.counts.end() ? 0 : it->second;
        ok &= all ? sums[k] == table : sums[k] <= table;
    }
    if (ok) return;
    idx.kindCountsDisagree = true;
    idx.kindCounts.clear();
    for (TraceReader::ChunkRef& c : idx.chunks) c.kindCountsAt = UINT32_MAX;
}

uint64_t countKinds(const std::vector<uint16_t>& counts, uint32_t at, uint64_t kinds,
                    uint64_t mask) {
    uint64_t n = 0;
    size_t i = at;
    for (uint64_t rest = kinds; rest; rest &= rest - 1, ++i)
        if (mask & kinds & (rest & -rest) && i < counts.size()) n += counts[i];
    return n;
}

} // namespace poolscope::detail

namespace poolscope {

void TraceReader::noteCopyLie(int64_t chunkId) const {
    distrustCopy_ = true;
    std::lock_guard lock(mutex_);
    if (std::find(copyLies_.begin(), copyLies_.end(), chunkId) == copyLies_.end())
        copyLies_.push_back(chunkId);
}

void TraceReader::ownTail(const ChunkRef& copied, const detail::OwnTail& tail, ChunkRef& own,
                          std::string& damaged) const {
    own = copied;
    own.fromCopy = false;
    const schema::ChunkHeader& h = copied.h;
    const int64_t words[7] = {int64_t(h.firstSeq), int64_t(h.lastSeq), h.tMin, h.tMax,
                              int64_t(h.count), int64_t(h.kinds), h.codec};
    const bool sameHeader = !tail.header || std::equal(words, words + 7, tail.words);
    if (tail.ints && sameHeader && tail.prev == static_cast<int64_t>(copied.h.prevLastSeq) &&
        tail.crc == int64_t{copied.crc})
        return;
    // The copy said otherwise: the chunk is read as its own columns say (what a reader without
    // the table would have found), and the copy is reported unless the chunk itself is damaged.
    noteCopyLie(copied.id);
    const std::string name = "event chunk " + std::to_string(copied.id);
    if (!tail.ints)
        damaged = name + ": a header column is not an integer";
    else if (tail.header && !sameHeader) {
        // The chunk's own header, checked as a scan of its row checks it.
        detail::RawChunkRow r;
        r.id = copied.id;
        r.h = copied.h;
        r.h.firstSeq = uint64_t(tail.words[0]);
        r.h.lastSeq = uint64_t(tail.words[1]);
        r.h.tMin = tail.words[2];
        r.h.tMax = tail.words[3];
        r.count = tail.words[4];
        r.h.count = uint64_t(tail.words[4]);
        r.h.kinds = uint64_t(tail.words[5]);
        r.h.codec = tail.words[6];
        r.h.prevLastSeq = uint64_t(tail.prev);
        r.crc = tail.crc;
        r.isBlob = tail.isBlob;
        r.bytes = tail.bytes;
        auto why = detail::headerRefusal(r, schemaVersion_);
        if (!why.first.empty()) {
            damaged = why.first;
            std::lock_guard lock(mutex_);
            chunkDamage_.emplace(copied.id, TraceDamage{damaged, why.second});
            return;
        }
    }
    else if (tail.crc < 0 || tail.crc > int64_t{0xFFFFFFFF})
        damaged = name + " (seq " + std::to_string(copied.h.firstSeq) + ".." +
                  std::to_string(copied.h.lastSeq) + ", " + std::to_string(copied.h.count) +
                  " events): its checksum value is out of range";
    if (!damaged.empty()) {
        std::lock_guard lock(mutex_);
        chunkDamage_.emplace(copied.id, TraceDamage{damaged, copied.h.count});
        return;
    }
    own.h.prevLastSeq = static_cast<uint64_t>(tail.prev);
    own.crc = static_cast<uint32_t>(tail.crc);
    if (tail.header) {
        // The chunk's own header (its checksum and its events decide whether it holds).
        own.h.firstSeq = uint64_t(tail.words[0]);
        own.h.lastSeq = uint64_t(tail.words[1]);
        own.h.tMin = tail.words[2];
        own.h.tMax = tail.words[3];
        own.h.count = uint64_t(tail.words[4]);
        own.h.kinds = uint64_t(tail.words[5]);
        own.h.codec = tail.words[6];
        if (own.h.kinds != copied.h.kinds) own.kindCountsAt = UINT32_MAX;
    }
}

void TraceReader::checkKindCounts(const ChunkIndex& idx, const ChunkRef& c,
                                  const std::vector<Event>& events) const {
    if (c.kindCountsAt == UINT32_MAX) return;
    uint16_t seen[64] = {};
    for (const Event& e : events) ++seen[static_cast<unsigned>(e.kind) & 63];
    size_t i = c.kindCountsAt;
    for (uint64_t rest = c.h.kinds; rest; rest &= rest - 1, ++i) {
        const unsigned k = unsigned(std::countr_zero(rest));
        if (i >= idx.kindCounts.size() || idx.kindCounts[i] != seen[k]) {
            noteCopyLie(c.id);
            return;
        }
    }
}

void TraceReader::appendCopyDamage(std::vector<TraceDamage>& out) const {
    std::lock_guard lock(mutex_);
    uint64_t missing = 0, bad = 0, lies = 0;
    int64_t firstMissing = 0, firstBad = 0, firstLie = 0;
    // A row of a chunk found damaged is not reported again: the chunk's damage says it.
    if (index_) {
        for (const auto& [what, id] : index_->copyFindings) {
            if (chunkDamage_.count(id)) continue;
            if (what == detail::RawChunkRow::kMissing && !missing++) firstMissing = id;
            if (what == detail::RawChunkRow::kBad && !bad++) firstBad = id;
        }
        if (index_->kindCountsDisagree)
            out.push_back({"chunk_headers: the events per kind of its rows do not add up to "
                           "event_counts (rewritten rows, or event_counts damaged): filters "
                           "decode chunks instead of counting", 0});
        if (index_->copyUnusable)
            out.push_back({"the chunk_headers table cannot be read: every chunk header is read "
                           "from its event chunk (slower to open)", 0});
    }
    for (int64_t id : copyLies_)
        if (!chunkDamage_.count(id) && !lies++) firstLie = id;
    const std::string slower = ": those headers are read from their event chunks (slower)";
    if (bad)
        out.push_back({"chunk_headers: " + std::to_string(bad) + " row(s) do not match their "
                       "event chunk (e.g. chunk " + std::to_string(firstBad) + ")" + slower, 0});
    if (missing)
        out.push_back({"chunk_headers has no row for " + std::to_string(missing) +
                           " event chunk(s) (e.g. chunk " + std::to_string(firstMissing) + ")" +
                           slower, 0});
    if (lies)
        out.push_back({"chunk_headers: " + std::to_string(lies) + " row(s) pass their checksum "
                       "but disagree with their event chunk (rewritten; e.g. chunk " +
                           std::to_string(firstLie) + "): the chunks were read as they are, "
                           "and this reader stopped using the table",
                       0});
}

Result<uint64_t> TraceReader::countMatching(const view::EventFilter& filter,
                                            FilteredReadStats* stats) const {
    FilteredReadStats local;
    FilteredReadStats& counts = stats ? *stats : local;
    const uint64_t before = counts.matched;
    Status st = forEachMatchingChunk(filter, [](std::vector<Event>&) { return true; }, &counts,
                                     FilteredReadOptions{0, true});
    if (!st) return st.error();
    return counts.matched - before;
}

} // namespace poolscope
