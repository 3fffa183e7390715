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
    c.lit("{\"attr\":");
    c.number(unsigned(e.attr));
    c.lit(",\"aux\":");
    c.number(e.aux);
    c.lit(",\"correlation\":");
    c.number(e.correlation);
    c.lit(",\"details\":");
    writeJsonString(c, describeEvent(e));
    c.lit(",\"device\":");
    c.number(int(e.device));
    c.lit(",\"flags\":");
    c.number(unsigned(e.flags));
    c.lit(",\"kind\":");
    writeJsonString(c, eventKindName(e.kind));
    c.lit(",\"pool\":");
    c.number(e.pool);
    if (poolName && !poolName->empty()) {
        c.lit(",\"pool_name\":");
        writeJsonString(c, *poolName);
    }
    c.lit(",\"ptr\":");
    c.number(e.ptr);
    c.lit(",\"reserved\":");
    c.number(e.reserved);
    c.lit(",\"result\":");
    c.number(e.result);
    c.lit(",\"seq\":");
    c.number(e.seq);
    c.lit(",\"site\":");
    c.number(e.site);
    c.lit(",\"size\":");
    c.number(e.size);
    c.lit(",\"stream\":");
    c.number(e.stream);
    if (streamName) {
        c.lit(",\"stream_name\":");
        writeJsonString(c, *streamName);
    }
    c.lit(",\"tid\":");
    c.number(e.tid);
    c.lit(",\"ts_ns\":");
    c.number(e.tsNs);
    c.lit(",\"used\":");
    c.number(e.used);
    c.lit(",\"variant\":");
    c.number(unsigned(e.variant));
    c.put('}');
}

void appendEventJson(std::string& out, const Event& e, const std::string* streamName,
                     const std::string* poolName) {
    TextCursor c(out, 512);
    writeEventJson(c, e, streamName, poolName);
}

} // namespace poolscope
