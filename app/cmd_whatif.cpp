// `poolscope whatif TRACE --release-threshold 64MiB [--reuse-* on|off] [--pool ID] [--json]`:
// the trace's pools as recorded beside what the pool model (core whatif/PoolModel.h) predicts
// under other knobs. `poolscope advise TRACE [--json]`: the smallest release threshold that
// removes most implicit releases, and reuse-policy changes worth making, per pool.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <future>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/Units.h"
#include "poolscope/view/EntityNames.h"
#include "poolscope/whatif/PoolModel.h"

namespace poolscope::cli {

namespace {

CLI::Validator bytesValidator() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            uint64_t v = 0;
            if (!parseBytes(s, v))
                return "'" + s + "' is not a size (examples: 0, 64MiB, 1.5GiB, 4096, max)";
            return {};
        },
        "SIZE", "bytes");
}

std::optional<bool> onOff(const std::string& s) {
    if (s.empty()) return std::nullopt;
    return s == "on";
}

// The window's and report's names ("pool #1 (default)"), from a streaming pass; its progress
// line on a terminal unless `quiet`.
view::EntityNames namesOf(const TraceReader& r, bool quiet = false) {
    TtyProgress progress("reading the trace for the names");
    auto names = traceNamesAndStart(r, nullptr, {quiet ? nullptr : progress.callback()});
    if (!names) return {};
    return std::move(names->names);
}

// The same pass on a thread of its own, through a reader of its own (a reader belongs to one
// thread) that adopts `reader`'s header scan, while the models read the trace through `reader`:
// where the names only label the answer, they need not come first. Where no thread can be had,
// get() makes them.
class NamesBeside {
public:
    explicit NamesBeside(TraceReader& reader) : path_(reader.path()) {
        (void)reader.chunkHeaders(); // the scan, kept for the models' read (a failure is theirs to say)
        scan_ = reader.sharedScan();
        try {
            names_ = std::async(std::launch::async, [this] { return read(true); });
        } catch (const std::system_error&) {
        }
    }
    ~NamesBeside() {
        if (names_.valid()) names_.wait();
    }
    view::EntityNames get() { return names_.valid() ? names_.get() : read(false); }

private:
    view::EntityNames read(bool quiet) const {
        auto r = TraceReader::open(path_);
        if (!r) return {};
        (*r)->setSkipDamaged(true);
        (*r)->setReuseHeaderScan(true);
        (*r)->adoptScan(scan_);
        return namesOf(**r, quiet);
    }
    std::string path_;
    std::shared_ptr<const TraceReader::SharedScan> scan_;
    std::future<view::EntityNames> names_;
};

std::string thresholdText(uint64_t v) {
    return v == std::numeric_limits<uint64_t>::max() ? "max" : formatBytes(v);
}

// --pool: a handle (0x... or decimal) or the pool's number as the window names it (#2, 2).
bool poolMatches(const std::string& want, uint64_t handle, const view::EntityNames& names) {
    if (want.empty()) return true;
    std::string w = want;
    if (!w.empty() && w[0] == '#') w = w.substr(1);
    const std::string name = names.pool(handle);
    if (name.rfind("pool #" + w + " ", 0) == 0 || name == "pool #" + w) return true;
    try {
        size_t used = 0;
        const uint64_t h = std::stoull(want, &used, 0);
        return used == want.size() && h == handle;
    } catch (...) {
        return false;
    }
}

const char* onOffText(bool b) { return b ? "on" : "off"; }

// The range of a pool threads race on (whatif/RaceRange.h), for whatif's text.
std::string raceText(const whatif::RaceRange& r) {
    const std::string n = std::to_string(r.threads);
    if (r.low == r.high)
        return "  " + n + " threads allocate from this pool at once, but no order of their calls "
               "changes its peak (" + formatBytes(r.high) + ")\n";
    std::string t = "  peak depends on how " + n + " threads interleave: " + formatBytes(r.low) +
                    " – " + formatBytes(r.high) + " (the figure above is the recorded order)\n";
    if (r.crossThreadFrees && r.highHandoversAsRecorded < r.high)
        t += "  at most " + formatBytes(r.highHandoversAsRecorded) + " while each of the " +
             formatCount(r.crossThreadFrees) +
             " blocks freed by another thread is freed where it was in this trace\n";
    return t;
}

} // namespace

