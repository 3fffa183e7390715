#pragma once
// Symbolization of recorded native frames (issue #13), off the hot path: function, file and line
// where debug information exists, module + offset where it does not. Uses elfutils' libdw,
// opened at run time (without libdw1 installed every frame stays module + offset, and
// SymbolizeResult::missing says why), in the poolscope_symbols library (never in the collector). A module's binary is
// the recorded path when its build-id still matches, else the debug file named by the build-id
// (/usr/lib/debug/.build-id/xx/yyyy.debug and each directory in POOLSCOPE_DEBUG_DIRS, colon
// separated, searched as DIR/.build-id/xx/yyyy.debug, DIR/.build-id/xx/yyyy and DIR/<file name>
// with a matching build-id).

#include <cstddef>
#include <string>
#include <vector>

#include "poolscope/Result.h"
#include "poolscope/Stacks.h"

namespace poolscope {

struct SymbolizeResult {
    size_t resolved = 0;               // frames that got a function name
    size_t unresolved = 0;             // frames left as module + offset
    std::vector<std::string> missing;  // modules whose binary was not found (or changed)
};

// Adds a Symbol to t.symbols for every native frame that has none yet and whose module's
// binary is found. `added`, when given, receives the new symbols (to store in the trace).
SymbolizeResult symbolize(StackTables& t, std::vector<Symbol>* added = nullptr);

// Symbolizes the trace at path in place (its symbols table): what the collector recorded is
// read, resolved against the binaries found here and the new names are written. Returns how
// many frames got names (0 for a trace without stacks).
Result<size_t> storeSymbols(const std::string& path);

// The NT_GNU_BUILD_ID of an ELF file as lower-case hex; "" when the file has none or cannot be
// read.
std::string readBuildId(const std::string& path);

} // namespace poolscope
