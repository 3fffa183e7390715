// appendEventJson against the nlohmann object `dump` used to build for every event: the same
// bytes, on every event of every sample (with and without --names), on events at the limits
// of every field and on names holding what JSON must escape.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "poolscope/EventCsv.h"
#include "poolscope/EventJson.h"
#include "poolscope/EventText.h"
#include "poolscope/JsonText.h"
#include "poolscope/TraceReader.h"
#include "poolscope/analysis/TraceReport.h"

namespace poolscope {
namespace {

const std::string kSamples = POOLSCOPE_SAMPLES_DIR;

std::string viaNlohmann(const Event& e, const std::string* stream = nullptr,
                        const std::string* pool = nullptr) {
    nlohmann::json j = {{"seq", e.seq},          {"ts_ns", e.tsNs},     {"kind", eventKindName(e.kind)},
                        {"variant", e.variant},  {"tid", e.tid},        {"device", e.device},
                        {"correlation", e.correlation}, {"result", e.result}, {"stream", e.stream},
                        {"pool", e.pool},        {"ptr", e.ptr},        {"size", e.size},
                        {"aux", e.aux},          {"attr", e.attr},      {"flags", e.flags},
                        {"reserved", e.reserved}, {"used", e.used},    {"site", e.site},
                        {"details", describeEvent(e)}};
    if (stream) j["stream_name"] = *stream;
    if (pool && !pool->empty()) j["pool_name"] = *pool;
    return dumpJson(j);
}

std::string direct(const Event& e, const std::string* stream = nullptr, const std::string* pool = nullptr) {
    std::string s;
    appendEventJson(s, e, stream, pool);
    return s;
}

TEST(EventJson, EveryEventOfEverySampleIsNlohmannsLine) {
    size_t events = 0, files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSamples)) {
        if (entry.path().extension() != ".poolscope") continue;
        SCOPED_TRACE(entry.path().filename().string());
        auto r = TraceReader::open(entry.path().string());
        ASSERT_TRUE(r.ok());
        auto names = traceNames(**r);
        ASSERT_TRUE(names.ok());
        size_t bad = 0;
        ASSERT_TRUE((*r)->forEachEvent([&](const Event& e) {
                        const std::string stream = names->stream(e.stream);
                        const std::string pool = e.pool ? names->pool(e.pool) : std::string();
                        if (direct(e) != viaNlohmann(e) ||
                            direct(e, &stream, &pool) != viaNlohmann(e, &stream, &pool)) {
                            if (++bad < 3) ADD_FAILURE() << viaNlohmann(e) << "\n" << direct(e);
                        }
                        ++events;
                        return true;
                    }).ok());
        EXPECT_EQ(bad, 0u);
        ++files;
    }
    EXPECT_GE(files, 15u);
    EXPECT_GT(events, 100000u);
}

// An event of `kind` with each field at one of its limits or random (round picks some).
Event eventAtLimits(std::mt19937_64& rng, int kind, int round) {
    Event e;
    auto pick = [&](uint64_t lo, uint64_t hi) { return (rng() & 1) ? lo : hi; };
    e.seq = pick(0, std::numeric_limits<uint64_t>::max());
    e.tsNs = (rng() & 1) ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
    if (round % 3 == 0) e.tsNs = static_cast<int64_t>(rng());
    e.stream = rng();
    e.pool = round % 4 ? rng() : 0;
    e.ptr = rng();
    e.size = pick(0, rng());
    e.aux = rng();
    e.reserved = rng();
    e.used = pick(std::numeric_limits<uint64_t>::max(), 0);
    e.tid = static_cast<uint32_t>(rng());
    e.correlation = static_cast<uint32_t>(rng());
    e.result = static_cast<int32_t>(rng());
    e.device = static_cast<int16_t>(rng());
    if (round % 5 == 0) e.device = std::numeric_limits<int16_t>::min();
    e.kind = static_cast<EventKind>(kind);
    e.variant = static_cast<uint8_t>(rng());
    e.attr = static_cast<uint16_t>(rng());
    e.flags = static_cast<uint8_t>(rng());
    e.site = static_cast<uint32_t>(rng());
    return e;
}

TEST(EventJson, FieldsAtTheirLimitsAndEveryKind) {
    std::mt19937_64 rng(7);
    for (int kind = 0; kind < 64; ++kind) {
        for (int round = 0; round < 40; ++round) {
            const Event e = eventAtLimits(rng, kind, round);
            const std::string s = "stream #" + std::to_string(round), p;
            EXPECT_EQ(direct(e), viaNlohmann(e)) << "kind " << kind;
            EXPECT_EQ(direct(e, &s, &p), viaNlohmann(e, &s, &p)) << "kind " << kind;
        }
    }
}

// `dump --format csv`'s row against the snprintf row it replaced, on the same events at the
// limits of every field.
std::string viaPrintf(const Event& e) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%" PRIu64 ",%" PRId64 ",%s,%u,%u,%d,%u,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                  ",%" PRIu64 ",%" PRIu64 ",%u,%u,%" PRIu64 ",%" PRIu64 ",%u,",
                  e.seq, e.tsNs, std::string(eventKindName(e.kind)).c_str(), e.variant, e.tid,
                  e.device, e.correlation, e.result, e.stream, e.pool, e.ptr, e.size, e.aux,
                  e.attr, e.flags, e.reserved, e.used, e.site);
    std::string details = describeEvent(e), quoted = details;
    if (details.find_first_of(",\"\r\n") != std::string::npos) {
        quoted = "\"";
        for (char c : details) {
            if (c == '"') quoted += '"';
            quoted += c;
        }
        quoted += '"';
    }
    return buf + quoted;
}

TEST(EventCsv, FieldsAtTheirLimitsAndEveryKindAreThePrintfRow) {
    std::mt19937_64 rng(11);
    size_t quoted = 0;
    for (int kind = 0; kind < 64; ++kind) {
        for (int round = 0; round < 40; ++round) {
            const Event e = eventAtLimits(rng, kind, round);
            std::string row;
            appendEventCsv(row, e);
            EXPECT_EQ(row, viaPrintf(e)) << "kind " << kind;
            quoted += row.back() == '"';
        }
    }
    EXPECT_GT(quoted, 0u) << "some details need quoting";
}

TEST(EventJson, NamesNeedingEscapesAreEscapedAsNlohmannDoes) {
    const std::vector<std::string> names = {
        "",
        "plain name (default)",
        "quote \" only",
        "backslash \\ only",
        "quote \" and backslash \\",
        std::string("nul \0 inside", 12),
        "tab\tnewline\ncr\r bell\x07 del\x7f",
        "utf-8 \xc3\xa9\xe2\x82\xac \xf0\x9f\x98\x80",
        "invalid \xff\xfe bytes \xc3",
        "/",
    };
    Event e;
    for (const std::string& n : names) {
        SCOPED_TRACE(n);
        std::string direct;
        appendJsonString(direct, n);
        EXPECT_EQ(direct, dumpJson(nlohmann::json(n)));
        const std::string pool = n + " pool";
        EXPECT_EQ(::poolscope::direct(e, &n, &pool), viaNlohmann(e, &n, &pool));
    }
}

} // namespace
} // namespace poolscope
