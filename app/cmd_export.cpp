// `poolscope export TRACE... --format perfetto|csv -o OUT`: a trace for the tools people
// already have. perfetto: the Chrome / Perfetto JSON trace-event format (ui.perfetto.dev,
// chrome://tracing), one process per trace given; csv: one row per event for a spreadsheet.
// What each contains: docs/INTEROP.md.
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "CliUtil.h"
#include "Commands.h"
#include "TimeRange.h"
#include "TraceInputs.h"
#include "poolscope/TimelineRange.h"
#include "poolscope/Units.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope::cli {

namespace {

struct ExportOptions {
    std::vector<std::string> traces;
    std::string format = "perfetto";
    std::string output;
    unsigned threads = 0; // csv: formatting threads (0: one per CPU)
    TimeRangeArgs range;
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
int runCsvExport(const std::string& trace, const std::string& output, unsigned threads,
                 const TimeRangeArgs& range) {
    int exitCode = 0;
    auto reader = openTraceOrReport(trace, exitCode);
    if (!reader) return exitCode;
    reader->setSkipDamaged(true);
    reader->setReuseHeaderScan(true); // the names pass's decoding threads share its scan
    auto pass = [&] {
        TtyProgress progress("reading the trace for the names");
        return traceNamesAndStart(*reader, nullptr, {progress.callback(), nullptr, threads});
    }();
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
    if (range.given()) {
        auto summary = reader->summary();
        if (!summary) {
            reportError(summary.error(), exitCode);
            return exitCode;
        }
        auto r = resolveTimeRange(range, pass->t0, summary->lastTsNs);
        if (!r) {
            reportError(r.error(), exitCode);
            return exitCode;
        }
        formatting.fromNs = r->fromNs;
        formatting.untilNs = r->untilNs;
    }
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

void printPerfettoSummary(const std::string& output, const interop::PerfettoStats& stats, bool large) {
    if (output == "-") return;
    std::fprintf(stderr,
                 "poolscope: wrote %s: %llu trace events (%llu allocation slices on %llu rows, "
                 "%llu counter points, %llu flows, %llu instants, %llu NVTX ranges) in %llu "
                 "tracks; %s\n",
                 output.c_str(), (unsigned long long)stats.events,
                 (unsigned long long)stats.allocationSlices, (unsigned long long)stats.allocationRows,
                 (unsigned long long)stats.counterPoints, (unsigned long long)stats.flows,
                 (unsigned long long)stats.instants, (unsigned long long)stats.nvtxRanges,
                 (unsigned long long)stats.tracks,
                 large ? "open it through trace_processor --httpd and https://ui.perfetto.dev"
                       : "open it at https://ui.perfetto.dev");
}

// A whole trace's Perfetto JSON takes 250-390 bytes an event (the samples: gpt2 385, jax 249;
// the generator 320). Past about a gigabyte of it the Perfetto UI, parsing in a browser tab,
// runs out of memory (a 900 MB JSON trace crashed it: google/perfetto#99; a tab gets about
// 2 GB, perfetto.dev/docs/visualization/large-traces), so the export says so before the
// minutes such a file takes. POOLSCOPE_PERFETTO_LARGE_BYTES sets the size (tests).
constexpr uint64_t kPerfettoBytesPerEvent = 300;

// True (and said) where the JSON will be that large.
bool notePerfettoSize(const std::vector<std::unique_ptr<TraceReader>>& readers) {
    uint64_t events = 0;
    for (const auto& r : readers)
        if (auto sum = r->summary()) events += sum->eventCount;
    uint64_t large = uint64_t{1} << 30;
    if (const char* e = std::getenv("POOLSCOPE_PERFETTO_LARGE_BYTES")) large = std::strtoull(e, nullptr, 10);
    const uint64_t bytes = events * kPerfettoBytesPerEvent;
    if (bytes < large) return false;
    std::fprintf(stderr,
                 "poolscope: note: %s events make about %s of JSON; the Perfetto UI runs out of "
                 "memory on JSON of about a gigabyte in a browser tab. Open it through Perfetto's "
                 "trace_processor --httpd (perfetto.dev/docs/visualization/large-traces), or export "
                 "a stretch with --from/--to.\n",
                 formatCount(events).c_str(), formatBytes(bytes).c_str());
    return true;
}

// Writes the Perfetto JSON to `output` through `write` and says what it wrote. 0, or the exit
// code of what failed (said; a half-written file is removed): a write that failed calls
// `failed` first (the readers' damage, which may be why).
int writePerfettoTo(const std::string& output,
                    const std::function<Status(std::FILE*, interop::PerfettoStats&)>& write,
                    const std::function<void()>& failed = {}, bool large = false) {
    Output out(output);
    if (!out.file()) {
        std::fprintf(stderr, "poolscope: cannot write '%s': %s\n", output.c_str(), out.error().c_str());
        return exitCodeFor(ErrorCode::WriteFailed);
    }
    interop::PerfettoStats stats;
    if (const Status st = write(out.file(), stats); !st) {
        if (failed) failed();
        int exitCode = 0;
        reportError(st.error(), exitCode);
        return exitCode;
    }
    if (!out.finish()) {
        std::fprintf(stderr, "poolscope: could not write '%s' (disk full?)\n", output.c_str());
        return exitCodeFor(ErrorCode::WriteFailed);
    }
    printPerfettoSummary(output, stats, large);
    return 0;
}

// `export --from/--to` to Perfetto (interop::writePerfettoStretch): one names pass over the
// whole trace, then only the chunks that overlap the range.
int runPerfettoRange(const ExportOptions& o) {
    int exitCode = 0;
    const std::string& path = o.traces[0];
    auto reader = openTraceOrReport(path, exitCode);
    if (!reader) return exitCode;
    reader->setSkipDamaged(true);
    reader->setReuseHeaderScan(true);
    // The range counts from the trace's first event or sample (the headers' and samples' first
    // time, which the timeline's t0 and the JSON's time base also are).
    auto summary = reader->summary();
    if (!summary) {
        reportError(summary.error(), exitCode);
        return exitCode;
    }
    const int64_t t0 = summary->firstTsNs;
    auto resolved = resolveTimeRange(o.range, t0, summary->lastTsNs);
    if (!resolved) {
        reportError(resolved.error(), exitCode);
        return exitCode;
    }
    interop::ExportInput parts;
    if (!readInputParts(*reader, path, parts, exitCode)) return exitCode;
    interop::StretchExport done;
    if (const int rc = writePerfettoTo(
            o.output,
            [&](std::FILE* f, interop::PerfettoStats& stats) -> Status {
                TtyProgress progress("reading the trace for the names");
                auto r = interop::writePerfettoStretch(*reader, std::move(parts), resolved->fromNs,
                                                       resolved->untilNs, f, interop::kMaxStretchEvents,
                                                       {progress.callback()});
                if (!r) {
                    Error e = r.error();
                    if (e.code == ErrorCode::InvalidArgument)
                        e.message = "export --from/--to holds its range in memory: " + e.message +
                                    ". Give a shorter range, or export the whole trace without them (streamed)";
                    return e;
                }
                done = std::move(*r);
                stats = done.stats;
                return {};
            },
            [&] { (void)warnDamage(*reader); }))
        return rc;
    std::fprintf(stderr, "poolscope: the range exported: +%s to +%s of the trace's %s\n",
                 formatDuration(nsBetween(t0, done.clipFromNs)).c_str(),
                 formatDuration(nsBetween(t0, done.clipUntilNs)).c_str(),
                 formatDuration(nsBetween(t0, summary->lastTsNs)).c_str());
    if (done.blocksBefore)
        std::fprintf(stderr,
                     "poolscope: %s blocks (%s) allocated before the range and not freed inside it are "
                     "drawn over all of it (args: allocated_before_range)\n",
                     formatCount(done.blocksBefore).c_str(), formatBytes(done.bytesBefore).c_str());
    if (done.unaccountedBytes)
        std::fprintf(stderr,
                     "poolscope: note: %s in use at the range's start is in no block this trace "
                     "recorded (allocated before the recording): the pools' used counters count it, "
                     "no slice shows it\n",
                     formatBytes(done.unaccountedBytes).c_str());
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
    if (o.format == "csv") return runCsvExport(o.traces[0], o.output, o.threads, o.range);
    if (o.range.given()) {
        if (o.traces.size() != 1) {
            std::fprintf(stderr, "poolscope: --from and --to take one trace (got %zu)\n", o.traces.size());
            return exitCodeFor(ErrorCode::InvalidArgument);
        }
        return runPerfettoRange(o);
    }
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
        if (!readInputParts(*reader, path, in, exitCode)) return exitCode;
        inputs.push_back(std::move(in));
        readers.push_back(std::move(reader));
    }
    const bool large = notePerfettoSize(readers);
    if (const int rc = writePerfettoTo(
            o.output,
            [&](std::FILE* f, interop::PerfettoStats& stats) {
                return interop::writePerfettoJsonStreaming(inputs, f, &stats);
            },
            [&] {
                for (auto& r : readers) (void)warnDamage(*r);
            },
            large))
        return rc;
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
    addTimeRangeOptions(sub, o->range,
                        "; perfetto: a stretch of at most " + formatCount(interop::kMaxStretchEvents) +
                            " events, held in memory while written");
    sub->add_option("--threads", o->threads)->group("")->check(CLI::Range(0, 64));
    sub->callback([o, &exitCode] { exitCode = runExport(*o); });
}

} // namespace poolscope::cli
