// `poolscope export` (issue #16) on the committed real samples: the Perfetto JSON is checked
// structurally (valid JSON, the trace-event rules Perfetto's importer relies on) and against
// counts derived from the trace by other means (the events themselves and a replay of them),
// plus a small golden digest of one sample; the CSV row by row against the events.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "PerfettoChecks.h"
#include "TestTraces.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/Units.h"
#include "poolscope/interop/Export.h"
#include "poolscope/interop/ProcessTree.h"
#include "poolscope/replay/Replay.h"

namespace poolscope {
namespace {

using nlohmann::json;
using test::checkStructure;

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;

std::string readFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct Exported {
    json doc;
    interop::PerfettoStats stats;
};

interop::ExportInput inputOf(const TraceReader& r, const std::string& label) {
    interop::ExportInput in;
    auto tl = buildTimeline(r);
    EXPECT_TRUE(tl.ok());
    if (tl) in.timeline = *tl;
    if (auto p = r.process()) in.process = *p;
    if (auto s = r.stacks()) in.stacks = *s;
    if (auto t = r.threads()) in.threads = *t;
    in.label = label;
    return in;
}

Exported exportJson(const std::vector<std::string>& samples, const test::ScratchDir& dir) {
    std::vector<std::unique_ptr<TraceReader>> readers;
    std::vector<interop::ExportInput> inputs;
    for (const std::string& s : samples) {
        auto r = TraceReader::open(kSamples + "/" + s);
        EXPECT_TRUE(r.ok()) << s;
        inputs.push_back(inputOf(**r, s));
        readers.push_back(std::move(*r));
    }
    const std::string path = dir.file("out.json");
    std::FILE* f = std::fopen(path.c_str(), "wb");
    Exported out;
    EXPECT_TRUE(interop::writePerfettoJson(inputs, f, &out.stats).ok());
    std::fclose(f);
    out.doc = json::parse(readFile(path)); // throws (fails the test) on invalid JSON
    return out;
}


// What the trace says, counted without the Timeline or the exporter: events by kind and result,
// and a replay of them for what needs the allocator's semantics.
struct Truth {
    uint64_t allocations = 0, failed = 0, releases = 0, trims = 0, knobs = 0, syncs = 0, edges = 0;
    uint64_t rows = 0; // sum over streams of the most allocations live at once
};

Truth truthOf(const std::string& sample) {
    auto r = TraceReader::open(kSamples + "/" + sample);
    EXPECT_TRUE(r.ok());
    Truth t;
    replay::Replay rp;
    struct Span {
        int64_t start, end;
    };
    std::map<uint64_t, std::vector<Span>> spans;     // stream -> allocation spans
    std::map<uint64_t, std::pair<uint64_t, int64_t>> liveAt; // ptr -> (stream, start)
    int64_t last = INT64_MIN;
    EXPECT_TRUE((*r)->forEachEvent([&](const Event& e) {
                        last = std::max(last, e.tsNs);
                        const replay::Fact& f = rp.apply(e);
                        if (e.kind == EventKind::Alloc && e.result == 0) {
                            ++t.allocations;
                            if (e.ptr) {
                                if (auto it = liveAt.find(e.ptr); it != liveAt.end())
                                    spans[it->second.first].push_back({it->second.second, e.tsNs});
                                liveAt[e.ptr] = {e.stream, e.tsNs};
                            } else {
                                spans[e.stream].push_back({e.tsNs, e.tsNs});
                            }
                        }
                        if (e.kind == EventKind::Alloc && e.result != 0) ++t.failed;
                        if (f.retry) --t.failed; // the runtime's own retry: not a failure
                        if (e.kind == EventKind::Free)
                            if (auto it = liveAt.find(e.ptr); it != liveAt.end()) {
                                spans[it->second.first].push_back({it->second.second, e.tsNs});
                                liveAt.erase(it);
                            }
                        if (e.kind == EventKind::ImplicitRelease) ++t.releases;
                        if (e.kind == EventKind::PoolTrimTo) ++t.trims;
                        if (e.kind == EventKind::KnobChange) ++t.knobs;
                        if (e.kind == EventKind::StreamSynchronize) ++t.syncs;
                        if (f.edge) ++t.edges;
                        return true;
                    })
                    .ok());
    if (auto samples = (*r)->samples(0, INT64_MIN, INT64_MAX))
        for (const Event& s : *samples) last = std::max(last, s.tsNs);
    for (auto& [ptr, v] : liveAt) spans[v.first].push_back({v.second, last});
    for (auto& [stream, list] : spans) {
        // Rows a stream needs: taken in start order, a span needs a row besides those of the
        // earlier spans still open at its start ([start, end): one ending at its start is not).
        std::sort(list.begin(), list.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
        std::multiset<int64_t> ends;
        size_t best = 0;
        for (const Span& s : list) {
            while (!ends.empty() && *ends.begin() <= s.start) ends.erase(ends.begin());
            ends.insert(std::max(s.end, s.start));
            best = std::max(best, ends.size());
        }
        t.rows += static_cast<uint64_t>(best);
    }
    return t;
}

uint64_t count(const json& doc, const std::function<bool(const json&)>& pred) {
    uint64_t n = 0;
    for (const json& e : doc["traceEvents"]) n += pred(e) ? 1 : 0;
    return n;
}

bool nameStarts(const json& e, const std::string& prefix) {
    return e.contains("name") && e["name"].get<std::string>().rfind(prefix, 0) == 0;
}

class PerfettoExportSample : public ::testing::TestWithParam<std::string> {};

TEST_P(PerfettoExportSample, IsValidAndMatchesTheTrace) {
    test::ScratchDir dir;
    const Exported ex = exportJson({GetParam()}, dir);
    checkStructure(ex.doc);
    const Truth t = truthOf(GetParam());
    const json& d = ex.doc;
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "X" && e["cat"] == "allocation"; }),
              t.allocations);
    EXPECT_EQ(ex.stats.allocationSlices, t.allocations);
    EXPECT_EQ(ex.stats.allocationRows, t.rows);
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "M" && e["name"] == "thread_name" &&
                                                  e["args"]["name"].get<std::string>().find(" · allocations") !=
                                                      std::string::npos; }),
              t.rows);
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "i" && nameStarts(e, "failed allocation"); }),
              t.failed);
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "i" && nameStarts(e, "implicit release"); }),
              t.releases);
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "i" && nameStarts(e, "trim to"); }), t.trims);
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "i" && nameStarts(e, "knob:"); }), t.knobs);
    EXPECT_EQ(count(d, [](const json& e) { return e["ph"] == "i" && e["name"] == "stream synchronize"; }),
              t.syncs);
    EXPECT_EQ(count(d, [](const json& e) { return e.value("flow_in", false); }), t.edges);
    EXPECT_EQ(ex.stats.processes, 1u);
    EXPECT_EQ(ex.stats.events, d["traceEvents"].size());
}

