// `poolscope info TRACE [--json]`: what a trace holds (process, devices, pools, streams, counts
// by kind) without reconstructing the timeline, so it is instant even on huge traces.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/JsonText.h"
#include "poolscope/Report.h"
#include "poolscope/TraceReader.h"
#include "poolscope/Units.h"
#include "poolscope/view/EntityNames.h"
#include "poolscope/view/Overview.h"

namespace poolscope::cli {

namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "poolscope: %s\n", e.message.c_str());
    return exitCodeFor(e.code);
}

struct InfoData {
    std::map<std::string, std::string> meta;
    ProcessInfo process;
    std::vector<DeviceInfo> devices;
    std::vector<PoolInfo> pools;
    std::vector<StreamInfo> streams;
    std::vector<ThreadInfo> threads;
    TraceSummary summary;
    std::vector<DropGap> dropGaps;
    std::string dropGapsError; // a damaged drop_gaps table loses the marks, not the trace
    // Each pool's peaks without decoding a chunk: the greater of the per-chunk summaries' and
    // the driver's high watermarks in the samples. Absent for traces written before the
    // summaries, and for a pool without watermarks.
    bool summaries = false;
    std::map<uint64_t, view::OverviewBlock> recorded;
};

// Reads everything info shows; the first error wins.
Result<InfoData> load(const TraceReader& r) {
    InfoData d;
    auto meta = r.meta();
    if (!meta) return meta.error();
    d.meta = std::move(*meta);
    auto process = r.process();
    if (!process) return process.error();
    d.process = std::move(*process);
    auto devices = r.devices();
    if (!devices) return devices.error();
    d.devices = std::move(*devices);
    auto pools = r.pools();
    if (!pools) return pools.error();
    d.pools = std::move(*pools);
    auto streams = r.streams();
    if (!streams) return streams.error();
    d.streams = std::move(*streams);
    auto threads = r.threads();
    if (!threads) return threads.error();
    d.threads = std::move(*threads);
    auto summary = r.summary();
    if (!summary) return summary.error();
    d.summary = std::move(*summary);
    // An unreadable summary table loses the peaks, not the trace (tableDamage() names it).
    if (auto summaries = r.poolSummaries(); summaries) {
        d.summaries = summaries->present;
        const view::Overview overview(*summaries);
        for (uint64_t pool : overview.pools())
            if (auto w = overview.whole(pool)) d.recorded[pool] = *w;
    }
    // The driver's high watermarks read while recording bound the peaks from above where racing
    // threads made the per-event used values miss them: the report's and the window's peaks.
    // Without summaries the samples alone may understate a peak (a program that reset the high
    // watermarks), so they only add to the summaries' maxima.
    if (d.summaries) {
        if (auto highs = r.sampleHighs(); highs) {
            for (const auto& [pool, h] : *highs) {
                auto it = d.recorded.find(pool);
                if (it == d.recorded.end()) continue;
                it->second.reservedMax = std::max(it->second.reservedMax, h.reservedHigh);
                it->second.usedMax = std::max(it->second.usedMax, h.usedHigh);
            }
        }
    }
    if (auto gaps = r.dropGaps(); gaps)
        d.dropGaps = std::move(*gaps);
    else
        d.dropGapsError = gaps.error().message;
    return d;
}

// Events the collector lost, in one line: how many, in how many gaps, the first and the largest.
std::string droppedLine(const InfoData& d) {
    auto it = d.meta.find("dropped_events");
    const bool any = it != d.meta.end() && !it->second.empty() && it->second != "0";
    if (!any && d.dropGaps.empty()) return {};
    std::string out = "dropped  " + (it != d.meta.end() ? it->second : std::string("?")) +
                      " events (the collector's rings were full)";
    if (!d.dropGaps.empty()) {
        const DropGap* largest = &d.dropGaps.front();
        for (const DropGap& g : d.dropGaps)
            if (g.count > largest->count) largest = &g;
        const DropGap& first = d.dropGaps.front();
        out += " in " + std::to_string(d.dropGaps.size()) + " gap(s); first at +" +
               formatDuration(nsBetween(d.summary.firstTsNs, first.tsNs)) + " on thread " +
               std::to_string(first.tid) + "; largest " + std::to_string(largest->count) +
               " events at +" + formatDuration(nsBetween(d.summary.firstTsNs, largest->tsNs));
    }
    return out + "\n";
}

