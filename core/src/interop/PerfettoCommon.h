#pragma once
// What the two Perfetto exports share (internal to core): the Timeline-based one
// (PerfettoExport.cpp, still `merge`'s and the tests' reference) and the streaming one
// (PerfettoStream.cpp, `export`'s). Every entry's text is written here, so that the two write
// the same bytes for the same thing; only where the facts come from differs.

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "poolscope/Entities.h"
#include "poolscope/Event.h"
#include "poolscope/EventJson.h"
#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/Stacks.h"
#include "poolscope/Timeline.h"
#include "poolscope/interop/Export.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope::interop::detail {

// Synthetic tracks use tids from 1,000,000,000 up (a million per process): above any Linux
// thread id (pid_max is at most 2^22), below 2^31 (Perfetto reads pid/tid as 32-bit).
constexpr uint32_t kFirstSyntheticTid = 1'000'000'000;
constexpr uint32_t kTidsPerProcess = 1'000'000;
constexpr size_t kMaxProcesses = 1000; // 1e9 + 1000 x 1e6 stays below 2^31

// A JSON string as nlohmann::json dumps it (appendJsonString: its own escaping where needed).
inline std::string quoted(const std::string& s) {
    std::string out;
    appendJsonString(out, s);
    return out;
}

// Microseconds with three decimals, from integer nanoseconds: no rounding through a double.
inline void appendMicros(std::string& out, int64_t ns) {
    const bool neg = ns < 0;
    const uint64_t a = neg ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
    if (neg) out += '-';
    appendNumber(out, a / 1000);
    const auto frac = static_cast<unsigned>(a % 1000);
    const char decimals[4] = {'.', char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10)};
    out.append(decimals, 4);
}
inline std::string micros(int64_t ns) {
    std::string out;
    appendMicros(out, ns);
    return out;
}

inline std::string hex(uint64_t v) { return view::EntityNames::hexHandle(v); }

class Writer {
public:
    explicit Writer(std::FILE* f) : f_(f) { buf_.reserve(1 << 20); }
    // One traceEvents entry (the object's text without braces).
    void event(const std::string& body) {
        buf_ += first_ ? "\n{" : ",\n{";
        first_ = false;
        buf_ += body;
        buf_ += '}';
        ++events_;
        if (buf_.size() > (1u << 20)) flush();
    }
    void raw(const std::string& s) {
        buf_ += s;
        if (buf_.size() > (1u << 20)) flush();
    }
    void flush() {
        if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) failed_ = true;
        buf_.clear();
    }
    bool failed() const { return failed_ || std::ferror(f_); }
    uint64_t events() const { return events_; }

private:
    std::FILE* f_;
    std::string buf_;
    bool first_ = true;
    bool failed_ = false;
    uint64_t events_ = 0;
};

struct Track {
    uint32_t tid = 0;
    int64_t lastNs = INT64_MIN;
};

// IPC flow ends of one input: (event seq) -> (flow id, true for the export end).
using IpcEnds = std::map<uint64_t, std::vector<std::pair<uint64_t, bool>>>;

// One input's process in the JSON: its tracks and the text of each kind of entry.
class ProcessBase {
public:
    ProcessBase(Writer& w, PerfettoStats& st, uint32_t pid, int64_t base, uint64_t flowBase,
                const view::EntityNames& names, IpcEnds ipcEnds, uint32_t tidBase)
        : w_(w), st_(st), pid_(pid), base_(base), flowBase_(flowBase), names_(names),
          ipcEnds_(std::move(ipcEnds)), tidBase_(tidBase), nextTid_(tidBase) {}

    bool tooManyTracks_ = false;

protected:
    std::string head(const char* ph, const std::string& name, const char* cat, uint32_t tid) const;
    void appendHead(std::string& out, const char* ph, const std::string& name, const char* cat,
                    uint32_t tid) const;
    std::string ts(int64_t ns) const;
    void metaName(const char* what, uint32_t tid, const std::string& name);
    // The track of that name, created (and named) at its first use: tids follow first use.
    Track& track(const std::string& name);
    // A track's marks must not go back in time: threads' clocks interleave slightly in seq
    // order (the same rule Series::push applies to the plotted series).
    int64_t ordered(Track& t, int64_t ns);

    void processName(const ProcessInfo& process, const std::string& label);
    void counterPoint(const std::string& name, uint32_t tid, int64_t t, uint64_t v);
    std::string allocName(const Allocation& a, const StackTables& stacks) const;
    // One allocation's slice on a row's track, from start to end (end >= start).
    void allocationSlice(const Allocation& a, const StackTables& stacks, uint32_t tid, int64_t start,
                         int64_t end);
    void recordSlice(uint32_t tid, int64_t ns, uint64_t flow, const WaitEdge& e);
    void waitSlice(uint32_t tid, int64_t ns, uint64_t flow, const WaitEdge& e);
    void failedInstant(uint32_t tid, int64_t ns, const FailedAllocation& f);
    void syncInstant(uint32_t tid, int64_t ns, uint64_t seq);
    void peerCopyInstant(uint32_t tid, int64_t ns, const Marker& m);
    void processInstant(const Marker& m);
    static bool isPoolMarker(EventKind k);
    std::string markerName(const Marker& m) const;
    void poolMarker(Track& t, const Marker& m);
    // Exports and imports of pools and blocks, on an IPC track per pool.
    void ipc(const std::vector<Event>& events);
    // NVTX ranges; open ones end at endOfTrace.
    void nvtx(const std::vector<NvtxRange>& ranges, const std::vector<ThreadInfo>& threads,
              int64_t endOfTrace);

    Writer& w_;
    PerfettoStats& st_;
    uint32_t pid_;
    int64_t base_;
    uint64_t flowBase_;
    const view::EntityNames& names_;
    IpcEnds ipcEnds_;
    std::unordered_map<std::string, Track> tracks_;
    uint32_t tidBase_;
    uint32_t nextTid_;
    std::string entry_; // the hot entries' text, built in one buffer kept between entries
    // The args key of an allocation still live where its slice ends: the trace's end, or the
    // end of the stretch a range's export writes (whatever happens to it after).
    const char* liveKey_ = ",\"live_at_end\":true";
};

// Every input is a process with its own block of tids (kTidsPerProcess each).
inline Status checkInputCount(size_t n) {
    if (n > kMaxProcesses)
        return Error{ErrorCode::InvalidArgument,
                     "export: at most " + std::to_string(kMaxProcesses) + " traces in one JSON trace"};
    return {};
}

inline Error tooManyTracks(const std::string& label) {
    return Error{ErrorCode::InvalidArgument,
                 "export: '" + label + "' needs more than a million tracks (allocations live at once "
                 "on one stream); the JSON format cannot show it"};
}

// The document around the processes, for both exports: the time base has been found by the
// caller; each input's pid, tid base, flow base and IPC ends are handed to run(i, ...), which
// writes that input's process and returns its flow id count (or an error).
struct InputHead {
    std::string label;
    const ProcessInfo* process = nullptr;
    const std::vector<Event>* ipc = nullptr;
};
Status writeDocument(const std::vector<InputHead>& inputs, int64_t base, std::FILE* out, PerfettoStats& st,
                     const std::function<Result<uint64_t>(size_t i, Writer&, uint32_t pid, uint64_t flowBase,
                                                          IpcEnds ends, uint32_t tidBase)>& run);

} // namespace poolscope::interop::detail
