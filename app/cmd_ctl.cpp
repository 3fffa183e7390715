// poolscope ctl: headless control of a running target (started with `poolscope record --listen`
// or POOLSCOPE_LISTEN=1) through the same core ControlClient the GUI uses.
//
//   poolscope ctl targets
//   poolscope ctl TARGET list
//   poolscope ctl TARGET get POOL [ATTR]
//   poolscope ctl TARGET set POOL ATTR VALUE      (release-threshold 64MiB|max|0, reuse-* on|off)
//   poolscope ctl TARGET trim POOL BYTES
//   poolscope ctl TARGET reset POOL
//   poolscope ctl TARGET watch [--count N] [--duration S]
// TARGET is a pid or a socket path; POOL is a handle (0x...), or default[:DEVICE].
#include "ArgChecks.h"
#include "Commands.h"
#include "poolscope/JsonText.h"
#include "poolscope/Units.h"
#include "poolscope/control/ControlClient.h"
#include "poolscope/control/Discovery.h"
#include "poolscope/control/UnixSocket.h"

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace poolscope::cli {

namespace {

using namespace poolscope::control;

struct CtlState {
    std::string target;
    bool json = false;
    int timeoutMs = 5000;
    std::string origin = "cli";
    std::string pool;
    std::string attr;
    std::string value;
    uint64_t count = 0;
    double duration = 0;
    int* exitCode = nullptr;
};

std::atomic<bool> g_interrupted{false};

std::string hex(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

void fail(CtlState& st, const Error& e) {
    std::fprintf(stderr, "poolscope ctl: %s\n", e.message.c_str());
    *st.exitCode = exitCodeFor(e.code);
}

void fail(CtlState& st, ErrorCode code, const std::string& msg) {
    fail(st, Error{code, msg});
}

std::unique_ptr<ControlClient> connectTo(CtlState& st, bool subscribe = false) {
    if (st.target.empty()) {
        fail(st, ErrorCode::InvalidArgument,
             "no TARGET given: 'poolscope ctl PID|SOCKET VERB ...' ('poolscope ctl targets' lists "
             "them)");
        return nullptr;
    }
    auto path = resolveTarget(st.target);
    if (!path) {
        fail(st, path.error());
        return nullptr;
    }
    ClientOptions o;
    o.clientName = std::string("poolscope ctl ") + POOLSCOPE_VERSION;
    o.origin = st.origin == "script" ? KnobOrigin::Script : KnobOrigin::Cli;
    o.timeoutMs = st.timeoutMs;
    o.subscribeEvents = subscribe;
    auto c = ControlClient::connect(*path, o);
    if (!c) {
        fail(st, c.error());
        return nullptr;
    }
    return std::move(*c);
}

// POOL: 0x-handle, decimal handle, "default" (device 0's default pool) or "default:N".
bool resolvePool(CtlState& st, const ServerHello& h, uint64_t& out) {
    const std::string& p = st.pool;
    if (p.rfind("default", 0) == 0) {
        int device = 0;
        if (p.size() > 7) {
            if (p[7] != ':') {
                fail(st, ErrorCode::InvalidArgument,
                     "bad POOL '" + p + "' (use default or default:N)");
                return false;
            }
            try {
                device = std::stoi(p.substr(8));
            } catch (...) {
                fail(st, ErrorCode::InvalidArgument, "bad device in POOL '" + p + "'");
                return false;
            }
        }
        for (const auto& s : h.pools)
            if (s.info.device == device && s.info.kind == PoolKind::Default) {
                out = s.info.handle;
                return true;
            }
        // A collector that does not tag kinds: the first pool it saw on the device is normally
        // the default pool (the stream-ordered allocator creates it first).
        for (const auto& s : h.pools)
            if (s.info.device == device && s.info.kind == PoolKind::Unknown) {
                std::fprintf(stderr,
                             "poolscope ctl: note: the target does not say which pool is the "
                             "default; using %s, the first pool seen on device %d\n",
                             hex(s.info.handle).c_str(), device);
                out = s.info.handle;
                return true;
            }
        std::string msg = "no default pool known on device " + std::to_string(device) +
                          " (the target has not used the stream-ordered allocator there yet)";
        if (!h.pools.empty()) msg += "; known pools:";
        for (const auto& s : h.pools)
            msg += " " + hex(s.info.handle) + " (device " + std::to_string(s.info.device) + ")";
        fail(st, ErrorCode::NotFound, msg);
        return false;
    }
    try {
        size_t used = 0;
        out = std::stoull(p, &used, 0);
        if (used == p.size()) return true;
    } catch (...) {
    }
    fail(st, ErrorCode::InvalidArgument,
         "bad POOL '" + p + "': use a handle (0x7f...), default, or default:DEVICE");
    return false;
}

bool parseAttr(CtlState& st, PoolAttr& a) {
    if (attrFromCliName(st.attr, a)) return true;
    std::string names;
    for (uint16_t v = 1; v <= 8; ++v)
        names += std::string(names.empty() ? "" : ", ") + std::string(attrCliName(PoolAttr(v)));
    fail(st, ErrorCode::InvalidArgument, "unknown attribute '" + st.attr + "'; known: " + names);
    return false;
}

std::string showValue(PoolAttr a, uint64_t v) {
    if (attrIsBoolean(a)) return v ? "on" : "off";
    if (v == kUnknown) return "max (UINT64_MAX)";
    return formatBytes(v) + (v >= 1024 ? " (" + std::to_string(v) + " B)" : "");
}

std::string poolLabel(const PoolState& s) {
    return hex(s.info.handle) + " (device " + std::to_string(s.info.device) + ", " +
           std::string(poolKindName(s.info.kind)) + ")";
}

void printPool(const PoolState& s) {
    std::printf("pool %s\n", poolLabel(s).c_str());
    for (uint16_t v = 1; v <= 8; ++v) {
        PoolAttr a = PoolAttr(v);
        std::printf("  %-34s %s\n", std::string(attrCliName(a)).c_str(),
                    showValue(a, s.attribute(a)).c_str());
    }
}

bool report(CtlState& st, const Result<Ack>& a) {
    if (!a) {
        fail(st, a.error());
        return false;
    }
    return true;
}

void cmdTargets(CtlState& st) {
    auto targets = listTargets("", true);
    if (st.json) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& t : targets)
            j.push_back(
                {{"pid", t.pid ? nlohmann::json(t.pid) : nlohmann::json()}, // null: not a pid
                 {"socket", t.socketPath},
                 {"command_line", t.commandLine}});
        std::printf("%s\n", dumpJson(j, 2).c_str());
        return;
    }
    if (targets.empty()) {
        std::printf("no controllable targets in %s\n(start one with 'poolscope record --listen "
                    "-- PROGRAM' or POOLSCOPE_LISTEN=1)\n",
                    defaultControlDir().c_str());
        return;
    }
    for (const auto& t : targets) {
        if (t.pid == 0) { // a socket not named <pid>.sock: its process is unknown
            std::printf(
                "%-8s (process unknown: the socket is not named after a pid)\n         %s\n", "?",
                t.socketPath.c_str());
            continue;
        }
        std::printf("%-8lld %s\n         %s\n", static_cast<long long>(t.pid),
                    t.commandLine.c_str(), t.socketPath.c_str());
    }
}

void cmdList(CtlState& st) {
    auto c = connectTo(st);
    if (!c) return;
    auto pools = c->listPools();
    if (!report(st, pools)) return;
    ServerHello h = c->hello();
    h.pools = pools->pools;
    if (st.json) {
        std::printf("%s\n", serverHelloJson(h).c_str());
        return;
    }
    std::printf("process %lld  %s\n", static_cast<long long>(h.process.pid),
                h.process.commandLine.c_str());
    if (!h.tracePath.empty()) std::printf("trace   %s\n", h.tracePath.c_str());
    for (const auto& d : h.devices)
        std::printf("device %d  %s  %s\n", d.ordinal, d.name.c_str(),
                    d.totalMemory ? formatBytes(d.totalMemory).c_str() : "");
    if (h.pools.empty()) std::printf("no pools yet\n");
    for (const auto& p : h.pools)
        printPool(p);
}

void cmdGet(CtlState& st) {
    auto c = connectTo(st);
    if (!c) return;
    uint64_t pool;
    if (!resolvePool(st, c->hello(), pool)) return;
    if (st.attr.empty()) {
        auto a = c->get(pool, PoolAttr::ReleaseThreshold); // any attribute: the ack has the state
        if (!report(st, a)) return;
        if (!a->state) return fail(st, ErrorCode::Protocol, "the target sent no pool state");
        if (st.json)
            std::printf("%s\n", poolStateJson(*a->state).c_str());
        else
            printPool(*a->state);
        return;
    }
    PoolAttr attr;
    if (!parseAttr(st, attr)) return;
    auto a = c->get(pool, attr);
    if (!report(st, a)) return;
    if (st.json)
        std::printf("%s\n", ackJson(*a).c_str());
    else
        std::printf("%s = %s\n", std::string(attrCliName(attr)).c_str(),
                    showValue(attr, a->value).c_str());
}

bool parseSetValue(CtlState& st, PoolAttr attr, uint64_t& v) {
    std::string s;
    for (char ch : st.value)
        s += char(std::tolower(static_cast<unsigned char>(ch)));
    if (attrIsBoolean(attr)) {
        if (s == "on" || s == "1" || s == "true" || s == "yes") {
            v = 1;
            return true;
        }
        if (s == "off" || s == "0" || s == "false" || s == "no") {
            v = 0;
            return true;
        }
        fail(st, ErrorCode::InvalidArgument,
             std::string(attrCliName(attr)) + " takes on or off, not '" + st.value + "'");
        return false;
    }
    if (parseBytes(st.value, v)) return true;
    fail(st, ErrorCode::InvalidArgument,
         "bad size '" + st.value + "' (examples: 0, 4096, 64MiB, 1.5GiB, max)");
    return false;
}

void cmdSet(CtlState& st) {
    PoolAttr attr;
    if (!parseAttr(st, attr)) return;
    if (!attrIsSettable(attr)) {
        std::string msg = std::string(attrCliName(attr)) + " is read-only";
        if (attr == PoolAttr::ReservedMemHigh || attr == PoolAttr::UsedMemHigh)
            msg += "; 'poolscope ctl TARGET reset POOL' resets the high watermarks";
        return fail(st, ErrorCode::InvalidArgument, msg);
    }
    uint64_t value;
    if (!parseSetValue(st, attr, value)) return;
    auto c = connectTo(st);
    if (!c) return;
    uint64_t pool;
    if (!resolvePool(st, c->hello(), pool)) return;
    auto a = c->set(pool, attr, value);
    if (!report(st, a)) return;
    if (st.json) {
        std::printf("%s\n", ackJson(*a).c_str());
        return;
    }
    std::printf("%s of pool %s: %s -> %s\n", std::string(attrCliName(attr)).c_str(),
                hex(pool).c_str(), showValue(attr, a->oldValue).c_str(),
                showValue(attr, a->value).c_str());
    if (a->value != value)
        std::printf("note: the driver reports %s, not the requested %s\n",
                    showValue(attr, a->value).c_str(), showValue(attr, value).c_str());
}

void cmdTrim(CtlState& st) {
    uint64_t bytes;
    if (!parseBytes(st.value, bytes))
        return fail(st, ErrorCode::InvalidArgument,
                    "bad size '" + st.value + "' (examples: 0, 64MiB, 1GiB)");
    auto c = connectTo(st);
    if (!c) return;
    uint64_t pool;
    if (!resolvePool(st, c->hello(), pool)) return;
    auto a = c->trimTo(pool, bytes);
    if (!report(st, a)) return;
    if (st.json) {
        std::printf("%s\n", ackJson(*a).c_str());
        return;
    }
    std::printf("trimmed pool %s to %s: reserved %s -> %s\n", hex(pool).c_str(),
                formatBytes(bytes).c_str(), formatBytes(a->oldValue).c_str(),
                formatBytes(a->value).c_str());
    if (a->state && a->value > bytes && a->state->usedCurrent > 0)
        std::printf("(%s is in use and cannot be released)\n",
                    formatBytes(a->state->usedCurrent).c_str());
}

void cmdReset(CtlState& st) {
    auto c = connectTo(st);
    if (!c) return;
    uint64_t pool;
    if (!resolvePool(st, c->hello(), pool)) return;
    auto a = c->resetWatermarks(pool);
    if (!report(st, a)) return;
    if (st.json) {
        std::printf("%s\n", ackJson(*a).c_str());
        return;
    }
    std::printf("reset high watermarks of pool %s: reserved high %s -> %s", hex(pool).c_str(),
                formatBytes(a->oldValue).c_str(), formatBytes(a->value).c_str());
    if (a->state) std::printf(", used high now %s", formatBytes(a->state->usedHigh).c_str());
    std::printf("\n");
}

void printEvent(const Event& e, bool json) {
    if (json) {
        nlohmann::json j{
            {"seq", e.seq},    {"ts_ns", e.tsNs},    {"kind", std::string(eventKindName(e.kind))},
            {"pool", e.pool},  {"stream", e.stream}, {"ptr", e.ptr},
            {"size", e.size},  {"aux", e.aux},       {"device", e.device},
            {"tid", e.tid},    {"result", e.result}, {"attr", e.attr},
            {"flags", e.flags}};
        if (e.has(kHasWatermarks)) {
            j["reserved"] = e.reserved;
            j["used"] = e.used;
        }
        std::printf("%s\n", dumpJson(j).c_str());
        return;
    }
    std::printf("%10llu %-20s pool %-14s size %-12s", static_cast<unsigned long long>(e.seq),
                std::string(eventKindName(e.kind)).c_str(), hex(e.pool).c_str(),
                formatBytes(e.size).c_str());
    if (e.kind == EventKind::KnobChange || e.kind == EventKind::PoolSetAttribute)
        std::printf(" %s (was %s)", std::string(poolAttrName(e.attr)).c_str(),
                    formatBytes(e.aux).c_str());
    if (e.has(kHasWatermarks))
        std::printf(" reserved %s used %s", formatBytes(e.reserved).c_str(),
                    formatBytes(e.used).c_str());
    if (e.failed()) std::printf(" FAILED (%d)", e.result);
    std::printf("\n");
}

void cmdWatch(CtlState& st) {
    auto c = connectTo(st, true);
    if (!c) return;
    g_interrupted = false;
    auto oldInt = std::signal(SIGINT, [](int) { g_interrupted = true; });
    auto oldTerm = std::signal(SIGTERM, [](int) { g_interrupted = true; });
    const int64_t end = st.duration > 0 ? monotonicMs() + int64_t(st.duration * 1000) : 0;
    uint64_t shown = 0;
    while (!g_interrupted && (st.count == 0 || shown < st.count) &&
           (end == 0 || monotonicMs() < end)) {
        if (Status s = c->pump(200); !s) {
            // The target exiting ends a watch normally.
            std::fprintf(stderr, "poolscope ctl: %s\n", s.error().message.c_str());
            break;
        }
        Incoming in;
        while (c->nextIncoming(in)) {
            if (in.kind == Incoming::Kind::Notice)
                std::fprintf(stderr, "poolscope ctl: %s\n", in.notice.message.c_str());
            if (in.kind != Incoming::Kind::Events) continue;
            for (const Event& e : in.events) {
                if (st.count && shown >= st.count) break;
                printEvent(e, st.json);
                ++shown;
            }
        }
        std::fflush(stdout);
    }
    std::signal(SIGINT, oldInt);
    std::signal(SIGTERM, oldTerm);
}

// CLI11 prints a verb's usage as "poolscope ctl set ..." without ctl's own positional: the
// target goes back in, where the user types it.
class CtlVerbFormatter : public CLI::Formatter {
  public:
    std::string make_usage(const CLI::App* app, std::string name) const override {
        const std::string verb = " " + app->get_name();
        if (const auto at = name.rfind(verb); at != std::string::npos && app->get_name() != "targets")
            name.insert(at, " TARGET");
        return CLI::Formatter::make_usage(app, name);
    }
};

} // namespace