std::string toJson(const TraceReader& r, const InfoData& d) {
    using json = nlohmann::ordered_json; // keys in the order written: readable output
    json j;
    j["trace"] = r.path();
    j["schema_version"] = r.schemaVersion();
    j["meta"] = d.meta;
    const ProcessInfo& p = d.process;
    j["process"] = {{"pid", p.pid},
                    {"parent_pid", p.parentPid},
                    {"command_line", p.commandLine},
                    {"start_unix_ns", p.startTimeUnixNs},
                    {"start_mono_ns", p.startTimeMonoNs},
                    {"host", p.host},
                    {"driver_version", p.driverVersion},
                    {"runtime_version", p.runtimeVersion},
                    {"collector_version", p.collectorVersion}};
    j["devices"] = json::array();
    for (const DeviceInfo& dv : d.devices)
        j["devices"].push_back({{"ordinal", dv.ordinal},
                                {"name", dv.name},
                                {"total_memory", dv.totalMemory},
                                {"uuid", dv.uuid}});
    j["pools"] = json::array();
    for (const PoolInfo& pi : d.pools) {
        json pool = {{"handle", formatHandle(pi.handle)},
                     {"device", pi.device},
                     {"kind", poolKindName(pi.kind)},
                     {"handle_types", pi.handleTypes},
                     {"location_type", pi.locationType},
                     {"location_id", pi.locationId},
                     {"max_size", pi.maxSize},
                     {"created_ns", pi.createdTsNs}};
        // Only where the trace has summaries: null = no watermark recorded for the pool.
        if (d.summaries) {
            auto it = d.recorded.find(pi.handle);
            pool["recorded_peak_reserved"] = it != d.recorded.end() ? json(it->second.reservedMax) : json();
            pool["recorded_peak_used"] = it != d.recorded.end() ? json(it->second.usedMax) : json();
        }
        j["pools"].push_back(std::move(pool));
    }
    j["streams"] = json::array();
    for (const StreamInfo& s : d.streams)
        j["streams"].push_back({{"handle", formatHandle(s.handle)},
                                {"device", s.device},
                                {"priority", s.priorityKnown ? json(s.priority) : json()},
                                {"flags", s.flags}});
    j["threads"] = json::array();
    for (const ThreadInfo& t : d.threads) j["threads"].push_back({{"tid", t.tid}, {"name", t.name}});
    const TraceSummary& s = d.summary;
    j["events"] = s.eventCount;
    j["samples"] = s.sampleCount;
    j["first_ts_ns"] = s.firstTsNs;
    j["last_ts_ns"] = s.lastTsNs;
    j["duration_ns"] = jsonNsBetween<json>(s.firstTsNs, s.lastTsNs);
    json counts = json::object();
    for (const auto& [kind, n] : s.countsByKind) counts[std::string(eventKindName(kind))] = n;
    j["counts_by_kind"] = counts;
    // What does not add up (issue #12): the counts above are what is intact.
    j["damage"] = json::array();
    for (const TraceDamage& dm : r.damage())
        j["damage"].push_back({{"what", dm.what}, {"events", dm.events}});
    if (!d.dropGapsError.empty())
        j["damage"].push_back({{"what", "drop_gaps table unreadable: " + d.dropGapsError}, {"events", 0}});
    j["drop_gaps"] = json::array();
    for (const DropGap& g : d.dropGaps)
        j["drop_gaps"].push_back({{"ts_ns", g.tsNs}, {"duration_ns", g.durationNs},
                                  {"tid", g.tid}, {"count", g.count}});
    return dumpJson(j, 2);
}

