#pragma once
// Errors are values in core: every fallible call returns Result<T> (or Status) carrying a code
// that the CLI maps to an exit code and a message written for a person.

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace poolscope {

enum class ErrorCode {
    Ok = 0,
    NotFound,        // the file does not exist
    NotReadable,     // permission or I/O error when opening
    NotSqlite,       // random bytes, empty or truncated file: not an SQLite database
    NotATrace,       // an SQLite database of another application
    NewerVersion,    // written by a newer PoolScope: schema version above ours
    MissingTables,   // claims to be a trace but lacks required tables (damaged)
    Corrupt,         // SQLite reports corruption while reading
    WriteFailed,     // disk full, read-only location...
    InvalidArgument,
    Cancelled,
    Protocol,        // malformed or unexpected control message
    Io,
    Internal,        // a fault of PoolScope's own (exit code 1): a check that should never fail
};

// Distinct exit codes per error so scripts can tell them apart.
int exitCodeFor(ErrorCode c);

struct Error {
    ErrorCode code = ErrorCode::Ok;
    std::string message;
};

template <class T> class Result {
public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error e) : v_(std::move(e)) {}
    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }
    T& value() { return std::get<0>(v_); }
    const T& value() const { return std::get<0>(v_); }
    T& operator*() { return value(); }
    T* operator->() { return &value(); }
    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

class Status {
public:
    Status() = default;
    Status(Error e) : e_(std::move(e)) {}
    bool ok() const { return !e_; }
    explicit operator bool() const { return ok(); }
    const Error& error() const { return *e_; }

private:
    std::optional<Error> e_;
};

} // namespace poolscope
