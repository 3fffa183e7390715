#pragma once
// What the verbs that export or combine traces (export, merge) read beside the events: the
// process, threads, call sites (named where the binaries are found), label and IPC calls, and
// whether an output would overwrite an input.
#include "CliUtil.h"
#include "poolscope/Symbolizer.h"
#include "poolscope/interop/Export.h"
#include "poolscope/interop/ProcessTree.h"

#include <cstdio>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace poolscope::cli {

inline std::string baseName(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// An output path that names one of the inputs (the same file, by device and inode): writing it
// would destroy what is being read. Prints why and returns true.
inline bool outputIsAnInput(const std::string& out, const std::vector<std::string>& inputs) {
    struct stat o {};
    if (out == "-" || ::stat(out.c_str(), &o) != 0) return false;
    for (const std::string& in : inputs) {
        struct stat i {};
        if (::stat(in.c_str(), &i) == 0 && i.st_dev == o.st_dev && i.st_ino == o.st_ino) {
            std::fprintf(stderr, "poolscope: the output '%s' is the input '%s': choose another file\n",
                         out.c_str(), in.c_str());
            return true;
        }
    }
    return false;
}

// What an export input holds beside its events (interop::ExportInput or StreamInput): the
// process, threads, call sites (named where the binaries are found), the file name as its label
// and the IPC calls (for links across processes). False (message printed, exitCode set) when a
// table cannot be read.
template <class Input>
bool readInputParts(const TraceReader& reader, const std::string& path, Input& in, int& exitCode) {
    auto process = reader.process();
    if (!process) {
        reportError(process.error(), exitCode);
        return false;
    }
    in.process = std::move(*process);
    if (auto threads = reader.threads()) in.threads = std::move(*threads);
    auto stacks = reader.stacks();
    if (!stacks) {
        reportError(stacks.error(), exitCode);
        return false;
    }
    in.stacks = std::move(*stacks);
    if (!in.stacks.sites.empty()) symbolize(in.stacks);
    in.label = baseName(path);
    auto ipc = interop::readIpcEvents(reader);
    if (!ipc) {
        reportError(ipc.error(), exitCode);
        return false;
    }
    in.ipc = std::move(*ipc);
    return true;
}

} // namespace poolscope::cli
