// The call stacks' tables (issue #13): modules, native and Python frames, NVTX paths and
// ranges, sites and symbols. A frame row the format cannot hold (a depth past any the collector
// records, a gap in a stack) makes the whole read an error naming it.
#include "poolscope/TraceReader.h"

#include <sqlite3.h>

#include "SqlStmt.h"
#include "poolscope/Schema.h"

namespace poolscope {

using detail::Stmt;

Result<StackTables> TraceReader::stacks() const {
    StackTables t;
    if (schemaVersion_ < schema::kStacksVersion) return t;
    // Frames per stack beyond any depth the collector records: a row past it is damage, and
    // the bound keeps a damaged file from growing a vector without limit.
    constexpr int64_t kMaxDepth = 4096;
    auto bad = [this](const std::string& what) {
        return Error{ErrorCode::Corrupt, "'" + path_ + "' has a damaged call-site table: " + what};
    };
    {
        Stmt s(db_, "SELECT id,path,build_id,load_address,size FROM modules ORDER BY id");
        if (!s.ok()) return sqlError("read the modules of");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW)
            t.modules.push_back(ModuleInfo{static_cast<uint32_t>(s.i64(0)), s.text(1), s.text(2),
                                           static_cast<uint64_t>(s.i64(3)),
                                           static_cast<uint64_t>(s.i64(4))});
        if (rc != SQLITE_DONE) return sqlError("read the modules of");
    }
    auto frameRows = [&](const char* sql, auto&& add) -> Status {
        Stmt s(db_, sql);
        if (!s.ok()) return sqlError("read the call stacks of");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            const int64_t id = s.i64(0), depth = s.i64(1);
            if (id <= 0 || id > UINT32_MAX || depth < 0 || depth >= kMaxDepth)
                return bad("stack " + std::to_string(id) + " frame " + std::to_string(depth));
            if (Status st = add(static_cast<uint32_t>(id), depth, s); !st) return st;
        }
        if (rc != SQLITE_DONE) return sqlError("read the call stacks of");
        return {};
    };
    auto placeAt = [&](auto& vec, int64_t depth, auto value, uint32_t id) -> Status {
        // Rows come in depth order; a gap would leave an empty frame.
        if (static_cast<size_t>(depth) != vec.size())
            return bad("stack " + std::to_string(id) + " misses frame " + std::to_string(vec.size()));
        vec.push_back(std::move(value));
        return {};
    };
    if (Status st = frameRows(
            "SELECT stack,depth,module,pc_offset FROM native_frames ORDER BY stack,depth",
            [&](uint32_t id, int64_t d, const Stmt& s) {
                return placeAt(t.nativeStacks[id], d,
                               NativeFrame{static_cast<uint32_t>(s.i64(2)),
                                           static_cast<uint64_t>(s.i64(3))}, id);
            });
        !st)
        return st.error();
    if (Status st = frameRows(
            "SELECT stack,depth,file,function,line FROM python_frames ORDER BY stack,depth",
            [&](uint32_t id, int64_t d, const Stmt& s) {
                return placeAt(t.pythonStacks[id], d,
                               PythonFrame{s.text(2), s.text(3), s.i32(4)}, id);
            });
        !st)
        return st.error();
    if (Status st = frameRows("SELECT path,depth,name FROM nvtx_paths ORDER BY path,depth",
                              [&](uint32_t id, int64_t d, const Stmt& s) {
                                  return placeAt(t.nvtxPaths[id], d, s.text(2), id);
                              });
        !st)
        return st.error();
    {
        Stmt s(db_, "SELECT id,native_stack,python_stack,nvtx_path FROM sites ORDER BY id");
        if (!s.ok()) return sqlError("read the call sites of");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            SiteInfo si{static_cast<uint32_t>(s.i64(0)), static_cast<uint32_t>(s.i64(1)),
                        static_cast<uint32_t>(s.i64(2)), static_cast<uint32_t>(s.i64(3))};
            t.sites[si.id] = si;
        }
        if (rc != SQLITE_DONE) return sqlError("read the call sites of");
    }
    {
        Stmt s(db_, "SELECT id,tid,name,start_ns,end_ns,depth,kind FROM nvtx_ranges ORDER BY id");
        if (!s.ok()) return sqlError("read the NVTX ranges of");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            NvtxRange r;
            r.id = static_cast<uint64_t>(s.i64(0));
            r.tid = static_cast<uint32_t>(s.i64(1));
            r.name = s.text(2);
            r.startNs = s.i64(3);
            r.endNs = s.i64(4);
            r.depth = static_cast<uint16_t>(s.i64(5));
            r.kind = s.i64(6) == 2 ? NvtxRangeKind::StartEnd : NvtxRangeKind::PushPop;
            t.ranges.push_back(std::move(r));
        }
        if (rc != SQLITE_DONE) return sqlError("read the NVTX ranges of");
    }
    {
        Stmt s(db_, "SELECT module,pc_offset,function,file,line FROM symbols");
        if (!s.ok()) return sqlError("read the symbols of");
        int rc;
        while ((rc = s.step()) == SQLITE_ROW) {
            Symbol sy{static_cast<uint32_t>(s.i64(0)), static_cast<uint64_t>(s.i64(1)),
                      s.text(2), s.text(3), s.i32(4)};
            t.symbols[{sy.module, sy.offset}] = sy;
        }
        if (rc != SQLITE_DONE) return sqlError("read the symbols of");
    }
    return t;
}

} // namespace poolscope
