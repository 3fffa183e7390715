// `poolscope report TRACE [--json] [--top N] [--top-sites N]`: peaks, per-pool and per-stream
// summaries, hazards, fragmentation, leaks, failed allocations and findings, read from the trace
// in one streaming pass (analysis/TraceReport.h).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/Report.h"
#include "poolscope/Symbolizer.h"
#include "poolscope/Units.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope::cli {

namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "poolscope: %s\n", e.message.c_str());
    return exitCodeFor(e.code);
}

// --top-sites: who held the memory at each pool's peak reserved.
std::string sitesText(const Report& rep, const std::vector<analysis::PoolSites>& pools,
                      const StackTables& t, size_t n) {
    std::string s = "\nCall sites at each pool's peak reserved (top " + std::to_string(n) + ")\n";
    if (t.sites.empty()) return s + "  no stacks recorded (traces before format 4 and those recorded "
                                    "with --stacks off have none)\n";
    for (const analysis::PoolSites& p : pools) {
        s += "  " + rep.names.pool(p.pool) + ": ";
        s += p.atPeakReserved ? "peak reserved " + formatBytes(p.reserved) : std::string("most live bytes");
        s += " at " + formatDuration(nsBetween(rep.t0, p.atTsNs)) + "; " + formatBytes(p.liveBytes) +
             " live in " + formatCount(p.liveCount) + " allocations\n";
        if (p.top.empty()) continue;
        char head[128];
        std::snprintf(head, sizeof head, "    %10s %6s %7s  %s\n", "bytes", "share", "allocs", "site");
        s += head;
        for (const analysis::SiteBytes& sb : p.top) {
            char row[96];
            const double share = p.liveBytes ? 100.0 * double(sb.bytes) / double(p.liveBytes) : 0;
            std::snprintf(row, sizeof row, "    %10s %5.1f%% %7s  ", formatBytes(sb.bytes).c_str(),
                          share, formatCount(sb.count).c_str());
            s += row + analysis::siteText(t, sb.site) + "\n";
        }
    }
    return s;
}

nlohmann::json sitesJson(const std::vector<analysis::PoolSites>& pools, const StackTables& t) {
    nlohmann::json out = nlohmann::json::array();
    for (const analysis::PoolSites& p : pools) {
        nlohmann::json j = {{"pool", formatHandle(p.pool)}, {"at_ts_ns", p.atTsNs},
                            {"at_peak_reserved", p.atPeakReserved}, {"reserved", p.reserved},
                            {"live_bytes", p.liveBytes}, {"live_count", p.liveCount}};
        nlohmann::json top = nlohmann::json::array();
        for (const analysis::SiteBytes& sb : p.top)
            top.push_back({{"site", sb.site}, {"bytes", sb.bytes}, {"count", sb.count},
                           {"text", analysis::siteText(t, sb.site)},
                           {"frames", analysis::siteFrames(t, sb.site)},
                           {"nvtx", analysis::sitePath(t, sb.site)}});
        j["top"] = top;
        out.push_back(j);
    }
    return out;
}

} // namespace

