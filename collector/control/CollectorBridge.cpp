// The seam the collector calls (collector/src/ControlHook.h): startControlServer() adapts the
// collector's CollectorApi to the server's PoolDriver and returns a LiveSink that publishes the
// collector's written events to live clients. Compiled only when ControlHook.h is present.

#include "ControlHook.h"
#include "ControlServer.h"

#include <cctype>
#include <cstdio>
#include <memory>
#include <unistd.h>

namespace poolscope::collector {

namespace {

using control::ControlServer;
using control::PoolDriver;
using control::PoolState;

std::string ownCommandLine() {
    std::string s;
    if (FILE* f = std::fopen("/proc/self/cmdline", "rb")) {
        char buf[4096];
        size_t n = std::fread(buf, 1, sizeof buf, f);
        std::fclose(f);
        s.assign(buf, n);
    }
    while (!s.empty() && s.back() == '\0')
        s.pop_back();
    for (char& c : s)
        if (c == '\0') c = ' ';
    return s;
}

// CollectorApi already applies each change with the collector's guard set and records the
// KnobChange event itself (recordsKnobChanges() = true), so this adapter only translates.
class ApiDriver final : public PoolDriver {
public:
    explicit ApiDriver(CollectorApi& api) : api_(api) {}

    control::TargetDescription describe() override {
        control::TargetDescription d;
        d.process = api_.process();
        d.devices = api_.devices();
        // What the collector leaves empty, the process itself can tell (attach lists show it).
        if (d.process.commandLine.empty()) d.process.commandLine = ownCommandLine();
        if (d.process.host.empty()) {
            char host[256] = {};
            if (gethostname(host, sizeof host - 1) == 0) d.process.host = host;
        }
        return d;
    }
    Result<std::vector<PoolState>> listPools() override {
        std::vector<PoolState> out;
        for (const PoolInfo& info : api_.pools())
            out.push_back(read(info));
        return out;
    }
    Result<PoolState> poolState(uint64_t pool) override {
        for (const PoolInfo& info : api_.pools())
            if (info.handle == pool) return read(info);
        return unknown(pool);
    }
    Result<uint64_t> getAttribute(uint64_t pool, PoolAttr attr) override {
        if (!known(pool)) return unknown(pool);
        return api_.poolAttribute(pool, attr);
    }
    Status setAttribute(uint64_t pool, PoolAttr attr, uint64_t value, KnobOrigin origin) override {
        if (!known(pool)) return unknown(pool);
        auto r = api_.setPoolAttribute(pool, attr, value, origin);
        if (!r) return r.error();
        return {};
    }
    Status trimTo(uint64_t pool, uint64_t minBytesToKeep, KnobOrigin origin) override {
        if (!known(pool)) return unknown(pool);
        return api_.trimPool(pool, minBytesToKeep, origin);
    }
    Status resetHighWatermarks(uint64_t pool, KnobOrigin origin) override {
        if (!known(pool)) return unknown(pool);
        // The driver resets a high watermark when it is set to 0.
        for (PoolAttr a : {PoolAttr::ReservedMemHigh, PoolAttr::UsedMemHigh}) {
            auto r = api_.setPoolAttribute(pool, a, 0, origin);
            if (!r) return r.error();
        }
        return {};
    }
    bool recordsKnobChanges() const override { return true; }

private:
    bool known(uint64_t pool) {
        for (const PoolInfo& info : api_.pools())
            if (info.handle == pool) return true;
        return false;
    }
    static Error unknown(uint64_t pool) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "no pool with handle 0x%llx in this process",
                      static_cast<unsigned long long>(pool));
        return Error{ErrorCode::NotFound, buf};
    }
    PoolState read(const PoolInfo& info) {
        PoolState s;
        s.info = info;
        auto get = [&](PoolAttr a) {
            auto v = api_.poolAttribute(info.handle, a);
            return v ? *v : 0;
        };
        s.releaseThreshold = get(PoolAttr::ReleaseThreshold);
        s.reuseFollowEventDependencies = get(PoolAttr::ReuseFollowEventDependencies) != 0;
        s.reuseAllowOpportunistic = get(PoolAttr::ReuseAllowOpportunistic) != 0;
        s.reuseAllowInternalDependencies = get(PoolAttr::ReuseAllowInternalDependencies) != 0;
        s.reservedCurrent = get(PoolAttr::ReservedMemCurrent);
        s.reservedHigh = get(PoolAttr::ReservedMemHigh);
        s.usedCurrent = get(PoolAttr::UsedMemCurrent);
        s.usedHigh = get(PoolAttr::UsedMemHigh);
        return s;
    }
    CollectorApi& api_;
};

class NullSink final : public control::EventSink {
public:
    void record(const Event&) override {}
};

class ServerLiveSink final : public LiveSink {
public:
    ServerLiveSink(CollectorApi& api, control::ServerOptions o)
        : driver_(api), server_(driver_, sink_, std::move(o)) {}
    Status start() { return server_.start(); }
    void onEvents(std::span<const Event> events) override { server_.publish(events); }
    void stop() override { server_.stop(); }

private:
    ApiDriver driver_;
    NullSink sink_;
    ControlServer server_;
};

std::string lower(std::string s) {
    for (char& c : s)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

} // namespace

std::unique_ptr<LiveSink> startControlServer(const std::string& listen, CollectorApi& api) {
    control::ServerOptions o;
    const std::string v = lower(listen);
    if (v == "0" || v == "off" || v == "no" || v == "false") return nullptr;
    if (v.empty() || v == "1" || v == "on" || v == "yes" || v == "true") {
        // <control dir>/<pid>.sock, discoverable by `poolscope ctl PID` and the GUI's Attach.
    } else if (listen.rfind("unix:", 0) == 0) {
        o.socketPath = listen.substr(5);
    } else if (!listen.empty() && listen[0] == '/') {
        o.socketPath = listen;
    } else {
        std::fprintf(
            stderr,
            "[poolscope] POOLSCOPE_LISTEN=%s is not understood (use 1, or unix:/path/to.sock; "
            "only local Unix sockets are supported); no live control\n",
            listen.c_str());
        return nullptr;
    }
    auto sink = std::make_unique<ServerLiveSink>(api, std::move(o));
    if (Status s = sink->start(); !s) {
        std::fprintf(stderr, "[poolscope] live control is off: %s\n", s.error().message.c_str());
        return nullptr;
    }
    return sink;
}

} // namespace poolscope::collector
