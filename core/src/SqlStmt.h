#pragma once
// RAII for one prepared SQLite statement, for core's readers. Private to core.

#include <cstdint>
#include <sqlite3.h>
#include <string>

namespace poolscope::detail {

class Stmt {
public:
    Stmt(sqlite3* db, const char* sql) { ok_ = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) == SQLITE_OK; }
    ~Stmt() { sqlite3_finalize(st_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    bool ok() const { return ok_; }
    sqlite3_stmt* get() const { return st_; }
    int step() { return sqlite3_step(st_); }
    int64_t i64(int c) const { return sqlite3_column_int64(st_, c); }
    uint64_t u64(int c) const { return static_cast<uint64_t>(sqlite3_column_int64(st_, c)); }
    int i32(int c) const { return sqlite3_column_int(st_, c); }
    std::string text(int c) const {
        auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
        return t ? std::string(t) : std::string();
    }
    void bind(int i, int64_t v) { sqlite3_bind_int64(st_, i, v); }

private:
    sqlite3_stmt* st_ = nullptr;
    bool ok_ = false;
};

} // namespace poolscope::detail