void registerCtl(CLI::App& app, int& exitCode) {
    // Lives as long as the process: the callbacks run after this function returned.
    static CtlState st;
    st.exitCode = &exitCode;
    auto* ctl = app.add_subcommand(
        "ctl", "Control a running target's memory pools (started with 'record --listen')");
    ctl->add_option("TARGET", st.target, "pid of the target, or its control socket path");
    ctl->add_flag("--json", st.json, "print results as JSON");
    ctl->add_option("--timeout", st.timeoutMs, "milliseconds to wait for the target (default 5000)")
        ->check(CLI::Range(1, 3600000));
    ctl->add_option("--origin", st.origin, "recorded origin of changes: cli or script")
        ->check(CLI::IsMember({"cli", "script"}));
    ctl->require_subcommand(1);
    // ctl's options are accepted after the verb too ("ctl 42 get default --json").
    auto common = [](CLI::App* s) {
        s->fallthrough();
        s->formatter(std::make_shared<CtlVerbFormatter>());
    };

    auto* targets = ctl->add_subcommand("targets", "list controllable targets of this user");
    common(targets);
    targets->callback([] { cmdTargets(st); });

    auto* list = ctl->add_subcommand("list", "the target's process, devices and pools");
    common(list);
    list->callback([] { cmdList(st); });

    auto* get = ctl->add_subcommand("get", "read a pool's attributes");
    common(get);
    get->add_option("POOL", st.pool, "pool handle (0x...), default, or default:DEVICE")->required();
    get->add_option("ATTR", st.attr, "attribute (all when omitted)");
    get->callback([] { cmdGet(st); });

    auto* set = ctl->add_subcommand(
        "set", "set a pool attribute: release-threshold SIZE|max, reuse-follow-event-dependencies, "
               "reuse-allow-opportunistic, reuse-allow-internal-dependencies on|off");
    common(set);
    set->add_option("POOL", st.pool, "pool handle (0x...), default, or default:DEVICE")->required();
    set->add_option("ATTR", st.attr, "attribute")->required();
    set->add_option("VALUE", st.value, "64MiB, max, 0, on, off...")->required();
    set->callback([] { cmdSet(st); });

    auto* trim = ctl->add_subcommand("trim", "release unused pool memory down to SIZE");
    common(trim);
    trim->add_option("POOL", st.pool, "pool handle (0x...), default, or default:DEVICE")
        ->required();
    trim->add_option("BYTES", st.value, "bytes to keep (0, 64MiB...)")->required();
    trim->callback([] { cmdTrim(st); });

    auto* reset = ctl->add_subcommand("reset", "reset a pool's high watermarks");
    common(reset);
    reset->add_option("POOL", st.pool, "pool handle (0x...), default, or default:DEVICE")
        ->required();
    reset->callback([] { cmdReset(st); });

    auto* watch = ctl->add_subcommand("watch", "print the target's events live");
    common(watch);
    watch->add_option("--count", st.count, "stop after N events (0: no limit)")
        ->check(wholeIn(0, UINT64_MAX));
    // At most a year: the end time is computed in int64 milliseconds.
    watch->add_option("--duration", st.duration, "stop after S seconds (0: no limit)")
        ->check(decimalIn(0.001, 31'536'000, "no limit"));
    watch->callback([] { cmdWatch(st); });
}

