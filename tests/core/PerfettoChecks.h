#pragma once
// What every Perfetto JSON export must satisfy, checked by the export tests (the Timeline-based
// writer's, the streamed one's and a time range's).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace poolscope::test {

using json = nlohmann::json;

using TrackKey = std::pair<uint64_t, uint64_t>; // (pid, tid)

// The rules of the trace-event format that Perfetto's JSON importer depends on (docs/INTEROP.md):
// every event has a known phase, integer pid/tid below 2^32 and a timestamp; slices on one track
// (X, and B/E pairs) nest; a B has its E; each track's marks are in time order in the file;
// every flow_in follows a flow_out with the same bind_id; every track used is named.
inline void checkStructure(const json& doc) {
    ASSERT_TRUE(doc.is_object());
    ASSERT_TRUE(doc.contains("traceEvents") && doc["traceEvents"].is_array());
    EXPECT_EQ(doc.value("displayTimeUnit", ""), "ns");
    std::map<TrackKey, std::vector<std::pair<double, double>>> open; // X/B stack: (start, end)
    std::map<TrackKey, std::vector<std::string>> openB;
    std::map<TrackKey, double> lastTs;
    std::set<TrackKey> named, used;
    std::set<uint64_t> pidsNamed, pids;
    const std::string phases = "XBEiCMbe";
    for (const json& e : doc["traceEvents"]) {
        ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e;
        const std::string ph = e["ph"];
        ASSERT_EQ(ph.size(), 1u) << e;
        ASSERT_NE(phases.find(ph), std::string::npos) << e;
        ASSERT_TRUE(e["pid"].is_number_unsigned() && e["pid"].get<uint64_t>() < (1ull << 32)) << e;
        ASSERT_TRUE(e["tid"].is_number_unsigned() && e["tid"].get<uint64_t>() < (1ull << 32)) << e;
        const TrackKey key{e["pid"], e["tid"]};
        pids.insert(key.first);
        if (ph == "M") {
            ASSERT_TRUE(e["args"].contains("name") || e["args"].contains("sort_index")) << e;
            if (e["name"] == "thread_name") named.insert(key);
            if (e["name"] == "process_name") pidsNamed.insert(key.first);
            continue;
        }
        ASSERT_TRUE(e.contains("name") && e["name"].is_string()) << e;
        ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e;
        const double ts = e["ts"];
        if (ph == "b" || ph == "e") { // async: keyed by id, not by track
            ASSERT_TRUE(e.contains("id")) << e;
            continue;
        }
        if (ph == "C") {
            ASSERT_TRUE(e["args"].is_object() && !e["args"].empty()) << e;
            for (auto& [k, v] : e["args"].items()) ASSERT_TRUE(v.is_number()) << e;
            continue; // counters are per name, checked below
        }
        if (ph == "i" && e.value("s", "") == "p") continue; // on the process, not a track
        used.insert(key);
        if (lastTs.count(key)) EXPECT_GE(ts, lastTs[key]) << "track time order: " << e;
        lastTs[key] = ts;
        auto& stack = open[key];
        while (!stack.empty() && stack.back().second <= ts &&
               !(ph == "E" && stack.back().second == HUGE_VAL))
            stack.pop_back();
        if (ph == "X") {
            ASSERT_TRUE(e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0) << e;
            const double end = ts + e["dur"].get<double>();
            if (!stack.empty()) EXPECT_LE(end, stack.back().second + 1e-9) << "X does not nest: " << e;
            stack.push_back({ts, end});
        } else if (ph == "B") {
            stack.push_back({ts, HUGE_VAL});
            openB[key].push_back(e["name"]);
        } else if (ph == "E") {
            ASSERT_FALSE(openB[key].empty()) << "E without B: " << e;
            EXPECT_EQ(openB[key].back(), e["name"].get<std::string>()) << e;
            openB[key].pop_back();
            ASSERT_FALSE(stack.empty());
            ASSERT_EQ(stack.back().second, HUGE_VAL) << "E closes an X: " << e;
            stack.pop_back();
        } else if (ph == "i") {
            ASSERT_TRUE(e.contains("s")) << e;
        }
    }
    // Flows: viewers sort by time, so a flow_in needs a flow_out with its bind_id no later.
    std::map<uint64_t, double> outTs;
    for (const json& e : doc["traceEvents"])
        if (e.value("flow_out", false)) {
            EXPECT_FALSE(outTs.count(e["bind_id"])) << "two flow_outs with one bind_id: " << e;
            outTs[e["bind_id"]] = e["ts"];
        }
    for (const json& e : doc["traceEvents"])
        if (e.value("flow_in", false)) {
            ASSERT_TRUE(outTs.count(e["bind_id"])) << "flow_in without flow_out: " << e;
            EXPECT_LE(outTs[e["bind_id"]], e["ts"].get<double>()) << "flow into the past: " << e;
        }
    for (auto& [key, names] : openB) EXPECT_TRUE(names.empty()) << "B without E on tid " << key.second;
    for (const TrackKey& k : used) EXPECT_TRUE(named.count(k)) << "unnamed track " << k.second;
    for (uint64_t p : pids) EXPECT_TRUE(pidsNamed.count(p)) << "unnamed process " << p;
    // Counter series: time order per counter name.
    std::map<std::pair<uint64_t, std::string>, double> lastCounter;
    for (const json& e : doc["traceEvents"]) {
        if (e["ph"] != "C") continue;
        const auto k = std::make_pair(e["pid"].get<uint64_t>(), e["name"].get<std::string>());
        if (lastCounter.count(k)) EXPECT_GT(e["ts"].get<double>(), lastCounter[k]) << e;
        lastCounter[k] = e["ts"];
    }
}

} // namespace poolscope::test
