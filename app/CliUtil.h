#pragma once
// Small helpers shared by the CLI verbs.

#include <cstdio>
#include <memory>
#include <string>

#include "poolscope/Result.h"
#include "poolscope/TraceReader.h"

namespace poolscope::cli {

// Opens a trace; on failure prints "poolscope: <plain message>" to stderr, sets exitCode to the
// error's distinct code and returns null.
inline std::unique_ptr<TraceReader> openTraceOrReport(const std::string& path, int& exitCode) {
    auto r = TraceReader::open(path);
    if (!r) {
        std::fprintf(stderr, "poolscope: %s\n", r.error().message.c_str());
        exitCode = exitCodeFor(r.error().code);
        return nullptr;
    }
    return std::move(r.value());
}

inline void reportError(const Error& e, int& exitCode) {
    std::fprintf(stderr, "poolscope: %s\n", e.message.c_str());
    exitCode = exitCodeFor(e.code);
}

} // namespace poolscope::cli
