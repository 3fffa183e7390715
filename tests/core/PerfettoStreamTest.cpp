// The streamed Perfetto export (writePerfettoJsonStreaming, `poolscope export`, issue #15)
// against the Timeline-based one (writePerfettoJson, what `export` wrote before and `merge`
// still writes): the same entries on every sample, on the samples exported together and on the
// benchmarks' generated workload (generated, not recorded: its samples' high watermarks cap
// `used`, so the counters depend on later samples).
//
// Compared after a canonical sort of traceEvents, not byte for byte: the Timeline-based export
// writes track by track (every counter point of a pool, then every slice of a stream...), which a
// single read in time order cannot do without holding the whole trace; the streamed one writes
// each entry once it is final. Everything else is equal: each entry's text (tids included, as a
// first pass finds the tracks), the entry count, the meta object and the stats.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "../bench/SyntheticTrace.h"
#include "TestTraces.h"
#include "poolscope/JsonText.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/interop/Export.h"
#include "poolscope/interop/ProcessTree.h"

namespace poolscope {
namespace {

using nlohmann::json;

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;

std::string readFile(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct Output {
    std::string text;
    interop::PerfettoStats stats;
};

// What both exports' inputs take from a trace beside its events.
template <class Input> void readCommon(const TraceReader& r, const std::string& label, Input& in) {
    if (auto p = r.process()) in.process = *p;
    if (auto s = r.stacks()) in.stacks = *s;
    if (auto t = r.threads()) in.threads = *t;
    if (auto ipc = interop::readIpcEvents(r)) in.ipc = *ipc;
    in.label = label;
}

Output viaTimeline(const std::vector<const TraceReader*>& readers, const std::vector<std::string>& labels,
                   const std::string& path) {
    std::vector<interop::ExportInput> inputs;
    for (size_t i = 0; i < readers.size(); ++i) {
        interop::ExportInput in;
        auto tl = buildTimeline(*readers[i]);
        EXPECT_TRUE(tl.ok());
        if (tl) in.timeline = *tl;
        readCommon(*readers[i], labels[i], in);
        inputs.push_back(std::move(in));
    }
    Output out;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_TRUE(interop::writePerfettoJson(inputs, f, &out.stats).ok());
    std::fclose(f);
    out.text = readFile(path);
    return out;
}

Output streamed(const std::vector<const TraceReader*>& readers, const std::vector<std::string>& labels,
                const std::string& path) {
    std::vector<interop::StreamInput> inputs;
    for (size_t i = 0; i < readers.size(); ++i) {
        interop::StreamInput in;
        in.reader = readers[i];
        TraceReportOptions o;
        o.report.topN = 0;
        o.advice = false;
        auto pass = reportTrace(*readers[i], o);
        EXPECT_TRUE(pass.ok());
        if (pass) in.names = pass->report.names;
        readCommon(*readers[i], labels[i], in);
        inputs.push_back(std::move(in));
    }
    Output out;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_TRUE(interop::writePerfettoJsonStreaming(inputs, f, &out.stats).ok());
    std::fclose(f);
    out.text = readFile(path);
    return out;
}

// traceEvents sorted by their text; the rest of the document as it is.
std::pair<std::vector<std::string>, json> canonical(const std::string& text) {
    json doc = json::parse(text);
    std::vector<std::string> events;
    for (const json& e : doc["traceEvents"]) events.push_back(e.dump());
    std::sort(events.begin(), events.end());
    doc.erase("traceEvents");
    return {events, doc};
}

void expectSameStats(const interop::PerfettoStats& a, const interop::PerfettoStats& b) {
    EXPECT_EQ(a.events, b.events);
    EXPECT_EQ(a.processes, b.processes);
    EXPECT_EQ(a.tracks, b.tracks);
    EXPECT_EQ(a.allocationSlices, b.allocationSlices);
    EXPECT_EQ(a.allocationRows, b.allocationRows);
    EXPECT_EQ(a.callSlices, b.callSlices);
    EXPECT_EQ(a.flows, b.flows);
    EXPECT_EQ(a.ipcSlices, b.ipcSlices);
    EXPECT_EQ(a.ipcLinks, b.ipcLinks);
    EXPECT_EQ(a.counterPoints, b.counterPoints);
    EXPECT_EQ(a.instants, b.instants);
    EXPECT_EQ(a.nvtxRanges, b.nvtxRanges);
    EXPECT_EQ(a.clampedTimestamps, b.clampedTimestamps);
    EXPECT_EQ(a.clampedRanges, b.clampedRanges);
    EXPECT_EQ(b.outOfOrderEvents, 0u);
}

// Perfetto's JSON import relies on each track's marks being in time order in the file
// (docs/INTEROP.md; ExportTest's checkStructure checks the rest): counters are per name, async
// and process-wide entries on no track.
void expectTracksInTimeOrder(const std::string& text) {
    const json doc = json::parse(text);
    std::map<std::pair<uint64_t, uint64_t>, double> last;
    for (const json& e : doc["traceEvents"]) {
        const std::string ph = e["ph"];
        if (ph == "M" || ph == "C" || ph == "b" || ph == "e" || (ph == "i" && e.value("s", "") == "p")) continue;
        const std::pair<uint64_t, uint64_t> key{e["pid"], e["tid"]};
        const double ts = e["ts"];
        if (last.count(key)) {
            EXPECT_GE(ts, last[key]) << "track time order: " << e;
        }
        last[key] = ts;
    }
}

// Returns the number of entries compared.
size_t expectSame(const std::vector<std::string>& files, const test::ScratchDir& dir, const std::string& tag) {
    std::vector<std::unique_ptr<TraceReader>> owned;
    std::vector<const TraceReader*> readers;
    std::vector<std::string> labels;
    for (const std::string& f : files) {
        auto r = TraceReader::open(f);
        EXPECT_TRUE(r.ok()) << f;
        if (!r) return 0;
        readers.push_back(r->get());
        owned.push_back(std::move(*r));
        labels.push_back(std::filesystem::path(f).filename().string());
    }
    const Output a = viaTimeline(readers, labels, dir.file(tag + ".tl.json"));
    const Output b = streamed(readers, labels, dir.file(tag + ".s.json"));
    expectSameStats(a.stats, b.stats);
    expectTracksInTimeOrder(b.text);
    const auto [ea, ma] = canonical(a.text);
    const auto [eb, mb] = canonical(b.text);
    EXPECT_EQ(ma, mb);
    EXPECT_EQ(ea.size(), eb.size());
    // The first few entries only one side has, to show what differs.
    std::vector<std::string> onlyA, onlyB;
    std::set_difference(ea.begin(), ea.end(), eb.begin(), eb.end(), std::back_inserter(onlyA));
    std::set_difference(eb.begin(), eb.end(), ea.begin(), ea.end(), std::back_inserter(onlyB));
    for (size_t i = 0; i < std::min<size_t>(onlyA.size(), 3); ++i) ADD_FAILURE() << "only in the Timeline's: " << onlyA[i];
    for (size_t i = 0; i < std::min<size_t>(onlyB.size(), 3); ++i) ADD_FAILURE() << "only in the streamed: " << onlyB[i];
    EXPECT_TRUE(onlyA.empty() && onlyB.empty()) << onlyA.size() << " / " << onlyB.size() << " entries differ";
    return ea.size();
}

TEST(PerfettoStream, EverySampleGivesTheTimelinesEntries) {
    test::ScratchDir dir;
    size_t compared = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        const std::string name = entry.path().stem().string();
        SCOPED_TRACE(name);
        expectSame({entry.path().string()}, dir, name);
        ++compared;
    }
    EXPECT_GE(compared, 15u);
}

// The counter points' and allocation slices' text is written by hand (PerfettoCommon.cpp), not
// through nlohmann::json: their names and args must be exactly what nlohmann would write (its
// escaping, its sorted keys), on every sample, the call-site one included.
TEST(PerfettoStream, HandWrittenEntriesAreNlohmannsText) {
    test::ScratchDir dir;
    size_t checked = 0, withSite = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        SCOPED_TRACE(entry.path().filename().string());
        auto r = TraceReader::open(entry.path().string());
        ASSERT_TRUE(r.ok());
        const Output out = streamed({r->get()}, {"sample"}, dir.file("hand.json"));
        std::istringstream lines(out.text);
        for (std::string line; std::getline(lines, line);) {
            if (!line.empty() && line.back() == ',') line.pop_back();
            if (line.size() < 2 || line.front() != '{') continue;
            const json e = json::parse(line, nullptr, false); // not the document's own lines
            if (e.is_discarded() || !e.is_object()) continue;
            const std::string ph = e.value("ph", "");
            if (ph != "C" && !(ph == "X" && e.value("cat", "") == "allocation")) continue;
            const std::string argsKey = "\"args\":";
            const size_t at = line.rfind(argsKey);
            ASSERT_NE(at, std::string::npos) << line;
            // args is the entry's last member: its text runs to the entry's closing brace.
            const std::string args = line.substr(at + argsKey.size(), line.size() - 1 - at - argsKey.size());
            EXPECT_EQ(args, dumpJson(e["args"])) << line;
            EXPECT_NE(line.find("\"name\":" + dumpJson(e["name"]) + ","), std::string::npos) << line;
            withSite += e["args"].contains("call_site");
            ++checked;
        }
    }
    EXPECT_GT(checked, 1000u);
    EXPECT_GT(withSite, 0u);
}

TEST(PerfettoStream, SamplesExportedTogetherGiveTheTimelinesEntries) {
    test::ScratchDir dir;
    expectSame({kSamples + "/ipc-parent.poolscope", kSamples + "/ipc-child.poolscope"}, dir, "ipc");
    expectSame({kSamples + "/torchrun-launcher.poolscope", kSamples + "/torchrun-rank0.poolscope",
                kSamples + "/torchrun-rank1.poolscope"},
               dir, "torchrun");
}

// The benchmarks' workload: many allocations live at once on a stream (rows), samples whose
// high watermarks lower `used` points written before them.
TEST(PerfettoStream, GeneratedWorkloadGivesTheTimelinesEntries) {
    test::ScratchDir dir;
    const std::vector<Event> all = bench::SyntheticTrace(11).generate(200'000);
    std::vector<Event> events, samples;
    for (const Event& e : all) (e.kind == EventKind::Sample ? samples : events).push_back(e);
    ASSERT_GT(samples.size(), 20u);
    const std::string path = dir.file("generated.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
        ASSERT_TRUE((*w)->append(events));
        ASSERT_TRUE((*w)->append(samples));
        ASSERT_TRUE((*w)->close());
    }
    EXPECT_GT(expectSame({path}, dir, "generated"), 100'000u);
}

// Without names given, the export's first pass finds them: byte for byte the export the
// streaming report's names give, on every sample and on the generated workload.
TEST(PerfettoStream, FirstPassNamesAreTheReportPasss) {
    test::ScratchDir dir;
    auto compare = [&](const std::string& file) {
        SCOPED_TRACE(file);
        auto r = TraceReader::open(file);
        ASSERT_TRUE(r.ok());
        const std::string label = std::filesystem::path(file).filename().string();
        const Output given = streamed({r->get()}, {label}, dir.file("given.json"));
        interop::StreamInput in;
        in.reader = r->get();
        if (auto p = (*r)->process()) in.process = *p;
        if (auto st = (*r)->stacks()) in.stacks = *st;
        if (auto t = (*r)->threads()) in.threads = *t;
        if (auto ipc = interop::readIpcEvents(**r)) in.ipc = *ipc;
        in.label = label;
        const std::string path = dir.file("found.json");
        std::FILE* f = std::fopen(path.c_str(), "wb");
        ASSERT_TRUE(f);
        EXPECT_TRUE(interop::writePerfettoJsonStreaming({in}, f).ok());
        std::fclose(f);
        EXPECT_TRUE(readFile(path) == given.text) << "the outputs differ";
    };
    size_t compared = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples))
        if (entry.path().extension() == ".poolscope") compare(entry.path().string()), ++compared;
    EXPECT_GE(compared, 15u);
    const std::vector<Event> all = bench::SyntheticTrace(11).generate(100'000);
    std::vector<Event> events, samples;
    for (const Event& e : all) (e.kind == EventKind::Sample ? samples : events).push_back(e);
    const std::string path = dir.file("generated.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->addDevice(DeviceInfo{0, "generated device (not a recording)", 80ull << 30, ""}));
        ASSERT_TRUE((*w)->append(events));
        ASSERT_TRUE((*w)->append(samples));
        ASSERT_TRUE((*w)->close());
    }
    compare(path);
}

// Hand-built events (not a recording): allocations that start exactly when another of their
// stream ends take its row, as the Timeline-based export packs them (a row is free at its
// slice's end, not after it): A's row goes to C, which starts at A's free while B still holds
// the second row; a zero-byte request's row goes to the allocation at its time; D's row goes to
// E, whose alloc comes before D's free at the same time. Two rows in all.
TEST(PerfettoStream, HandBuiltAllocationAtAnothersEndTakesItsRow) {
    test::ScratchDir dir;
    constexpr uint64_t kStream = 0x10, kPool = 0x100;
    test::Events ev;
    ev.alloc(1'000, kStream, kPool, 0xA000, 256);
    ev.alloc(1'500, kStream, kPool, 0xB000, 512);
    ev.free(2'000, kStream, kPool, 0xA000);
    ev.alloc(2'000, kStream, kPool, 0xC000, 128); // starts as A ends
    ev.free(3'000, kStream, kPool, 0xB000);
    ev.free(4'000, kStream, kPool, 0xC000);
    ev.alloc(5'000, kStream, kPool, 0, 0);        // zero bytes: ends where it starts
    ev.alloc(5'000, kStream, kPool, 0xD000, 64);
    ev.alloc(6'000, kStream, kPool, 0xE000, 64);  // before D's free, at the same time
    ev.free(6'000, kStream, kPool, 0xD000);
    ev.free(7'000, kStream, kPool, 0xE000);
    const std::string path = dir.file("handbuilt_row_at_end.poolscope");
    {
        auto w = TraceWriter::create(path);
        ASSERT_TRUE(w);
        ASSERT_TRUE((*w)->addDevice(DeviceInfo{0, "hand-built device (not a recording)", 80ull << 30, ""}));
        PoolInfo p;
        p.handle = kPool;
        p.device = 0;
        p.kind = PoolKind::Default;
        ASSERT_TRUE((*w)->addPool(p));
        ASSERT_TRUE((*w)->append(ev.all()));
        ASSERT_TRUE((*w)->close());
    }
    expectSame({path}, dir, "handbuilt");

    auto r = TraceReader::open(path);
    ASSERT_TRUE(r.ok());
    const Output s = streamed({r->get()}, {"handbuilt"}, dir.file("rows.json"));
    EXPECT_EQ(s.stats.allocationRows, 2u);
    std::map<std::string, uint64_t> tidOf; // ptr -> tid of its slice
    const json doc = json::parse(s.text);
    for (const json& e : doc["traceEvents"])
        if (e["ph"] == "X" && e.value("cat", "") == "allocation") tidOf[e["args"]["ptr"]] = e["tid"];
    ASSERT_EQ(tidOf.size(), 6u);
    EXPECT_NE(tidOf["0xa000"], tidOf["0xb000"]);
    EXPECT_EQ(tidOf["0xc000"], tidOf["0xa000"]);
    EXPECT_EQ(tidOf["0xd000"], tidOf["0x0"]);
    EXPECT_EQ(tidOf["0xe000"], tidOf["0xd000"]);
}

// The CLI writes the streamed export.
TEST(PerfettoStream, CliExportIsTheStreamedOne) {
    test::ScratchDir dir;
    const std::string trace = kSamples + "/churn.poolscope";
    const std::string out = dir.file("cli.json");
    auto cli = test::runCli("export " + trace + " -o " + out);
    ASSERT_EQ(cli.exitCode, 0) << cli.output;
    auto r = TraceReader::open(trace);
    ASSERT_TRUE(r.ok());
    const Output s = streamed({r->get()}, {"churn.poolscope"}, dir.file("lib.json"));
    EXPECT_EQ(readFile(out), s.text);
}

// A failed export removes its half-written output, but only a regular file: it once removed
// `-o /dev/null` (the hostile corpus's output), and as root that replaced the device with a plain
// file for every program after it. A symlink to /dev/full fails every write and must stay.
TEST(PerfettoStream, AFailedExportLeavesAnOutputThatIsNotARegularFile) {
    struct stat full {};
    if (::stat("/dev/full", &full) != 0 || !S_ISCHR(full.st_mode)) GTEST_SKIP() << "no /dev/full";
    test::ScratchDir dir;
    const std::string link = dir.file("full.json");
    ASSERT_EQ(::symlink("/dev/full", link.c_str()), 0);
    auto cli = test::runCli("export " + kSamples + "/churn.poolscope -o " + link);
    EXPECT_NE(cli.exitCode, 0) << cli.output;
    EXPECT_NE(cli.output.find("could not write"), std::string::npos) << cli.output;
    struct stat st {};
    EXPECT_EQ(::lstat(link.c_str(), &st), 0) << "the failed export removed its output's symlink";
    EXPECT_TRUE(S_ISLNK(st.st_mode));
}

} // namespace
} // namespace poolscope
