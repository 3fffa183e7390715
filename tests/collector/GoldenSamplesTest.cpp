// Golden tests on the real traces in resources/samples (recorded on an H200 by tests/gpu/run.sh):
// each trace still opens with today's reader and agrees exactly with the ground truth its
// program printed (counts, bytes, watermarks read by the program itself at chosen calls).
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "poolscope/TraceReader.h"

using namespace poolscope;

namespace {

const std::string kDir = POOLSCOPE_SAMPLES_DIR;

struct Truth {
    nlohmann::json summary;
    std::vector<nlohmann::json> wms;
};

Truth loadTruth(const std::string& file, const std::string& workload = {}) {
    Truth t;
    std::ifstream in(kDir + "/" + file);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] != '{') continue;
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded()) continue;
        if (j["type"] == "summary" && (workload.empty() || j["workload"] == workload))
            t.summary = j;
        else if (j["type"] == "wm")
            t.wms.push_back(j);
    }
    return t;
}

std::vector<Event> loadEvents(const std::string& file) {
    auto r = TraceReader::open(kDir + "/" + file);
    EXPECT_TRUE(r.ok()) << file << ": " << (r.ok() ? "" : r.error().message);
    std::vector<Event> out;
    if (!r) return out;
    EXPECT_TRUE((*r)->forEachEvent([&](const Event& e) {
                         out.push_back(e);
                         return true;
                     }).ok());
    return out;
}

const std::map<std::string, EventKind> kCounted = {
    {"event_records", EventKind::EventRecord},   {"stream_waits", EventKind::StreamWaitEvent},
    {"stream_syncs", EventKind::StreamSynchronize}, {"ctx_syncs", EventKind::ContextSynchronize},
    {"trims", EventKind::PoolTrimTo},            {"set_attributes", EventKind::PoolSetAttribute},
    {"pool_creates", EventKind::PoolCreate},     {"pool_destroys", EventKind::PoolDestroy},
    {"set_mempool", EventKind::DeviceSetMempool}, {"pool_exports", EventKind::PoolExport},
    {"pool_imports", EventKind::PoolImport},     {"ptr_exports", EventKind::PointerExport},
    {"ptr_imports", EventKind::PointerImport},   {"stream_creates", EventKind::StreamCreate},
    {"pool_set_access", EventKind::PoolSetAccess}};

const std::map<std::string, EventKind> kWmKind = {{"alloc", EventKind::Alloc},
                                                  {"free", EventKind::Free},
                                                  {"stream_sync", EventKind::StreamSynchronize},
                                                  {"ctx_sync", EventKind::ContextSynchronize},
                                                  {"trim", EventKind::PoolTrimTo}};

void checkTrace(const std::string& trace, const Truth& t, bool checkWms = true) {
    ASSERT_FALSE(t.summary.is_null()) << "no ground truth for " << trace;
    auto events = loadEvents(trace);
    ASSERT_FALSE(events.empty());
    std::map<EventKind, std::vector<const Event*>> by;
    for (size_t i = 0; i < events.size(); ++i) {
        if (i) {
            ASSERT_LT(events[i - 1].seq, events[i].seq);
        }
        by[events[i].kind].push_back(&events[i]);
    }
    uint64_t allocs = 0, allocBytes = 0, failed = 0, frees = 0, freeBytes = 0, resolved = 0;
    for (const Event* e : by[EventKind::Alloc]) {
        if (e->failed()) {
            ++failed;
            EXPECT_EQ(e->ptr, 0u);
        } else {
            ++allocs;
            allocBytes += e->size;
        }
    }
    for (const Event* e : by[EventKind::Free]) {
        if (e->failed()) continue;
        ++frees;
        if (e->has(kSizeKnown)) {
            ++resolved;
            freeBytes += e->size;
        }
    }
    for (auto& [key, value] : t.summary.items()) {
        if (key == "type" || key == "workload" || key == "threads_allocating") continue;
        const uint64_t want = value.get<uint64_t>();
        if (key == "allocs") EXPECT_EQ(allocs, want) << trace;
        else if (key == "alloc_bytes") EXPECT_EQ(allocBytes, want) << trace;
        else if (key == "failed_allocs") EXPECT_EQ(failed, want) << trace;
        else if (key == "frees") EXPECT_EQ(frees, want) << trace;
        else if (key == "free_bytes") {
            EXPECT_EQ(resolved, frees) << trace << ": frees not resolved to their alloc";
            EXPECT_EQ(freeBytes, want) << trace;
        } else if (key == "implicit_releases_min")
            EXPECT_GE(by[EventKind::ImplicitRelease].size(), want) << trace;
        else if (key == "failed_bytes") continue;
        else if (auto it = kCounted.find(key); it != kCounted.end())
            EXPECT_EQ(by[it->second].size(), want) << trace << ": " << key;
        else
            ADD_FAILURE() << "unknown truth key " << key;
    }
    if (!checkWms) return;
    for (const auto& w : t.wms) {
        const auto& list = by[kWmKind.at(w["what"].get<std::string>())];
        const size_t n = w["nth"].get<size_t>();
        ASSERT_LT(n, list.size()) << trace << " " << w.dump();
        const Event& e = *list[n];
        const uint64_t pool = std::stoull(w["pool"].get<std::string>(), nullptr, 16);
        if (e.pool != pool) continue; // a synchronize names the current pool; others are samples
        ASSERT_TRUE(e.has(kHasWatermarks)) << trace << " " << w.dump();
        EXPECT_EQ(e.reserved, w["reserved"].get<uint64_t>()) << trace << " " << w.dump();
        EXPECT_EQ(e.used, w["used"].get<uint64_t>()) << trace << " " << w.dump();
    }
}

} // namespace

TEST(GoldenSamples, Churn) { checkTrace("churn.poolscope", loadTruth("churn.truth.jsonl")); }
// The same workload recorded in trace format 7 (event codec 6, 2 KiB pages).
TEST(GoldenSamples, ChurnFormat7) {
    checkTrace("churn_format7.poolscope", loadTruth("churn_format7.truth.jsonl"));
}
TEST(GoldenSamples, Pools) { checkTrace("pools.poolscope", loadTruth("pools.truth.jsonl")); }
TEST(GoldenSamples, TrimsAndOom) {
    checkTrace("trims_oom.poolscope", loadTruth("trims_oom.truth.jsonl"));
}
TEST(GoldenSamples, Threads) { checkTrace("threads.poolscope", loadTruth("threads.truth.jsonl")); }
TEST(GoldenSamples, IpcParentAndChild) {
    checkTrace("ipc-parent.poolscope", loadTruth("ipc.truth.jsonl", "ipc_parent"));
    checkTrace("ipc-child.poolscope", loadTruth("ipc.truth.jsonl", "ipc_child"), false);
    auto r = TraceReader::open(kDir + "/ipc-child.poolscope");
    ASSERT_TRUE(r.ok());
    auto p = (*r)->process();
    ASSERT_TRUE(p.ok());
    EXPECT_NE(p->parentPid, 0); // the child's own trace knows its parent
}
