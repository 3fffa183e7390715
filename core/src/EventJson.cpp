#include "poolscope/EventJson.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"

namespace poolscope {

namespace {

template <class T> void field(std::string& out, const char* key, T v) {
    out += key;
    appendNumber(out, v);
}

} // namespace

void appendJsonString(std::string& out, std::string_view s) {
    // Printable ASCII without a quote or a backslash is written as it is by any JSON writer;
    // anything else (control characters, UTF-8, invalid bytes) takes nlohmann's own escaping,
    // so the two can never disagree.
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
            out += dumpJson(nlohmann::json(std::string(s)));
            return;
        }
    }
    out += '"';
    out += s;
    out += '"';
}

void appendEventJson(std::string& out, const Event& e, const std::string* streamName,
                     const std::string* poolName) {
    field(out, "{\"attr\":", unsigned(e.attr));
    field(out, ",\"aux\":", e.aux);
    field(out, ",\"correlation\":", e.correlation);
    out += ",\"details\":";
    appendJsonString(out, describeEvent(e));
    field(out, ",\"device\":", int(e.device));
    field(out, ",\"flags\":", unsigned(e.flags));
    out += ",\"kind\":";
    appendJsonString(out, eventKindName(e.kind));
    field(out, ",\"pool\":", e.pool);
    if (poolName && !poolName->empty()) {
        out += ",\"pool_name\":";
        appendJsonString(out, *poolName);
    }
    field(out, ",\"ptr\":", e.ptr);
    field(out, ",\"reserved\":", e.reserved);
    field(out, ",\"result\":", e.result);
    field(out, ",\"seq\":", e.seq);
    field(out, ",\"site\":", e.site);
    field(out, ",\"size\":", e.size);
    field(out, ",\"stream\":", e.stream);
    if (streamName) {
        out += ",\"stream_name\":";
        appendJsonString(out, *streamName);
    }
    field(out, ",\"tid\":", e.tid);
    field(out, ",\"ts_ns\":", e.tsNs);
    field(out, ",\"used\":", e.used);
    field(out, ",\"variant\":", unsigned(e.variant));
    out += '}';
}

} // namespace poolscope
