#include "poolscope/control/LaunchSpec.h"

#include "poolscope/control/Discovery.h"

#include <cstdlib>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <unistd.h>

extern char** environ;

namespace poolscope::control {

namespace {

std::string nameOf(const std::string& entry) {
    auto eq = entry.find('=');
    return eq == std::string::npos ? entry : entry.substr(0, eq);
}

bool validName(const std::string& n) {
    if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
        return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               (c >= '0' && c <= '9');
    });
}

// The variables a launch sets (LaunchEnv.h). Their inherited values must not leak into a launch
// that did not ask for them (a shell that exported POOLSCOPE_LISTEN=1 once should not make every
// launch listen; a launcher started under PoolScope must not pass its own root pid on).
bool managed(const std::string& n) {
    return n == kEnvInjection || n == kEnvOutput || n == kEnvSamplePeriodMs || n == kEnvRootPid ||
           n == kEnvListen || n == kEnvControlDir;
}

// "1", "0.1": the shortest text the collector's strtod reads back exactly.
std::string formatPeriod(double ms) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, ms);
    return std::string(buf, r.ptr);
}

constexpr size_t kPidDigits = 20; // room for any int64

void setVar(std::vector<std::string>& env, const std::string& name, const std::string& value) {
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& e) { return nameOf(e) == name; }),
              env.end());
    env.push_back(name + "=" + value);
}

} // namespace

std::vector<std::string> currentEnvironment() {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e)
        out.emplace_back(*e);
    return out;
}

std::string shellQuote(const std::string& s) {
    if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) ||
                   std::string_view("_-./=:,+@%").find(c) != std::string_view::npos;
        }))
        return s;
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

Result<LaunchPlan> buildLaunchPlan(const LaunchSpec& spec,
                                   const std::vector<std::string>& baseEnv) {
    if (spec.program.empty()) return Error{ErrorCode::InvalidArgument, "no program to launch"};
    if (spec.collectorPath.empty())
        return Error{ErrorCode::InvalidArgument,
                     "the collector library (libpoolscope_collector.so) was not found; this build "
                     "cannot record (it needs the CUDA Toolkit)"};
    if (spec.tracePath.empty()) return Error{ErrorCode::InvalidArgument, "no trace path given"};
    if (!(spec.samplePeriodMs >= 0))
        return Error{ErrorCode::InvalidArgument, "the sample period must be >= 0 ms (0 = off)"};
    LaunchPlan plan;
    plan.program = spec.program;
    plan.argv.push_back(spec.program);
    plan.argv.insert(plan.argv.end(), spec.args.begin(), spec.args.end());
    plan.workingDir = spec.workingDir;

    for (const auto& e : baseEnv) {
        const std::string n = nameOf(e);
        if (n == kEnvInjection && e.substr(n.size() + 1) != spec.collectorPath)
            plan.warnings.push_back(
                "replacing the inherited " + e +
                " (another tool's injection): only one CUPTI subscriber can exist per process");
        if (!managed(n)) plan.env.push_back(e);
    }
    for (const auto& [name, value] : spec.env) {
        if (!validName(name))
            return Error{ErrorCode::InvalidArgument,
                         "invalid environment variable name '" + name + "'"};
        if (managed(name)) {
            plan.warnings.push_back(name + " is set by PoolScope for this launch; the value '" +
                                    value + "' from the environment additions is ignored");
            continue;
        }
        setVar(plan.env, name, value);
    }
    if (!spec.stacks.empty()) {
        static const char* kModes[] = {"off", "native", "python", "all", "auto"};
        if (std::find(std::begin(kModes), std::end(kModes), spec.stacks) == std::end(kModes))
            return Error{ErrorCode::InvalidArgument, "--stacks must be off, native, python, all "
                                                     "or auto (not '" + spec.stacks + "')"};
        setVar(plan.env, kEnvStacks, spec.stacks);
    }
    if (spec.stackDepth != 0) {
        if (spec.stackDepth < 1 || spec.stackDepth > 256)
            return Error{ErrorCode::InvalidArgument, "the stack depth must be 1 to 256 frames"};
        setVar(plan.env, kEnvStackDepth, std::to_string(spec.stackDepth));
    }
    if (spec.stacksAtFree) {
        if (spec.stacks == "off")
            return Error{ErrorCode::InvalidArgument, "--stacks-at-free needs stacks (not --stacks off)"};
        setVar(plan.env, kEnvStacksAtFree, "1");
    }
    bool inheritedNvtx = false;
    for (const auto& e : plan.env) inheritedNvtx = inheritedNvtx || nameOf(e) == kEnvNvtxInjection;
    if (!inheritedNvtx) {
        // The collector forwards NVTX to the CUPTI copy it subscribes to, which only it knows.
        setVar(plan.env, kEnvNvtxInjection,
               spec.nvtxInjectionPath.empty() ? spec.collectorPath : spec.nvtxInjectionPath);
    }
    setVar(plan.env, kEnvInjection, spec.collectorPath);
    setVar(plan.env, kEnvOutput, spec.tracePath);
    setVar(plan.env, kEnvSamplePeriodMs, formatPeriod(spec.samplePeriodMs));
    if (spec.listen) {
        setVar(plan.env, kEnvListen, spec.listenAt.empty() ? "1" : "unix:" + spec.listenAt);
        if (!spec.controlDir.empty()) setVar(plan.env, kEnvControlDir, spec.controlDir);
    }
    return plan;
}

std::vector<std::string> LaunchPlan::environmentFor(int64_t pid) const {
    std::vector<std::string> out = env;
    out.push_back(std::string(kEnvRootPid) + "=" + std::to_string(pid));
    return out;
}

ChildExec::ChildExec(const LaunchPlan& plan) : program_(plan.program) {
    strings_ = plan.argv;
    const size_t argc = strings_.size();
    strings_.insert(strings_.end(), plan.env.begin(), plan.env.end());
    std::string root = std::string(kEnvRootPid) + "=";
    pidValueAt_ = root.size();
    root.append(kPidDigits, '\0');
    strings_.push_back(std::move(root));
    for (size_t i = 0; i < strings_.size(); ++i)
        (i < argc ? argv_ : envp_).push_back(strings_[i].data());
    argv_.push_back(nullptr);
    envp_.push_back(nullptr);
}

void ChildExec::setPid(int64_t pid) noexcept {
    char digits[kPidDigits];
    size_t n = 0;
    uint64_t v = pid < 0 ? 0 : static_cast<uint64_t>(pid);
    do {
        digits[n++] = char('0' + v % 10);
        v /= 10;
    } while (v && n < kPidDigits - 1);
    char* out = strings_.back().data() + pidValueAt_;
    for (size_t i = 0; i < n; ++i)
        out[i] = digits[n - 1 - i];
    out[n] = '\0';
}

void ChildExec::exec() noexcept {
    setPid(getpid());
    execve(program_.c_str(), argv_.data(), envp_.data());
}

std::string LaunchPlan::displayCommand() const {
    std::string out;
    for (const auto& e : env) {
        const std::string n = nameOf(e);
        if (!managed(n)) continue;
        out += n + "=" + shellQuote(e.substr(n.size() + 1)) + " ";
    }
    for (size_t i = 0; i < argv.size(); ++i)
        out += (i ? " " : "") + shellQuote(argv[i]);
    return out;
}

} // namespace poolscope::control
