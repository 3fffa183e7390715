#include "poolscope/EventJson.h"

#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"

namespace poolscope {

namespace {

// A row's keys and numbers go into a buffer on the stack and then into `out` a few at a time:
// appended one by one they cost `dump` a fifth of its time in small copies.
template <size_t N> char* put(char* p, const char (&text)[N]) {
    std::memcpy(p, text, N - 1);
    return p + N - 1;
}
template <class T> char* num(char* p, T v) { return std::to_chars(p, p + 24, v).ptr; }

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
    char buf[512]; // at most 8 numbers (24 bytes each) and their keys between two flushes
    char* p = buf;
    auto flush = [&] {
        out.append(buf, static_cast<size_t>(p - buf));
        p = buf;
    };
    p = num(put(p, "{\"attr\":"), unsigned(e.attr));
    p = num(put(p, ",\"aux\":"), e.aux);
    p = num(put(p, ",\"correlation\":"), e.correlation);
    p = put(p, ",\"details\":");
    flush();
    appendJsonString(out, describeEvent(e));
    p = num(put(p, ",\"device\":"), int(e.device));
    p = num(put(p, ",\"flags\":"), unsigned(e.flags));
    p = put(p, ",\"kind\":");
    flush();
    appendJsonString(out, eventKindName(e.kind));
    p = num(put(p, ",\"pool\":"), e.pool);
    if (poolName && !poolName->empty()) {
        p = put(p, ",\"pool_name\":");
        flush();
        appendJsonString(out, *poolName);
    }
    p = num(put(p, ",\"ptr\":"), e.ptr);
    p = num(put(p, ",\"reserved\":"), e.reserved);
    p = num(put(p, ",\"result\":"), e.result);
    p = num(put(p, ",\"seq\":"), e.seq);
    p = num(put(p, ",\"site\":"), e.site);
    p = num(put(p, ",\"size\":"), e.size);
    p = num(put(p, ",\"stream\":"), e.stream);
    if (streamName) {
        p = put(p, ",\"stream_name\":");
        flush();
        appendJsonString(out, *streamName);
    }
    p = num(put(p, ",\"tid\":"), e.tid);
    p = num(put(p, ",\"ts_ns\":"), e.tsNs);
    p = num(put(p, ",\"used\":"), e.used);
    p = num(put(p, ",\"variant\":"), unsigned(e.variant));
    *p++ = '}';
    flush();
}

} // namespace poolscope