INSTANTIATE_TEST_SUITE_P(Samples, PerfettoExportSample,
                         ::testing::Values("callsites.poolscope", "churn.poolscope", "pools.poolscope",
                                           "trims_oom.poolscope", "threads.poolscope", "gpt2.poolscope",
                                           "jax.poolscope", "torch_async.poolscope", "ipc-parent.poolscope"),
                         [](const auto& info) {
                             std::string n = info.param.substr(0, info.param.find('.'));
                             for (char& c : n)
                                 if (c == '-') c = '_';
                             return n;
                         });

// churn: 1,232 allocations on stream A freed on B after event waits: every wait is a flow from a
// record on the other stream, and every allocation slice says which stream freed it.
TEST(PerfettoExport, ChurnFlowsGoFromRecordToWaitAcrossStreams) {
    test::ScratchDir dir;
    const Exported ex = exportJson({"churn.poolscope"}, dir);
    std::map<uint64_t, uint64_t> outTid; // bind_id -> tid of the record
    uint64_t crossed = 0, freedOn = 0;
    for (const json& e : ex.doc["traceEvents"]) {
        if (e.value("flow_out", false)) outTid[e["bind_id"]] = e["tid"];
        if (e.value("flow_in", false)) {
            ASSERT_TRUE(outTid.count(e["bind_id"]));
            crossed += outTid[e["bind_id"]] != e["tid"].get<uint64_t>();
        }
        if (e["ph"] == "X" && e["cat"] == "allocation" && e["args"].contains("freed_on")) ++freedOn;
    }
    EXPECT_GT(crossed, 0u);
    EXPECT_EQ(crossed, ex.stats.flows);
    EXPECT_EQ(freedOn, 1232u); // the workload's own count (resources/samples/README.md)
}

