// `poolscope diff A B [--json] [--all]`: two runs compared per pool, per stream and per call
// site (core/include/poolscope/interop/Diff.h says how they are matched).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/Report.h"
#include "poolscope/Symbolizer.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Diff.h"

namespace poolscope::cli {

namespace {

struct DiffOptions {
    std::string a, b;
    bool json = false;
    bool all = false;
    size_t topSites = 20;
};

// A trace as the diff compares it: its report (as `report` prints it, less the advisor's
// findings, which the diff does not compare) and the diff's facts, from one streaming read, in
// memory bounded by the trace's entities (a whole Timeline of each took about 80 bytes an event).
struct DiffInput {
    std::unique_ptr<TraceReader> reader;
    StackTables stacks;
    interop::DiffFacts facts;
    Report report;
};

// nullptr (message printed, exitCode set) when the trace cannot be read.
std::unique_ptr<DiffInput> readForDiff(const std::string& path, const char* what, int& exitCode) {
    auto in = std::make_unique<DiffInput>();
    in->reader = openTraceOrReport(path, exitCode);
    if (!in->reader) return nullptr;
    in->reader->setSkipDamaged(true);
    auto process = in->reader->process();
    if (!process) {
        reportError(process.error(), exitCode);
        return nullptr;
    }
    auto stacks = in->reader->stacks();
    if (!stacks) {
        reportError(stacks.error(), exitCode);
        return nullptr;
    }
    in->stacks = std::move(*stacks);
    if (!in->stacks.sites.empty()) symbolize(in->stacks);
    in->facts.keepSites(in->stacks);
    auto meta = in->reader->meta();
    TraceReportOptions options;
    options.advice = false;
    options.diffFacts = &in->facts;
    TtyProgress progress(what);
    options.progress = progress.callback();
    auto r = reportTrace(*in->reader, options, path, std::move(*process),
                         meta ? std::move(*meta) : std::map<std::string, std::string>{});
    if (!r) {
        (void)warnDamage(*in->reader);
        reportError(r.error(), exitCode);
        return nullptr;
    }
    in->report = std::move(r->report);
    return in;
}

int runDiff(const DiffOptions& o) {
    int exitCode = 0;
    auto ta = readForDiff(o.a, "reading A", exitCode);
    if (!ta) return exitCode;
    auto tb = readForDiff(o.b, "reading B", exitCode);
    if (!tb) return exitCode;
    const interop::TraceDiff d = interop::diffTraces({&ta->report, nullptr, &ta->stacks, &ta->facts},
                                                     {&tb->report, nullptr, &tb->stacks, &tb->facts},
                                                     o.topSites);
    const std::string text = o.json ? interop::diffToJson(d) + "\n" : interop::diffToText(d, o.all);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) return 13;
    return std::max(warnDamage(*ta->reader), warnDamage(*tb->reader));
}

} // namespace

void registerDiff(CLI::App& app, int& exitCode) {
    auto o = std::make_shared<DiffOptions>();
    auto* sub = app.add_subcommand(
        "diff", "Compare two traces: per pool and stream peaks, idle bytes, releases, failures, "
                "knob settings, and per call site");
    sub->add_option("A", o->a, "the first trace (the baseline)")->required();
    sub->add_option("B", o->b, "the second trace; deltas are B - A")->required();
    sub->add_flag("--json", o->json, "print JSON for scripts (raw numbers, a/b/delta per metric)");
    sub->add_flag("--all", o->all, "list every metric, not only those that differ");
    sub->add_option("--top-sites", o->topSites,
                    "how many call sites to list, largest change first (default 20; needs stacks "
                    "in both traces)")
        ->check(CLI::PositiveNumber);
    sub->callback([o, &exitCode] { exitCode = runDiff(*o); });
}

} // namespace poolscope::cli
