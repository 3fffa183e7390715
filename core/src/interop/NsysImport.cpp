// Nsight Systems SQLite export -> PoolScope trace (interop/NsysImport.h; docs/INTEROP.md lists
// the documented columns used and what each becomes).

#include "poolscope/interop/NsysImport.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "poolscope/EventFields.h"
#include "poolscope/Schema.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Units.h"

namespace poolscope::interop {

namespace {

struct Db {
    sqlite3* db = nullptr;
    ~Db() {
        if (db) sqlite3_close(db);
    }
};

struct Stmt {
    sqlite3_stmt* s = nullptr;
    ~Stmt() {
        if (s) sqlite3_finalize(s);
    }
};

Error err(ErrorCode c, std::string m) { return Error{c, std::move(m)}; }

bool hasTable(sqlite3* db, const char* name) {
    Stmt st;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", -1, &st.s,
                           nullptr) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st.s, 1, name, -1, SQLITE_STATIC);
    return sqlite3_step(st.s) == SQLITE_ROW;
}

std::set<std::string> columnsOf(sqlite3* db, const std::string& table) {
    std::set<std::string> cols;
    Stmt st;
    if (sqlite3_prepare_v2(db, ("PRAGMA table_info(" + table + ")").c_str(), -1, &st.s, nullptr) != SQLITE_OK)
        return cols;
    while (sqlite3_step(st.s) == SQLITE_ROW)
        if (auto* t = sqlite3_column_text(st.s, 1)) cols.insert(reinterpret_cast<const char*>(t));
    return cols;
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// An ENUM_* table: id -> "NAME|LABEL" upper-cased, so a symbol is matched by name or label.
Result<std::map<int64_t, std::string>> readEnum(sqlite3* db, const char* table) {
    std::map<int64_t, std::string> out;
    if (!hasTable(db, table)) return out;
    const auto cols = columnsOf(db, table);
    const std::string name = cols.count("name") ? "name" : "''";
    const std::string label = cols.count("label") ? "label" : "''";
    if (!cols.count("id")) return err(ErrorCode::Corrupt, std::string(table) + " has no id column");
    Stmt st;
    const std::string sql = "SELECT id, " + name + ", " + label + " FROM " + table;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
        return err(ErrorCode::Corrupt, std::string("cannot read ") + table + ": " + sqlite3_errmsg(db));
    while (sqlite3_step(st.s) == SQLITE_ROW) {
        auto text = [&](int c) {
            auto* t = sqlite3_column_text(st.s, c);
            return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
        };
        out[sqlite3_column_int64(st.s, 0)] = upper(text(1) + "|" + text(2));
    }
    return out;
}

// The ids whose symbol or label contains `word` (and none of `unless`).
std::set<int64_t> idsWith(const std::map<int64_t, std::string>& e, const std::string& word,
                          const std::vector<std::string>& unless = {}) {
    std::set<int64_t> ids;
    for (auto& [id, text] : e) {
        if (text.find(word) == std::string::npos) continue;
        bool excluded = false;
        for (const std::string& u : unless) excluded = excluded || text.find(u) != std::string::npos;
        if (!excluded) ids.insert(id);
    }
    return ids;
}

std::optional<int64_t> colInt(sqlite3_stmt* s, int c) {
    if (c < 0 || sqlite3_column_type(s, c) == SQLITE_NULL) return std::nullopt;
    return sqlite3_column_int64(s, c);
}

// Nsight Systems serializes a process id into globalPid's bits 24..47 (its docs' example
// "Serialized process and thread identifiers").
std::string hexOf(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

int64_t pidOf(int64_t globalPid) { return (globalPid >> 24) & 0xFFFFFF; }

struct Row {
    int64_t ts = 0;
    int order = 0;     // pool events before usage events at one timestamp
    uint64_t rowid = 0;
    Event e;
};

} // namespace

Result<NsysImportStats> importNsysSqlite(const std::string& path, const std::string& outPath,
                                         const NsysImportOptions& options) {
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0) return err(ErrorCode::NotFound, "'" + path + "' does not exist");
    if (!S_ISREG(sb.st_mode)) return err(ErrorCode::NotReadable, "'" + path + "' is not a file");
    Db db;
    if (sqlite3_open_v2(path.c_str(), &db.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
        return err(ErrorCode::NotReadable, "cannot open '" + path + "': " + sqlite3_errmsg(db.db));
    {
        Stmt st;
        if (sqlite3_prepare_v2(db.db, "PRAGMA application_id", -1, &st.s, nullptr) != SQLITE_OK ||
            sqlite3_step(st.s) != SQLITE_ROW)
            return err(ErrorCode::NotSqlite, "'" + path + "' is not an SQLite file (is it the .nsys-rep "
                                             "report? export it first: nsys export --type sqlite REPORT.nsys-rep)");
        if (sqlite3_column_int(st.s, 0) == schema::kApplicationId)
            return err(ErrorCode::NotATrace, "'" + path + "' is already a PoolScope trace: open it directly");
    }
    if (!hasTable(db.db, "StringIds"))
        return err(ErrorCode::NotATrace, "'" + path + "' is an SQLite file but not an Nsight Systems export "
                                         "(it has no StringIds table)");
    if (!hasTable(db.db, "CUDA_GPU_MEMORY_USAGE_EVENTS"))
        return err(ErrorCode::MissingTables,
                   "'" + path + "' has no CUDA_GPU_MEMORY_USAGE_EVENTS table: the report was recorded "
                                "without CUDA memory usage tracing (record with nsys profile "
                                "--trace=cuda --cuda-memory-usage=true)");
    auto oper = readEnum(db.db, "ENUM_CUDA_DEV_MEM_EVENT_OPER");
    auto memKind = readEnum(db.db, "ENUM_CUDA_MEM_KIND");
    auto poolOper = readEnum(db.db, "ENUM_CUDA_MEMPOOL_OPER");
    auto poolType = readEnum(db.db, "ENUM_CUDA_MEMPOOL_TYPE");
    for (auto* e : {&oper, &memKind, &poolOper, &poolType})
        if (!*e) return e->error();
    if (oper->empty())
        return err(ErrorCode::MissingTables, "'" + path + "' has no ENUM_CUDA_DEV_MEM_EVENT_OPER table: "
                                             "allocations cannot be told from frees");
    const std::set<int64_t> freeOps = idsWith(*oper, "DEALLOC");
    const std::set<int64_t> allocOps = idsWith(*oper, "ALLOC", {"DEALLOC"});
    if (freeOps.empty() || allocOps.empty())
        return err(ErrorCode::Corrupt, "ENUM_CUDA_DEV_MEM_EVENT_OPER names no allocation or no "
                                       "deallocation operation");
    // Device memory kinds; an export without the kind enumeration is read as all-device (the
    // pool columns below decide what is a pool allocation).
    const std::set<int64_t> deviceKinds = idsWith(*memKind, "DEVICE", {"STATIC"});

    const auto cols = columnsOf(db.db, "CUDA_GPU_MEMORY_USAGE_EVENTS");
    for (const char* required : {"start", "globalPid", "deviceId", "address", "bytes", "memKind",
                                 "memoryOperationType"})
        if (!cols.count(required))
            return err(ErrorCode::MissingTables, std::string("CUDA_GPU_MEMORY_USAGE_EVENTS has no ") +
                                                     required + " column");
    auto opt = [&](const char* c) { return cols.count(c) ? std::string(c) : std::string("NULL"); };
    const std::string sql =
        "SELECT rowid, start, globalPid, deviceId, address, bytes, memKind, memoryOperationType, " +
        opt("correlationId") + ", " + opt("streamId") + ", " + opt("localMemoryPoolAddress") + ", " +
        opt("localMemoryPoolReleaseThreshold") + ", " + opt("localMemoryPoolSize") + ", " +
        opt("localMemoryPoolUtilizedSize") + ", " + opt("importedMemoryPoolAddress") +
        " FROM CUDA_GPU_MEMORY_USAGE_EVENTS ORDER BY start, rowid";

    NsysImportStats stats;
    std::vector<Row> rows;
    std::map<int64_t, uint64_t> perPid; // pid -> pool rows
    std::map<uint64_t, PoolInfo> pools;
    std::map<uint64_t, std::set<uint64_t>> thresholds; // pool -> values seen
    std::set<std::pair<uint64_t, int>> streams;         // (stream id, device)
    std::set<int> devices;
    {
        Stmt st;
        if (sqlite3_prepare_v2(db.db, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
            return err(ErrorCode::Corrupt, std::string("cannot read CUDA_GPU_MEMORY_USAGE_EVENTS: ") +
                                               sqlite3_errmsg(db.db));
        int rc;
        while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
            const int64_t rowid = sqlite3_column_int64(st.s, 0);
            auto where = [&] { return "CUDA_GPU_MEMORY_USAGE_EVENTS row " + std::to_string(rowid) + ": "; };
            const int64_t start = sqlite3_column_int64(st.s, 1);
            const int64_t gpid = sqlite3_column_int64(st.s, 2);
            const int64_t dev = sqlite3_column_int64(st.s, 3);
            const int64_t bytes = sqlite3_column_int64(st.s, 5);
            const int64_t kind = sqlite3_column_int64(st.s, 6);
            const int64_t op = sqlite3_column_int64(st.s, 7);
            const auto localPool = colInt(st.s, 10);
            const auto importedPool = colInt(st.s, 14);
            if (start < 0) return err(ErrorCode::Corrupt, where() + "negative start time " + std::to_string(start));
            if (bytes < 0) return err(ErrorCode::Corrupt, where() + "negative size " + std::to_string(bytes));
            if (dev < 0 || dev > 4096) return err(ErrorCode::Corrupt, where() + "device " + std::to_string(dev) + " is not a device id");
            const bool isFree = freeOps.count(op) != 0;
            if (!isFree && !allocOps.count(op))
                return err(ErrorCode::Corrupt, where() + "operation type " + std::to_string(op) +
                                                   " is not in ENUM_CUDA_DEV_MEM_EVENT_OPER");
            const bool device = memKind->empty() || deviceKinds.count(kind);
            const uint64_t pool = static_cast<uint64_t>(localPool && *localPool ? *localPool
                                                        : importedPool ? *importedPool : 0);
            if (!device || pool == 0) {
                ++stats.skippedNonPool;
                continue;
            }
            const int64_t pid = pidOf(gpid);
            if (options.pid && pid != options.pid) continue;
            ++perPid[pid];
            Row r;
            r.ts = start;
            r.order = 1;
            r.rowid = static_cast<uint64_t>(rowid);
            Event& e = r.e;
            e.tsNs = start;
            e.device = static_cast<int16_t>(dev);
            e.pool = pool;
            e.ptr = static_cast<uint64_t>(sqlite3_column_int64(st.s, 4));
            e.correlation = static_cast<uint32_t>(colInt(st.s, 8).value_or(0));
            e.stream = static_cast<uint64_t>(colInt(st.s, 9).value_or(0));
            if (isFree) {
                FreeFields{e.ptr, static_cast<uint64_t>(bytes)}.into(e);
            } else {
                if (e.ptr == 0 && bytes > 0)
                    return err(ErrorCode::Corrupt, where() + "an allocation of " +
                                                       formatBytes(uint64_t(bytes)) + " at address 0");
                AllocFields{e.ptr, static_cast<uint64_t>(bytes), AllocApi::Async}.into(e);
            }
            const auto size = colInt(st.s, 12), utilized = colInt(st.s, 13);
            if (size && utilized) {
                if (*size < 0 || *utilized < 0)
                    return err(ErrorCode::Corrupt, where() + "negative pool size");
                if (*utilized > *size)
                    return err(ErrorCode::Corrupt, where() + "the pool's utilized size (" +
                                                       formatBytes(uint64_t(*utilized)) + ") is above its size (" +
                                                       formatBytes(uint64_t(*size)) + ")");
                e.reserved = static_cast<uint64_t>(*size);
                e.used = static_cast<uint64_t>(*utilized);
                e.flags |= kHasWatermarks;
            }
            if (auto th = colInt(st.s, 11)) thresholds[pool].insert(static_cast<uint64_t>(*th));
            PoolInfo& p = pools[pool];
            p.handle = pool;
            p.device = static_cast<int>(dev);
            if (!(localPool && *localPool)) p.kind = PoolKind::Imported;
            streams.insert({e.stream, static_cast<int>(dev)});
            devices.insert(static_cast<int>(dev));
            isFree ? ++stats.frees : ++stats.allocations;
            rows.push_back(r);
        }
        if (rc != SQLITE_DONE)
            return err(ErrorCode::Corrupt, std::string("reading CUDA_GPU_MEMORY_USAGE_EVENTS failed: ") +
                                               sqlite3_errmsg(db.db));
    }
    if (perPid.size() > 1) {
        std::string list;
        for (auto& [pid, n] : perPid) list += (list.empty() ? "" : ", ") + std::to_string(pid);
        return err(ErrorCode::InvalidArgument, "'" + path + "' holds pool allocations of " +
                                                   std::to_string(perPid.size()) + " processes (pids " + list +
                                                   "): choose one with --pid");
    }
    if (perPid.empty())
        return err(ErrorCode::InvalidArgument,
                   options.pid ? "'" + path + "' has no pool allocations of pid " + std::to_string(options.pid)
                               : "'" + path + "' has no allocations from stream-ordered pools (cudaMallocAsync); " +
                                     std::to_string(stats.skippedNonPool) + " other allocations and frees were found");
    stats.pid = perPid.begin()->first;

    // Pool creation, destruction and trims.
    if (hasTable(db.db, "CUDA_GPU_MEMORY_POOL_EVENTS")) {
        const auto pc = columnsOf(db.db, "CUDA_GPU_MEMORY_POOL_EVENTS");
        for (const char* required : {"start", "globalPid", "deviceId", "address", "operationType"})
            if (!pc.count(required))
                return err(ErrorCode::MissingTables, std::string("CUDA_GPU_MEMORY_POOL_EVENTS has no ") +
                                                         required + " column");
        auto o = [&](const char* c) { return pc.count(c) ? std::string(c) : std::string("NULL"); };
        const std::string psql = "SELECT rowid, start, globalPid, deviceId, address, operationType, " +
                                 o("poolType") + ", " + o("correlationId") + ", " + o("minBytesToKeep") +
                                 ", " + o("localMemoryPoolSize") + ", " + o("localMemoryPoolUtilizedSize") +
                                 " FROM CUDA_GPU_MEMORY_POOL_EVENTS ORDER BY start, rowid";
        const auto created = idsWith(*poolOper, "CREATE");
        const auto destroyed = idsWith(*poolOper, "DESTROY");
        const auto trimmed = idsWith(*poolOper, "TRIM");
        const auto importedType = idsWith(*poolType, "IMPORT");
        Stmt st;
        if (sqlite3_prepare_v2(db.db, psql.c_str(), -1, &st.s, nullptr) != SQLITE_OK)
            return err(ErrorCode::Corrupt, std::string("cannot read CUDA_GPU_MEMORY_POOL_EVENTS: ") +
                                               sqlite3_errmsg(db.db));
        while (sqlite3_step(st.s) == SQLITE_ROW) {
            const int64_t rowid = sqlite3_column_int64(st.s, 0);
            auto where = [&] { return "CUDA_GPU_MEMORY_POOL_EVENTS row " + std::to_string(rowid) + ": "; };
            const int64_t start = sqlite3_column_int64(st.s, 1);
            if (start < 0) return err(ErrorCode::Corrupt, where() + "negative start time");
            if (pidOf(sqlite3_column_int64(st.s, 2)) != stats.pid) continue;
            const int64_t op = sqlite3_column_int64(st.s, 5);
            Row r;
            r.ts = start;
            r.order = 0;
            r.rowid = static_cast<uint64_t>(rowid);
            Event& e = r.e;
            e.tsNs = start;
            e.device = static_cast<int16_t>(sqlite3_column_int64(st.s, 3));
            e.pool = static_cast<uint64_t>(sqlite3_column_int64(st.s, 4));
            e.correlation = static_cast<uint32_t>(colInt(st.s, 7).value_or(0));
            const bool imported = importedType.count(colInt(st.s, 6).value_or(-1)) != 0;
            PoolInfo& p = pools[e.pool];
            p.handle = e.pool;
            p.device = e.device;
            if (created.count(op)) {
                e.kind = imported ? EventKind::PoolImport : EventKind::PoolCreate;
                PoolCreateFields{imported ? PoolKind::Imported : PoolKind::Explicit, 0, 0, 1}.into(e);
                p.kind = imported ? PoolKind::Imported : PoolKind::Explicit;
                p.createdTsNs = start;
            } else if (destroyed.count(op)) {
                e.kind = EventKind::PoolDestroy;
            } else if (trimmed.count(op)) {
                const auto keep = colInt(st.s, 8);
                if (keep && *keep < 0) return err(ErrorCode::Corrupt, where() + "negative minBytesToKeep");
                TrimFields{static_cast<uint64_t>(keep.value_or(0))}.into(e);
            } else {
                return err(ErrorCode::Corrupt, where() + "operation type " + std::to_string(op) +
                                                   " is not in ENUM_CUDA_MEMPOOL_OPER");
            }
            const auto size = colInt(st.s, 9), utilized = colInt(st.s, 10);
            if (size && utilized && *size >= *utilized && *utilized >= 0) {
                e.reserved = static_cast<uint64_t>(*size);
                e.used = static_cast<uint64_t>(*utilized);
                e.flags |= kHasWatermarks;
            }
            devices.insert(e.device);
            ++stats.poolEvents;
            rows.push_back(r);
        }
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        return a.ts != b.ts ? a.ts < b.ts : a.order != b.order ? a.order < b.order : a.rowid < b.rowid;
    });
    uint64_t seq = 0;
    for (Row& r : rows) r.e.seq = ++seq;

    // The trace.
    auto w = TraceWriter::create(outPath, WriterOptions{false, false, true});
    if (!w) return w.error();
    ProcessInfo proc;
    proc.pid = stats.pid;
    if (hasTable(db.db, "PROCESSES")) {
        const auto pc = columnsOf(db.db, "PROCESSES");
        if (pc.count("pid") && pc.count("name")) {
            Stmt st;
            if (sqlite3_prepare_v2(db.db, "SELECT name FROM PROCESSES WHERE pid = ?", -1, &st.s, nullptr) == SQLITE_OK) {
                sqlite3_bind_int64(st.s, 1, stats.pid);
                if (sqlite3_step(st.s) == SQLITE_ROW)
                    if (auto* t = sqlite3_column_text(st.s, 0)) proc.commandLine = reinterpret_cast<const char*>(t);
            }
        }
    }
    if (!rows.empty()) proc.startTimeMonoNs = rows.front().ts;
    proc.collectorVersion = std::string("nsys import (poolscope ") + POOLSCOPE_VERSION + ")";
    Status st = (*w)->setProcess(proc);
    std::map<int, DeviceInfo> devInfo;
    for (int d : devices) devInfo[d] = DeviceInfo{d, "", 0, ""};
    if (hasTable(db.db, "TARGET_INFO_GPU")) {
        const auto gc = columnsOf(db.db, "TARGET_INFO_GPU");
        const std::string idCol = gc.count("cuDevice") ? "cuDevice" : "id";
        if (gc.count(idCol) && gc.count("name")) {
            Stmt g;
            const std::string gsql = "SELECT " + idCol + ", name, " + (gc.count("totalMemory") ? "totalMemory" : "0") +
                                     ", " + (gc.count("uuid") ? "uuid" : "''") + " FROM TARGET_INFO_GPU";
            if (sqlite3_prepare_v2(db.db, gsql.c_str(), -1, &g.s, nullptr) == SQLITE_OK)
                while (sqlite3_step(g.s) == SQLITE_ROW) {
                    const int d = sqlite3_column_int(g.s, 0);
                    if (!devInfo.count(d)) continue;
                    auto text = [&](int c) {
                        auto* t = sqlite3_column_text(g.s, c);
                        return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
                    };
                    const int64_t mem = sqlite3_column_int64(g.s, 2);
                    devInfo[d] = DeviceInfo{d, text(1), mem > 0 ? uint64_t(mem) : 0, text(3)};
                }
        }
    }
    for (auto& [d, info] : devInfo)
        if (st) st = (*w)->addDevice(info);
    for (auto& [h, p] : pools)
        if (st) st = (*w)->addPool(p);
    for (auto& [s, d] : streams) {
        StreamInfo si;
        si.handle = s;
        si.device = d;
        if (st) st = (*w)->addStream(si);
    }
    stats.pools = pools.size();
    stats.streams = streams.size();
    std::vector<Event> events;
    events.reserve(rows.size());
    for (const Row& r : rows) events.push_back(r.e);
    if (st) st = (*w)->append(events);
    auto meta = [&](const std::string& k, const std::string& v) {
        if (st) st = (*w)->setMeta(k, v);
    };
    const auto slash = path.rfind('/');
    meta("imported_from", "nsys");
    meta("imported_file", slash == std::string::npos ? path : path.substr(slash + 1));
    meta("imported_lacks",
         "event records and stream waits (no wait edges, cross-stream ordering unknown); stream, "
         "event and context synchronizes (implicit releases show only as drops of reserved); call "
         "sites; thread ids; reuse policies; release-threshold changes as events; pool kinds "
         "(default or explicit) of pools not created during the capture");
    meta("imported_streams", "stream values are CUPTI stream ids (streamId), not CUstream handles");
    meta("imported_watermarks", "reserved/used are the export's localMemoryPoolSize and "
                                "localMemoryPoolUtilizedSize at each operation");
    meta("imported_skipped_non_pool", std::to_string(stats.skippedNonPool));
    std::string th;
    for (auto& [pool, values] : thresholds) {
        th += (th.empty() ? "" : "; ") + hexOf(pool) + ":";
        for (uint64_t v : values) th += " " + (v == UINT64_MAX ? std::string("max") : formatBytes(v));
    }
    if (!th.empty()) meta("imported_release_thresholds", th);
    if (st) st = (*w)->close();
    if (!st) {
        std::remove(partialPath(outPath).c_str());
        return st.error();
    }
    return stats;
}

} // namespace poolscope::interop