// The last reserved counter point of each pool equals the trace's last read of it.
TEST(PerfettoExport, ReservedCounterEndsAtTheLastReadValue) {
    test::ScratchDir dir;
    const Exported ex = exportJson({"trims_oom.poolscope"}, dir);
    auto r = TraceReader::open(kSamples + "/trims_oom.poolscope");
    ASSERT_TRUE(r.ok());
    auto tl = buildTimeline(**r);
    ASSERT_TRUE(tl.ok());
    std::map<std::string, uint64_t> last;
    for (const json& e : ex.doc["traceEvents"])
        if (e["ph"] == "C") last[e["name"]] = e["args"]["bytes"];
    uint64_t checked = 0;
    for (const PoolTimeline& p : (*tl)->pools) {
        if (p.reserved.empty()) continue;
        bool found = false;
        for (auto& [name, v] : last)
            if (name.size() > 9 && name.compare(name.size() - 9, 9, " reserved") == 0 && v == p.reserved.v.back())
                found = true;
        EXPECT_TRUE(found);
        ++checked;
    }
    EXPECT_GT(checked, 0u);
}

// Two traces: two processes on one time axis, each track named within its own process.
TEST(PerfettoExport, SeveralTracesBecomeSeveralProcesses) {
    test::ScratchDir dir;
    const Exported ex = exportJson({"ipc-parent.poolscope", "ipc-child.poolscope"}, dir);
    checkStructure(ex.doc);
    std::set<uint64_t> pids;
    for (const json& e : ex.doc["traceEvents"])
        if (e["ph"] == "M" && e["name"] == "process_name") pids.insert(e["pid"].get<uint64_t>());
    EXPECT_EQ(pids.size(), 2u);
    EXPECT_EQ(ex.stats.processes, 2u);
}

// A small golden digest of the callsites sample (stacks and NVTX ranges): one line per event,
// track name, phase, name, ts and dur, args left out (their call-site text depends on whether
// the workload's binary is found here). POOLSCOPE_UPDATE_GOLDEN=1 rewrites it.
TEST(PerfettoExport, CallsitesGoldenDigest) {
    test::ScratchDir dir;
    const Exported ex = exportJson({"callsites.poolscope"}, dir);
    std::map<uint64_t, std::string> trackName;
    for (const json& e : ex.doc["traceEvents"])
        if (e["ph"] == "M" && e["name"] == "thread_name") trackName[e["tid"]] = e["args"]["name"];
    std::string digest;
    for (const json& e : ex.doc["traceEvents"]) {
        if (e["ph"] == "M") continue;
        std::string name = e["name"];
        // Frame names need the workload's binary; keep the size and the NVTX path.
        if (e["cat"] == "allocation") name = name.substr(0, name.find(' ', name.find(' ') + 1));
        char line[512];
        std::snprintf(line, sizeof line, "%s | %s | %s | %.3f | %s\n",
                      trackName.count(e["tid"]) ? trackName[e["tid"]].c_str() : "(process)",
                      e["ph"].get<std::string>().c_str(), name.c_str(), e["ts"].get<double>(),
                      e.contains("dur") ? std::to_string(e["dur"].get<double>()).c_str() : "-");
        digest += line;
    }
    const std::string golden = std::string(POOLSCOPE_TESTS_DIR) + "/core/golden/callsites.perfetto.txt";
    if (std::getenv("POOLSCOPE_UPDATE_GOLDEN")) {
        std::ofstream(golden) << digest;
        GTEST_SKIP() << "golden rewritten";
    }
    EXPECT_EQ(digest, readFile(golden));
}

// CSV: a header, then one row per event with the same number of fields, kinds and seqs in the
// trace's order, sizes in human units next to the raw bytes.
std::vector<std::string> csvFields(const std::string& line) {
    std::vector<std::string> out(1);
    bool q = false;
    for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (q) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                out.back() += '"';
                ++i;
            } else if (c == '"') {
                q = false;
            } else {
                out.back() += c;
            }
        } else if (c == '"') {
            q = true;
        } else if (c == ',') {
            out.emplace_back();
        } else {
            out.back() += c;
        }
    }
    return out;
}