int explainCtlParseError(CLI::App& app, const CLI::ParseError& e) {
    // CLI11 reports `ctl 42 frob` as "A subcommand is required" without naming what it got.
    if (!dynamic_cast<const CLI::RequiredError*>(&e)) return -1;
    CLI::App* ctl = nullptr;
    for (CLI::App* s : app.get_subcommands())
        if (s->get_name() == "ctl") ctl = s;
    if (!ctl || !ctl->get_subcommands().empty()) return -1;
    std::string verbs;
    for (const CLI::App* v : ctl->get_subcommands([](CLI::App*) { return true; }))
        verbs += (verbs.empty() ? "" : ", ") + v->get_name();
    const std::vector<std::string> rest = ctl->remaining();
    CLI::Option* targetOpt = ctl->get_option_no_throw("TARGET");
    const std::string target = targetOpt && targetOpt->count() ? targetOpt->as<std::string>() : "";
    if (!rest.empty())
        std::fprintf(stderr, "poolscope ctl: unknown verb '%s' (verbs: %s)\n", rest[0].c_str(),
                     verbs.c_str());
    else if (!target.empty() && target.find_first_not_of("0123456789") != std::string::npos &&
             target.find('/') == std::string::npos)
        // Neither a pid nor a socket path: most likely a mistyped verb with no target.
        std::fprintf(stderr, "poolscope ctl: unknown verb '%s' (verbs: %s)\n", target.c_str(),
                     verbs.c_str());
    else
        std::fprintf(stderr, "poolscope ctl: a verb is required%s (verbs: %s)\n",
                     target.empty() ? "" : " after the target", verbs.c_str());
    return e.get_exit_code();
}

} // namespace poolscope::cli
