#include "Config.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "poolscope/control/LaunchEnv.h"

namespace poolscope::collector {

namespace {
const char* env(const char* name) {
    const char* v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}
} // namespace

std::string pathForPid(const std::string& path, int64_t pid) {
    const std::string ext = ".poolscope";
    const std::string tag = "." + std::to_string(pid);
    if (path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0)
        return path.substr(0, path.size() - ext.size()) + tag + ext;
    return path + tag;
}

Config Config::fromEnvironment() {
    Config c;
    const int64_t pid = getpid();
    if (const char* v = env(control::kEnvOutput))
        c.output = v;
    else
        c.output = "poolscope-" + std::to_string(pid) + ".poolscope";
    if (const char* v = env(control::kEnvSamplePeriodMs)) {
        char* end = nullptr;
        double d = std::strtod(v, &end);
        // Finite and at most an hour (as `record --sample-period` checks): the sampler turns it
        // into int64 nanoseconds, and inf or 1e309 there is undefined behaviour (issue #12).
        if (end != v && *end == '\0' && std::isfinite(d) && d >= 0 && d <= 3'600'000)
            c.samplePeriodMs = d;
    }
    if (const char* v = env(control::kEnvRingEvents)) {
        long long n = std::atoll(v);
        if (n >= 64) c.ringEvents = static_cast<size_t>(n);
    }
    if (const char* v = env(control::kEnvSpoolEvents)) {
        long long n = std::atoll(v);
        // At most 64 M events (6 GiB): beyond that a typo, not a setting.
        if (n >= 1024 && n <= (64ll << 20)) c.spoolEvents = static_cast<size_t>(n);
    }
    if (const char* v = env(control::kEnvWatermarks)) {
        if (std::strcmp(v, "full") == 0) c.watermarks = WatermarkMode::Full;
        else if (std::strcmp(v, "off") == 0) c.watermarks = WatermarkMode::Off;
    }
    if (const char* v = env(control::kEnvActivity)) c.activity = std::strcmp(v, "0") != 0;
    if (const char* v = env(control::kEnvClock)) c.allowTsc = std::strcmp(v, "monotonic") != 0;
    if (const char* v = env(control::kEnvDebug)) c.debug = std::strcmp(v, "0") != 0;
    if (const char* v = env(control::kEnvDisable)) c.disabled = std::strcmp(v, "0") != 0;
    if (const char* v = env(control::kEnvListen)) c.listen = v;
    if (const char* v = env(control::kEnvStacks)) {
        StackMode m;
        if (stackModeFromName(v, m)) c.stacks = m;
    }
    if (const char* v = env(control::kEnvStackDepth)) {
        const long long n = std::atoll(v);
        if (n >= 1 && n <= kMaxStackDepth) c.stackDepth = static_cast<int>(n);
    }
    if (const char* v = env(control::kEnvStacksAtFree)) c.stacksAtFree = std::strcmp(v, "0") != 0;
    if (const char* v = env(control::kEnvRootPid)) c.rootPid = std::atoll(v);
    // A process the launcher did not start itself (a fork+exec'd helper, a multiprocessing
    // worker) writes its own file so two writers never share one trace.
    if (c.rootPid != 0 && c.rootPid != pid) {
        c.output = pathForPid(c.output, pid);
        c.parentPid = getppid();
    }
    return c;
}

} // namespace poolscope::collector