TEST(CsvExport, OneRowPerEventWithHumanAndRawColumns) {
    test::ScratchDir dir;
    auto r = TraceReader::open(kSamples + "/churn.poolscope");
    ASSERT_TRUE(r.ok());
    interop::ExportInput in = inputOf(**r, "churn");
    const std::string path = dir.file("out.csv");
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_TRUE(interop::writeEventsCsv(**r, *in.timeline, in.stacks, f).ok());
    std::fclose(f);
    std::istringstream text(readFile(path));
    std::string line;
    ASSERT_TRUE(std::getline(text, line));
    EXPECT_EQ(line, interop::eventsCsvHeader());
    const std::vector<std::string> header = csvFields(line);
    auto col = [&](const char* n) { return size_t(std::find(header.begin(), header.end(), n) - header.begin()); };
    std::vector<Event> events;
    ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) { events.push_back(e); return true; }).ok());
    size_t i = 0;
    while (std::getline(text, line)) {
        ASSERT_LT(i, events.size());
        const auto fields = csvFields(line);
        ASSERT_EQ(fields.size(), header.size()) << line;
        const Event& e = events[i++];
        EXPECT_EQ(fields[col("seq")], std::to_string(e.seq));
        EXPECT_EQ(fields[col("kind")], std::string(eventKindName(e.kind)));
        EXPECT_EQ(fields[col("value")], std::to_string(e.size));
        EXPECT_EQ(fields[col("t_ns")], std::to_string(e.tsNs - in.timeline->t0));
        if (e.kind == EventKind::Alloc && e.result == 0) {
            EXPECT_EQ(fields[col("size")], formatBytes(e.size));
            EXPECT_EQ(fields[col("stream")].rfind("stream #", 0), 0u) << line;
        }
    }
    EXPECT_EQ(i, events.size());
}

std::string csvOf(TraceReader& r, const view::EntityNames& names, int64_t t0, const StackTables& stacks,
                  const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_TRUE(f);
    if (!f) return {};
    EXPECT_TRUE(interop::writeEventsCsv(r, names, t0, stacks, f).ok());
    std::fclose(f);
    return readFile(path);
}

// `export --format csv` takes its names and first timestamp from the streaming pass instead of a
// Timeline (bounded memory): every sample's CSV, written both ways and by the CLI, is the same
// file. The samples differ in what t0 is (a sample before the first event, several devices,
// imported pools), so a t0 or a lane numbering taken differently shows here.
TEST(CsvExport, StreamingNamesAndStartGiveTheTimelinesCsvOnEverySample) {
    test::ScratchDir dir;
    size_t compared = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        const std::string name = entry.path().stem().string();
        SCOPED_TRACE(name);
        auto r = TraceReader::open(entry.path().string());
        ASSERT_TRUE(r.ok());
        interop::ExportInput in = inputOf(**r, name);
        const std::string viaTimeline = csvOf(**r, view::EntityNames::fromTimeline(*in.timeline),
                                              in.timeline->t0, in.stacks, dir.file(name + ".tl.csv"));
        TraceReportOptions o;
        o.report.topN = 0;
        o.advice = false;
        auto pass = reportTrace(**r, o);
        ASSERT_TRUE(pass.ok());
        EXPECT_EQ(pass->report.t0, in.timeline->t0);
        EXPECT_EQ(csvOf(**r, pass->report.names, pass->report.t0, in.stacks, dir.file(name + ".s.csv")),
                  viaTimeline);
        // The CLI symbolizes the sites where the binaries are found; the samples' are not here,
        // so its rows are the library's.
        const std::string cliOut = dir.file(name + ".cli.csv");
        auto cli = test::runCli("export " + entry.path().string() + " --format csv -o " + cliOut);
        EXPECT_EQ(cli.exitCode, 0) << cli.output;
        EXPECT_EQ(readFile(cliOut), viaTimeline);
        ++compared;
    }
    EXPECT_GE(compared, 15u);
}

// A damaged trace (its last chunk row deleted: event_counts no longer match): what is intact is exported, the damage is
// named, and the exit status says so (9), as report and dump do.
TEST(ExportCli, DamagedTraceExportsWhatIsIntactAndSaysSo) {
    test::ScratchDir dir;
    const std::string copy = dir.file("damaged.poolscope");
    std::filesystem::copy_file(kSamples + "/churn.poolscope", copy);
    test::execSql(copy, "DELETE FROM event_chunks WHERE id = (SELECT MAX(id) FROM event_chunks);");
    auto r = test::runCli("export " + copy + " -o " + dir.file("d.json"));
    EXPECT_EQ(r.exitCode, 9) << r.output;
    EXPECT_NE(r.output.find("is damaged"), std::string::npos) << r.output;
    const json doc = json::parse(readFile(dir.file("d.json")));
    checkStructure(doc);
    auto d = test::runCli("diff " + kSamples + "/churn.poolscope " + copy);
    EXPECT_EQ(d.exitCode, 9) << d.output;
}