void registerWhatif(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand(
        "whatif", "Predict each pool's reserved memory under another release threshold or other "
                  "reuse policies, beside what the trace recorded");
    struct Opts {
        std::string path, threshold, opportunistic, eventDeps, internalDeps, pool;
        bool json = false;
        int growthsShown = 5;
    };
    auto o = std::make_shared<Opts>();
    sub->add_option("TRACE", o->path, "a .poolscope trace file")->required();
    sub->add_option("--release-threshold", o->threshold,
                    "release threshold to predict under (e.g. 0, 64MiB, 1GiB, max); default: "
                    "as recorded")
        ->check(bytesValidator());
    const auto onoff = CLI::IsMember({"on", "off"});
    sub->add_option("--reuse-opportunistic", o->opportunistic, "on or off (default: as recorded)")
        ->check(onoff);
    sub->add_option("--reuse-event-dependencies", o->eventDeps, "on or off (default: as recorded)")
        ->check(onoff);
    sub->add_option("--reuse-internal-dependencies", o->internalDeps,
                    "on or off (default: as recorded)")
        ->check(onoff);
    sub->add_option("--pool", o->pool,
                    "only this pool: its number as report names it (#1) or its handle (0x...); "
                    "the settings apply to it alone");
    sub->add_flag("--json", o->json, "print JSON for scripts");
    sub->callback([&exitCode, o] {
        auto reader = openTraceOrReport(o->path, exitCode);
        if (!reader) return;
        reader->setSkipDamaged(true);
        reader->setReuseHeaderScan(true); // the names pass's decoding threads share its scan
        // --pool names a pool as the names do: they come first then; else beside the models.
        std::optional<NamesBeside> beside;
        view::EntityNames names;
        if (o->pool.empty())
            beside.emplace(*reader);
        else
            names = namesOf(*reader);
        whatif::Settings s;
        if (!o->threshold.empty()) {
            uint64_t v = 0;
            parseBytes(o->threshold, v);
            s.releaseThreshold = v;
        }
        s.allowOpportunistic = onOff(o->opportunistic);
        s.followEventDependencies = onOff(o->eventDeps);
        s.allowInternalDependencies = onOff(o->internalDeps);
        whatif::Question q;
        if (o->pool.empty()) {
            q.all = s;
        } else {
            auto pools = reader->pools();
            bool found = false;
            std::string known;
            if (pools)
                for (const PoolInfo& p : *pools) {
                    known += "\n  " + names.poolWithHandle(p.handle);
                    if (poolMatches(o->pool, p.handle, names)) {
                        q.perPool[p.handle] = s;
                        found = true;
                    }
                }
            if (!found) {
                std::fprintf(stderr, "poolscope: no pool '%s' in '%s'; its pools:%s\n",
                             o->pool.c_str(), o->path.c_str(),
                             known.empty() ? " none" : known.c_str());
                exitCode = 2;
                return;
            }
        }
        // Opportunistic reuse depends on the GPU's progress, which the trace does not show: the
        // same question with every other stream's free reusable at once gives the lower bound.
        whatif::Question low = q;
        low.opportunisticLagNs = 0;
        // Where several threads allocate from a pool at once, their order decides the peak too.
        auto answers = [&] { // its progress line cleared before the answer
            TtyProgress progress("predicting");
            return whatif::predict(*reader, {q, low}, {}, /*races=*/true, progress.callback());
        }();
        if (!answers) {
            (void)warnDamage(*reader);
            reportError(answers.error(), exitCode);
            return;
        }
        if (beside) names = beside->get();
        std::vector<whatif::PoolPrediction> preds, lows;
        std::vector<std::optional<whatif::RaceRange>> races;
        for (size_t i = 0; i < answers->perQuestion[0].size(); ++i) {
            auto& p = answers->perQuestion[0][i];
            if (!p.touched || !poolMatches(o->pool, p.handle, names)) continue;
            std::optional<whatif::RaceRange> race;
            for (const whatif::RaceRange& r : answers->races)
                if (r.handle == p.handle && r.racing()) {
                    race = r;
                    race->clampTo(p.peakReserved);
                }
            races.push_back(race);
            preds.push_back(std::move(p));
            lows.push_back(std::move(answers->perQuestion[1][i]));
        }
        if (o->json) {
            nlohmann::ordered_json j;
            j["trace"] = o->path;
            j["events"] = answers->events;
            auto& arr = j["pools"] = nlohmann::ordered_json::array();
            for (size_t pi = 0; pi < preds.size(); ++pi) {
                const auto& p = preds[pi];
                const auto& lo = lows[pi];
                nlohmann::ordered_json x;
                x["pool"] = names.pool(p.handle);
                x["handle"] = view::EntityNames::hexHandle(p.handle);
                x["device"] = p.device;
                x["settings"] = {{"release_threshold", p.releaseThreshold},
                                 {"reuse_follow_event_dependencies", p.followEventDependencies},
                                 {"reuse_allow_opportunistic", p.allowOpportunistic},
                                 {"reuse_allow_internal_dependencies", p.allowInternalDependencies}};
                if (p.recordedKnown)
                    x["recorded"] = {{"peak_reserved", p.recordedPeakReserved},
                                     {"implicit_releases", p.recordedReleases},
                                     {"growths", p.recordedGrowths},
                                     {"max_idle", p.recordedMaxIdle},
                                     {"mean_idle", p.recordedMeanIdle},
                                     {"final_reserved", p.recordedFinalReserved}};
                else
                    x["recorded"] = nullptr;
                nlohmann::ordered_json g = nlohmann::ordered_json::array();
                for (const auto& a : p.growthAllocs)
                    g.push_back({{"seq", a.seq},
                                 {"ts_ns", a.tsNs},
                                 {"stream", view::EntityNames::hexHandle(a.stream)},
                                 {"bytes", a.bytes},
                                 {"grown_by", a.grownBy}});
                x["predicted"] = {{"peak_reserved", p.peakReserved},
                                  {"peak_reserved_ts_ns", p.peakReservedTsNs},
                                  {"implicit_releases", p.releases},
                                  {"released_bytes", p.releasedBytes},
                                  {"trims", p.trims},
                                  {"growths", p.growths},
                                  {"grown_bytes", p.grownBytes},
                                  {"failed_allocs", p.failedAllocs},
                                  {"max_idle", p.maxIdle},
                                  {"mean_idle", p.meanIdle},
                                  {"final_reserved", p.finalReserved},
                                  {"growth_allocations", g},
                                  {"growth_allocations_listed_max", whatif::kKeptGrowths}};
                // With opportunistic reuse on: the prediction when every free is reusable at once.
                if (p.allowOpportunistic)
                    x["predicted_opportunistic_at_once"] = {{"peak_reserved", lo.peakReserved},
                                                            {"implicit_releases", lo.releases},
                                                            {"growths", lo.growths}};
                else
                    x["predicted_opportunistic_at_once"] = nullptr;
                // Only for a pool threads race on (other pools' JSON is unchanged).
                if (const auto& r = races[pi])
                    x["predicted_interleavings"] = {{"threads", r->threads},
                                                    {"racing_allocations", r->racingAllocs},
                                                    {"cross_thread_frees", r->crossThreadFrees},
                                                    {"peak_reserved_low", r->low},
                                                    {"peak_reserved_high", r->high},
                                                    {"peak_reserved_high_handovers_as_recorded",
                                                     r->highHandoversAsRecorded}};
                arr.push_back(std::move(x));
            }
            const std::string t = j.dump(2) + "\n";
            std::fwrite(t.data(), 1, t.size(), stdout);
            exitCode = warnDamage(*reader);
            return;
        }
        std::string t;
        if (preds.empty()) t += "no pool allocated anything in this trace: nothing to predict\n";
        char line[256];
        for (size_t pi = 0; pi < preds.size(); ++pi) {
            const auto& p = preds[pi];
            const auto& lo = lows[pi];
            t += names.poolWithHandle(p.handle) + ", device " + std::to_string(p.device) + "\n";
            t += "  predicted under: release threshold " + thresholdText(p.releaseThreshold) +
                 ", opportunistic " + onOffText(p.allowOpportunistic) + ", event dependencies " +
                 onOffText(p.followEventDependencies) + ", internal dependencies " +
                 onOffText(p.allowInternalDependencies) + "\n";
            auto row = [&](const char* what, const std::string& rec, const std::string& pred) {
                std::snprintf(line, sizeof line, "  %-20s %16s %16s\n", what, rec.c_str(), pred.c_str());
                t += line;
            };
            const bool k = p.recordedKnown;
            row("", "recorded", "predicted");
            row("peak reserved", k ? formatBytes(p.recordedPeakReserved) : "?", formatBytes(p.peakReserved));
            row("implicit releases", k ? formatCount(p.recordedReleases) : "?", formatCount(p.releases));
            row("pool growths", k ? formatCount(p.recordedGrowths) : "?", formatCount(p.growths));
            row("mean idle reserved", k ? formatBytes(p.recordedMeanIdle) : "?", formatBytes(p.meanIdle));
            row("max idle reserved", k ? formatBytes(p.recordedMaxIdle) : "?", formatBytes(p.maxIdle));
            row("final reserved", k ? formatBytes(p.recordedFinalReserved) : "?", formatBytes(p.finalReserved));
            if (p.failedAllocs) row("failed (pool limit)", "", formatCount(p.failedAllocs));
            if (p.allowOpportunistic &&
                (lo.peakReserved != p.peakReserved || lo.releases != p.releases))
                t += "  if the GPU keeps up, opportunistic reuse may give as little as " +
                     formatBytes(lo.peakReserved) + " peak reserved, " + formatCount(lo.releases) +
                     " releases, " + formatCount(lo.growths) + " growths\n";
            if (const auto& r = races[pi]) t += raceText(*r);
            if (!p.growthAllocs.empty()) {
                t += "  allocations that would grow the pool (first " +
                     std::to_string(std::min<size_t>(p.growthAllocs.size(), 5)) + " of " +
                     formatCount(p.growths) + "):\n";
                for (size_t i = 0; i < p.growthAllocs.size() && i < 5; ++i) {
                    const auto& a = p.growthAllocs[i];
                    t += "    seq " + std::to_string(a.seq) + " on " + names.stream(a.stream) +
                         ": " + formatBytes(a.bytes) + ", pool +" + formatBytes(a.grownBy) + "\n";
                }
            }
        }
        t += "(idle = reserved - used; predicted by the what-if model: docs/WHATIF.md)\n";
        std::fwrite(t.data(), 1, t.size(), stdout);
        exitCode = warnDamage(*reader);
    });
}

