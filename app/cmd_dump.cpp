// poolscope dump: every event of a trace as rows (JSON lines or CSV), for scripts and checks.
// Events are stored compressed in chunks (see core/src/schema.sql), so this is the way to get
// them as plain rows. The columns are the record's fields as stored (their meaning per kind is
// on poolscope::EventKind), then `details`: what the kind's values mean, the same text as the
// window's Details column (describeEvent). `site` is the call site (0 = none); `dump --stacks`
// prints the sites instead of the events: each site's frames, symbolized where the binaries
// are found (Stacks.h, Symbolizer.h).

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "CliUtil.h"
#include "Commands.h"
#include "TimeRange.h"
#include "poolscope/ChunksInOrder.h"
#include "poolscope/EventCsv.h"
#include "poolscope/Event.h"
#include "poolscope/EventJson.h"
#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/TextCursor.h"
#include "poolscope/Symbolizer.h"
#include "poolscope/analysis/CallSites.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope::cli {

namespace {

struct DumpOptions {
    std::string trace;
    std::string format = "jsonl";
    bool samples = false;
    bool names = false;
    bool stacks = false;
    unsigned threads = 0; // formatting threads (0: one per CPU)
    TimeRangeArgs range;
};

// The window's names of an event's stream and pool (--names): "" for a pool handle of 0 (the
// event has none).
struct Names {
    std::string stream, pool;
};

Names namesOf(const view::EntityNames& n, const Event& e) {
    return {n.stream(e.stream), e.pool ? n.pool(e.pool) : std::string()};
}

std::string csvField(const std::string& s) {
    std::string out;
    appendCsvField(out, s);
    return out;
}

// Always quoted: names hold spaces and parentheses, and scripts split on the quotes.
std::string csvQuoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}


// `dump --stacks`: one JSON line per site (id, nvtx path, frames innermost first), or CSV rows
// site,depth,kind,frame. Names where the binaries are found here (the trace's own symbols
// first).
int dumpStacks(const TraceReader& r, bool csv) {
    int exitCode = 0;
    auto t = r.stacks();
    if (!t) {
        reportError(t.error(), exitCode);
        return exitCode;
    }
    if (t->sites.empty()) {
        std::fprintf(stderr, "poolscope: %s: no stacks recorded (traces before format 4 and "
                             "those recorded with --stacks off have none)\n",
                     r.path().c_str());
        return 0;
    }
    const SymbolizeResult sr = symbolize(*t);
    if (!sr.missing.empty())
        std::fprintf(stderr, "poolscope: note: %zu frames stay as module+offset: binaries not "
                             "found or changed (%s%s)\n",
                     sr.unresolved, sr.missing.front().c_str(),
                     sr.missing.size() > 1 ? ", ..." : "");
    if (csv) std::printf("site,depth,kind,frame\n");
    for (const auto& [id, si] : t->sites) {
        std::vector<std::pair<std::string, std::string>> frames; // kind, text
        if (auto py = t->pythonStacks.find(si.pythonStack); py != t->pythonStacks.end())
            for (const PythonFrame& f : py->second) frames.push_back({"python", frameText(f)});
        if (auto nat = t->nativeStacks.find(si.nativeStack); nat != t->nativeStacks.end())
            for (const NativeFrame& f : nat->second) frames.push_back({"native", frameText(*t, f)});
        const std::string path = analysis::sitePath(*t, id);
        if (csv) {
            for (size_t d = 0; d < frames.size(); ++d)
                std::printf("%u,%zu,%s,%s\n", id, d, frames[d].first.c_str(),
                            csvField(frames[d].second).c_str());
            if (!path.empty()) std::printf("%u,%zu,nvtx,%s\n", id, frames.size(), csvField(path).c_str());
        } else {
            nlohmann::json j = {{"site", id}, {"native_stack", si.nativeStack},
                                {"python_stack", si.pythonStack}, {"nvtx", path}};
            nlohmann::json fr = nlohmann::json::array();
            for (auto& [kind, text] : frames) fr.push_back({{"kind", kind}, {"frame", text}});
            j["frames"] = fr;
            std::printf("%s\n", dumpJson(j).c_str());
        }
        if (std::ferror(stdout)) return 13;
    }
    return 0;
}

