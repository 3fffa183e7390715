// poolscope dump: every event of a trace as rows (JSON lines or CSV), for scripts and checks.
// Events are stored compressed in chunks (see core/src/schema.sql), so this is the way to get
// them as plain rows. The columns are the record's fields as stored (their meaning per kind is
// on poolscope::EventKind), then `details`: what the kind's values mean, the same text as the
// window's Details column (describeEvent).

#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/Event.h"
#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/TimelineBuilder.h"
#include "poolscope/view/EntityNames.h"

namespace poolscope::cli {

namespace {

struct DumpOptions {
    std::string trace;
    std::string format = "jsonl";
    bool samples = false;
    bool names = false;
};

nlohmann::json toJson(const Event& e) {
    return {{"seq", e.seq},          {"ts_ns", e.tsNs},     {"kind", eventKindName(e.kind)},
            {"variant", e.variant},  {"tid", e.tid},        {"device", e.device},
            {"correlation", e.correlation}, {"result", e.result}, {"stream", e.stream},
            {"pool", e.pool},        {"ptr", e.ptr},        {"size", e.size},
            {"aux", e.aux},          {"attr", e.attr},      {"flags", e.flags},
            {"reserved", e.reserved}, {"used", e.used},    {"details", describeEvent(e)}};
}

// The window's names of an event's stream and pool (--names): "" for a pool handle of 0 (the
// event has none).
struct Names {
    std::string stream, pool;
};

Names namesOf(const view::EntityNames& n, const Event& e) {
    return {n.stream(e.stream), e.pool ? n.pool(e.pool) : std::string()};
}

// RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled.
std::string csvField(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
        if (c == '"') q += '"';
        q += c;
    }
    return q + '"';
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

std::string csvRow(const Event& e) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%" PRIu64 ",%" PRId64 ",%s,%u,%u,%d,%u,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                  ",%" PRIu64 ",%" PRIu64 ",%u,%u,%" PRIu64 ",%" PRIu64,
                  e.seq, e.tsNs, std::string(eventKindName(e.kind)).c_str(), e.variant, e.tid,
                  e.device, e.correlation, e.result, e.stream, e.pool, e.ptr, e.size, e.aux,
                  e.attr, e.flags, e.reserved, e.used);
    return buf + ("," + csvField(describeEvent(e)));
}

int runDump(const DumpOptions& o) {
    int exitCode = 0;
    auto reader = openTraceOrReport(o.trace, exitCode);
    if (!reader) return exitCode;
    reader->setSkipDamaged(true); // print what is intact, then say what is not
    // Names number pools and streams in lane order, which takes the whole timeline: built
    // only when asked for.
    view::EntityNames names;
    if (o.names) {
        auto tl = buildTimeline(*reader);
        if (!tl) {
            reportError(tl.error(), exitCode);
            return exitCode;
        }
        names = view::EntityNames::fromTimeline(**tl);
    }
    const bool csv = o.format == "csv";
    if (csv)
        std::printf("seq,ts_ns,kind,variant,tid,device,correlation,result,stream,pool,ptr,size,"
                    "aux,attr,flags,reserved,used,details%s\n",
                    o.names ? ",stream_name,pool_name" : "");
    auto print = [&](const Event& e) {
        if (csv) {
            std::string row = csvRow(e);
            if (o.names) {
                const Names n = namesOf(names, e);
                row += "," + csvQuoted(n.stream) + "," + csvQuoted(n.pool);
            }
            std::printf("%s\n", row.c_str());
        } else {
            nlohmann::json j = toJson(e);
            if (o.names) {
                const Names n = namesOf(names, e);
                j["stream_name"] = n.stream;
                if (!n.pool.empty()) j["pool_name"] = n.pool;
            }
            std::printf("%s\n", dumpJson(j).c_str());
        }
        return !std::ferror(stdout);
    };
    Status st = reader->forEachEvent(print);
    if (!st) {
        if (st.error().code == ErrorCode::Cancelled) return 13; // stdout closed (e.g. | head)
        (void)warnDamage(*reader);
        reportError(st.error(), exitCode);
        return exitCode;
    }
    if (o.samples) {
        auto samples = reader->samples(0, INT64_MIN, INT64_MAX);
        if (!samples) {
            reportError(samples.error(), exitCode);
            return exitCode;
        }
        for (const Event& e : *samples) print(e);
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
    sub->callback([opts, &exitCode] { exitCode = runDump(*opts); });
}

} // namespace poolscope::cli