void registerAdvise(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand(
        "advise", "Suggest, per pool, a release threshold and reuse policies from the what-if "
                  "model, with what they cost");
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    sub->add_option("TRACE", *path, "a .poolscope trace file")->required();
    sub->add_flag("--json", *json, "print JSON for scripts");
    // The questions during the read forced on or off, for measuring them: not for users.
    auto askAhead = std::make_shared<std::string>("auto");
    sub->add_option("--ask-ahead", *askAhead)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    // The read's models on threads of their own forced on or off, likewise.
    auto readThreads = std::make_shared<std::string>("auto");
    sub->add_option("--read-threads", *readThreads)->group("")->check(CLI::IsMember({"auto", "on", "off"}));
    sub->callback([&exitCode, path, json, askAhead, readThreads] {
        auto reader = openTraceOrReport(*path, exitCode);
        if (!reader) return;
        reader->setSkipDamaged(true);
        reader->setReuseHeaderScan(true); // the models' decoding threads share its scan
        NamesBeside beside(*reader);
        auto advice = [&] {
            TtyProgress progress("advising");
            auto forced = [](const std::string& v) {
                return v == "auto" ? std::optional<bool>{} : std::optional<bool>{v == "on"};
            };
            return whatif::advise(*reader, {}, progress.callback(), forced(*askAhead), forced(*readThreads));
        }();
        if (!advice) {
            (void)warnDamage(*reader);
            reportError(advice.error(), exitCode);
            return;
        }
        const view::EntityNames names = beside.get();
        std::string t;
        if (*json) {
            nlohmann::ordered_json j;
            j["trace"] = *path;
            auto& arr = j["pools"] = nlohmann::ordered_json::array();
            for (const auto& a : *advice) {
                nlohmann::ordered_json x;
                x["pool"] = names.pool(a.handle);
                x["handle"] = view::EntityNames::hexHandle(a.handle);
                x["current"] = {{"release_threshold", a.currentThreshold},
                                {"implicit_releases", a.currentReleases},
                                {"peak_reserved", a.currentPeakReserved},
                                {"mean_idle", a.currentMeanIdle}};
                if (a.thresholdAdvice)
                    x["suggested"] = {{"release_threshold", a.suggestedThreshold},
                                      {"implicit_releases", a.suggestedReleases},
                                      {"peak_reserved", a.suggestedPeakReserved},
                                      {"mean_idle", a.suggestedMeanIdle}};
                else
                    x["suggested"] = nullptr;
                nlohmann::ordered_json pol = nlohmann::ordered_json::array();
                for (const auto& p : a.policies)
                    pol.push_back({{"policy", p.name}, {"set", "on"}, {"peak_reserved", p.peakReservedOn}});
                x["policies"] = pol;
                if (a.race)
                    x["predicted_interleavings"] = {{"threads", a.race->threads},
                                                    {"peak_reserved_low", a.race->low},
                                                    {"peak_reserved_high", a.race->high}};
                x["text"] = whatif::adviceText(a, names.pool(a.handle));
                arr.push_back(std::move(x));
            }
            t = j.dump(2) + "\n";
        } else {
            if (advice->empty()) t = "no pool allocated anything in this trace: nothing to advise\n";
            for (const auto& a : *advice) {
                const std::string s = whatif::adviceText(a, names.poolWithHandle(a.handle));
                if (!s.empty()) {
                    t += s + "\n";
                } else {
                    t += names.poolWithHandle(a.handle) + ": keep its settings (threshold " +
                         thresholdText(a.currentThreshold) + ", " + formatCount(a.currentReleases) +
                         " predicted implicit releases, peak reserved " +
                         formatBytes(a.currentPeakReserved) + ")\n";
                }
            }
        }
        std::fwrite(t.data(), 1, t.size(), stdout);
        exitCode = warnDamage(*reader);
    });
}

} // namespace poolscope::cli
