// `poolscope diff A B [--json] [--all]`: two runs compared per pool, per stream and per call
// site (core/include/poolscope/interop/Diff.h says how they are matched).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "Commands.h"
#include "TraceInputs.h"
#include "poolscope/Report.h"
#include "poolscope/interop/Diff.h"

namespace poolscope::cli {

namespace {

struct DiffOptions {
    std::string a, b;
    bool json = false;
    bool all = false;
    size_t topSites = 20;
};

int runDiff(const DiffOptions& o) {
    int exitCode = 0;
    auto ta = loadTrace(o.a, exitCode);
    if (!ta) return exitCode;
    auto tb = loadTrace(o.b, exitCode);
    if (!tb) return exitCode;
    const Report ra = interop::reportForDiff(*ta->reader, *ta->input.timeline, o.a);
    const Report rb = interop::reportForDiff(*tb->reader, *tb->input.timeline, o.b);
    const interop::TraceDiff d = interop::diffTraces({&ra, ta->input.timeline.get(), &ta->input.stacks},
                                                     {&rb, tb->input.timeline.get(), &tb->input.stacks},
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
