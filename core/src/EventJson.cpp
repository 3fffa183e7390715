#include "poolscope/EventJson.h"

#include <nlohmann/json.hpp>

#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/TextCursor.h"

namespace poolscope {

void writeJsonString(TextCursor& c, std::string_view s) {
    // Printable ASCII without a quote or a backslash is written as it is by any JSON writer;
    // anything else (control characters, UTF-8, invalid bytes) takes nlohmann's own escaping,
    // so the two can never disagree.
    for (const char ch : s) {
        const auto u = static_cast<unsigned char>(ch);
        if (u < 0x20 || u >= 0x7f || ch == '"' || ch == '\\') {
            c.put(dumpJson(nlohmann::json(std::string(s))));
            return;
        }
    }
    c.put('"');
    c.put(s);
    c.put('"');
}

void appendJsonString(std::string& out, std::string_view s) {
    TextCursor c(out, s.size() + 2);
    writeJsonString(c, s);
}

void writeEventJson(TextCursor& c, const Event& e, const std::string* streamName,
                    const std::string* poolName) {
    auto num = [&c]<size_t N>(const char (&key)[N], auto v) {
        c.lit(key);
        c.number(v);
    };
    num("{\"attr\":", unsigned(e.attr));
    num(",\"aux\":", e.aux);
    num(",\"correlation\":", e.correlation);
    c.lit(",\"details\":");
    writeJsonString(c, describeEvent(e));
    num(",\"device\":", int(e.device));
    num(",\"flags\":", unsigned(e.flags));
    c.lit(",\"kind\":");
    writeJsonString(c, eventKindName(e.kind));
    num(",\"pool\":", e.pool);
    if (poolName && !poolName->empty()) {
        c.lit(",\"pool_name\":");
        writeJsonString(c, *poolName);
    }
    num(",\"ptr\":", e.ptr);
    num(",\"reserved\":", e.reserved);
    num(",\"result\":", e.result);
    num(",\"seq\":", e.seq);
    num(",\"site\":", e.site);
    num(",\"size\":", e.size);
    num(",\"stream\":", e.stream);
    if (streamName) {
        c.lit(",\"stream_name\":");
        writeJsonString(c, *streamName);
    }
    num(",\"tid\":", e.tid);
    num(",\"ts_ns\":", e.tsNs);
    num(",\"used\":", e.used);
    num(",\"variant\":", unsigned(e.variant));
    c.put('}');
}

void appendEventJson(std::string& out, const Event& e, const std::string* streamName,
                     const std::string* poolName) {
    TextCursor c(out, 512);
    writeEventJson(c, e, streamName, poolName);
}

} // namespace poolscope
