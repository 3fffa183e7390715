// `poolscope report TRACE [--json] [--top N]`: reconstructs the timeline and prints peaks,
// per-pool and per-stream summaries, leaks and failed allocations.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/Report.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope::cli {

namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "poolscope: %s\n", e.message.c_str());
    return exitCodeFor(e.code);
}

// A progress line on stderr, only for a person watching a terminal and only once the build
// has taken long enough to wonder about (scripts and short traces see nothing).
class Progress {
public:
    Progress() : tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {}
    ~Progress() {
        if (shown_) std::fprintf(stderr, "\r%40s\r", "");
    }
    void operator()(uint64_t done, uint64_t total) {
        if (!tty_ || total == 0) return;
        const auto now = Clock::now();
        if (now - start_ < std::chrono::milliseconds(500) || now - last_ < std::chrono::milliseconds(100))
            return;
        last_ = now;
        shown_ = true;
        std::fprintf(stderr, "\rreading events: %3d%%", static_cast<int>(done * 100 / total));
        std::fflush(stderr);
    }

private:
    using Clock = std::chrono::steady_clock;
    bool tty_;
    bool shown_ = false;
    Clock::time_point start_;
    Clock::time_point last_{};
};

} // namespace

void registerReport(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand("report", "Summarise a trace: peaks, pools, streams, leaks and "
                                             "failed allocations");
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto top = std::make_shared<size_t>(10);
    sub->add_option("TRACE", *path, "a .poolscope trace file")->required();
    sub->add_flag("--json", *json, "print JSON for scripts");
    sub->add_option("--top", *top, "how many leaks and failed allocations to list (default 10)")
        ->check(CLI::NonNegativeNumber);
    sub->callback([&exitCode, path, json, top] {
        auto reader = TraceReader::open(*path);
        if (!reader) {
            exitCode = fail(reader.error());
            return;
        }
        (*reader)->setSkipDamaged(true); // report what is intact, then say what is not
        const TraceReader& r = **reader;
        auto process = r.process();
        if (!process) {
            exitCode = fail(process.error());
            return;
        }
        auto meta = r.meta();
        if (!meta) {
            exitCode = fail(meta.error());
            return;
        }
        std::shared_ptr<const Timeline> tl;
        {
            Progress progress;
            auto built = buildTimeline(r, [&](uint64_t d, uint64_t t) { progress(d, t); });
            if (!built) {
                (void)warnDamage(r);
                exitCode = fail(built.error());
                return;
            }
            tl = std::move(*built);
        }
        ReportOptions options;
        options.topN = *top;
        Report rep = buildReport(*tl, options, *path, std::move(*process), std::move(*meta));
        // The what-if advisor's suggestions (whatif/PoolModel.h), as findings. It reads the trace
        // twice more with up to 29 pool models, so only where it can suggest something: a trace
        // with implicit releases, or a pool that ran with a reuse policy off.
        bool policyOff = false;
        for (const PoolTimeline& p : tl->pools)
            for (const Series* s : {&p.reuseFollowEventDependencies, &p.reuseAllowOpportunistic,
                                    &p.reuseAllowInternalDependencies})
                for (uint64_t v : s->v) policyOff = policyOff || v == 0;
        auto advice = rep.implicitReleases >= 3 || policyOff
                          ? whatif::advise(r)
                          : Result<std::vector<whatif::PoolAdvice>>(std::vector<whatif::PoolAdvice>{});
        if (advice)
            for (const whatif::PoolAdvice& a : *advice)
                if (a.any()) rep.findings.push_back(whatif::adviceText(a, rep.names.poolWithHandle(a.handle)));
        const std::string text = *json ? reportToJson(rep) + "\n" : reportToText(rep);
        std::fwrite(text.data(), 1, text.size(), stdout);
        exitCode = warnDamage(r);
    });
}

} // namespace poolscope::cli
