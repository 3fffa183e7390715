#pragma once
// Every JSON writer (info --json, report --json, dump, ctl --json) dumps through here.
//
// Text from a trace is not always UTF-8: the collector copies /proc/self/cmdline as it is, so one
// Latin-1 program argument is enough, and a damaged file can hold any bytes. nlohmann's default
// dump() throws type_error.316 on such text, which aborted `info --json` (issue #12). Here each
// invalid byte becomes U+FFFD instead: the output is always valid JSON, and the replacement
// character shows where the original bytes were.
//
// Header-only and templated on the json type so core needs no public nlohmann dependency.
#include "poolscope/Units.h"

#include <cstdint>
#include <string>

namespace poolscope {

template <class Json> std::string dumpJson(const Json& j, int indent = -1) {
    return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// to - from as a JSON number without signed overflow: exact when to >= from (any such span fits
// uint64, and reads as the same number as before below 2^63), else saturated by nsBetween (only a
// damaged trace has a time that far before its start).
template <class Json> Json jsonNsBetween(int64_t from, int64_t to) {
    if (to >= from) return Json(static_cast<uint64_t>(to) - static_cast<uint64_t>(from));
    return Json(nsBetween(from, to));
}

} // namespace poolscope
