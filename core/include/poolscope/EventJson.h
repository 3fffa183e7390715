#pragma once
// An event as one JSON object, the line `poolscope dump` prints: every stored field under its
// own name plus "details" (describeEvent), keys in alphabetical order, written straight into a
// string. The text is byte for byte what nlohmann::json's dump of the same object gives through
// dumpJson (JsonText.h: invalid UTF-8 becomes U+FFFD); building that object (a std::map of 19
// keys) per event made `dump` take ~4 µs an event, seven times its CSV.

#include <charconv>
#include <string>
#include <string_view>

#include "poolscope/Event.h"

namespace poolscope {

// Appends the object (no newline). With names (dump --names): "stream_name" always and
// "pool_name" when poolName is not empty.
void appendEventJson(std::string& out, const Event& e, const std::string* streamName = nullptr,
                     const std::string* poolName = nullptr);

// s as a JSON string, quotes included, escaped as nlohmann::json escapes it.
void appendJsonString(std::string& out, std::string_view s);

// The same, through a cursor that lives over a chunk's rows (`dump`).
class TextCursor;
void writeEventJson(TextCursor& c, const Event& e, const std::string* streamName = nullptr,
                    const std::string* poolName = nullptr);
void writeJsonString(TextCursor& c, std::string_view s);

// An integer as nlohmann::json writes it.
template <class T> void appendNumber(std::string& out, T v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<size_t>(r.ptr - buf)); // an iterator pair would go through replace()
}

} // namespace poolscope
