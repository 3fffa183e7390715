// `poolscope diff A B [--json] [--all]`: two runs compared per pool, per stream and per call
// site (core/include/poolscope/interop/Diff.h says how they are matched).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/Report.h"
#include "poolscope/Symbolizer.h"
#include "poolscope/TraceReader.h"
#include "poolscope/interop/Diff.h"

namespace poolscope::cli {

namespace {

struct DiffOptions {
    std::string a, b;
    bool json = false;
    bool all = false;
    size_t topSites = 20;
};

// A trace as the diff compares it: its report and the diff's facts, from one streaming read
// (interop::readForDiff; a whole Timeline of each took about 80 bytes an event).
struct DiffInput {
    std::string path;
    std::unique_ptr<TraceReader> reader;
    ProcessInfo process;
    std::map<std::string, std::string> meta;
    StackTables stacks;
    Result<interop::DiffRead> read = Error{ErrorCode::Cancelled, "not read"};
};

// What the read needs beside the events; nullptr (message printed, exitCode set) when the trace
// cannot be opened or those tables read.
std::unique_ptr<DiffInput> openForDiff(const std::string& path, int& exitCode) {
    auto in = std::make_unique<DiffInput>();
    in->path = path;
    in->reader = openTraceOrReport(path, exitCode);
    if (!in->reader) return nullptr;
    in->reader->setSkipDamaged(true);
    auto process = in->reader->process();
    if (!process) {
        reportError(process.error(), exitCode);
        return nullptr;
    }
    in->process = std::move(*process);
    auto stacks = in->reader->stacks();
    if (!stacks) {
        reportError(stacks.error(), exitCode);
        return nullptr;
    }
    in->stacks = std::move(*stacks);
    if (!in->stacks.sites.empty()) symbolize(in->stacks);
    if (auto meta = in->reader->meta()) in->meta = std::move(*meta);
    return in;
}

void readForDiff(DiffInput& in, std::function<void(uint64_t, uint64_t)> progress) {
    in.read = interop::readForDiff(*in.reader, &in.stacks, in.path, in.process, in.meta, nullptr,
                                   std::move(progress));
}

int runDiff(const DiffOptions& o) {
    int exitCode = 0;
    auto ta = openForDiff(o.a, exitCode);
    if (!ta) return exitCode;
    auto tb = openForDiff(o.b, exitCode);
    if (!tb) return exitCode;
    {
        // The two reads at once where the machine has the CPUs (each decodes on threads of its
        // own from 4), with one progress line over both.
        TtyProgress progress("reading both traces");
        auto line = progress.callback();
        std::mutex m;
        uint64_t done[2] = {}, total[2] = {};
        auto side = [&](int k) -> std::function<void(uint64_t, uint64_t)> {
            if (!line) return {};
            return [&, k](uint64_t d, uint64_t t) {
                std::lock_guard lock(m);
                done[k] = d;
                total[k] = t;
                line(done[0] + done[1], total[0] + total[1]);
            };
        };
        std::thread second;
        if (std::thread::hardware_concurrency() >= 4) {
            try {
                second = std::thread([&] { readForDiff(*tb, side(1)); });
            } catch (const std::system_error&) { // no thread to be had: one after the other
            }
        }
        struct Join { // (also where the first read throws)
            std::thread& t;
            ~Join() {
                if (t.joinable()) t.join();
            }
        } join{second};
        readForDiff(*ta, side(0));
        if (second.joinable()) second.join();
        else readForDiff(*tb, side(1));
    }
    for (DiffInput* in : {ta.get(), tb.get()})
        if (!in->read) {
            (void)warnDamage(*in->reader);
            reportError(in->read.error(), exitCode);
            return exitCode;
        }
    const interop::TraceDiff d = interop::diffTraces({&ta->read->report, nullptr, &ta->stacks, &ta->read->facts},
                                                     {&tb->read->report, nullptr, &tb->stacks, &tb->read->facts},
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