std::string toText(const TraceReader& r, const InfoData& d) {
    std::string out = "trace    " + r.path() + " (format " + std::to_string(r.schemaVersion()) +
                      ")\n";
    const ProcessInfo& p = d.process;
    out += "process  pid " + std::to_string(p.pid);
    if (p.parentPid) out += " (child of " + std::to_string(p.parentPid) + ")";
    if (!p.commandLine.empty()) out += "  " + p.commandLine;
    out += "\n";
    if (!p.host.empty()) out += "host     " + p.host + "\n";
    if (p.driverVersion || p.runtimeVersion) {
        auto ver = [](int v) {
            return v ? std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10)
                     : std::string("unknown");
        };
        out += "cuda     driver " + ver(p.driverVersion) + ", runtime " + ver(p.runtimeVersion) +
               "\n";
    }
    if (!p.collectorVersion.empty()) out += "collector " + p.collectorVersion + "\n";
    const TraceSummary& s = d.summary;
    out += "events   " + std::to_string(s.eventCount) + " events, " +
           std::to_string(s.sampleCount) + " samples over " +
           formatDuration(nsBetween(s.firstTsNs, s.lastTsNs)) + "\n";
    for (const auto& [kind, n] : s.countsByKind) {
        char line[96];
        std::snprintf(line, sizeof line, "  %-22s %12llu\n", std::string(eventKindName(kind)).c_str(),
                      static_cast<unsigned long long>(n));
        out += line;
    }
    out += "devices  " + std::to_string(d.devices.size()) + "\n";
    for (const DeviceInfo& dv : d.devices)
        out += "  " + std::to_string(dv.ordinal) + "  " + dv.name + "  " +
               formatBytes(dv.totalMemory) + "\n";
    out += "pools    " + std::to_string(d.pools.size()) + "\n";
    for (const PoolInfo& pi : d.pools) {
        out += "  " + formatHandle(pi.handle) + "  device " + std::to_string(pi.device) + "  " +
               std::string(poolKindName(pi.kind));
        out += pi.maxSize ? "  max " + formatBytes(pi.maxSize) : "";
        if (auto it = d.recorded.find(pi.handle); it != d.recorded.end())
            out += "  peak: reserved " + formatBytes(it->second.reservedMax) +
                   ", used " + formatBytes(it->second.usedMax);
        out += "\n";
    }
    out += "streams  " + std::to_string(d.streams.size()) + "\n";
    for (const StreamInfo& st : d.streams) {
        out += "  " + view::EntityNames::streamLabel(st.handle) +
               "  device " + std::to_string(st.device);
        if (st.priorityKnown) out += "  priority " + std::to_string(st.priority);
        out += "\n";
    }
    out += "threads  " + std::to_string(d.threads.size()) + "\n";
    out += droppedLine(d);
    if (!d.dropGapsError.empty()) out += "DAMAGED  drop_gaps table unreadable: " + d.dropGapsError + "\n";
    for (const TraceDamage& dm : r.damage())
        out += "DAMAGED  " + dm.what +
               (dm.events ? " [" + std::to_string(dm.events) + " events affected]" : "") + "\n";
    for (const auto& [k, v] : d.meta) out += "meta     " + k + " = " + v + "\n";
    return out;
}

} // namespace

void registerInfo(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand("info", "Show a trace's process, devices, pools, streams and "
                                           "event counts");
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    sub->add_option("TRACE", *path, "a .poolscope trace file")->required();
    sub->add_flag("--json", *json, "print JSON for scripts");
    sub->callback([&exitCode, path, json] {
        auto reader = TraceReader::open(*path);
        if (!reader) {
            exitCode = fail(reader.error());
            return;
        }
        // info prints counts and times from the chunk headers: check every chunk first
        // (its checksum; older files are decoded), so that what it prints holds. On up to 8
        // threads: at 2 G events that is 13 GB of checksums.
        (*reader)->setSkipDamaged(true);
        const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
        if (Status v = (*reader)->verifyChunks(threads); !v) {
            exitCode = fail(v.error());
            return;
        }
        auto data = load(**reader);
        if (!data) {
            exitCode = fail(data.error());
            return;
        }
        const std::string text = *json ? toJson(**reader, *data) + "\n" : toText(**reader, *data);
        std::fwrite(text.data(), 1, text.size(), stdout);
        exitCode = warnDamage(**reader);
    });
}

} // namespace poolscope::cli