void registerReport(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand("report", "Summarise a trace: peaks, pools, streams, leaks and "
                                             "failed allocations");
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto top = std::make_shared<size_t>(10);
    auto topSites = std::make_shared<size_t>(0);
    sub->footer("The what-if advice keeps the replayed operations in an unnamed temporary file in "
                "$TMPDIR, or without it in /tmp (in /var/tmp where /tmp is in memory and /var/tmp "
                "is not) while the report runs: about 4 bytes an event, at most 64 GiB, 256 MiB "
                "where the directory is in memory (tmpfs), and always leaving 1 GiB plus half of "
                "the free space. Where it does not fit, the trace is read a second time instead.");
    sub->add_option("TRACE", *path, "a .poolscope trace file")->required();
    sub->add_flag("--json", *json, "print JSON for scripts");
    sub->add_option("--top", *top, "how many leaks and failed allocations to list (default 10)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--top-sites", *topSites,
                    "list the N call sites holding the most memory at each pool's peak reserved "
                    "(needs a trace recorded with stacks)")
        ->check(CLI::PositiveNumber);
    // The report as it was computed before it streamed (a whole Timeline in memory): for
    // comparing the two (tests/bench/report_scale.sh), not for users.
    auto viaTimeline = std::make_shared<bool>(false);
    sub->add_flag("--via-timeline", *viaTimeline)->group("");
    // The advisor's threads forced (0: as many as stood idle), for measuring them: not for users.
    auto adviceThreads = std::make_shared<unsigned>(0);
    sub->add_option("--advice-threads", *adviceThreads)->group("")->check(CLI::Range(0, 64));
    // The advisor's questions during the read forced on or off, for measuring them: not for users.
    auto askAhead = std::make_shared<std::string>("auto");
    sub->add_option("--ask-ahead", *askAhead)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    // The live set kept once (TraceReportOptions::leadThread) forced on or off, for measuring it: not
    // for users.
    auto leadReplay = std::make_shared<std::string>("auto");
    // "report": the report's own replay keeps it for the others (TraceReportOptions::reportLeads).
    sub->add_option("--lead-replay", *leadReplay)->group("")->check(CLI::IsMember({"auto", "on", "off", "report"}));
    // The analyses over two threads (TraceReportOptions::analysesSplit) forced on or off, for
    // measuring it: not for users.
    auto splitAnalyses = std::make_shared<std::string>("auto");
    sub->add_option("--split-analyses", *splitAnalyses)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    // The racing threads' ranges on a thread of their own (TraceReportOptions::racesThread)
    // forced on or off, for measuring it: not for users.
    auto racesThread = std::make_shared<std::string>("auto");
    sub->add_option("--races-thread", *racesThread)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    // The analyses kept on the report's own replay (TraceReportOptions::analysesOnReport), for
    // measuring it: not for users.
    auto analysesOnReport = std::make_shared<std::string>("auto");
    sub->add_option("--analyses-on-report", *analysesOnReport)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    // The advisor's models on the report's own replay (TraceReportOptions::modelsOnReport), for
    // measuring it: not for users.
    auto modelsOnReport = std::make_shared<std::string>("auto");
    sub->add_option("--models-on-report", *modelsOnReport)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    // The questions asked during the read giving way to it (TraceReportOptions::aheadYield), for
    // measuring it: not for users.
    auto aheadYield = std::make_shared<std::string>("none");
    sub->add_option("--ahead-yield", *aheadYield)->group("")->check(CLI::IsMember({"none", "nice", "idle"}));
    // The lanes to a LaneModel in the first and second waves of questions asked during the read
    // (TraceReportOptions::aheadLanes), for measuring them: not for users.
    auto aheadLanes = std::make_shared<std::vector<size_t>>();
    sub->add_option("--ahead-lanes", *aheadLanes)->group("")->delimiter(',')->expected(2)->check(CLI::Range(1, 64));
    // The analyses read in pieces beside the read (TraceReportOptions::analysesPieces), and on
    // how many threads, for measuring it: not for users.
    auto analysesPieces = std::make_shared<size_t>(0);
    sub->add_option("--analyses-pieces", *analysesPieces)->group("")->check(CLI::Range(0, 4096));
    auto piecesThreads = std::make_shared<unsigned>(0);
    sub->add_option("--analyses-pieces-threads", *piecesThreads)->group("")->check(CLI::Range(0, 1024));
    // The analyses and the advisor's models read in pieces beside the read
    // (TraceReportOptions::readPieces), and on how many threads, for measuring it: not for users.
    auto readPieces = std::make_shared<size_t>(0);
    sub->add_option("--read-pieces", *readPieces)->group("")->check(CLI::Range(0, 4096));
    auto readThreads = std::make_shared<unsigned>(0);
    sub->add_option("--read-pieces-threads", *readThreads)->group("")->check(CLI::Range(0, 1024));
    // Where the time went, on stderr: for measuring (tests/bench), not for users.
    auto timings = std::make_shared<bool>(false);
    sub->add_flag("--timings", *timings)->group("");
    sub->callback([&exitCode, path, json, top, topSites, viaTimeline, adviceThreads, askAhead, leadReplay, splitAnalyses, racesThread, analysesOnReport, aheadYield, modelsOnReport, aheadLanes, analysesPieces, piecesThreads, readPieces, readThreads, timings] {
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
        Result<TraceReport> built = [&] {
            TtyProgress progress("reading events");
            TraceReportOptions options;
            options.report.topN = *top;
            options.topSites = *topSites;
            options.adviceThreads = *adviceThreads;
            using F = TraceReportOptions::FeedThread;
            auto onOff = [](const std::string& v) { return v == "on" ? F::On : v == "off" ? F::Off : F::Auto; };
            options.askAhead = onOff(*askAhead);
            options.leadThread = *leadReplay == "on" ? F::On : *leadReplay == "auto" ? F::Auto : F::Off;
            if (*leadReplay == "report") options.reportLeads = F::On;
            options.analysesSplit = onOff(*splitAnalyses);
            options.racesThread = onOff(*racesThread);
            options.aheadYield = *aheadYield == "nice"   ? TraceReportOptions::AheadYield::Nice
                                 : *aheadYield == "idle" ? TraceReportOptions::AheadYield::Idle
                                                         : TraceReportOptions::AheadYield::None;
            if (aheadLanes->size() == 2) {
                options.aheadLanes[0] = (*aheadLanes)[0];
                options.aheadLanes[1] = (*aheadLanes)[1];
            }
            options.modelsOnReport = onOff(*modelsOnReport);
            options.analysesOnReport = onOff(*analysesOnReport);
            options.analysesPieces = *analysesPieces;
            options.analysesPiecesThreads = *piecesThreads;
            options.readPieces = *readPieces;
            options.readPiecesThreads = *readThreads;
            options.progress = [&](uint64_t d, uint64_t t) { progress(d, t); };
            // The what-if questions after the read: 5-10 s of a 100 M-event trace.
            options.adviceProgress = [&](uint64_t d, uint64_t t) {
                progress.phase("what-if questions");
                progress(d, t);
            };
            return *viaTimeline ? reportTraceViaTimeline(r, options, *path, std::move(*process),
                                                         std::move(*meta))
                                : reportTrace(r, options, *path, std::move(*process),
                                              std::move(*meta));
        }();
        if (!built) {
            (void)warnDamage(r);
            exitCode = fail(built.error());
            return;
        }
        if (*timings)
            std::fprintf(stderr,
                         "timings: read %.2f s (waited for its replay threads %.2f s, they for "
                         "it %.2f s), advice %.2f s on %u thread(s)\n",
                         built->readSeconds, built->readWaitedForThreads, built->threadsWaitedForRead,
                         built->adviceSeconds, built->adviceThreads);
        if (*timings && *readPieces)
            std::fprintf(stderr, "timings: the analyses and models in %zu pieces beside the read %.2f s (at most %zu "
                         "waiting to be joined), %s%s\n",
                         *readPieces, built->piecesSeconds, built->piecesMostWaiting,
                         built->piecesUsed ? "used" : "not used: ", built->piecesInexact.c_str());
        else if (*timings && *analysesPieces)
            std::fprintf(stderr, "timings: the analyses in %zu pieces beside the read %.2f s, %s%s\n", *analysesPieces,
                         built->piecesSeconds,
                         !built->piecesUsed              ? "not used: "
                         : built->piecesStoppedReplay ? "used, their replay stopped during the read"
                                                      : "used, done after the read",
                         built->piecesInexact.c_str());
        if (*timings && built->aheadThreads)
            std::fprintf(stderr, "timings: questions asked during the read on %u thread(s): %llu answered "
                         "there, %llu asked after it\n",
                         built->aheadThreads, (unsigned long long)built->aheadGiven,
                         (unsigned long long)built->aheadAsked);
        if (*timings) {
            std::fprintf(stderr, "timings: read CPU %.2f s: the report's thread %.2f s", built->readProcessCpu,
                         built->readCallerCpu);
            for (const TraceReport::ThreadCpu& c : built->readThreadCpu)
                std::fprintf(stderr, ", %s %.2f s", c.name, c.seconds);
            std::fprintf(stderr, "\n");
        }
        const Report& rep = built->report;
        std::string text = *json ? reportToJson(rep) + "\n" : reportToText(rep);
        if (*topSites > 0) {
            auto stacks = r.stacks();
            if (!stacks) {
                exitCode = fail(stacks.error());
                return;
            }
            symbolize(*stacks); // names where the binaries are found here
            const auto& pools = built->sites;
            if (*json) {
                // ordered_json: the report's keys stay in the order reportToJson wrote them.
                nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
                j["call_sites"] = stacks->sites.empty() ? nlohmann::json(nullptr)
                                                        : sitesJson(pools, *stacks);
                if (stacks->sites.empty()) j["call_sites_note"] = "no stacks recorded";
                text = j.dump(2) + "\n";
            } else {
                text += sitesText(rep, pools, *stacks, *topSites);
            }
        }
        std::fwrite(text.data(), 1, text.size(), stdout);
        exitCode = warnDamage(r);
    });
}

} // namespace poolscope::cli
