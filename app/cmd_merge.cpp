// `poolscope merge TRACE... [-o merged.json] [--json]`: the traces of one process tree (record
// writes one per process) seen together: the tree (parent -> child), and the pools and blocks
// exported by one process and imported by another, linked (interop/ProcessTree.h says how a link
// is inferred). With -o, one Perfetto / Chrome JSON trace: a process per input on one time axis,
// the links drawn as flows between the processes' IPC tracks.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "CliUtil.h"
#include "Commands.h"
#include "TraceInputs.h"
#include "poolscope/JsonText.h"
#include "poolscope/Report.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Export.h"
#include "poolscope/interop/ProcessTree.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope::cli {

namespace {

struct MergeOptions {
    std::vector<std::string> traces;
    std::string output;
    bool json = false;
};

// A trace of the tree: its process, threads, call sites, IPC calls, the lanes' names (the
// names pass, which replays little of the trace) and its event count, never its events held:
// the export below reads them again, twice, as `export` does.
struct MergeInput {
    std::unique_ptr<TraceReader> reader;
    interop::StreamInput input;
    uint64_t events = 0;
};

std::unique_ptr<MergeInput> readForMerge(const std::string& path, int& exitCode) {
    auto t = std::make_unique<MergeInput>();
    t->reader = openTraceOrReport(path, exitCode);
    if (!t->reader) return nullptr;
    t->reader->setSkipDamaged(true);
    t->reader->setReuseHeaderScan(true); // the names pass's decoding threads share its scan
    t->input.reader = t->reader.get();
    auto names = [&] {
        TtyProgress progress("naming the lanes");
        return traceNamesAndStart(*t->reader, nullptr, {progress.callback()});
    }();
    if (!names) {
        (void)warnDamage(*t->reader);
        reportError(names.error(), exitCode);
        return nullptr;
    }
    t->input.names = std::move(names->names);
    if (!readInputParts(*t->reader, path, t->input, exitCode)) return nullptr;
    if (auto sum = t->reader->summary()) t->events = sum->eventCount;
    return t;
}

int runMerge(const MergeOptions& o) {
    int exitCode = 0;
    if (!o.output.empty() && outputIsAnInput(o.output, o.traces)) return exitCodeFor(ErrorCode::InvalidArgument);
    std::vector<std::unique_ptr<MergeInput>> loaded;
    for (const std::string& p : o.traces) {
        auto t = readForMerge(p, exitCode);
        if (!t) return exitCode;
        loaded.push_back(std::move(t));
    }
    std::vector<interop::ProcessEvents> pe;
    for (auto& t : loaded) pe.push_back({t->input.process, t->input.ipc});
    const auto tree = interop::processTree(pe);
    const auto links = interop::findIpcLinks(pe);
    std::vector<view::EntityNames> names;
    for (auto& t : loaded) names.push_back(*t->input.names);
    auto who = [&](size_t i) {
        return "pid " + std::to_string(loaded[i]->input.process.pid) + " (" + loaded[i]->input.label + ")";
    };
    if (o.json) {
        nlohmann::json j;
        nlohmann::json procs = nlohmann::json::array();
        for (const auto& n : tree)
            procs.push_back({{"trace", o.traces[n.input]},
                             {"pid", loaded[n.input]->input.process.pid},
                             {"parent_pid", loaded[n.input]->input.process.parentPid},
                             {"depth", n.depth}});
        j["processes"] = procs;
        nlohmann::json ls = nlohmann::json::array();
        for (const auto& l : links) {
            ls.push_back({{"kind", l.kind == interop::IpcLink::Kind::Pool ? "pool" : "pointer"},
                          {"basis", interop::basisName(l.basis)},
                          {"exporter_pid", loaded[l.exporter]->input.process.pid},
                          {"importer_pid", loaded[l.importer]->input.process.pid},
                          {"export_pool", formatHandle(l.exportPool)},
                          {"import_pool", formatHandle(l.importPool)},
                          {"export_ts_ns", l.exportTsNs},
                          {"import_ts_ns", l.importTsNs}});
            if (l.kind == interop::IpcLink::Kind::Pointer) ls.back()["ptr"] = formatHandle(l.ptr);
        }
        j["links"] = ls;
        std::printf("%s\n", dumpJson(j, 2).c_str());
    } else {
        std::printf("Processes\n");
        for (const auto& n : tree) {
            const auto& in = loaded[n.input]->input;
            std::printf("  %*s%s  %s  (%s events)\n", n.depth * 2, "", who(n.input).c_str(),
                        in.process.commandLine.c_str(), formatCount(loaded[n.input]->events).c_str());
        }
        std::printf("\nShared across processes\n");
        if (links.empty()) std::printf("  none (no pool or block exported by one input and imported by another)\n");
        for (const auto& l : links) {
            const bool pool = l.kind == interop::IpcLink::Kind::Pool;
            std::printf("  %s%s of %s -> %s of %s, %s later (%s)\n",
                        pool ? "pool: " : ("block " + formatHandle(l.ptr) + ": ").c_str(),
                        names[l.exporter].poolWithHandle(l.exportPool).c_str(), who(l.exporter).c_str(),
                        names[l.importer].poolWithHandle(l.importPool).c_str(), who(l.importer).c_str(),
                        formatDuration(nsBetween(l.exportTsNs, l.importTsNs)).c_str(),
                        interop::basisName(l.basis).c_str());
        }
    }
    if (!o.output.empty()) {
        std::FILE* f = o.output == "-" ? stdout : std::fopen(o.output.c_str(), "wb");
        if (!f) {
            std::fprintf(stderr, "poolscope: cannot write '%s'\n", o.output.c_str());
            return exitCodeFor(ErrorCode::WriteFailed);
        }
        std::vector<interop::StreamInput> inputs;
        for (const auto& n : tree) inputs.push_back(loaded[n.input]->input); // parents first
        interop::PerfettoStats stats;
        Status st = interop::writePerfettoJsonStreaming(inputs, f, &stats);
        const bool closed = f == stdout ? std::fflush(f) == 0 : std::fclose(f) == 0;
        if (!st || !closed) {
            cli::removeFailedOutput(o.output);
            std::fprintf(stderr, "poolscope: could not write '%s'\n", o.output.c_str());
            return exitCodeFor(ErrorCode::WriteFailed);
        }
        std::fprintf(stderr, "poolscope: wrote %s: %llu processes, %llu cross-process links, %llu trace events\n",
                     o.output.c_str(), (unsigned long long)stats.processes,
                     (unsigned long long)stats.ipcLinks, (unsigned long long)stats.events);
    }
    int rc = 0;
    for (auto& t : loaded) rc = std::max(rc, warnDamage(*t->reader));
    return rc;
}

} // namespace

void registerMerge(CLI::App& app, int& exitCode) {
    auto o = std::make_shared<MergeOptions>();
    auto* sub = app.add_subcommand(
        "merge", "Show the traces of one process tree together: parent and child processes, and "
                 "the pools and blocks shared between them (exported by one, imported by another)");
    sub->add_option("TRACE", o->traces, "two or more .poolscope traces (record writes one per process)")
        ->required()
        ->expected(2, -1);
    sub->add_option("-o,--output", o->output,
                    "also write one Perfetto / Chrome JSON trace with a process per input and the "
                    "shared pools linked by flows ('-' for standard output)");
    sub->add_flag("--json", o->json, "print the tree and the links as JSON");
    sub->callback([o, &exitCode] { exitCode = runMerge(*o); });
}

} // namespace poolscope::cli