// A whole export whose JSON would pass what the Perfetto UI loads in a browser says so first
// (how many events, about how large, where to open it instead) and still writes the same file;
// a smaller one says nothing. (The size is lowered for the test: gpt2's JSON is about 17 MB.)
TEST(ExportCli, ALargeExportSaysWhereToOpenIt) {
    test::ScratchDir dir;
    const std::string gpt2 = kSamples + "/gpt2.poolscope";
    auto reader = TraceReader::open(gpt2);
    ASSERT_TRUE(reader);
    auto sum = (*reader)->summary();
    ASSERT_TRUE(sum);
    auto quiet = test::runCli("export " + gpt2 + " -o " + dir.file("a.json"));
    EXPECT_EQ(quiet.exitCode, 0) << quiet.output;
    EXPECT_EQ(quiet.output.find("trace_processor"), std::string::npos) << quiet.output;
    ::setenv("POOLSCOPE_PERFETTO_LARGE_BYTES", "1000000", 1);
    auto noted = test::runCli("export " + gpt2 + " -o " + dir.file("b.json"));
    ::unsetenv("POOLSCOPE_PERFETTO_LARGE_BYTES");
    EXPECT_EQ(noted.exitCode, 0) << noted.output;
    EXPECT_NE(noted.output.find(formatCount(sum->eventCount) + " events make about "), std::string::npos)
        << noted.output;
    EXPECT_NE(noted.output.find("trace_processor --httpd"), std::string::npos);
    EXPECT_NE(noted.output.find("--from/--to"), std::string::npos);
    EXPECT_EQ(noted.output.find("open it at https://ui.perfetto.dev"), std::string::npos) << noted.output;
    EXPECT_NE(quiet.output.find("open it at https://ui.perfetto.dev"), std::string::npos) << quiet.output;
    EXPECT_EQ(readFile(dir.file("a.json")), readFile(dir.file("b.json")));
}

// Bad input and bad output through the CLI: plain messages, the documented exit codes, no file
// left behind.
TEST(ExportCli, BadInputAndOutput) {
    test::ScratchDir dir;
    auto missing = test::runCli("export " + dir.file("nope.poolscope") + " -o " + dir.file("x.json"));
    EXPECT_EQ(missing.exitCode, 3) << missing.output;
    const std::string notTrace = dir.file("not.poolscope");
    std::ofstream(notTrace) << "hello";
    auto bad = test::runCli("export " + notTrace + " -o " + dir.file("x.json"));
    EXPECT_EQ(bad.exitCode, 5) << bad.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("x.json")));
    auto unwritable = test::runCli("export " + kSamples + "/pools.poolscope -o " + dir.file("no/such/dir.json"));
    EXPECT_EQ(unwritable.exitCode, 10) << unwritable.output;
    EXPECT_NE(unwritable.output.find("cannot write"), std::string::npos) << unwritable.output;
    auto two = test::runCli("export --format csv " + kSamples + "/pools.poolscope " + kSamples +
                            "/churn.poolscope -o " + dir.file("x.csv"));
    EXPECT_EQ(two.exitCode, 2) << two.output;
    auto fmt = test::runCli("export --format protobuf " + kSamples + "/pools.poolscope -o " + dir.file("x"));
    EXPECT_NE(fmt.exitCode, 0);
    auto ok = test::runCli("export " + kSamples + "/pools.poolscope -o " + dir.file("ok.json"));
    EXPECT_EQ(ok.exitCode, 0) << ok.output;
    EXPECT_NO_THROW((void)json::parse(readFile(dir.file("ok.json"))));
    // The output naming the input: refused before anything is written.
    const std::string copy = dir.file("copy.poolscope");
    std::filesystem::copy_file(kSamples + "/pools.poolscope", copy);
    const auto before = std::filesystem::file_size(copy);
    for (const char* fmt : {"perfetto", "csv"}) {
        auto same = test::runCli(std::string("export --format ") + fmt + " " + copy + " -o " + copy);
        EXPECT_EQ(same.exitCode, 2) << same.output;
        EXPECT_NE(same.output.find("is the input"), std::string::npos) << same.output;
        EXPECT_EQ(std::filesystem::file_size(copy), before);
    }
    auto dirOut = test::runCli("export " + kSamples + "/pools.poolscope -o " + dir.file(""));
    EXPECT_EQ(dirOut.exitCode, 10) << dirOut.output;
}

} // namespace
} // namespace poolscope