int runDump(const DumpOptions& o) {
    int exitCode = 0;
    auto reader = openTraceOrReport(o.trace, exitCode);
    if (!reader) return exitCode;
    if (o.stacks && o.range.given()) {
        std::fprintf(stderr, "poolscope: --stacks prints the call sites, which have no time: --from and --to "
                             "apply to the events\n");
        return exitCodeFor(ErrorCode::InvalidArgument);
    }
    if (o.stacks) return dumpStacks(*reader, o.format == "csv");
    reader->setSkipDamaged(true); // print what is intact, then say what is not
    // Names number pools and streams in lane order, which takes a pass over the whole trace
    // (streaming, analysis/TraceReport.h): made only when asked for.
    view::EntityNames names;
    if (o.names) {
        auto n = [&] { // its progress line cleared before the rows
            TtyProgress progress("reading the trace for the names");
            reader->setReuseHeaderScan(true); // the names pass's decoding threads share its scan
            return traceNamesAndStart(*reader, nullptr, {progress.callback(), nullptr, o.threads});
        }();
        if (!n) {
            reportError(n.error(), exitCode);
            return exitCode;
        }
        names = std::move(n->names);
    }
    ChunkTextOptions threads;
    threads.threads = o.threads;
    if (o.range.given()) {
        // The headers' scan, kept for the read after it.
        reader->setReuseHeaderScan(true);
        auto summary = reader->summary();
        if (!summary) {
            reportError(summary.error(), exitCode);
            return exitCode;
        }
        // From the first event or sample, as `info` counts the trace's span.
        auto range = resolveTimeRange(o.range, summary->firstTsNs, summary->lastTsNs);
        if (!range) {
            reportError(range.error(), exitCode);
            return exitCode;
        }
        threads.fromNs = range->fromNs;
        threads.untilNs = range->untilNs;
    }
    const bool csv = o.format == "csv";
    if (csv)
        std::printf("seq,ts_ns,kind,variant,tid,device,correlation,result,stream,pool,ptr,size,"
                    "aux,attr,flags,reserved,used,site,details%s\n",
                    o.names ? ",stream_name,pool_name" : "");
    // Each event's row depends on the event (and the names) alone: the chunks are formatted on
    // several threads and written in order (ChunksInOrder.h).
    auto format = [&](const std::vector<Event>& events, std::string& out) {
        TextCursor c(out);
        for (const Event& e : events) {
            if (csv) {
                writeEventCsv(c, e);
                if (o.names) {
                    const Names n = namesOf(names, e);
                    c.put(',');
                    c.put(csvQuoted(n.stream));
                    c.put(',');
                    c.put(csvQuoted(n.pool));
                }
            } else if (o.names) {
                const Names n = namesOf(names, e);
                writeEventJson(c, e, &n.stream, &n.pool);
            } else {
                writeEventJson(c, e);
            }
            c.put('\n');
        }
    };
    int writeErrno = 0;
    auto write = [&](const std::string& text) {
        if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) writeErrno = errno;
        return !std::ferror(stdout);
    };
    // A reader that went away (| head) ends the dump quietly; a full disk is said.
    auto writeFailed = [&] {
        if (writeErrno == EPIPE) return 13;
        std::fprintf(stderr, "poolscope: could not write the dump: %s\n",
                     writeErrno ? std::strerror(writeErrno) : "write error");
        return exitCodeFor(ErrorCode::WriteFailed);
    };
    Status st = formatChunksInOrder(*reader, format, write, threads);
    if (!st) {
        if (st.error().code == ErrorCode::Cancelled) return writeFailed();
        (void)warnDamage(*reader);
        reportError(st.error(), exitCode);
        return exitCode;
    }
    if (o.samples) {
        auto samples = reader->samples(0, threads.fromNs, threads.untilNs);
        if (!samples) {
            reportError(samples.error(), exitCode);
            return exitCode;
        }
        std::string text;
        format(*samples, text);
        if (!write(text)) return writeFailed();
    }
    if (std::fflush(stdout) != 0) {
        writeErrno = errno;
        return writeFailed();
    }
    return warnDamage(*reader);
}

} // namespace

void registerDump(CLI::App& app, int& exitCode) {
    auto opts = std::make_shared<DumpOptions>();
    auto* sub = app.add_subcommand("dump", "Print every event of a trace as JSON lines or CSV");
    sub->add_option("TRACE", opts->trace, "a .poolscope trace file")->required();
    sub->add_option("--format", opts->format, "jsonl (default) or csv")
        ->check(CLI::IsMember({"jsonl", "csv"}));
    sub->add_flag("--samples", opts->samples, "also print periodic watermark samples (kind sample)");
    sub->add_flag("--names", opts->names,
                  "add stream_name and pool_name, the names the window and report use (reads the "
                  "trace twice)");
    sub->add_flag("--stacks", opts->stacks,
                  "print the trace's call sites (the ids in the events' site column) with their "
                  "frames instead of the events");
    addTimeRangeOptions(sub, opts->range);
    sub->add_option("--threads", opts->threads)->group("")->check(CLI::Range(0, 64));
    sub->callback([opts, &exitCode] { exitCode = runDump(*opts); });
}

} // namespace poolscope::cli
