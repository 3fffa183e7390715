#pragma once
// `poolscope diff A B` (issue #16): two runs side by side, typically the same training step
// before and after a threshold change. Per pool and per stream: peaks, idle bytes, releases,
// failures and knob settings; per call site when both traces have stacks. Computed from the two
// Reports and a few facts beside them (DiffFacts), so every number is the one `report` prints for
// that trace.
//
// Pools and streams have new handles in every run, so they are matched by what stays:
//   pools   (device, kind, creation order among the device's pools of that kind): the default
//           pool of device 0 is "dev 0 default #1" in both runs, the second explicit pool
//           created on device 1 is "dev 1 explicit #2";
//   streams the runtime's special handles (0 default, 1 legacy, 2 per-thread) by themselves;
//           others by (device, order of first activity: allocation, failure, synchronize or
//           event wait);
//   sites   by their text (frames and NVTX path, as `report --top-sites` prints them).
// What has no counterpart is listed as only in A or only in B.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "poolscope/Report.h"
#include "poolscope/Result.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"

namespace poolscope {
class TraceReader;
namespace replay {
class Replay;
struct Fact;
} // namespace replay
} // namespace poolscope

namespace poolscope::interop {

// What the diff reads of a trace beside its Report, as a Timeline has it: per pool (by handle)
// its implicit releases and trims (the markers' count), per stream (by handle, above the
// runtime's special handles 0-2, which are named rather than numbered by first use) the first
// time it was used (an allocation, a failure, a synchronize or peer copy on it, either end of an
// event wait), and per call site its allocations and bytes. Taken from a finished Timeline
// (diffFacts), or event by event from the streaming report's replay (see(), through
// TraceReportOptions::diffFacts), in memory bounded by the trace's entities and stacks.
struct DiffFacts {
    std::map<uint64_t, uint64_t> releases, trims;
    std::map<uint64_t, int64_t> firstUse;
    bool sitesKept = false; // only where the trace has stacks (the diff compares them then)
    std::map<uint32_t, std::pair<uint64_t, uint64_t>> sites; // allocations, bytes
    // With sitesKept: the stacks' sites; any other site is counted as site 0 ("(no stack)",
    // as siteText names it), so that a trace's made-up site numbers cost no memory.
    std::unordered_set<uint32_t> knownSites;

    void keepSites(const StackTables& stacks);
    // An event (not a sample) the replay `r` has just applied, with its fact.
    void see(const Event& e, const replay::Fact& f, const replay::Replay& r);

private:
    void addSite(uint32_t site, uint64_t bytes);
    friend DiffFacts diffFacts(const Timeline& tl, const StackTables* stacks);
};
DiffFacts diffFacts(const Timeline& tl, const StackTables* stacks = nullptr);

// A whole trace's Report and DiffFacts from one streaming read (reportTrace without the what-if
// advice, which the diff does not compare), in memory bounded by the trace's entities: `poolscope
// diff`, and the compare mode where the window holds only a trace's beginning. `stacks` (may be
// null): the trace's call sites, whose totals are kept.
struct DiffRead {
    Report report;
    DiffFacts facts;
};
Result<DiffRead> readForDiff(const TraceReader& reader, const StackTables* stacks, std::string path,
                             ProcessInfo process, std::map<std::string, std::string> meta,
                             const std::atomic<bool>* cancel = nullptr,
                             std::function<void(uint64_t, uint64_t)> progress = {});

// A trace's side of the diff: its Report, and its facts or (to take them from) its Timeline.
struct DiffSide {
    const Report* report = nullptr;
    const Timeline* timeline = nullptr;
    const StackTables* stacks = nullptr; // may be empty
    const DiffFacts* facts = nullptr;    // else from the timeline (with neither: none)
};

// One compared quantity. `bytes`: shown in KiB/MiB with a signed delta; otherwise a count;
// `text` values (knob settings) are compared as text.
struct DiffValue {
    std::string metric;
    enum class Unit { Bytes, Count, Duration, Text } unit = Unit::Bytes;
    std::optional<uint64_t> a, b; // absent: not known in that trace
    std::string textA, textB;     // Unit::Text
    bool changed() const;
};

struct DiffEntity {
    std::string key;            // the matching key ("dev 0 default #1")
    std::string nameA, nameB;   // each trace's own name for it ("pool #1 (default) 0x...")
    uint64_t handleA = 0, handleB = 0; // the pool or stream handle in each trace (where in it)
    bool inA = false, inB = false;
    std::vector<DiffValue> values;
};

struct SiteDiff {
    std::string site; // siteText
    uint64_t countA = 0, countB = 0;
    uint64_t bytesA = 0, bytesB = 0; // bytes allocated over the run
};

struct TraceDiff {
    std::string pathA, pathB;
    std::vector<DiffValue> totals;
    std::vector<DiffEntity> pools;
    std::vector<DiffEntity> streams;
    bool sitesCompared = false;
    std::string sitesNote; // why not, when not
    std::vector<SiteDiff> sites; // largest |bytes delta| first
};

TraceDiff diffTraces(const DiffSide& a, const DiffSide& b, size_t topSites = 20);

// Text for a terminal (human units, signed deltas, only what changed unless `all`), and JSON
// (raw numbers: a, b, delta per metric).
std::string diffToText(const TraceDiff& d, bool all = false);
std::string diffToJson(const TraceDiff& d, int indent = 2);

// One value as the text and the window show it: "32.0 MiB", "1,024", "max"; "-" where that
// trace has no such value.
std::string diffValueText(const DiffValue& v, bool sideA);
// B - A with its sign and, where A is not 0, the percentage: "+32.0 MiB (+100.0 %)", "0";
// "changed" for a text value that differs; "" where one side has no value.
std::string diffDeltaText(const DiffValue& v);
// +1 when B is higher, -1 when lower, 0 when equal, a text value or one side missing.
int diffDirection(const DiffValue& v);

// The Report that diffTraces compares, as `report` builds it for the trace (its process and meta
// read from the reader).
Report reportForDiff(const TraceReader& reader, const Timeline& timeline, const std::string& path);

// Where the two runs' plots line up (the window's compare mode): time `originA` of A is drawn at
// the same x as `originB` of B.
//   Start      each trace's first event (Timeline::t0);
//   NvtxRange  the first instance in each trace of an NVTX range name both recorded: the first
//              common name in A's order of range starts, or the one asked for.
struct RunAlignment {
    enum class Basis { Start, NvtxRange } basis = Basis::Start;
    int64_t originA = 0, originB = 0;
    std::string range; // NvtxRange: the range's name
    std::string description;
};
// The names of NVTX ranges recorded in both traces, in the order A first opened them.
std::vector<std::string> commonNvtxRanges(const StackTables* a, const StackTables* b);
// range: "" = the first common one when there is one (else Start); a name = that range (Start
// when either trace lacks it); nullopt = Start.
RunAlignment alignRuns(const Timeline& a, const StackTables* sa, const Timeline& b,
                       const StackTables* sb,
                       const std::optional<std::string>& range = std::string());

} // namespace poolscope::interop