// ---- Several processes (poolscope merge, issue #16) ----

namespace poolscope {
namespace {

interop::ProcessEvents processEventsOf(const std::string& sample) {
    auto r = TraceReader::open(kSamples + "/" + sample);
    EXPECT_TRUE(r.ok());
    interop::ProcessEvents pe;
    if (auto p = (*r)->process()) pe.process = *p;
    EXPECT_TRUE((*r)->forEachEvent([&](const Event& e) {
                         if (e.kind == EventKind::PoolExport || e.kind == EventKind::PoolImport ||
                             e.kind == EventKind::PointerExport || e.kind == EventKind::PointerImport)
                             pe.ipc.push_back(e);
                         return true;
                     })
                    .ok());
    return pe;
}

uint64_t poolOfKind(const std::string& sample, PoolKind kind) {
    auto r = TraceReader::open(kSamples + "/" + sample);
    auto pools = (*r)->pools();
    for (const PoolInfo& p : *pools)
        if (p.kind == kind) return p.handle;
    return 0;
}

// The real IPC pair (resources/samples/ipc-*.poolscope, recorded on an H200): the child imports
// the parent's exported pool and one block of it.
TEST(ProcessTree, RealIpcPairIsLinked) {
    for (bool childFirst : {false, true}) {
        std::vector<interop::ProcessEvents> in = {processEventsOf("ipc-parent.poolscope"),
                                                  processEventsOf("ipc-child.poolscope")};
        if (childFirst) std::swap(in[0], in[1]);
        const size_t parent = childFirst ? 1 : 0, child = 1 - parent;
        const auto tree = interop::processTree(in);
        ASSERT_EQ(tree.size(), 2u);
        EXPECT_EQ(tree[0].input, parent);
        EXPECT_EQ(tree[0].depth, 0);
        EXPECT_EQ(tree[1].input, child);
        EXPECT_EQ(tree[1].depth, 1);
        EXPECT_EQ(tree[1].parent, parent);
        const auto links = interop::findIpcLinks(in);
        ASSERT_EQ(links.size(), 2u);
        const uint64_t exported = poolOfKind("ipc-parent.poolscope", PoolKind::Explicit);
        const uint64_t imported = poolOfKind("ipc-child.poolscope", PoolKind::Imported);
        ASSERT_NE(exported, 0u);
        ASSERT_NE(imported, 0u);
        int pools = 0, pointers = 0;
        for (const auto& l : links) {
            EXPECT_EQ(l.exporter, parent);
            EXPECT_EQ(l.importer, child);
            EXPECT_EQ(l.exportPool, exported);
            EXPECT_EQ(l.importPool, imported);
            EXPECT_LE(l.exportTsNs, l.importTsNs);
            EXPECT_EQ(l.basis, interop::IpcLink::Basis::PointerValue);
            pools += l.kind == interop::IpcLink::Kind::Pool;
            pointers += l.kind == interop::IpcLink::Kind::Pointer;
        }
        EXPECT_EQ(pools, 1);
        EXPECT_EQ(pointers, 1);
    }
}

// Hand-built events (not recordings): without a pointer import, a pool import links to the
// parent's latest earlier export of the same handle type, and to nothing of another type or
// from a later export.
TEST(ProcessTree, HandBuiltLinksByHandleTypeWithoutPointers) {
    auto ev = [](EventKind k, int64_t ts, uint64_t pool, uint64_t seq, uint32_t handleType) {
        Event e;
        e.kind = k;
        e.tsNs = ts;
        e.pool = pool;
        e.seq = seq;
        e.aux = handleType; // PoolExportFields / PoolCreateFields::handleTypes
        return e;
    };
    interop::ProcessEvents parent, child, stranger;
    parent.process.pid = 100;
    child.process.pid = 101;
    child.process.parentPid = 100;
    stranger.process.pid = 300;
    parent.ipc = {ev(EventKind::PoolExport, 10, 0xA, 1, 1), ev(EventKind::PoolExport, 12, 0xB, 2, 1),
                  ev(EventKind::PoolExport, 50, 0xC, 3, 1)};
    stranger.ipc = {ev(EventKind::PoolExport, 15, 0xD, 1, 1)};
    child.ipc = {ev(EventKind::PoolImport, 20, 0x1, 1, 1), ev(EventKind::PoolImport, 21, 0x2, 2, 2)};
    const auto links = interop::findIpcLinks({parent, child, stranger});
    ASSERT_EQ(links.size(), 1u);
    EXPECT_EQ(links[0].exporter, 0u);
    EXPECT_EQ(links[0].importer, 1u);
    EXPECT_EQ(links[0].exportPool, 0xBu); // the latest earlier export, in the parent
    EXPECT_EQ(links[0].importPool, 0x1u);
    EXPECT_EQ(links[0].basis, interop::IpcLink::Basis::HandleType);
}

TEST(ProcessTree, MergedPerfettoJsonLinksTheProcesses) {
    test::ScratchDir dir;
    std::vector<std::unique_ptr<TraceReader>> readers;
    std::vector<interop::ExportInput> inputs;
    for (const char* s : {"ipc-parent.poolscope", "ipc-child.poolscope"}) {
        auto r = TraceReader::open(kSamples + "/" + s);
        ASSERT_TRUE(r.ok());
        inputs.push_back(inputOf(**r, s));
        inputs.back().ipc = processEventsOf(s).ipc;
        readers.push_back(std::move(*r));
    }
    const std::string path = dir.file("merged.json");
    std::FILE* f = std::fopen(path.c_str(), "wb");
    interop::PerfettoStats stats;
    ASSERT_TRUE(interop::writePerfettoJson(inputs, f, &stats).ok());
    std::fclose(f);
    const json doc = json::parse(readFile(path));
    checkStructure(doc);
    EXPECT_EQ(stats.processes, 2u);
    EXPECT_EQ(stats.ipcLinks, 2u);
    std::map<uint64_t, uint64_t> outPid;
    for (const json& e : doc["traceEvents"])
        if (e.value("flow_out", false) && e["cat"] == "ipc") outPid[e["bind_id"]] = e["pid"];
    uint64_t across = 0;
    for (const json& e : doc["traceEvents"])
        if (e.value("flow_in", false) && e["cat"] == "ipc") {
            ASSERT_TRUE(outPid.count(e["bind_id"]));
            EXPECT_NE(outPid[e["bind_id"]], e["pid"].get<uint64_t>());
            ++across;
        }
    EXPECT_EQ(across, 2u);
}

TEST(MergeCli, TreeLinksAndErrors) {
    test::ScratchDir dir;
    const std::string p = kSamples + "/ipc-parent.poolscope", c = kSamples + "/ipc-child.poolscope";
    auto ok = test::runCli("merge " + c + " " + p + " -o " + dir.file("m.json"));
    EXPECT_EQ(ok.exitCode, 0) << ok.output;
    EXPECT_NE(ok.output.find("pid 526"), std::string::npos) << ok.output;
    EXPECT_NE(ok.output.find("block 0x302000000"), std::string::npos) << ok.output;
    EXPECT_NO_THROW((void)json::parse(readFile(dir.file("m.json"))));
    // Its document is the streamed export's of the tree, parents first (neither trace held whole).
    auto ex = test::runCli("export " + p + " " + c + " -o " + dir.file("e.json"));
    EXPECT_EQ(ex.exitCode, 0) << ex.output;
    EXPECT_EQ(readFile(dir.file("m.json")), readFile(dir.file("e.json")));
    auto js = test::runCli("merge --json " + p + " " + c);
    EXPECT_EQ(js.exitCode, 0);
    const json j = json::parse(js.output);
    EXPECT_EQ(j["links"].size(), 2u);
    auto one = test::runCli("merge " + p);
    EXPECT_NE(one.exitCode, 0);
    auto missing = test::runCli("merge " + p + " " + dir.file("nope.poolscope"));
    EXPECT_EQ(missing.exitCode, 3) << missing.output;
}

} // namespace
} // namespace poolscope
