// `poolscope report` on every bundled sample against its output committed in
// tests/core/golden/report/ (text and JSON, plain and with --top-sites 5 --top 3). The goldens were
// written by the Timeline-based report before it was replaced by the streaming one (issue #15),
// so any change in what the report prints shows here. To accept an intended change, rerun
//   cd resources/samples && for f in *.poolscope; do n=${f%.poolscope}; G=../../tests/core/golden/report
//     poolscope report $f > $G/$n.txt; poolscope report $f --json > $G/$n.json
//     poolscope report $f --top-sites 5 --top 3 > $G/$n.sites.txt
//     poolscope report $f --json --top-sites 5 --top 3 > $G/$n.sites.json; done
// and review the diff. Symbolized frames come from the names stored in the trace; frames of
// binaries not stored there stay module+offset unless the same binary is installed here.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "TestTraces.h"

namespace poolscope {
namespace {

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;
const std::string kGolden = std::string(POOLSCOPE_TESTS_DIR) + "/core/golden/report";

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A shell command's standard output, and whether it exited 0.
std::string output(const std::string& cmd, bool& ok) {
    std::string out;
    FILE* f = ::popen(cmd.c_str(), "r");
    ok = f != nullptr;
    if (!f) return out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    const int status = ::pclose(f);
    ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    return out;
}

// The first line where two outputs part, for a readable failure.
std::string firstDifference(const std::string& want, const std::string& got) {
    std::istringstream a(want), b(got);
    std::string la, lb;
    for (int line = 1;; ++line) {
        const bool ea = !std::getline(a, la), eb = !std::getline(b, lb);
        if (ea && eb) return "identical lines (whitespace at the end?)";
        if (ea || eb || la != lb)
            return "line " + std::to_string(line) + ":\n  want: " + (ea ? "<end>" : la) +
                   "\n  got:  " + (eb ? "<end>" : lb);
    }
}

struct Variant {
    const char* suffix;
    const char* args;
};
const Variant kVariants[] = {{".txt", ""},
                             {".json", " --json"},
                             {".sites.txt", " --top-sites 5 --top 3"},
                             {".sites.json", " --json --top-sites 5 --top 3"}};

TEST(ReportGolden, EverySampleMatchesItsCommittedReport) {
    int compared = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        const std::string name = entry.path().stem().string();
        for (const Variant& v : kVariants) {
            SCOPED_TRACE(name + v.suffix);
            const std::string golden = kGolden + "/" + name + v.suffix;
            ASSERT_TRUE(std::filesystem::exists(golden)) << "no golden for a new sample: " << golden;
            // Run in the samples folder: the report names the trace as given on the command line.
            const std::string cmd = "cd '" + kSamples + "' && '" + POOLSCOPE_CLI + "' report '" +
                                    name + ".poolscope'" + v.args + " 2>/dev/null";
            bool ok = false;
            const std::string out = output(cmd, ok);
            EXPECT_TRUE(ok);
            const std::string want = readFile(golden);
            EXPECT_EQ(want.size(), out.size());
            EXPECT_TRUE(want == out) << firstDifference(want, out);
            ++compared;
        }
    }
    EXPECT_GE(compared, 4 * 15); // every sample, every variant
}

// Every time in the JSON report is measured from the trace's start, so none can be negative; a
// pool that never held a byte has no peak time at all (null), where the report once printed its
// unset time minus the start (ipc-child, gpt2, torch: -25.9 s and such).
void expectNoTimeBeforeTheStart(const nlohmann::json& j, const std::string& path, int& seen) {
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            const std::string& key = it.key();
            if (key.size() > 3 && key.compare(key.size() - 3, 3, "_ns") == 0 &&
                it.value().is_number()) {
                ++seen;
                EXPECT_GE(it.value().get<double>(), 0) << path << "." << key;
            }
            expectNoTimeBeforeTheStart(it.value(), path + "." + key, seen);
        }
    } else if (j.is_array()) {
        for (size_t i = 0; i < j.size(); ++i)
            expectNoTimeBeforeTheStart(j[i], path + "[" + std::to_string(i) + "]", seen);
    }
}

TEST(ReportGolden, NoSamplesJsonReportHasATimeBeforeTheTraceStarts) {
    int seen = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        const std::string cmd = "'" + std::string(POOLSCOPE_CLI) + "' report --json '" +
                                entry.path().string() + "' 2>/dev/null";
        bool ok = false;
        const std::string out = output(cmd, ok);
        EXPECT_TRUE(ok) << entry.path();
        const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << entry.path();
        expectNoTimeBeforeTheStart(j, entry.path().stem().string(), seen);
    }
    EXPECT_GT(seen, 100);
}

} // namespace
} // namespace poolscope
