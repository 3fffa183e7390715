// `poolscope import nsys REPORT.sqlite -o run.poolscope [--pid PID]`: an Nsight Systems SQLite
// export becomes a PoolScope trace (core/include/poolscope/interop/NsysImport.h says what is
// read and what such a trace lacks; docs/INTEROP.md cites NVIDIA's schema).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "CliUtil.h"
#include "TraceInputs.h"
#include "Commands.h"
#include "poolscope/Units.h"
#include "poolscope/interop/NsysImport.h"

namespace poolscope::cli {

void registerImport(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand("import", "Make a PoolScope trace from another tool's recording");
    sub->require_subcommand(1);
    auto* nsys = sub->add_subcommand(
        "nsys", "An Nsight Systems SQLite export (nsys export --type sqlite, of a report recorded "
                "with --cuda-memory-usage=true): its CUDA memory usage and memory pool tables");
    auto in = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto pid = std::make_shared<int64_t>(0);
    nsys->add_option("REPORT", *in, "the .sqlite file nsys export wrote")->required();
    nsys->add_option("-o,--output", *out, "the .poolscope trace to write")->required();
    nsys->add_option("--pid", *pid, "the process to import when the report holds several")
        ->check(CLI::PositiveNumber);
    nsys->callback([in, out, pid, &exitCode] {
        if (outputIsAnInput(*out, {*in})) {
            exitCode = exitCodeFor(ErrorCode::InvalidArgument);
            return;
        }
        interop::NsysImportOptions o;
        o.pid = *pid;
        auto r = interop::importNsysSqlite(*in, *out, o);
        if (!r) {
            reportError(r.error(), exitCode);
            return;
        }
        std::fprintf(stderr,
                     "poolscope: wrote %s: pid %lld, %s allocations, %s frees, %s pool events, %s "
                     "pools, %s streams (%s allocations and frees outside stream-ordered pools "
                     "left out). An nsys export has no event waits, synchronizes or call sites: "
                     "`poolscope info` lists what is missing.\n",
                     out->c_str(), (long long)r->pid, formatCount(r->allocations).c_str(),
                     formatCount(r->frees).c_str(), formatCount(r->poolEvents).c_str(),
                     formatCount(r->pools).c_str(), formatCount(r->streams).c_str(),
                     formatCount(r->skippedNonPool).c_str());
        exitCode = 0;
    });
}

} // namespace poolscope::cli
