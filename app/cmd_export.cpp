// `poolscope export TRACE... --format perfetto|csv -o OUT`: a trace for the tools people
// already have. perfetto: the Chrome / Perfetto JSON trace-event format (ui.perfetto.dev,
// chrome://tracing), one process per trace given; csv: one row per event for a spreadsheet.
// What each contains: docs/INTEROP.md.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "CliUtil.h"
#include "Commands.h"
#include "TraceInputs.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope::cli {

namespace {

struct ExportOptions {
    std::vector<std::string> traces;
    std::string format = "perfetto";
    std::string output;
    unsigned threads = 0; // csv: formatting threads (0: one per CPU)
};

// The output file, or stdout for "-"; a failed export removes what it wrote (a regular file).
class Output {
public:
    explicit Output(const std::string& path) : path_(path) {
        f_ = path == "-" ? stdout : std::fopen(path.c_str(), "wb");
        if (!f_) error_ = std::strerror(errno);
    }
    ~Output() {
        if (f_ && f_ != stdout) std::fclose(f_);
        if (!ok_ && f_) cli::removeFailedOutput(path_);
    }
    std::FILE* file() const { return f_; }
    const std::string& error() const { return error_; }
    bool finish() {
        ok_ = std::fflush(f_) == 0 && !std::ferror(f_);
        if (f_ != stdout) {
            ok_ = std::fclose(f_) == 0 && ok_;
            f_ = nullptr;
        }
        return ok_;
    }

private:
    std::string path_;
    std::FILE* f_ = nullptr;
    std::string error_;
    bool ok_ = false;
};

// CSV rows need only the names and the trace's first timestamp, which a streaming pass gives
// (as for `dump --names`): no Timeline, so the export's memory does not grow with the trace.
int runCsvExport(const std::string& trace, const std::string& output, unsigned threads) {
    int exitCode = 0;
    auto reader = openTraceOrReport(trace, exitCode);
    if (!reader) return exitCode;
    reader->setSkipDamaged(true);
    auto pass = traceNamesAndStart(*reader);
    if (!pass) {
        (void)warnDamage(*reader);
        reportError(pass.error(), exitCode);
        return exitCode;
    }
    auto stacks = reader->stacks();
    if (!stacks) {
        reportError(stacks.error(), exitCode);
        return exitCode;
    }
    if (!stacks->sites.empty()) symbolize(*stacks);
    Output out(output);
    if (!out.file()) {
        std::fprintf(stderr, "poolscope: cannot write '%s': %s\n", output.c_str(), out.error().c_str());
        return exitCodeFor(ErrorCode::WriteFailed);
    }
    ChunkTextOptions formatting;
    formatting.threads = threads;
    Status st = interop::writeEventsCsv(*reader, pass->names, pass->t0, *stacks, out.file(),
                                        formatting);
    if (!st) {
        reportError(st.error(), exitCode);
        return exitCode;
    }
    if (!out.finish()) {
        std::fprintf(stderr, "poolscope: could not write '%s' (disk full?)\n", output.c_str());
        return exitCodeFor(ErrorCode::WriteFailed);
    }
    return warnDamage(*reader);
}

int runExport(const ExportOptions& o) {
    int exitCode = 0;
    if (o.format == "csv" && o.traces.size() != 1) {
        std::fprintf(stderr, "poolscope: --format csv takes one trace (got %zu); perfetto takes several\n",
                     o.traces.size());
        return exitCodeFor(ErrorCode::InvalidArgument);
    }
    if (outputIsAnInput(o.output, o.traces)) return exitCodeFor(ErrorCode::InvalidArgument);
    if (o.format == "csv") return runCsvExport(o.traces[0], o.output, o.threads);
    // Each trace is read twice, never held whole (interop::writePerfettoJsonStreaming): its
    // first pass also finds the names.
    std::vector<std::unique_ptr<TraceReader>> readers;
    std::vector<interop::StreamInput> inputs;
    for (const std::string& path : o.traces) {
        auto reader = openTraceOrReport(path, exitCode);
        if (!reader) return exitCode;
        reader->setSkipDamaged(true);
        interop::StreamInput in;
        in.reader = reader.get();
        auto process = reader->process();
        if (!process) {
            reportError(process.error(), exitCode);
            return exitCode;
        }
        in.process = std::move(*process);
        if (auto threads = reader->threads()) in.threads = std::move(*threads);
        auto stacks = reader->stacks();
        if (!stacks) {
            reportError(stacks.error(), exitCode);
            return exitCode;
        }
        in.stacks = std::move(*stacks);
        if (!in.stacks.sites.empty()) symbolize(in.stacks);
        in.label = baseName(path);
        auto ipc = interop::readIpcEvents(*reader);
        if (!ipc) {
            reportError(ipc.error(), exitCode);
            return exitCode;
        }
        in.ipc = std::move(*ipc);
        inputs.push_back(std::move(in));
        readers.push_back(std::move(reader));
    }
    Output out(o.output);
    if (!out.file()) {
        std::fprintf(stderr, "poolscope: cannot write '%s': %s\n", o.output.c_str(), out.error().c_str());
        return exitCodeFor(ErrorCode::WriteFailed);
    }
    interop::PerfettoStats stats;
    const Status st = interop::writePerfettoJsonStreaming(inputs, out.file(), &stats);
    if (!st) {
        for (auto& r : readers) (void)warnDamage(*r);
        reportError(st.error(), exitCode);
        return exitCode;
    }
    if (!out.finish()) {
        std::fprintf(stderr, "poolscope: could not write '%s' (disk full?)\n", o.output.c_str());
        return exitCodeFor(ErrorCode::WriteFailed);
    }
    if (o.format == "perfetto" && o.output != "-")
        std::fprintf(stderr,
                     "poolscope: wrote %s: %llu trace events (%llu allocation slices on %llu rows, "
                     "%llu counter points, %llu flows, %llu instants, %llu NVTX ranges) in %llu "
                     "tracks; open it at https://ui.perfetto.dev\n",
                     o.output.c_str(), (unsigned long long)stats.events,
                     (unsigned long long)stats.allocationSlices, (unsigned long long)stats.allocationRows,
                     (unsigned long long)stats.counterPoints, (unsigned long long)stats.flows,
                     (unsigned long long)stats.instants, (unsigned long long)stats.nvtxRanges,
                     (unsigned long long)stats.tracks);
    int rc = 0;
    for (auto& r : readers) rc = std::max(rc, warnDamage(*r));
    return rc;
}

} // namespace

void registerExport(CLI::App& app, int& exitCode) {
    auto o = std::make_shared<ExportOptions>();
    auto* sub = app.add_subcommand(
        "export", "Write a trace for other tools: Perfetto / Chrome JSON trace events or CSV");
    sub->add_option("TRACE", o->traces,
                    "one or more .poolscope traces (perfetto: each becomes a process, on one "
                    "time axis; csv: one trace)")
        ->required();
    sub->add_option("--format", o->format,
                    "perfetto (default): JSON trace events for ui.perfetto.dev or chrome://tracing "
                    "(a track per stream with the allocations as slices, reserved/used counters "
                    "per pool, event record -> wait flows, releases, trims, knob changes, failed "
                    "allocations, NVTX ranges); csv: one row per event with human-readable and "
                    "raw columns")
        ->check(CLI::IsMember({"perfetto", "csv"}));
    sub->add_option("-o,--output", o->output, "the file to write ('-' for standard output)")->required();
    sub->add_option("--threads", o->threads)->group("")->check(CLI::Range(0, 64));
    sub->callback([o, &exitCode] { exitCode = runExport(*o); });
}

} // namespace poolscope::cli
